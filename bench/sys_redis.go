package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hibiken/asynq"
	goredis "github.com/redis/go-redis/v9"
)

// redisEnv holds a go-redis client used for cleanup, and the prefix of this
// process's keys.
type redisEnv struct {
	url    string
	rdb    *goredis.Client
	opt    *goredis.Options
	prefix string
}

func newRedisEnv(ctx context.Context, url string) (*redisEnv, error) {
	opt, err := goredis.ParseURL(url)
	if err != nil {
		return nil, err
	}
	rdb := goredis.NewClient(opt)
	if err := rdb.Ping(ctx).Err(); err != nil {
		_ = rdb.Close()
		return nil, err
	}
	return &redisEnv{url: url, rdb: rdb, opt: opt, prefix: "benchfila" + randSuffix()}, nil
}

// delPattern deletes every key matching pattern.
func (e *redisEnv) delPattern(ctx context.Context, pattern string) error {
	iter := e.rdb.Scan(ctx, 0, pattern, 1000).Iterator()
	var batch []string
	for iter.Next(ctx) {
		batch = append(batch, iter.Val())
		if len(batch) == 500 {
			if err := e.rdb.Unlink(ctx, batch...).Err(); err != nil {
				return err
			}
			batch = batch[:0]
		}
	}
	if err := iter.Err(); err != nil {
		return err
	}
	if len(batch) > 0 {
		return e.rdb.Unlink(ctx, batch...).Err()
	}
	return nil
}

func (e *redisEnv) filaSystem(ctx context.Context) (*filaSystem, error) {
	url := addParams(e.url, "fila_prefix="+e.prefix)
	return newFilaSystem(ctx, url,
		func(ctx context.Context, q string) error { return e.delPattern(ctx, "{"+e.prefix+":"+q+"}*") },
		func(ctx context.Context) error {
			err := e.delPattern(ctx, "*"+e.prefix+"*")
			if cerr := e.rdb.Close(); err == nil {
				err = cerr
			}
			return err
		})
}

// rawRedis is the raw go-redis streams baseline: XADD (pipelined for a
// batch), XREADGROUP of up to the free slots, and XACK + XDEL pipelined per
// finished job.
type rawRedis struct {
	env    *redisEnv
	rdb    *goredis.Client
	stream string
}

func (e *redisEnv) rawSystem(context.Context) (*rawRedis, error) {
	return &rawRedis{env: e, rdb: goredis.NewClient(e.opt)}, nil
}

func (s *rawRedis) Name() string { return "raw go-redis streams" }

func (s *rawRedis) Setup(ctx context.Context) error {
	s.stream = "benchraw:" + randSuffix()
	return s.rdb.XGroupCreateMkStream(ctx, s.stream, "g", "0").Err()
}

func (s *rawRedis) Enqueue(ctx context.Context, bodies [][]byte) error {
	if len(bodies) == 1 {
		return s.rdb.XAdd(ctx, &goredis.XAddArgs{Stream: s.stream, Values: []any{"b", bodies[0]}}).Err()
	}
	_, err := s.rdb.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for _, b := range bodies {
			p.XAdd(ctx, &goredis.XAddArgs{Stream: s.stream, Values: []any{"b", b}})
		}
		return nil
	})
	return err
}

func (s *rawRedis) Start(ctx context.Context, concurrency int, onStart func([]byte)) (Consumer, error) {
	consumer := "c" + randSuffix()
	fetch := func(ctx context.Context, n int) ([]goredis.XMessage, error) {
		res, err := s.rdb.XReadGroup(ctx, &goredis.XReadGroupArgs{
			Group: "g", Consumer: consumer, Streams: []string{s.stream, ">"}, Count: int64(n), Block: time.Second,
		}).Result()
		if errors.Is(err, goredis.Nil) {
			return nil, nil
		}
		if err != nil || len(res) == 0 {
			return nil, err
		}
		return res[0].Messages, nil
	}
	handle := func(ctx context.Context, m goredis.XMessage) bool {
		b, _ := m.Values["b"].(string)
		onStart([]byte(b))
		_, err := s.rdb.Pipelined(context.WithoutCancel(ctx), func(p goredis.Pipeliner) error {
			p.XAck(ctx, s.stream, "g", m.ID)
			p.XDel(ctx, s.stream, m.ID)
			return nil
		})
		if err != nil {
			logf("raw redis ack: %v", err)
		}
		return err == nil
	}
	return startSlotLoop(ctx, concurrency, 1000, fetch, handle), nil
}

