package mysql_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/internal/testenv"
	"github.com/fila-go/fila/mysql"
)

// TestOpenRejectsBadURLs needs no server: bad URLs fail before connecting.
func TestOpenRejectsBadURLs(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{
		"mysql://root@127.0.0.1:1/test?fila_bogus=1",
		"mysql://root@127.0.0.1:1/test?fila_poll_interval=soon",
		"mysql://root@127.0.0.1:1/test?fila_poll_interval=0s",
		"mysql://root@127.0.0.1:1/test?fila_migrate=maybe",
		"mysql://root@127.0.0.1:1/test?fila_max_conns=0",
		"mysql://root@127.0.0.1:1/test?fila_prefix=Bad-Prefix",
		"mysql://root@127.0.0.1:1/test?timeout=soon",
		"mysql://root@127.0.0.1:1/",
		"mysql://root@127.0.0.1:1/a/b",
	} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		drv, err := mysql.Open(ctx, u, backend.OpenOptions{})
		cancel()
		if !errors.Is(err, fila.ErrInvalid) {
			t.Errorf("Open(%s): want ErrInvalid, got %v", raw, err)
		}
		if drv != nil {
			_ = drv.Close()
		}
	}
}

// TestOpenUnreachable: a closed port and a server that never answers fail
// Open with ErrUnavailable, within the context's deadline.
func TestOpenUnreachable(t *testing.T) {
	testenv.CheckOpenUnreachable(t, func(hostport string) string {
		return "mysql://root:pw-s3cret@" + hostport + "/test"
	})
}

// TestOpenWrongPassword: refused credentials are ErrAccessDenied, and the
// error shows neither the password nor a credential parameter's value.
func TestOpenWrongPassword(t *testing.T) {
	base := driverURL(t, "tls", "false")
	base.User = url.UserPassword("no_such_user", "pw-s3cret")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := fila.Open(ctx, base.String())
	if err == nil {
		c.Close()
		t.Fatal("Open with a wrong password succeeded")
	}
	if !errors.Is(err, fila.ErrAccessDenied) {
		t.Errorf("Open with a wrong password: %v; want ErrAccessDenied", err)
	}
	if strings.Contains(err.Error(), "s3cret") {
		t.Errorf("Open's error shows the password: %v", err)
	}
}

// TestOpenUnknownServerVariable: a parameter neither Fila nor go-sql-driver
// knows is set as a server variable at connection start; one the server
// does not know either fails Open with ErrInvalid, without the value.
func TestOpenUnknownServerVariable(t *testing.T) {
	u := driverURL(t, "fila_migrate", "true", "tokne", "'val-s3cret'")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d, err := mysql.Open(ctx, u, backend.OpenOptions{})
	if err == nil {
		d.Close()
		t.Fatal("Open with ?tokne= succeeded")
	}
	if !errors.Is(err, fila.ErrInvalid) || !strings.Contains(err.Error(), "tokne") {
		t.Errorf("Open with ?tokne=: %v; want ErrInvalid naming tokne", err)
	}
	if strings.Contains(err.Error(), "s3cret") {
		t.Errorf("Open's error shows the value: %v", err)
	}
	// A server variable the server knows is accepted.
	d, err = mysql.Open(ctx, driverURL(t, "fila_migrate", "true", "wait_timeout", "600"), backend.OpenOptions{})
	if err != nil {
		t.Fatalf("Open with wait_timeout=600: %v", err)
	}
	d.Close()
}

