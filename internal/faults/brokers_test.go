package faults_test

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	amqp "github.com/rabbitmq/amqp091-go"
)

// privateRedis starts a redis-server on a free port with its own directory
// and an append-only file fsynced on every write (appendfsync always), so
// every acknowledged write survives a kill -9.
func privateRedis(t *testing.T) *server {
	bin := findProgram(t, "redis-server", "redis-server")
	acct := runAs{uid: os.Getuid(), gid: os.Getgid()}
	dir := serverDir(t, "fila-faults-redis-", acct)
	return startOnFreePorts(t, 1, func(ports []int) *server {
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))
		return &server{
			t: t, name: "redis", dir: dir, logPath: filepath.Join(dir, "server.log"),
			argv: []string{bin, "--port", strconv.Itoa(ports[0]), "--bind", "127.0.0.1", "--dir", dir,
				"--appendonly", "yes", "--appendfsync", "always", "--save", "", "--daemonize", "no",
				"--maxmemory-policy", "noeviction"},
			url: "redis://" + addr + "/0",
			probe: func(ctx context.Context) error {
				return redisPing(ctx, addr)
			},
		}
	})
}

// redisPing sends PING and wants PONG (a loading server answers LOADING).
func redisPing(ctx context.Context, addr string) error {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	if strings.TrimSpace(line) != "+PONG" {
		return fmt.Errorf("%w: %s", errNotYet, strings.TrimSpace(line))
	}
	return nil
}

// privatePostgres initdb's a cluster in a fresh directory and starts a
// postmaster on a free port (as the postgres user when the test runs as
// root). fsync and synchronous_commit stay on, their defaults.
func privatePostgres(t *testing.T) *server {
	pgDirs := []string{"/usr/lib/postgresql/*/bin"}
	initdb := findProgram(t, "initdb", "postgresql", pgDirs...)
	postgres := findProgram(t, "postgres", "postgresql", filepath.Dir(initdb))
	acct := accountFor(t, "postgres")
	dir := serverDir(t, "fila-faults-pg-", acct)
	data := filepath.Join(dir, "data")
	init := exec.Command(initdb, "-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync")
	init.Env = append(os.Environ(), "LC_ALL=C")
	init.SysProcAttr = sysProcAttr(acct)
	if out, err := init.CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	return startOnFreePorts(t, 1, func(ports []int) *server {
		url := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", ports[0])
		return &server{
			t: t, name: "postgres", dir: dir, logPath: filepath.Join(dir, "server.log"), cred: acct.cred,
			argv: []string{postgres, "-D", data, "-p", strconv.Itoa(ports[0]),
				"-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories=" + dir,
				"-c", "shared_buffers=32MB", "-c", "max_connections=60"},
			url: url + "&fila_migrate=true",
			probe: func(ctx context.Context) error {
				conn, err := pgx.Connect(ctx, url)
				if err != nil {
					return err
				}
				defer conn.Close(context.Background())
				var one int
				return conn.QueryRow(ctx, "select 1").Scan(&one)
			},
		}
	})
}

// privateRabbitMQ starts a second RabbitMQ node, fila-faults-<random>@localhost,
// with its own AMQP and distribution ports, config, plugins file (none),
// data (mnesia) and log directories; it shares only the machine's epmd and,
// running as the rabbitmq user, its Erlang cookie (so
// `rabbitmqctl -n NODE` reaches it). It runs the start script in the
// foreground; the broker proper is the script's beam.smp child.
func privateRabbitMQ(t *testing.T) *server {
	script := "/usr/lib/rabbitmq/bin/rabbitmq-server" // the real script; /usr/sbin's wrapper su's and logs to /var/log
	if _, err := os.Stat(script); err != nil {
		script = findProgram(t, "rabbitmq-server", "rabbitmq-server")
	}
	findProgram(t, "erl", "erlang-base") // the script needs it: fail early in one line
	acct := accountFor(t, "rabbitmq")
	return startOnFreePorts(t, 2, func(ports []int) *server {
		return rabbitNode(t, script, acct, ports[0], ports[1])
	})
}

