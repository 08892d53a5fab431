package redis

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/backend"
)

// Defaults of Options.
const (
	DefaultPrefix     = "fila"
	DefaultDeadCap    = 100000
	DefaultBlock      = time.Second
	DefaultSweepEvery = 30 * time.Second
	DefaultOrphanIdle = 5 * time.Minute
	// DefaultWaitTimeout is the default of Options.WaitTimeout.
	DefaultWaitTimeout = time.Second
	// defaultPromote is how many due delayed messages one receive promotes.
	defaultPromote = 1000
	// defaultFastMin is the default of Options.fastMin.
	defaultFastMin = 10
)

// Options configure a driver built with New. The zero value uses the
// defaults.
type Options struct {
	// Prefix starts every key: a queue's keys are "{<Prefix>:<queue>}:…".
	// It must not contain '{' or '}'. Default "fila".
	Prefix string
	// DeadCap bounds each queue's dead-letter stream: beyond it the oldest
	// dead letters are deleted. 0 means DefaultDeadCap; negative means
	// unbounded.
	DeadCap int
	// Block is the longest a blocked Receive waits on the stream before it
	// looks again for due delayed messages and expired leases that other
	// clients created meanwhile (its own known due times wake it earlier).
	// It bounds the redelivery latency. Default 1s.
	Block time.Duration
	// SweepEvery is how often (per queue, across all clients) a Receive
	// starts a sweep: consumers holding entries without a lease deadline
	// become takeover candidates, and the stream is checked for entries that
	// lost their pending entry (see the package doc). Negative disables the
	// sweep. Default 30s.
	SweepEvery time.Duration
	// OrphanIdle is how long a consumer holding entries without a deadline
	// must be idle before the sweep hands its entries out. Default 5m.
	OrphanIdle time.Duration
	// Logger receives the driver's warnings. Default slog.Default().
	Logger *slog.Logger
	// CloseClient makes Close close the go-redis client too. New leaves it
	// false (the caller owns the client); Open sets it.
	CloseClient bool
	// WaitReplicas, when positive, makes Enqueue (and DeadImport) return
	// only once that many replicas of the queue's master acknowledged the
	// write (Redis WAIT on the same connection). Redis replicates
	// asynchronously: without it, a message whose Enqueue returned nil can
	// be lost when its master fails before a replica has it and the replica
	// takes over. A write that does not reach enough replicas within
	// WaitTimeout fails with ErrUnavailable (it may still be stored: a retry
	// may store it twice). Default 0 (no waiting).
	WaitReplicas int
	// WaitTimeout bounds WaitReplicas' wait. Default 1s. The WAIT is read
	// under the client's read timeout: Open raises read_timeout to
	// WaitTimeout + 3s when it is shorter and turns go-redis's own retries
	// off (max_retries -1: a write and its WAIT share a plain pipeline,
	// which go-redis would send again after a lost reply); with New, give
	// the client a ReadTimeout longer than WaitTimeout and MaxRetries -1.
	WaitTimeout time.Duration

	// fastMin is the smallest Max for which Receive may use the fast path
	// (see fastrecv.go): for one message it gains nothing over the receive
	// script, which also takes over expired leases. 0 means defaultFastMin;
	// tests set 1.
	fastMin int
}