// TestOpenNotMigrated: tables missing, or at an older version, fail Open
// with ErrNotMigrated (an ErrInvalid) saying what to run; migrating makes
// the same URL open.
func TestOpenNotMigrated(t *testing.T) {
	db := testDB(t)
	prefix := freshPrefix(t, db) // migrated: drop its version row
	if _, err := db.Exec("DELETE FROM `" + prefix + "schema`"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := mysql.Open(ctx, driverURL(t, "fila_prefix", prefix), backend.OpenOptions{})
	if !errors.Is(err, mysql.ErrNotMigrated) || !errors.Is(err, fila.ErrInvalid) || !strings.Contains(err.Error(), "fila schema up") {
		t.Fatalf("Open of unmigrated tables: %v; want ErrNotMigrated and ErrInvalid, saying to run fila schema up", err)
	}
	if err := mysql.MigrateURL(ctx, driverURL(t, "fila_prefix", prefix).String()); err != nil {
		t.Fatalf("MigrateURL: %v", err)
	}
	d, err := mysql.Open(ctx, driverURL(t, "fila_prefix", prefix), backend.OpenOptions{})
	if err != nil {
		t.Fatalf("Open after MigrateURL: %v", err)
	}
	d.Close()
}

// TestMigrateConcurrently: migrators of one prefix in several processes
// (here goroutines with their own connections) all succeed and leave one
// row per migration.
func TestMigrateConcurrently(t *testing.T) {
	db := testDB(t)
	prefix := freshPrefix(t, db)
	for _, name := range []string{"messages", "dead", "marks", "schema"} {
		if _, err := db.Exec("DROP TABLE `" + prefix + name + "`"); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, 6)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = mysql.MigrateURL(ctx, driverURL(t, "fila_prefix", prefix).String())
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("migrator %d: %v", i, err)
		}
	}
	var rows, top int
	if err := db.QueryRow("SELECT COUNT(*), MAX(version) FROM `"+prefix+"schema`").Scan(&rows, &top); err != nil {
		t.Fatal(err)
	}
	if rows != top || top != mysql.SchemaVersion() {
		t.Errorf("schema table: %d rows, top version %d; want %d of each", rows, top, mysql.SchemaVersion())
	}
}

// TestNewOverApplicationDB: New takes a *sql.DB the application owns and
// leaves it open at Close; EnqueueTx writes in the application's
// transaction.
func TestNewOverApplicationDB(t *testing.T) {
	db := testDB(t)
	prefix := freshPrefix(t, db)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d, err := mysql.New(ctx, db, mysql.Options{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	c, err := fila.New(d)
	if err != nil {
		t.Fatal(err)
	}
	q := fmt.Sprintf("new-%d", time.Now().UnixNano())
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.EnqueueTx(ctx, tx, q, []fila.Message{{Kind: "k", Body: []byte("rolled back")}}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	tx, err = db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.EnqueueTx(ctx, tx, q, []fila.Message{{Kind: "k", Body: []byte("committed")}}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	ds, err := c.Receive(ctx, q, fila.ReceiveParams{Max: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 1 || string(ds[0].Body) != "committed" {
		t.Fatalf("received %d messages (%v); want the committed one alone", len(ds), ds)
	}
	if err := ds[0].Ack(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.PingContext(ctx); err != nil {
		t.Errorf("the application's *sql.DB after Close: %v; want it open", err)
	}
	if _, err := mysql.New(ctx, nil, mysql.Options{}); !errors.Is(err, fila.ErrInvalid) {
		t.Errorf("New(nil): %v; want ErrInvalid", err)
	}
}

// TestOpenReadCommitted: the connections of a driver opened from a URL run
// at READ COMMITTED (at REPEATABLE READ, InnoDB's range locks would make
// enqueues wait for claims), whichever name the server gives the
// variable; a URL that sets the level keeps it.
func TestOpenReadCommitted(t *testing.T) {
	level := func(d *mysql.Driver) string {
		var v string
		err := d.DB().QueryRow("SELECT @@transaction_isolation").Scan(&v)
		if err != nil {
			err = d.DB().QueryRow("SELECT @@tx_isolation").Scan(&v)
		}
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	db := testDB(t)
	prefix := freshPrefix(t, db)
	if got := level(openDriver(t, prefix)); got != "READ-COMMITTED" {
		t.Errorf("isolation of the driver's connections: %s; want READ-COMMITTED", got)
	}
	name := "transaction_isolation"
	if strings.Contains(openDriver(t, prefix).ServerVersion(), "MariaDB") {
		name = "tx_isolation"
	}
	if got := level(openDriver(t, prefix, name, "'SERIALIZABLE'")); got != "SERIALIZABLE" {
		t.Errorf("isolation with %s=SERIALIZABLE in the URL: %s", name, got)
	}
}