// rabbitNode prepares (without starting it) a fresh RabbitMQ node listening
// for AMQP on amqpPort, with distPort for Erlang distribution.
func rabbitNode(t *testing.T, script string, acct runAs, amqpPort, distPort int) *server {
	dir := serverDir(t, "fila-faults-rabbitmq-", acct)
	node := "fila-faults-" + randomHex(4) + "@localhost"
	files := map[string]string{
		"rabbitmq.conf":     fmt.Sprintf("listeners.tcp.local = 127.0.0.1:%d\nloopback_users = none\n", amqpPort),
		"enabled_plugins":   "[].\n",
		"rabbitmq-env.conf": "",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{"mnesia", "log"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	chownAll(t, dir, acct)
	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + acct.home, // the Erlang cookie
		"LANG=C.UTF-8",
		"RABBITMQ_NODENAME=" + node,
		"RABBITMQ_NODE_IP_ADDRESS=127.0.0.1",
		"RABBITMQ_NODE_PORT=" + strconv.Itoa(amqpPort),
		"RABBITMQ_DIST_PORT=" + strconv.Itoa(distPort),
		"RABBITMQ_CONFIG_FILE=" + filepath.Join(dir, "rabbitmq.conf"),
		"RABBITMQ_ADVANCED_CONFIG_FILE=" + filepath.Join(dir, "advanced.config"),
		"RABBITMQ_CONF_ENV_FILE=" + filepath.Join(dir, "rabbitmq-env.conf"),
		"RABBITMQ_ENABLED_PLUGINS_FILE=" + filepath.Join(dir, "enabled_plugins"),
		"RABBITMQ_MNESIA_BASE=" + filepath.Join(dir, "mnesia"),
		"RABBITMQ_LOG_BASE=" + filepath.Join(dir, "log"),
		"RABBITMQ_PID_FILE=" + filepath.Join(dir, "pid"),
		"ERL_EPMD_ADDRESS=127.0.0.1",
		"ERL_FLAGS=-kernel inet_dist_use_interface {127,0,0,1}",
	}
	amqpURL := fmt.Sprintf("amqp://guest:guest@127.0.0.1:%d/", amqpPort)
	s := &server{
		node: node, amqpAddr: fmt.Sprintf("127.0.0.1:%d", amqpPort),
		t: t, name: "rabbitmq " + node, dir: dir, logPath: filepath.Join(dir, "server.log"), cred: acct.cred,
		argv: []string{script}, env: env, killFirst: "beam.smp",
		url: amqpURL,
		// RabbitMQ 3.10 keeps the quorum queue directory (queue name to
		// Raft log, names.dets) and Raft metadata (term, vote: meta.dets)
		// in dets tables saved every 500 ms and 5 s: a node killed sooner
		// after a queue's declaration restarts that queue as an empty
		// follower that never elects itself, and every publish and
		// consume on it hangs. That is the broker's limit, not Fila's, so
		// the kill waits until the queue is older than that.
		minQueueAge: 6 * time.Second,
		probe: func(ctx context.Context) error {
			conn, err := amqp.DialConfig(amqpURL, amqp.Config{Dial: amqp.DefaultDial(time.Second)})
			if err != nil {
				return err
			}
			return conn.Close()
		},
	}
	if ctl, err := exec.LookPath("rabbitmqctl"); err == nil {
		s.diag = func() string {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			out, err := exec.CommandContext(ctx, ctl, "-n", node, "list_queues", "name", "type", "state", "messages_ready", "messages_unacknowledged", "leader").CombinedOutput()
			return fmt.Sprintf("rabbitmqctl -n %s list_queues: %v\n%s", node, err, out)
		}
	}
	return s
}

// privateMariaDB runs mariadb-install-db on a fresh data directory and starts
// a mariadbd on a free port of 127.0.0.1, with its socket, pid file and log
// (stderr) in that directory and no option file read (--no-defaults). It
// runs as the test's own account (with --user=root when that is root, which
// mariadbd otherwise refuses). The root account has no password. Every
// commit is written and flushed to the redo log before it returns
// (innodb_flush_log_at_trx_commit=1, doublewrite on: the defaults, stated);
// there is no binary log. Once it answers, the database "test" is created.
func privateMariaDB(t *testing.T) *server {
	install := findProgram(t, "mariadb-install-db", "mariadb-server", "/usr/bin", "/usr/local/mysql/scripts")
	mariadbd := findProgram(t, "mariadbd", "mariadb-server", "/usr/sbin", "/usr/libexec")
	acct := runAs{uid: os.Getuid(), gid: os.Getgid()}
	dir := serverDir(t, "fila-faults-mariadb-", acct)
	data := filepath.Join(dir, "data")
	var asRoot []string
	if os.Geteuid() == 0 {
		asRoot = []string{"--user=root"}
	}
	initArgs := append([]string{"--no-defaults", "--datadir=" + data, "--auth-root-authentication-method=normal",
		"--skip-test-db", "--skip-name-resolve"}, asRoot...)
	init := exec.Command(install, initArgs...)
	init.Dir = dir
	init.Env = append(os.Environ(), "LC_ALL=C")
	if out, err := init.CombinedOutput(); err != nil {
		t.Fatalf("mariadb-install-db: %v\n%s", err, out)
	}
	var addr string // of the server that started
	srv := startOnFreePorts(t, 1, func(ports []int) *server {
		addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))
		argv := append([]string{mariadbd, "--no-defaults", "--datadir=" + data,
			"--port=" + strconv.Itoa(ports[0]), "--bind-address=127.0.0.1",
			"--socket=" + filepath.Join(dir, "sock"), "--pid-file=" + filepath.Join(dir, "mariadbd.pid"),
			"--tmpdir=" + dir, "--skip-name-resolve", "--skip-log-bin",
			"--innodb-flush-log-at-trx-commit=1", "--innodb-doublewrite=1",
			"--innodb-buffer-pool-size=64M", "--max-connections=200"}, asRoot...)
		a := addr
		return &server{
			t: t, name: "mariadb", dir: dir, logPath: filepath.Join(dir, "server.log"),
			argv: argv,
			url:  "mysql://root@" + addr + "/test?fila_migrate=true",
			probe: func(ctx context.Context) error {
				return mariadbExec(ctx, a, "SELECT 1")
			},
			diag: func() string { return mariadbProcessList(a) },
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := mariadbExec(ctx, addr, "CREATE DATABASE IF NOT EXISTS test"); err != nil {
		t.Fatalf("private mariadb: create database test: %v; its log ends:\n%s", err, srv.logTail())
	}
	return srv
}

// mariadbDB opens a database/sql handle on the private server's root
// account, with no database selected.
func mariadbDB(addr string) (*sql.DB, error) {
	cfg := gomysql.NewConfig()
	cfg.User = "root"
	cfg.Net = "tcp"
	cfg.Addr = addr
	cfg.Timeout = time.Second
	cfg.Logger = quietMySQLLog{} // a probe of a server still starting is no news
	conn, err := gomysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(conn), nil
}

// quietMySQLLog drops go-sql-driver's log lines.
type quietMySQLLog struct{}

func (quietMySQLLog) Print(...any) {}

// mariadbExec runs one statement on a fresh connection.
func mariadbExec(ctx context.Context, addr, stmt string) error {
	db, err := mariadbDB(addr)
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = db.ExecContext(ctx, stmt)
	return err
}

// mariadbProcessList describes the server's sessions for a failure message.
func mariadbProcessList(addr string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	db, err := mariadbDB(addr)
	if err != nil {
		return fmt.Sprintf("processlist: %v", err)
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, "SELECT id, user, db, command, time, state, LEFT(COALESCE(info, ''), 200) FROM information_schema.processlist ORDER BY id")
	if err != nil {
		return fmt.Sprintf("processlist: %v", err)
	}
	defer rows.Close()
	var b strings.Builder
	b.WriteString("id user db command time state info\n")
	for rows.Next() {
		var id, secs int64
		var user, command, state, info string
		var dbName sql.NullString
		if err := rows.Scan(&id, &user, &dbName, &command, &secs, &state, &info); err != nil {
			fmt.Fprintf(&b, "scan: %v\n", err)
			break
		}
		fmt.Fprintf(&b, "%d %s %s %s %ds %q %q\n", id, user, dbName.String, command, secs, state, info)
	}
	if err := rows.Err(); err != nil {
		fmt.Fprintf(&b, "processlist: %v\n", err)
	}
	return b.String()
}
