package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// pgqueSystem is PgQue (github.com/NikolayS/pgque), installed from its one
// SQL file (sql/pgque.sql, given by --pgque-sql) into a database of its own,
// for the comparison of issue 37. Nothing of PgQue is copied into this
// repository, and its Go client (clients/go, a module of its own) is not a
// dependency: this system calls PgQue's SQL functions with pgx, doing what
// that client does:
//
//   - Send: SELECT pgque.send(queue, type, $payload::jsonb), the payload
//     being json.Marshal of the body ([]byte, so a base64 JSON string:
//     90 bytes of text for the 64-byte body);
//   - SendBatch: SELECT pgque.send_batch(queue, type, $payloads::jsonb[]);
//   - Consumer.Start: SELECT … FROM pgque.receive(queue, consumer, max) (max
//     MaxInt32 by default: the whole batch), every message handled in turn,
//     then SELECT pgque.ack(batch_id), the batch acknowledged as a whole; an
//     empty receive sleeps the poll interval (the client's default is 30 s;
//     here --pgque-poll);
//   - the ticker: what pgque.ticker_loop() does under pg_cron, SELECT
//     pgque.ticker() every --pgque-tick, each in its own transaction, on a
//     connection of its own (pg_cron's worker is a backend of its own too).
//
// Each queue is created with ticker_max_count 1, so every ticker call with
// new events makes a tick (the default, 500 events or 3 s of lag, would
// leave the tick period without effect below 500 events); idle queues keep
// PgQue's back-off. The ticker runs while a queue is set up, as it does in
// a deployment. PgQue's maintenance (pgque.maint(): table rotation, retry
// queue) is not run: the runs are far shorter than its rotation period (2 h).
type pgqueSystem struct {
	url  string // PgQue's database
	tick time.Duration
	poll time.Duration

	pool   *pgxpool.Pool
	queue  string // the run's queue; "" when none is set up
	ticker *pgqueTicker

	mu sync.Mutex
	// subs maps a subscription name (a PgQue consumer) to its PgQue queue:
	// the run's queue has one named after itself, a topic one per
	// subscribe.
	subs map[string]string
}

// pgqueType is the event type of every message (the Go client defaults to
// "default"; Fila's bench messages are of kind "bench").
const pgqueType = "bench"

// installPgque runs PgQue's install script on the database at url: one
// multi-statement script, sent in the simple protocol (pgx does so for an
// Exec without arguments).
func installPgque(ctx context.Context, url, sqlPath string) error {
	script, err := os.ReadFile(sqlPath)
	if err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, string(script)); err != nil {
		return fmt.Errorf("install %s: %w", sqlPath, err)
	}
	var v string
	if err := conn.QueryRow(ctx, `SELECT pgque.version()`).Scan(&v); err != nil {
		return fmt.Errorf("install %s: pgque.version(): %w", sqlPath, err)
	}
	logf("pgque: installed version %s from %s", v, sqlPath)
	return nil
}

func newPgqueSystem(ctx context.Context, url string, tick, poll time.Duration) (*pgqueSystem, error) {
	s := &pgqueSystem{url: url, tick: tick, poll: poll, subs: map[string]string{}}
	return s, s.connect(ctx)
}

func (s *pgqueSystem) Name() string { return "pgque" }

// connect opens the pool (when closed) and starts the ticker (when a queue
// is set up).
func (s *pgqueSystem) connect(ctx context.Context) error {
	if s.pool == nil {
		p, err := pgxpool.New(ctx, s.url)
		if err != nil {
			return err
		}
		s.pool = p
	}
	if s.queue != "" && s.ticker == nil {
		t, err := startPgqueTicker(ctx, s.url, s.tick)
		if err != nil {
			return err
		}
		s.ticker = t
	}
	return nil
}

// disconnect stops the ticker and closes every connection, so the server
// flushes their statistics (pg_stat_user_tables) as the backends exit.
func (s *pgqueSystem) disconnect() error {
	s.stopTicker()
	if s.pool != nil {
		s.pool.Close()
		s.pool = nil
	}
	return nil
}

func (s *pgqueSystem) stopTicker() {
	if s.ticker != nil {
		s.ticker.stop()
		s.ticker = nil
	}
}

// createQueue makes a PgQue queue that ticks at every ticker call with new
// events.
func (s *pgqueSystem) createQueue(ctx context.Context, q string) error {
	if _, err := s.pool.Exec(ctx, `SELECT pgque.create_queue($1)`, q); err != nil {
		return err
	}
	_, err := s.pool.Exec(ctx, `SELECT pgque.set_queue_config($1, 'ticker_max_count', '1')`, q)
	return err
}

