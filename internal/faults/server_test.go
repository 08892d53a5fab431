package faults_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// server is a private broker process the test started, on its own port and
// data directory, which the test may SIGKILL and start again. It never
// touches the shared brokers of the machine: it only signals processes it
// started and their descendants.
type server struct {
	t       testing.TB
	name    string
	argv    []string
	env     []string // nil: the test's environment
	cred    *syscall.Credential
	dir     string // data, logs; removed at cleanup
	logPath string
	url     string // what fila.Open takes
	// probe checks once that the server answers (accepts a connection and
	// serves a request).
	probe func(ctx context.Context) error
	// killFirst is the command name of the process that is the broker
	// proper, SIGKILLed first (beam.smp for RabbitMQ, whose start script
	// runs the VM as a child); empty: the started process.
	killFirst string
	// minQueueAge is how long the broker must have held the test's queue
	// before a kill can be survived (see privateRabbitMQ); 0: any time.
	minQueueAge time.Duration
	// diag, when set, describes the server's state for a failure message
	// (the log tail is always shown).
	diag func() string
	// node and amqpAddr name a RabbitMQ node and its AMQP address.
	node, amqpAddr string

	cmd     *exec.Cmd
	done    chan struct{}
	waitErr error
}

// start starts the server process in its own process group, its output
// appended to the server's log. It does not wait for the server to answer.
func (s *server) start() {
	s.t.Helper()
	logf, err := os.OpenFile(s.logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		s.t.Fatal(err)
	}
	defer logf.Close()
	fmt.Fprintf(logf, "\n==== faults: starting %s at %s: %s\n", s.name, time.Now().Format(time.RFC3339Nano), strings.Join(s.argv, " "))
	cmd := exec.Command(s.argv[0], s.argv[1:]...)
	cmd.Dir = s.dir
	cmd.Env = s.env
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: s.cred}
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("start private %s: %v", s.name, err)
	}
	s.cmd, s.done, s.waitErr = cmd, make(chan struct{}), nil
	done := s.done
	go func() { err := cmd.Wait(); s.waitErr = err; close(done) }()
}

func (s *server) exited() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// waitReady polls the server every 20ms until it answers, and returns when
// the first answer came. It fails the test when the process ends first or
// limit passes.
func (s *server) waitReady(limit time.Duration) time.Time {
	s.t.Helper()
	at, err := s.awaitReady(limit)
	if err != nil {
		s.t.Fatalf("%v; its log ends:\n%s", err, s.logTail())
	}
	return at
}

// errExited is awaitReady's error when the server ended before answering.
var errExited = errors.New("exited before answering")

func (s *server) awaitReady(limit time.Duration) (time.Time, error) {
	deadline := time.Now().Add(limit)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := s.probe(ctx)
		cancel()
		if err == nil {
			return time.Now(), nil
		}
		if s.exited() {
			return time.Time{}, fmt.Errorf("private %s %w (%v)", s.name, errExited, s.waitErr)
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("private %s did not answer within %v (last: %v)", s.name, limit, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// startOnFreePorts builds a server on n free ports with build, starts it
// and waits until it answers. Another process can bind a port between
// freePorts and the server's own bind (RabbitMQ's CLI tools, for one, take
// ports from 35672 up), so a server that exits at start-up because a port
// is in use is built again on other ports, up to three times.
func startOnFreePorts(t testing.TB, n int, build func(ports []int) *server) *server {
	t.Helper()
	for attempt := 1; ; attempt++ {
		s := build(freePorts(t, n))
		t.Cleanup(s.kill)
		s.start()
		_, err := s.awaitReady(startLimit)
		if err == nil {
			return s
		}
		log := s.logTail()
		if attempt < 3 && errors.Is(err, errExited) && (strings.Contains(log, "eaddrinuse") || strings.Contains(log, "already in use")) {
			t.Logf("private %s: a port was taken before it could bind; trying others", s.name)
			continue
		}
		t.Fatalf("%v; its log ends:\n%s", err, log)
	}
}

// kill SIGKILLs the broker (the process named killFirst, or the started
// one), then every other process it started, and waits until all of them
// are gone: a crash of the whole server, as kill -9 on a machine would
// leave it.
func (s *server) kill() {
	s.t.Helper()
	if s.cmd == nil || s.exited() && len(descendants(s.cmd.Process.Pid)) == 0 {
		return
	}
	procs := descendants(s.cmd.Process.Pid)
	first := s.cmd.Process.Pid
	if s.killFirst != "" {
		first = 0
		for _, p := range procs {
			if p.comm == s.killFirst {
				first = p.pid
			}
		}
		if first == 0 {
			s.t.Fatalf("private %s: no %s process among its processes %v", s.name, s.killFirst, procs)
		}
	}
	_ = syscall.Kill(first, syscall.SIGKILL)
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL) // the process group
	for _, p := range procs {
		p.kill()
	}
	<-s.done
	deadline := time.Now().Add(10 * time.Second)
	for _, p := range procs {
		for p.alive() {
			if time.Now().After(deadline) {
				s.t.Fatalf("private %s: process %d (%s) still there 10s after SIGKILL", s.name, p.pid, p.comm)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

func (s *server) logTail() string {
	b, _ := os.ReadFile(s.logPath)
	if len(b) > 6000 {
		b = b[len(b)-6000:]
	}
	if s.diag != nil && !s.exited() {
		return string(b) + "\n==== state:\n" + s.diag()
	}
	return string(b)
}

// proc is a process seen in /proc, identified by pid and start time (so a
// reused pid is never mistaken for it).
type proc struct {
	pid   int
	comm  string
	start string
}

func (p proc) String() string { return fmt.Sprintf("%d(%s)", p.pid, p.comm) }

// alive reports whether the process still exists and is not a zombie.
func (p proc) alive() bool {
	q, ok := readProc(p.pid)
	return ok && q.start == p.start && q.state != "Z"
}

func (p proc) kill() {
	if p.alive() {
		_ = syscall.Kill(p.pid, syscall.SIGKILL)
	}
}

type procStat struct {
	proc
	ppid  int
	state string
}

// readProc parses /proc/PID/stat.
func readProc(pid int) (procStat, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}, false
	}
	// pid (comm) state ppid ... starttime is field 22.
	open, close := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 0 || close < open {
		return procStat{}, false
	}
	f := strings.Fields(string(b[close+1:]))
	if len(f) < 20 {
		return procStat{}, false
	}
	ppid, _ := strconv.Atoi(f[1])
	return procStat{proc: proc{pid: pid, comm: string(b[open+1 : close]), start: f[19]}, ppid: ppid, state: f[0]}, true
}

// descendants lists root and every process below it.
func descendants(root int) []proc {
	ents, _ := os.ReadDir("/proc")
	children := map[int][]procStat{}
	var rootStat procStat
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, ok := readProc(pid)
		if !ok {
			continue
		}
		if pid == root {
			rootStat = st
		}
		children[st.ppid] = append(children[st.ppid], st)
	}
	var out []proc
	if rootStat.pid != 0 {
		out = append(out, rootStat.proc)
	}
	queue := []int{root}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		for _, c := range children[pid] {
			out = append(out, c.proc)
			queue = append(queue, c.pid)
		}
	}
	return out
}

// freePorts returns n TCP ports on 127.0.0.1 that were free a moment ago.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	ports := make([]int, 0, n)
	var ls []net.Listener
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		_ = l.Close()
	}
	return ports
}

