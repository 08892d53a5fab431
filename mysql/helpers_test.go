package mysql_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/internal/testenv"
	"github.com/fila-go/fila/mysql"
)

// testDB returns a handle on the test server's database, closed when t
// ends.
func testDB(t testing.TB) *sql.DB {
	t.Helper()
	u, err := url.Parse(testenv.MySQLURL(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg := gomysql.NewConfig()
	cfg.Net, cfg.Addr = "tcp", u.Host
	cfg.DBName = u.Path[1:]
	if u.User != nil {
		cfg.User = u.User.Username()
		cfg.Passwd, _ = u.User.Password()
	}
	cfg.MaxAllowedPacket = 0
	conn, err := gomysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(conn)
	db.SetMaxOpenConns(4)
	t.Cleanup(func() { db.Close() })
	return db
}

// freshPrefix returns a table prefix no other test uses, migrated, whose
// tables are dropped when t ends.
func freshPrefix(t testing.TB, db *sql.DB) string {
	t.Helper()
	var b [4]byte
	rand.Read(b[:])
	prefix := "t" + hex.EncodeToString(b[:]) + "_"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := mysql.Migrate(ctx, db, prefix); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, name := range []string{"messages", "dead", "marks", "schema"} {
			if _, err := db.ExecContext(ctx, "DROP TABLE IF EXISTS `"+prefix+name+"`"); err != nil {
				t.Errorf("drop %s%s: %v", prefix, name, err)
			}
		}
	})
	return prefix
}

// driverURL returns the test server's URL with params set.
func driverURL(t testing.TB, params ...string) *url.URL {
	t.Helper()
	u, err := url.Parse(testenv.WithParams(t, testenv.MySQLURL(t), params...))
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// openDriver opens a driver on prefix's tables, closed when t ends.
func openDriver(t testing.TB, prefix string, params ...string) *mysql.Driver {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d, err := mysql.Open(ctx, driverURL(t, append([]string{"fila_prefix", prefix}, params...)...), backend.OpenOptions{})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	return d.(*mysql.Driver)
}