func (s *pgqueSystem) Setup(ctx context.Context) error {
	if err := s.connect(ctx); err != nil {
		return err
	}
	s.queue = "bench_" + randSuffix()
	if err := s.createQueue(ctx, s.queue); err != nil {
		return err
	}
	if err := s.register(ctx, s.queue, s.queue); err != nil {
		return err
	}
	return s.connect(ctx) // starts the ticker
}

func (s *pgqueSystem) register(ctx context.Context, queue, consumer string) error {
	if _, err := s.pool.Exec(ctx, `SELECT pgque.subscribe($1, $2)`, queue, consumer); err != nil {
		return err
	}
	s.mu.Lock()
	s.subs[consumer] = queue
	s.mu.Unlock()
	return nil
}

func (s *pgqueSystem) queueOf(sub string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, ok := s.subs[sub]
	if !ok {
		return "", fmt.Errorf("pgque: no subscription %q", sub)
	}
	return q, nil
}

// payloads encodes bodies as the Go client's Send does: json.Marshal of
// the payload.
func pgquePayloads(bodies [][]byte) ([]string, error) {
	out := make([]string, len(bodies))
	for i, b := range bodies {
		j, err := json.Marshal(b)
		if err != nil {
			return nil, err
		}
		out[i] = string(j)
	}
	return out, nil
}

func (s *pgqueSystem) send(ctx context.Context, queue string, bodies [][]byte) error {
	ps, err := pgquePayloads(bodies)
	if err != nil {
		return err
	}
	if len(ps) == 1 {
		var id int64
		return s.pool.QueryRow(ctx, `SELECT pgque.send($1, $2, $3::jsonb)`, queue, pgqueType, ps[0]).Scan(&id)
	}
	var ids []int64
	return s.pool.QueryRow(ctx, `SELECT pgque.send_batch($1, $2, $3::jsonb[])`, queue, pgqueType, ps).Scan(&ids)
}

func (s *pgqueSystem) Enqueue(ctx context.Context, bodies [][]byte) error {
	return s.send(ctx, s.queue, bodies)
}

// preloadBatches fills the run's queue with n messages in sends of batch,
// one after another, with the ticker stopped and a tick after each send:
// every PgQue batch then holds one send, so a consumer receiving up to
// batch messages gets whole batches. Not measured.
func (s *pgqueSystem) preloadBatches(ctx context.Context, n, batch int) error {
	s.stopTicker()
	defer func() {
		if err := s.connect(context.WithoutCancel(ctx)); err != nil {
			logf("pgque: restart ticker: %v", err)
		}
	}()
	for left := n; left > 0; {
		k := min(batch, left)
		bodies := make([][]byte, k)
		for i := range bodies {
			bodies[i] = makeBody(time.Now())
		}
		if err := s.send(ctx, s.queue, bodies); err != nil {
			return err
		}
		var tick *int64
		if err := s.pool.QueryRow(ctx, `SELECT pgque.ticker($1)`, s.queue).Scan(&tick); err != nil {
			return fmt.Errorf("ticker: %w", err)
		}
		if tick == nil {
			return fmt.Errorf("ticker made no tick after a send of %d", k)
		}
		left -= k
		progress.add(int64(k))
	}
	return nil
}

func (s *pgqueSystem) Start(ctx context.Context, _ int, onStart func([]byte)) (Consumer, error) {
	return s.startBatch(ctx, s.queue, math.MaxInt32, onStart)
}