// runAs is the account a private server runs as: the named system user
// (postgres, rabbitmq) when the test runs as root, since PostgreSQL refuses
// to run as root and RabbitMQ's files and Erlang cookie belong to its user;
// otherwise the test's own account.
type runAs struct {
	cred *syscall.Credential // nil: the test's own account
	uid  int
	gid  int
	home string
}

func accountFor(t testing.TB, name string) runAs {
	t.Helper()
	if os.Geteuid() != 0 {
		home, _ := os.UserHomeDir()
		return runAs{uid: os.Getuid(), gid: os.Getgid(), home: home}
	}
	u, err := user.Lookup(name)
	if err != nil {
		missingTool(t, fmt.Sprintf("the test runs as root and there is no %q user to run the private server as (%v)", name, err))
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return runAs{cred: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, uid: uid, gid: gid, home: u.HomeDir}
}

// serverDir makes a fresh directory owned by acct, removed when the test
// ends (after the server is killed: cleanups run last-registered first).
func serverDir(t testing.TB, prefix string, acct runAs) string {
	t.Helper()
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.RemoveAll(dir); err != nil {
			t.Logf("remove %s: %v", dir, err)
		}
	})
	if err := os.Chown(dir, acct.uid, acct.gid); err != nil {
		t.Fatal(err)
	}
	return dir
}

// chownAll gives every file under dir to acct.
func chownAll(t testing.TB, dir string, acct runAs) {
	t.Helper()
	err := filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, acct.uid, acct.gid)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// findProgram returns the path of a program a private server needs: from
// PATH, else from the first of dirs (globs) that has it. A missing program
// skips the test, or fails it when CI is set, in one line naming the
// Debian package to install.
func findProgram(t testing.TB, name, pkg string, dirs ...string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, d := range dirs {
		ms, _ := filepath.Glob(filepath.Join(d, name))
		for i := len(ms) - 1; i >= 0; i-- { // highest version first
			if fi, err := os.Stat(ms[i]); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
				return ms[i]
			}
		}
	}
	missingTool(t, fmt.Sprintf("%s not found in PATH (install the Debian package %s; scripts/services does): cannot start a private server", name, pkg))
	return ""
}

// missingTool skips the test, or fails it when the CI environment variable
// is set (as internal/testenv does for a missing server).
func missingTool(t testing.TB, msg string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("faults: %s (CI is set, so this fails instead of skipping)", msg)
	}
	t.Skipf("faults: %s", msg)
}

// errNotYet is a probe's answer while the server is starting.
var errNotYet = errors.New("not answering yet")

// startLimit bounds a private broker's start (RabbitMQ boots in 5-10 s on a
// quiet 2-core machine, several times that on a busy one).
const startLimit = 120 * time.Second

// sysProcAttr runs a command as acct.
func sysProcAttr(acct runAs) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: acct.cred}
}
