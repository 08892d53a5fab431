package postgres_test

import (
	"context"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// privatePostgres is a PostgreSQL cluster the test creates with initdb and
// runs on its own port and directory, with password (SCRAM) authentication,
// so a wrong password can be refused: the shared test server trusts every
// loopback connection. Only the postmaster the test started is stopped.
type privatePostgres struct {
	port     int
	password string
}

// startPrivatePostgres initdb's and starts a cluster whose superuser
// postgres has password, or skips the test when it cannot (PostgreSQL's
// server binaries missing, or not running as root with a postgres user to
// run the server as: postgres refuses to run as root).
func startPrivatePostgres(t *testing.T, password string) *privatePostgres {
	t.Helper()
	bin := postgresBinDir(t)
	if os.Geteuid() != 0 {
		t.Skip("a private PostgreSQL cluster needs root (to run the server as the postgres user)")
	}
	pu, err := user.Lookup("postgres")
	if err != nil {
		t.Skipf("no postgres user to run a private cluster as: %v", err)
	}
	uid, _ := strconv.Atoi(pu.Uid)
	gid, _ := strconv.Atoi(pu.Gid)
	asPostgres := &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}

	dir, err := os.MkdirTemp("", "fila-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chown(dir, uid, gid); err != nil {
		t.Fatal(err)
	}
	pwfile := filepath.Join(dir, "pw")
	if err := os.WriteFile(pwfile, []byte(password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(pwfile, uid, gid); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "--auth=scram-sha-256",
		"--pwfile="+pwfile, "-E", "UTF8", "--no-sync")
	initdb.SysProcAttr = asPostgres
	initdb.Dir = dir
	if out, err := initdb.CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	srv := exec.Command(filepath.Join(bin, "postgres"), "-D", data, "-p", strconv.Itoa(port), "-k", dir,
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off")
	srv.SysProcAttr = asPostgres
	srv.Dir = dir
	logf, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		t.Fatal(err)
	}
	srv.Stdout, srv.Stderr = logf, logf
	if err := srv.Start(); err != nil {
		t.Fatalf("start postgres: %v", err)
	}
	t.Cleanup(func() {
		_ = srv.Process.Signal(syscall.SIGQUIT) // immediate shutdown of the postmaster we started
		_ = srv.Wait()
		_ = logf.Close()
	})
	p := &privatePostgres{port: port, password: password}
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		c, err := pgx.Connect(ctx, p.URL("postgres", password))
		cancel()
		if err == nil {
			_ = c.Close(context.Background())
			return p
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "server.log"))
			t.Fatalf("private PostgreSQL on port %d did not accept the password within 30s: %v\n%s", port, err, log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// URL is the cluster's URL for user with password.
func (p *privatePostgres) URL(user, password string) string {
	return "postgres://" + user + ":" + password + "@127.0.0.1:" + strconv.Itoa(p.port) + "/postgres?sslmode=disable"
}

// postgresBinDir finds the directory of initdb and postgres, or skips.
func postgresBinDir(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("initdb"); err == nil {
		if _, err := os.Stat(filepath.Join(filepath.Dir(p), "postgres")); err == nil {
			return filepath.Dir(p)
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Strings(dirs)
	for i := len(dirs) - 1; i >= 0; i-- {
		if _, err := os.Stat(filepath.Join(dirs[i], "initdb")); err == nil {
			return dirs[i]
		}
	}
	t.Skip("PostgreSQL's initdb and postgres are not installed: cannot start a private cluster")
	return ""
}