// startBatch runs one consumer of the subscription sub, as the Go client's
// Consumer.Start does: receive up to max messages of the next batch, handle
// each, ack the batch. Done counts a batch's messages once its ack
// returned 1 (the batch was finished).
func (s *pgqueSystem) startBatch(parent context.Context, sub string, max int, onStart func([]byte)) (Consumer, error) {
	queue, err := s.queueOf(sub)
	if err != nil {
		return nil, err
	}
	pool := s.pool
	ctx, cancel := context.WithCancel(parent)
	l := &goLoop{cancel: cancel}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		var payloads []string
		var body []byte
		for ctx.Err() == nil {
			payloads = payloads[:0]
			var batch int64
			rows, err := pool.Query(ctx, `SELECT batch_id, payload FROM pgque.receive($1, $2, $3)`, queue, sub, max)
			if err == nil {
				for rows.Next() {
					var p *string
					if err = rows.Scan(&batch, &p); err != nil {
						break
					}
					if p != nil {
						payloads = append(payloads, *p)
					}
				}
				rows.Close()
				if err == nil {
					err = rows.Err()
				}
			}
			if err != nil {
				if ctx.Err() == nil {
					logf("pgque receive: %v", err)
					sleepCtx(ctx, s.poll)
				}
				continue
			}
			if batch == 0 {
				sleepCtx(ctx, s.poll)
				continue
			}
			for _, p := range payloads {
				body = body[:0]
				if err := json.Unmarshal([]byte(p), &body); err == nil {
					onStart(body)
				}
			}
			var n int64
			if err := pool.QueryRow(ctx, `SELECT pgque.ack($1)`, batch).Scan(&n); err != nil {
				if ctx.Err() == nil {
					logf("pgque ack: %v", err)
					sleepCtx(ctx, s.poll)
				}
				continue
			}
			if n == 1 {
				l.done.Add(int64(len(payloads)))
			}
		}
	}()
	return l, nil
}

// The fan-out methods: a topic is a PgQue queue, a subscription one of its
// consumers, each with its own cursor over the queue's one event log.

func (s *pgqueSystem) subscribe(ctx context.Context, topic, sub string) error {
	s.mu.Lock()
	_, made := s.topics()[topic]
	s.mu.Unlock()
	if !made {
		if err := s.createQueue(ctx, topic); err != nil {
			return err
		}
	}
	return s.register(ctx, topic, sub)
}

// topics is the set of queues that have subscriptions; s.mu held.
func (s *pgqueSystem) topics() map[string]bool {
	t := map[string]bool{}
	for _, q := range s.subs {
		t[q] = true
	}
	return t
}

func (s *pgqueSystem) unsubscribe(ctx context.Context, topic, sub string) error {
	if _, err := s.pool.Exec(ctx, `SELECT pgque.unsubscribe($1, $2)`, topic, sub); err != nil {
		return err
	}
	s.mu.Lock()
	delete(s.subs, sub)
	s.mu.Unlock()
	return nil
}

// forgetTopic drops the topic's queue, with the ticker stopped: a
// pgque.ticker() call beside a drop_queue can deadlock with it, or fail on
// the queue's dropped sequence.
func (s *pgqueSystem) forgetTopic(ctx context.Context, topic string) error {
	s.stopTicker()
	_, err := s.pool.Exec(ctx, `SELECT pgque.drop_queue($1, true)`, topic)
	if cerr := s.connect(ctx); err == nil {
		err = cerr
	}
	return err
}

func (s *pgqueSystem) publish(ctx context.Context, topic string, bodies [][]byte, _ int) error {
	return s.send(ctx, topic, bodies)
}

func (s *pgqueSystem) startQueue(ctx context.Context, sub string, _ int, onStart func([]byte)) (Consumer, error) {
	return s.startBatch(ctx, sub, math.MaxInt32, onStart)
}

func (s *pgqueSystem) Teardown(ctx context.Context) error {
	s.stopTicker()
	if s.queue == "" {
		return nil
	}
	q := s.queue
	s.queue = "" // so connect does not restart the ticker
	if err := s.connect(ctx); err != nil {
		return err
	}
	s.mu.Lock()
	delete(s.subs, q)
	s.mu.Unlock()
	_, err := s.pool.Exec(ctx, `SELECT pgque.drop_queue($1, true)`, q)
	return err
}

func (s *pgqueSystem) Close(context.Context) error { return s.disconnect() }

// pgqueTicker calls pgque.ticker() every period on a connection of its own,
// as pgque.ticker_loop() does under pg_cron.
type pgqueTicker struct {
	cancel context.CancelFunc
	done   chan struct{}
	ticks  atomic.Int64
}

func startPgqueTicker(ctx context.Context, url string, period time.Duration) (*pgqueTicker, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return nil, err
	}
	tctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	t := &pgqueTicker{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(t.done)
		defer conn.Close(context.Background())
		tk := time.NewTicker(period)
		defer tk.Stop()
		for {
			var n int64
			err := conn.QueryRow(tctx, `SELECT pgque.ticker()`).Scan(&n)
			if err != nil && tctx.Err() == nil && !errors.Is(err, context.Canceled) {
				logf("pgque ticker: %v", err)
			}
			t.ticks.Add(n)
			select {
			case <-tk.C:
			case <-tctx.Done():
				return
			}
		}
	}()
	return t, nil
}

func (t *pgqueTicker) stop() {
	t.cancel()
	<-t.done
}
