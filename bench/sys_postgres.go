package main

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// pgEnv holds the names shared by the Postgres systems of one benchmark
// process: each system gets its own schema, dropped at Close.
type pgEnv struct {
	url    string // base URL, without Fila's parameters
	pool   *pgxpool.Pool
	suffix string
}

func newPGEnv(ctx context.Context, url string) (*pgEnv, error) {
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return nil, err
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	return &pgEnv{url: url, pool: pool, suffix: randSuffix()}, nil
}

func (e *pgEnv) dropSchema(ctx context.Context, schema string) error {
	_, err := e.pool.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{schema}.Sanitize()+` CASCADE`)
	return err
}

func (e *pgEnv) filaSchema() string { return "bench_fila_" + e.suffix }

// filaSystem opens Fila on its own schema, migrated at open.
func (e *pgEnv) filaSystem(ctx context.Context) (*filaSystem, error) {
	schema := e.filaSchema()
	url := addParams(e.url, "fila_schema="+schema, "fila_migrate=true")
	s, err := newFilaSystem(ctx, url,
		func(ctx context.Context, q string) error {
			_, err := e.pool.Exec(ctx, `DELETE FROM `+schema+`.messages WHERE queue = $1`, q)
			return err
		},
		func(ctx context.Context) error { return e.dropSchema(ctx, schema) })
	if s != nil {
		s.pgSchema = schema
	}
	return s, err
}

// filaLogName is the name of Fila in its Postgres log storage mode.
const filaLogName = "fila-log"

// filaLogSystem opens Fila in its log storage mode (fila_mode=log:
// append-only, partitioned, rotating tables) on its own schema, migrated at
// open. Between runs its schema is dropped and migrated again (the log
// tables have no per-queue DELETE to clean up with).
func (e *pgEnv) filaLogSystem(ctx context.Context) (*filaSystem, error) {
	schema := "bench_fila_log_" + e.suffix
	url := addParams(e.url, "fila_schema="+schema, "fila_migrate=true", "fila_mode=log")
	drop := func(ctx context.Context) error { return e.dropSchema(ctx, schema) }
	s, err := newFilaSystem(ctx, url, nil, drop)
	if err != nil {
		return nil, fmt.Errorf("%s (%s): %w", filaLogName, "fila_mode=log", err)
	}
	s.name, s.pgSchema, s.pgLog, s.fresh = filaLogName, schema, true, drop
	return s, nil
}

// rawPG is the raw pgx baseline: a table like Fila's hot table, a SKIP
// LOCKED claim of up to the free slots, and one DELETE per finished job,
// the same shape of work as Fila's worker does.
type rawPG struct {
	env    *pgEnv
	pool   *pgxpool.Pool
	schema string
	queue  string
}

func (e *pgEnv) rawSystem(ctx context.Context) (*rawPG, error) {
	pool, err := pgxpool.New(ctx, e.url)
	if err != nil {
		return nil, err
	}
	s := &rawPG{env: e, pool: pool, schema: "bench_raw_" + e.suffix}
	_, err = pool.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+s.schema+`;
CREATE TABLE IF NOT EXISTS `+s.schema+`.jobs (
	id bigserial PRIMARY KEY,
	queue text NOT NULL,
	body bytea NOT NULL,
	visible_at timestamptz NOT NULL DEFAULT now(),
	attempts int NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS jobs_claim ON `+s.schema+`.jobs (queue, visible_at, id);`)
	if err != nil {
		pool.Close()
		return nil, err
	}
	return s, nil
}

func (s *rawPG) Name() string { return "raw pgx" }

func (s *rawPG) Setup(context.Context) error {
	s.queue = "bench-" + randSuffix()
	return nil
}

