package faults_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

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
