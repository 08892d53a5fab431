package faults_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/fila-go/fila"
)

// TestRedisClusterFailover kills -9 the master holding a queue's slot in a
// private Redis Cluster (3 masters, 2 replicas each) while a producer and a consumer
// run on one client: the replica takes over and the client follows without
// a restart. Redis replicates asynchronously, so an enqueue acknowledged by
// the master alone can be lost; the run without fila_wait_replicas reports
// how many were, and the run with fila_wait_replicas=1 must lose none.
func TestRedisClusterFailover(t *testing.T) {
	for _, tc := range []struct {
		name string
		wait bool
	}{{"without-wait", false}, {"wait-replicas", true}} {
		t.Run(tc.name, func(t *testing.T) {
			nodes := privateRedisCluster(t)
			url := nodes.url
			if tc.wait {
				url += "&fila_wait_replicas=1"
			}
			queue := "failover"
			kill := func() {
				addr := nodes.masterFor(t, "{fila:"+queue+"}")
				srv := nodes.byAddr[addr]
				t.Logf("killing the master of the queue's slot, %s", addr)
				srv.kill()
			}
			r := runFailover(t, url, queue, kill)
			t.Logf("%s: %d enqueues confirmed, %d lost, %d handled twice; first enqueue %v and first handled message %v after the kill",
				tc.name, r.confirmed, r.lost, r.dups, r.enqRecovery.Round(time.Millisecond), r.ackRecovery.Round(time.Millisecond))
			if tc.wait && r.lost > 0 {
				t.Errorf("%d confirmed enqueues lost with fila_wait_replicas=1", r.lost)
			}
			if r.enqRecovery > clusterRecoveryLimit || r.ackRecovery > clusterRecoveryLimit {
				t.Errorf("the client took %v (enqueue) and %v (handled message) to work again after the kill; want <= %v",
					r.enqRecovery, r.ackRecovery, clusterRecoveryLimit)
			}
		})
	}
}

// clusterRecoveryLimit bounds how long after a node's death the client
// works again: the cluster's failure detection and election, then the
// client's next try.
const clusterRecoveryLimit = 10 * time.Second

// redisCluster is a private Redis Cluster of six servers.
type redisCluster struct {
	url    string
	admin  *goredis.ClusterClient
	byAddr map[string]*server
}

// privateRedisCluster starts nine cluster-enabled redis-servers on free
// ports and joins them with redis-cli --cluster create: three masters with
// two replicas each, so a master promoted after a failure still has a
// replica (fila_wait_replicas=1 can be met). Failure detection:
// cluster-node-timeout 1000 ms.
func privateRedisCluster(t *testing.T) *redisCluster {
	bin := findProgram(t, "redis-server", "redis-server")
	cli := findProgram(t, "redis-cli", "redis-tools")
	acct := runAs{uid: os.Getuid(), gid: os.Getgid()}
	c := &redisCluster{byAddr: map[string]*server{}}
	var addrs []string
	for i := 0; i < 9; i++ {
		dir := serverDir(t, "fila-faults-rediscluster-", acct)
		srv := startOnFreePorts(t, 1, func(ports []int) *server {
			addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))
			return &server{
				t: t, name: "redis cluster node " + addr, dir: dir, logPath: filepath.Join(dir, "server.log"),
				argv: []string{bin, "--port", strconv.Itoa(ports[0]), "--bind", "127.0.0.1", "--dir", dir,
					"--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(dir, "nodes.conf"),
					"--cluster-node-timeout", "1000", "--save", "", "--appendonly", "no", "--daemonize", "no",
					"--maxmemory-policy", "noeviction"},
				url:   addr,
				probe: func(ctx context.Context) error { return redisPing(ctx, addr) },
			}
		})
		c.byAddr[srv.url] = srv
		addrs = append(addrs, srv.url)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", "2", "--cluster-yes")
	if out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	c.admin = goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: addrs})
	t.Cleanup(func() { _ = c.admin.Close() })
	// Whole: the slots are served, and every replica has finished its first
	// sync (a replica that never synced refuses to take over: "disconnected
	// from master for longer than allowed").
	if !waitUntil(30*time.Second, func() bool {
		info, err := c.admin.ClusterInfo(ctx).Result()
		if err != nil || !containsLine(info, "cluster_state:ok") {
			return false
		}
		var synced atomic.Int32 // ForEachShard calls concurrently
		err = c.admin.ForEachShard(ctx, func(ctx context.Context, n *goredis.Client) error {
			repl, err := n.Info(ctx, "replication").Result()
			if err == nil && containsLine(repl, "role:slave") && containsLine(repl, "master_link_status:up") {
				synced.Add(1)
			}
			return err
		})
		return err == nil && synced.Load() == 6
	}) {
		t.Fatalf("the private Redis Cluster did not become whole (six synced replicas)")
	}
	c.url = fmt.Sprintf("redis://%s?fila_mode=cluster&addr=%s&addr=%s&fila_block=200ms", addrs[0], addrs[1], addrs[2])
	return c
}