func (s *rawRedis) Teardown(ctx context.Context) error { return s.rdb.Del(ctx, s.stream).Err() }

func (s *rawRedis) Close(context.Context) error { return s.rdb.Close() }

// asynqSystem is asynq with its default TaskCheckInterval (1s) or a given
// one. asynq has no batch enqueue.
type asynqSystem struct {
	env       *redisEnv
	client    *asynq.Client
	inspector *asynq.Inspector
	interval  time.Duration
	queue     string
}

func (e *redisEnv) redisConnOpt() asynq.RedisClientOpt {
	return asynq.RedisClientOpt{Addr: e.opt.Addr, Username: e.opt.Username, Password: e.opt.Password, DB: e.opt.DB}
}

func (e *redisEnv) asynqSystem(_ context.Context, interval time.Duration) (*asynqSystem, error) {
	return &asynqSystem{
		env: e, interval: interval,
		client:    asynq.NewClient(e.redisConnOpt()),
		inspector: asynq.NewInspector(e.redisConnOpt()),
	}, nil
}

func (s *asynqSystem) Name() string {
	if s.interval > 0 {
		return fmt.Sprintf("asynq (TaskCheckInterval %v)", s.interval)
	}
	return "asynq (default)"
}

func (s *asynqSystem) Setup(context.Context) error {
	s.queue = "bench-" + randSuffix()
	return nil
}

func (s *asynqSystem) Enqueue(ctx context.Context, bodies [][]byte) error {
	if len(bodies) != 1 {
		return errNoBatch
	}
	_, err := s.client.EnqueueContext(ctx, asynq.NewTask("bench", bodies[0]), asynq.Queue(s.queue))
	return err
}

func (s *asynqSystem) EnqueueDelayed(ctx context.Context, body []byte, delay time.Duration) error {
	_, err := s.client.EnqueueContext(ctx, asynq.NewTask("bench", body), asynq.Queue(s.queue), asynq.ProcessIn(delay))
	return err
}

type asynqConsumer struct {
	srv   *asynq.Server
	rdb   *goredis.Client
	key   string
	start int64
}

func (s *asynqSystem) Start(_ context.Context, concurrency int, onStart func([]byte)) (Consumer, error) {
	cfg := asynq.Config{
		Concurrency:     concurrency,
		Queues:          map[string]int{s.queue: 1},
		LogLevel:        asynq.ErrorLevel,
		ShutdownTimeout: 5 * time.Second,
	}
	if s.interval > 0 {
		cfg.TaskCheckInterval = s.interval
	}
	srv := asynq.NewServer(s.env.redisConnOpt(), cfg)
	mux := asynq.NewServeMux()
	mux.HandleFunc("bench", func(_ context.Context, t *asynq.Task) error {
		onStart(t.Payload())
		return nil
	})
	// asynq's done script removes the task and increments this counter in
	// one step, so the counter is the count of stored acks.
	c := &asynqConsumer{srv: srv, rdb: s.env.rdb, key: "asynq:{" + s.queue + "}:processed"}
	c.start, _ = c.rdb.Get(context.Background(), c.key).Int64()
	if err := srv.Start(mux); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *asynqConsumer) Done() int64 {
	n, err := c.rdb.Get(context.Background(), c.key).Int64()
	if err != nil {
		return 0
	}
	return n - c.start
}

func (c *asynqConsumer) Stop() error {
	c.srv.Shutdown()
	return nil
}

func (s *asynqSystem) Teardown(ctx context.Context) error {
	err := s.inspector.DeleteQueue(s.queue, true)
	if errors.Is(err, asynq.ErrQueueNotFound) {
		err = nil
	}
	// DeleteQueue leaves the processed counters behind.
	if derr := s.env.delPattern(ctx, "asynq:{"+s.queue+"}*"); err == nil {
		err = derr
	}
	return err
}

func (s *asynqSystem) Close(context.Context) error {
	err := s.client.Close()
	if cerr := s.inspector.Close(); err == nil {
		err = cerr
	}
	return err
}
