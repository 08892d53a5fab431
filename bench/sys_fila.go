package main

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/fila-go/fila"
	_ "github.com/fila-go/fila/mongo"
	_ "github.com/fila-go/fila/mysql"
	_ "github.com/fila-go/fila/postgres"
	_ "github.com/fila-go/fila/rabbitmq"
	_ "github.com/fila-go/fila/redis"
	"github.com/fila-go/fila/worker"
)

// filaSystem is Fila over any driver: enqueue through fila.Client and
// consume with package worker at Fila's defaults (apart from the
// concurrency, which every system is given).
type filaSystem struct {
	client *fila.Client
	queue  string
	// name is the system's name in the report; "" means "fila".
	name string
	// pgSchema is the Postgres schema of Fila's tables (Postgres only).
	pgSchema string
	// pgLog: Fila's Postgres driver runs its log storage mode
	// (fila_mode=log), whose tables are the ones named log_*.
	pgLog bool
	// myDB is the MySQL/MariaDB database of Fila's tables (MySQL only).
	myDB string
	// teardown deletes a queue's messages with the broker's own client.
	teardown func(ctx context.Context, queue string) error
	// closeFn removes the schema, database or keys of this run.
	closeFn func(ctx context.Context) error
	// url and fresh: when fresh is set, Teardown closes the client and
	// calls fresh (which drops the database) and Setup opens a new client,
	// for brokers where deleting a queue's messages is slower than that.
	url   string
	fresh func(ctx context.Context) error
	// dropTopic removes what the broker keeps of a topic once its last
	// subscription has ended (RabbitMQ: the topic's fanout exchange); nil
	// where nothing is left.
	dropTopic func(ctx context.Context, topic string) error
}

func newFilaSystem(ctx context.Context, url string, teardown func(context.Context, string) error,
	closeFn func(context.Context) error) (*filaSystem, error) {
	c, err := fila.Open(ctx, url, fila.WithLogger(quietLogger()))
	if err != nil {
		return nil, err
	}
	return &filaSystem{client: c, teardown: teardown, closeFn: closeFn, url: url}, nil
}

func (s *filaSystem) Name() string {
	if s.name != "" {
		return s.name
	}
	return "fila"
}

func (s *filaSystem) Setup(ctx context.Context) error {
	s.queue = "bench-" + randSuffix()
	if s.client == nil {
		c, err := fila.Open(ctx, s.url, fila.WithLogger(quietLogger()))
		if err != nil {
			return err
		}
		s.client = c
	}
	return nil
}

func (s *filaSystem) Enqueue(ctx context.Context, bodies [][]byte) error {
	if len(bodies) == 1 {
		_, err := s.client.Enqueue(ctx, s.queue, fila.Message{Kind: "bench", Body: bodies[0]})
		return err
	}
	msgs := make([]fila.Message, len(bodies))
	for i, b := range bodies {
		msgs[i] = fila.Message{Kind: "bench", Body: b}
	}
	_, err := s.client.EnqueueBatch(ctx, s.queue, msgs)
	return err
}

func (s *filaSystem) EnqueueDelayed(ctx context.Context, body []byte, delay time.Duration) error {
	_, err := s.client.Enqueue(ctx, s.queue, fila.Message{Kind: "bench", Body: body, Delay: delay})
	return err
}

type filaConsumer struct {
	done   atomic.Int64
	cancel context.CancelFunc
	errc   chan error
}

func (s *filaSystem) Start(ctx context.Context, concurrency int, onStart func([]byte)) (Consumer, error) {
	return s.startQueue(ctx, s.queue, concurrency, onStart)
}

// startQueue runs a worker on queue, which need not be the run's own queue
// (the fan-out scenario drains subscription queues with it).
func (s *filaSystem) startQueue(ctx context.Context, queue string, concurrency int, onStart func([]byte)) (Consumer, error) {
	fc := &filaConsumer{errc: make(chan error, 1)}
	w, err := worker.New(s.client, worker.Config{
		Queues: map[string]worker.QueueConfig{queue: {Concurrency: concurrency}},
		Logger: quietLogger(),
		OnJobEnd: func(ev worker.JobEvent) {
			if ev.Outcome == worker.OutcomeAck {
				fc.done.Add(1)
			}
		},
	})
	if err != nil {
		return nil, err
	}
	w.HandleFunc("bench", func(_ context.Context, d *fila.Delivery) error {
		onStart(d.Body)
		return nil
	})
	rctx, cancel := context.WithCancel(ctx)
	fc.cancel = cancel
	go func() { fc.errc <- w.Run(rctx) }()
	return fc, nil
}

func (c *filaConsumer) Done() int64 { return c.done.Load() }

func (c *filaConsumer) Stop() error {
	c.cancel()
	return <-c.errc
}

func (s *filaSystem) Teardown(ctx context.Context) error {
	if s.fresh != nil {
		err := s.client.Close()
		s.client = nil
		if ferr := s.fresh(ctx); err == nil {
			err = ferr
		}
		return err
	}
	if s.teardown == nil {
		return nil
	}
	return s.teardown(ctx, s.queue)
}

func (s *filaSystem) Close(ctx context.Context) error {
	var err error
	if s.client != nil {
		err = s.client.Close()
	}
	if s.closeFn != nil {
		if cerr := s.closeFn(ctx); err == nil {
			err = cerr
		}
	}
	return err
}

// quietLogger logs warnings and errors only, to stderr.
func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(logWriter{}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// connect opens the client when disconnect (or a fresh Teardown) closed it.
func (s *filaSystem) connect(ctx context.Context) error {
	if s.client != nil {
		return nil
	}
	c, err := fila.Open(ctx, s.url, fila.WithLogger(quietLogger()))
	if err != nil {
		return err
	}
	s.client = c
	return nil
}

// disconnect closes the client and with it every connection it holds (on
// PostgreSQL the backends then flush their statistics as they exit).
func (s *filaSystem) disconnect() error {
	if s.client == nil {
		return nil
	}
	err := s.client.Close()
	s.client = nil
	return err
}

// startBatch runs one consumer of queue that takes up to max messages per
// call and acks them as a batch: Receive, then AckReceive (the acks of one
// batch with the claim of the next, in one round trip where the driver can)
// until that claims nothing, then Receive again. Done counts the messages
// of a batch once its acks are stored.
func (s *filaSystem) startBatch(parent context.Context, queue string, max int, onStart func([]byte)) (Consumer, error) {
	c := s.client
	p := fila.ReceiveParams{Max: max}
	ctx, cancel := context.WithCancel(parent)
	l := &goLoop{cancel: cancel}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		var ds []*fila.Delivery
		for ctx.Err() == nil {
			if len(ds) == 0 {
				var err error
				if ds, err = c.Receive(ctx, queue, p); err != nil {
					if ctx.Err() == nil {
						logf("%s receive: %v", s.Name(), err)
						sleepCtx(ctx, 10*time.Millisecond)
					}
					continue
				}
			}
			for _, d := range ds {
				onStart(d.Body)
			}
			next, ackErr, err := c.AckReceive(ctx, ds, queue, p)
			if ackErr == nil {
				l.done.Add(int64(len(ds)))
			} else if ctx.Err() == nil {
				logf("%s ack: %v", s.Name(), ackErr)
			}
			if err != nil && ctx.Err() == nil {
				logf("%s receive: %v", s.Name(), err)
			}
			ds = next
		}
	}()
	return l, nil
}