func (s *rawPG) Enqueue(ctx context.Context, bodies [][]byte) error {
	if len(bodies) == 1 {
		_, err := s.pool.Exec(ctx, `INSERT INTO `+s.schema+`.jobs (queue, body) VALUES ($1, $2)`, s.queue, bodies[0])
		return err
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO `+s.schema+`.jobs (queue, body) SELECT $1, unnest($2::bytea[])`, s.queue, bodies)
	return err
}

type pgJob struct {
	id   int64
	body []byte
}

func (s *rawPG) Start(ctx context.Context, concurrency int, onStart func([]byte)) (Consumer, error) {
	claim := `UPDATE ` + s.schema + `.jobs j SET attempts = j.attempts + 1, visible_at = now() + interval '30 seconds'
FROM (SELECT id FROM ` + s.schema + `.jobs WHERE queue = $1 AND visible_at <= now()
	ORDER BY visible_at, id LIMIT $2 FOR UPDATE SKIP LOCKED) c
WHERE j.id = c.id RETURNING j.id, j.body`
	ack := `DELETE FROM ` + s.schema + `.jobs WHERE id = $1`
	fetch := func(ctx context.Context, n int) ([]pgJob, error) {
		rows, err := s.pool.Query(ctx, claim, s.queue, n)
		if err != nil {
			return nil, err
		}
		jobs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (pgJob, error) {
			var j pgJob
			err := r.Scan(&j.id, &j.body)
			return j, err
		})
		if err == nil && len(jobs) == 0 {
			sleepCtx(ctx, rawPollInterval) // empty: poll again shortly
		}
		return jobs, err
	}
	handle := func(ctx context.Context, j pgJob) bool {
		onStart(j.body)
		_, err := s.pool.Exec(context.WithoutCancel(ctx), ack, j.id)
		if err != nil {
			logf("raw pgx ack: %v", err)
		}
		return err == nil
	}
	return startSlotLoop(ctx, concurrency, 1000, fetch, handle), nil
}

func (s *rawPG) Teardown(ctx context.Context) error {
	_, err := s.pool.Exec(ctx, `DELETE FROM `+s.schema+`.jobs WHERE queue = $1`, s.queue)
	return err
}

func (s *rawPG) Close(ctx context.Context) error {
	s.pool.Close()
	return s.env.dropSchema(ctx, s.schema)
}

// rawPollInterval is how long the raw loops wait after an empty claim.
const rawPollInterval = time.Millisecond

// benchArgs are River's job arguments: the same 64-byte body.
type benchArgs struct {
	Body []byte `json:"b"`
}

func (benchArgs) Kind() string { return "bench" }

type benchRiverWorker struct {
	river.WorkerDefaults[benchArgs]
	onStart atomic.Pointer[func([]byte)]
}

func (w *benchRiverWorker) Work(_ context.Context, j *river.Job[benchArgs]) error {
	if f := w.onStart.Load(); f != nil {
		(*f)(j.Args.Body)
	}
	return nil
}

// riverSystem is River (riverpgxv5) on its own schema, with its default
// FetchCooldown or a given one.
type riverSystem struct {
	env      *pgEnv
	pool     *pgxpool.Pool
	schema   string
	cooldown time.Duration // 0: River's default
	inserter *river.Client[pgx.Tx]
	worker   *benchRiverWorker
	workers  *river.Workers
	queue    string
}

func (e *pgEnv) riverSystem(ctx context.Context, cooldown time.Duration) (*riverSystem, error) {
	pool, err := pgxpool.New(ctx, e.url)
	if err != nil {
		return nil, err
	}
	tag := "default"
	if cooldown > 0 {
		tag = "fast"
	}
	s := &riverSystem{env: e, pool: pool, schema: "bench_river_" + tag + "_" + e.suffix, cooldown: cooldown}
	if _, err := pool.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+s.schema); err != nil {
		pool.Close()
		return nil, err
	}
	m, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Schema: s.schema, Logger: quietLogger()})
	if err != nil {
		pool.Close()
		return nil, err
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		pool.Close()
		return nil, fmt.Errorf("river migrate: %w", err)
	}
	s.worker = &benchRiverWorker{}
	s.workers = river.NewWorkers()
	river.AddWorker(s.workers, s.worker)
	// The inserting client throttles its insert notifications per queue to
	// one per FetchCooldown, so it must get the same setting as the workers.
	icfg := &river.Config{Schema: s.schema, Logger: quietLogger(), Workers: s.workers}
	if cooldown > 0 {
		icfg.FetchCooldown = cooldown
	}
	s.inserter, err = river.NewClient(riverpgxv5.New(pool), icfg)
	if err != nil {
		pool.Close()
		return nil, err
	}
	return s, nil
}

func (s *riverSystem) Name() string {
	if s.cooldown > 0 {
		return fmt.Sprintf("river (FetchCooldown %v)", s.cooldown)
	}
	return "river (default)"
}

func (s *riverSystem) Setup(context.Context) error {
	s.queue = "bench_" + randSuffix()
	return nil
}

func (s *riverSystem) Enqueue(ctx context.Context, bodies [][]byte) error {
	opts := &river.InsertOpts{Queue: s.queue}
	if len(bodies) == 1 {
		_, err := s.inserter.Insert(ctx, benchArgs{Body: bodies[0]}, opts)
		return err
	}
	params := make([]river.InsertManyParams, len(bodies))
	for i, b := range bodies {
		params[i] = river.InsertManyParams{Args: benchArgs{Body: b}, InsertOpts: opts}
	}
	_, err := s.inserter.InsertMany(ctx, params)
	return err
}

func (s *riverSystem) EnqueueDelayed(ctx context.Context, body []byte, delay time.Duration) error {
	_, err := s.inserter.Insert(ctx, benchArgs{Body: body}, &river.InsertOpts{Queue: s.queue, ScheduledAt: time.Now().Add(delay)})
	return err
}

type riverConsumer struct {
	client *river.Client[pgx.Tx]
	done   atomic.Int64
	unsub  func()
	evDone chan struct{}
}

func (s *riverSystem) Start(ctx context.Context, concurrency int, onStart func([]byte)) (Consumer, error) {
	s.worker.onStart.Store(&onStart)
	cfg := &river.Config{
		Schema:  s.schema,
		Logger:  quietLogger(),
		Workers: s.workers,
		Queues:  map[string]river.QueueConfig{s.queue: {MaxWorkers: concurrency}},
	}
	if s.cooldown > 0 {
		cfg.FetchCooldown = s.cooldown
	}
	c, err := river.NewClient(riverpgxv5.New(s.pool), cfg)
	if err != nil {
		return nil, err
	}
	rc := &riverConsumer{client: c, evDone: make(chan struct{})}
	// JobCompleted events are sent after the completer has stored the
	// completion: the "ack stored" point.
	events, unsub := c.SubscribeConfig(&river.SubscribeConfig{ChanSize: 100_000, Kinds: []river.EventKind{river.EventKindJobCompleted}})
	rc.unsub = unsub
	go func() {
		defer close(rc.evDone)
		for range events {
			rc.done.Add(1)
		}
	}()
	if err := c.Start(ctx); err != nil {
		unsub()
		return nil, err
	}
	return rc, nil
}

func (c *riverConsumer) Done() int64 { return c.done.Load() }

func (c *riverConsumer) Stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	err := c.client.Stop(ctx)
	c.unsub()
	<-c.evDone
	return err
}

func (s *riverSystem) Teardown(ctx context.Context) error {
	_, err := s.pool.Exec(ctx, `DELETE FROM `+s.schema+`.river_job WHERE queue = $1`, s.queue)
	return err
}

func (s *riverSystem) Close(ctx context.Context) error {
	s.pool.Close()
	return s.env.dropSchema(ctx, s.schema)
}