// masterFor returns the address of the master serving key's slot.
func (c *redisCluster) masterFor(t *testing.T, key string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n, err := c.admin.MasterForKey(ctx, key)
	if err != nil {
		t.Fatalf("master for %s: %v", key, err)
	}
	return n.Options().Addr
}

func containsLine(s, line string) bool {
	for len(s) > 0 {
		i := 0
		for i < len(s) && s[i] != '\n' {
			i++
		}
		l := s[:i]
		if len(l) > 0 && l[len(l)-1] == '\r' {
			l = l[:len(l)-1]
		}
		if l == line {
			return true
		}
		if i == len(s) {
			break
		}
		s = s[i+1:]
	}
	return false
}

// failoverResult is what a failover run measured.
type failoverResult struct {
	confirmed, handled, lost, dups int
	// enqRecovery and ackRecovery: from the kill to the first successful
	// enqueue, and to the first message handled and acked, after it.
	enqRecovery, ackRecovery time.Duration
}

// runFailover runs a producer (retrying failed enqueues) and a consumer on
// one client of url; once 300 enqueues were confirmed it calls kill, keeps
// going until 300 more were confirmed after the kill, then drains the queue.
// Lost: confirmed and never handled.
func runFailover(t *testing.T, url, queue string, kill func()) failoverResult {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var logBuf testenvLog
	c, err := fila.Open(ctx, url, fila.WithLogger(slog.New(slog.NewTextHandler(&logBuf, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer c.Close()
	var (
		mu          sync.Mutex
		confirmed   = map[int]bool{}
		confirmedAt = map[int]time.Time{}
		handled     = map[int]int{}
		acks        []time.Time
		enqs        []time.Time
	)
	count := func() (int, int) {
		mu.Lock()
		defer mu.Unlock()
		return len(confirmed), len(handled)
	}
	stopProd := make(chan struct{})
	var stopOnce sync.Once
	stop := func() { stopOnce.Do(func() { close(stopProd) }) }
	var wg sync.WaitGroup
	prodDone := make(chan struct{})
	wg.Add(1)
	go func() { // producer
		defer wg.Done()
		defer close(prodDone)
		for seq := 0; ; seq++ {
			for {
				select {
				case <-stopProd:
					return
				default:
				}
				cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
				_, err := c.Enqueue(cctx, queue, fila.Message{Kind: "failover", Body: []byte(strconv.Itoa(seq))})
				ccancel()
				if err == nil {
					mu.Lock()
					confirmed[seq] = true
					confirmedAt[seq] = time.Now()
					enqs = append(enqs, time.Now())
					mu.Unlock()
					break
				}
				if errors.Is(err, fila.ErrClosed) {
					return
				}
				if !errors.Is(err, fila.ErrUnavailable) && !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("Enqueue failed with an error that is not fila.ErrUnavailable: %v", err)
				}

				time.Sleep(20 * time.Millisecond)
			}
		}
	}()
	cctx, stopCons := context.WithCancel(ctx)
	defer func() { // also when a Fatalf ends the test early
		stop()
		stopCons()
		wg.Wait()
	}()
	wg.Add(1)
	go func() { // consumer
		defer wg.Done()
		for cctx.Err() == nil {
			ds, err := c.Receive(cctx, queue, fila.ReceiveParams{Max: 20, Lease: 10 * time.Second})
			if err != nil {
				if cctx.Err() == nil {
					time.Sleep(20 * time.Millisecond)
				}
				continue
			}
			// Handled means delivered to this consumer: an ack that fails
			// (a connection lost mid-call) may still have been stored, and
			// the message is then never delivered again.
			mu.Lock()
			for _, d := range ds {
				seq, _ := strconv.Atoi(string(d.Body))
				handled[seq]++
			}
			mu.Unlock()
			if err := c.AckBatch(cctx, ds); err != nil {
				continue // those not stored come back after their leases
			}
			mu.Lock()
			acks = append(acks, time.Now())
			mu.Unlock()
		}
	}()
	if !waitUntil(60*time.Second, func() bool { n, _ := count(); return n >= 300 }) {
		t.Fatalf("the producer did not confirm 300 enqueues before the kill")
	}
	kill()
	killed := time.Now() // the broker is gone: calls in flight before this may still have succeeded
	before, _ := count()
	if !waitUntil(60*time.Second, func() bool { n, _ := count(); return n >= before+300 }) {
		n, _ := count()
		t.Fatalf("after the kill the producer confirmed %d more enqueues in 60s, want 300; the client's log ends:\n%s", n-before, logBuf.tail())
	}
	stop()
	// An enqueue in flight when stop was called may still be confirmed:
	// drain only once the producer has returned.
	<-prodDone
	if !waitUntil(60*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		for seq := range confirmed {
			if handled[seq] == 0 {
				return false
			}
		}
		return true
	}) {
		t.Logf("draining ended with confirmed messages unhandled")
	}
	stopCons()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	r := failoverResult{confirmed: len(confirmed), handled: len(handled)}
	for seq := range confirmed {
		if handled[seq] == 0 {
			r.lost++
			t.Logf("lost: seq %d confirmed at %v relative to the kill", seq, confirmedAt[seq].Sub(killed))
		}
	}
	if r.lost > 0 {
		st, err := c.QueueStats(context.Background(), queue)
		t.Logf("queue stats after the drain: %+v, %v; the client's log ends:\n%s", st, err, logBuf.tail())
	}
	for _, n := range handled {
		if n > 1 {
			r.dups++
		}
	}
	if at, ok := firstAfter(enqs, killed); ok {
		r.enqRecovery = at.Sub(killed)
	}
	if at, ok := firstAfter(acks, killed); ok {
		r.ackRecovery = at.Sub(killed)
	}
	return r
}

// TestRabbitMQClusterFailover kills -9 the node leading a queue's quorum
// queue in a private 3-node RabbitMQ cluster, while a producer and a
// consumer run on one client connected to that very node: the client
// reconnects to another node named in fila_hosts, the queue elects a new
// leader, and nothing confirmed is lost.
func TestRabbitMQClusterFailover(t *testing.T) {
	nodes := privateRabbitCluster(t)
	queue := "failover"
	kill := func() {
		leader := nodes.leaderOf(t, "fila."+queue)
		srv := nodes.byNode[leader]
		if srv == nil {
			t.Fatalf("the queue's leader %q is not a node of the private cluster", leader)
		}
		t.Logf("killing the queue's leader, %s", leader)
		srv.kill()
	}
	r := runFailover(t, nodes.url, queue, kill)
	t.Logf("%d enqueues confirmed, %d lost, %d handled twice; first enqueue %v and first handled message %v after the kill",
		r.confirmed, r.lost, r.dups, r.enqRecovery.Round(time.Millisecond), r.ackRecovery.Round(time.Millisecond))
	if r.lost > 0 {
		t.Errorf("%d confirmed enqueues lost", r.lost)
	}
	if r.enqRecovery > clusterRecoveryLimit || r.ackRecovery > clusterRecoveryLimit {
		t.Errorf("the client took %v (enqueue) and %v (handled message) to work again after the kill; want <= %v",
			r.enqRecovery, r.ackRecovery, clusterRecoveryLimit)
	}
}

// rabbitCluster is a private 3-node RabbitMQ cluster.
type rabbitCluster struct {
	url    string // the first node, the others in fila_hosts
	first  string // the first node's name
	byNode map[string]*server
}

// privateRabbitCluster starts three RabbitMQ nodes (see privateRabbitMQ)
// and joins the second and third to the first.
func privateRabbitCluster(t *testing.T) *rabbitCluster {
	c := &rabbitCluster{byNode: map[string]*server{}}
	ctl := findProgram(t, "rabbitmqctl", "rabbitmq-server")
	var amqpAddrs []string
	for i := 0; i < 3; i++ {
		srv := privateRabbitMQ(t)
		c.byNode[srv.node] = srv
		if i == 0 {
			c.first = srv.node
		}
		amqpAddrs = append(amqpAddrs, srv.amqpAddr)
		if i == 0 {
			continue
		}
		for _, args := range [][]string{{"stop_app"}, {"join_cluster", c.first}, {"start_app"}} {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			out, err := exec.CommandContext(ctx, ctl, append([]string{"-n", srv.node}, args...)...).CombinedOutput()
			cancel()
			if err != nil {
				t.Fatalf("rabbitmqctl -n %s %v: %v\n%s", srv.node, args, err, out)
			}
		}
	}
	c.url = fmt.Sprintf("amqp://guest:guest@%s/?fila_hosts=%s,%s", amqpAddrs[0], amqpAddrs[1], amqpAddrs[2])
	return c
}

// leaderOf returns the name of the node leading quorum queue name.
func (c *rabbitCluster) leaderOf(t *testing.T, name string) string {
	ctl := findProgram(t, "rabbitmqctl", "rabbitmq-server")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, ctl, "-n", c.first, "list_queues", "name", "leader", "--no-table-headers", "--quiet").CombinedOutput()
	if err != nil {
		t.Fatalf("rabbitmqctl list_queues: %v\n%s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 2 && f[0] == name {
			return f[1]
		}
	}
	t.Fatalf("queue %s not found among:\n%s", name, out)
	return ""
}

// testenvLog keeps a client's log lines for a failure message.
type testenvLog struct {
	mu  sync.Mutex
	buf []byte
}

func (l *testenvLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	return len(p), nil
}

func (l *testenvLog) tail() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.buf) > 4000 {
		return string(l.buf[len(l.buf)-4000:])
	}
	return string(l.buf)
}