func (o *Options) defaults() error {
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if o.WaitReplicas < 0 {
		return backend.Invalidf("redis WaitReplicas %d is negative", o.WaitReplicas)
	}
	if o.WaitTimeout <= 0 {
		o.WaitTimeout = DefaultWaitTimeout
	}
	if strings.ContainsAny(o.Prefix, "{}") {
		return backend.Invalidf("redis key prefix %q must not contain '{' or '}'", o.Prefix)
	}
	if o.DeadCap == 0 {
		o.DeadCap = DefaultDeadCap
	}
	if o.DeadCap < 0 {
		o.DeadCap = 0
	}
	if o.Block <= 0 {
		o.Block = DefaultBlock
	}
	if o.Block < time.Millisecond {
		o.Block = time.Millisecond
	}
	if o.SweepEvery == 0 {
		o.SweepEvery = DefaultSweepEvery
	}
	if o.OrphanIdle <= 0 {
		o.OrphanIdle = DefaultOrphanIdle
	}
	if o.fastMin <= 0 {
		o.fastMin = defaultFastMin
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return nil
}

func init() {
	fila.Register("redis", Open)
	fila.Register("rediss", Open)
}

// Open is the fila.Opener of the "redis" and "rediss" schemes; the driver
// logs to oo.Logger (nil: slog.Default()). The URL is a go-redis URL; Fila's
// own query parameters start with "fila_":
//
//	fila_prefix     key prefix (default "fila")
//	fila_dead_cap   dead letters kept per queue (default 100000, 0 unbounded)
//	fila_block      longest single stream wait of a blocked Receive (default 1s)
//	fila_sweep      pending-list sweep interval (default 30s, 0 disables)
//	fila_mode       "single" (default), "cluster" or "sentinel"
//	fila_wait_replicas  replicas that must acknowledge an enqueue (default 0)
//	fila_wait_timeout   how long an enqueue waits for them (default 1s)
//
// An unknown fila_ parameter is an ErrInvalid error. Every other parameter
// goes to go-redis: redis.ParseURL in single mode (db, pool_size,
// read_timeout, …), redis.ParseClusterURL in cluster mode (addr=host:port for
// more seed nodes) and redis.ParseFailoverURL in sentinel mode
// (master_name=…, addr=… for more sentinels); go-redis rejects the ones it
// does not know, which is reported as ErrInvalid too.
//
// Open connects and checks that Redis answers (PING) before it returns,
// within ctx: an unreachable server fails here with an error matching
// fila.ErrUnavailable (New, over a client the caller owns, does not check).
func Open(ctx context.Context, u *url.URL, oo backend.OpenOptions) (_ backend.Driver, err error) {
	// Client libraries may put the URL, or parts of it, into their errors.
	defer func() { err = backend.RedactError(err, u) }()
	own := url.Values{}
	rest := url.Values{}
	for k, v := range u.Query() {
		if strings.HasPrefix(k, "fila_") {
			own[k] = v
		} else {
			rest[k] = v
		}
	}
	p := backend.NewURLParams(&url.URL{RawQuery: own.Encode()})
	o := Options{CloseClient: true, Logger: oo.Logger}
	o.Prefix = p.String("fila_prefix", DefaultPrefix)
	if p.Has("fila_dead_cap") {
		if o.DeadCap = p.Int("fila_dead_cap", DefaultDeadCap); o.DeadCap == 0 {
			o.DeadCap = -1
		}
	}
	o.Block = p.Duration("fila_block", DefaultBlock)
	if p.Has("fila_sweep") {
		if o.SweepEvery = p.Duration("fila_sweep", DefaultSweepEvery); o.SweepEvery == 0 {
			o.SweepEvery = -1
		}
	}
	mode := p.String("fila_mode", "single")
	o.WaitReplicas = p.Int("fila_wait_replicas", 0)
	o.WaitTimeout = p.Duration("fila_wait_timeout", DefaultWaitTimeout)
	if err := p.Done(); err != nil {
		return nil, err
	}
	if o.Block == 0 {
		return nil, backend.Invalidf("URL parameter fila_block must be positive")
	}
	cu := *u
	cu.RawQuery = rest.Encode()
	var client goredis.UniversalClient
	switch mode {
	case "single", "":
		opt, err := goredis.ParseURL(cu.String())
		if err != nil {
			return nil, goRedisURLErr(err)
		}
		opt.ReadTimeout = readTimeoutFor(opt.ReadTimeout, o)
		opt.MaxRetries = maxRetriesFor(opt.MaxRetries, o)
		client = goredis.NewClient(opt)
	case "cluster":
		opt, err := goredis.ParseClusterURL(cu.String())
		if err != nil {
			return nil, goRedisURLErr(err)
		}
		opt.ReadTimeout = readTimeoutFor(opt.ReadTimeout, o)
		opt.MaxRetries = maxRetriesFor(opt.MaxRetries, o)
		client = goredis.NewClusterClient(opt)
	case "sentinel":
		opt, err := goredis.ParseFailoverURL(cu.String())
		if err != nil {
			return nil, goRedisURLErr(err)
		}
		opt.ReadTimeout = readTimeoutFor(opt.ReadTimeout, o)
		opt.MaxRetries = maxRetriesFor(opt.MaxRetries, o)
		client = goredis.NewFailoverClient(opt)
	default:
		return nil, backend.Invalidf("URL parameter fila_mode=%q: want single, cluster or sentinel", mode)
	}
	// Like sql.Open followed by Ping: an unreachable server or refused
	// credentials fail here, not at the first call.
	d, err := newDriver(ctx, client, o, true)
	if err != nil {
		_ = client.Close()
		return nil, err
	}
	return d, nil
}

// goRedisURLErr reports a go-redis URL parse error as ErrInvalid, without the
// URL itself (it may carry a password).
// readTimeoutFor returns a go-redis read timeout that outlasts a replica
// wait: a WAIT of fila_wait_timeout is read in the same pipeline as its
// write, under the connection's read timeout (default 3s), which would cut
// a longer wait into an i/o timeout. Negative values (no timeout) stay.
func readTimeoutFor(rt time.Duration, o Options) time.Duration {
	if o.WaitReplicas <= 0 || rt < 0 {
		return rt
	}
	if rt == 0 {
		rt = 3 * time.Second // go-redis's default
	}
	return max(rt, o.WaitTimeout+3*time.Second)
}

// maxRetriesFor turns go-redis's own retries off when writes wait for
// replicas: the write and its WAIT go in one plain pipeline, which go-redis
// would send again after a lost reply, storing the messages twice (see
// once.go). Everything else the driver writes runs in MULTI/EXEC, which
// go-redis never sends twice, so without the wait its retries stay.
func maxRetriesFor(mr int, o Options) int {
	if o.WaitReplicas > 0 {
		return -1
	}
	return mr
}

func goRedisURLErr(err error) error {
	return fmt.Errorf("%w: redis URL: %s", backend.ErrInvalid, strings.TrimPrefix(err.Error(), "redis: "))
}
