package redis_test

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// privateRedis is a redis-server the test starts on its own port and data
// directory, so it can be stopped, restarted or configured (passwords, slow
// loading) without touching the shared test server. Only the process the
// test started is ever killed.
type privateRedis struct {
	t    testing.TB
	dir  string
	port int
	args []string
	cmd  *exec.Cmd
}

// startPrivateRedis starts a private redis-server with extra arguments
// (like "--requirepass", "pw"), or skips the test when redis-server is not
// installed. It is killed when the test ends.
func startPrivateRedis(t testing.TB, args ...string) *privateRedis {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server is not installed: cannot start a private Redis")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	r := &privateRedis{t: t, dir: t.TempDir(), port: port, args: args}
	t.Cleanup(r.Kill)
	r.Start()
	return r
}

// Addr is the server's host:port.
func (r *privateRedis) Addr() string { return "127.0.0.1:" + strconv.Itoa(r.port) }

// URL is the server's redis:// URL, with userinfo when not empty
// (":password" or "user:password").
func (r *privateRedis) URL(userinfo string) string {
	if userinfo != "" {
		userinfo += "@"
	}
	return "redis://" + userinfo + r.Addr() + "/0"
}

// Start starts the server (again) with its arguments plus extra ones, and
// waits until it accepts connections (it may still be loading its data).
func (r *privateRedis) Start(extra ...string) {
	r.t.Helper()
	args := append([]string{"--port", strconv.Itoa(r.port), "--bind", "127.0.0.1", "--dir", r.dir,
		"--save", "", "--appendonly", "no", "--logfile", filepath.Join(r.dir, "redis.log")}, r.args...)
	r.cmd = exec.Command("redis-server", append(args, extra...)...)
	if err := r.cmd.Start(); err != nil {
		r.t.Fatalf("start redis-server: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", r.Addr(), time.Second)
		if err == nil {
			_ = c.Close()
			return
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("private redis-server on %s did not accept connections within 10s: %v", r.Addr(), err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Kill kills the server (SIGKILL) and waits for it to exit.
func (r *privateRedis) Kill() {
	if r.cmd == nil || r.cmd.Process == nil {
		return
	}
	_ = r.cmd.Process.Kill()
	_ = r.cmd.Wait()
	r.cmd = nil
}

// Client returns a raw go-redis client of the server, closed at the end.
func (r *privateRedis) Client(password string) *goredis.Client {
	c := goredis.NewClient(&goredis.Options{Addr: r.Addr(), Password: password, MaxRetries: -1})
	r.t.Cleanup(func() { _ = c.Close() })
	return c
}

// fill stores n small keys and saves them to the server's RDB file.
func (r *privateRedis) fill(ctx context.Context, c *goredis.Client, n int) {
	r.t.Helper()
	pipe := c.Pipeline()
	for i := 0; i < n; i++ {
		pipe.Set(ctx, fmt.Sprintf("filler:%d", i), "x", 0)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		r.t.Fatalf("fill: %v", err)
	}
	if err := c.Save(ctx).Err(); err != nil {
		r.t.Fatalf("SAVE: %v", err)
	}
}

// isLoading reports whether err is Redis's reply while it loads its data.
func isLoading(err error) bool { return err != nil && strings.HasPrefix(err.Error(), "LOADING ") }
