package mongo

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/testcontainers/testcontainers-go"
	tcmongo "github.com/testcontainers/testcontainers-go/modules/mongodb"
	gomongo "go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/internal/skips"
	"github.com/fila-go/fila/internal/testenv"
)

var (
	realOnce sync.Once
	realURL  string
	realErr  error
)

// realMongoServer returns a real MongoDB for tests of what FerretDB v1
// does not do (atomic conditional updates): the test server when it is
// one, else a MongoDB replica set started with testcontainers. Without a
// Docker engine the test is skipped, even under CI: the shared servers run
// FerretDB, and only a container can stand in for MongoDB there.
func realMongoServer(t *testing.T) *testServer {
	t.Helper()
	if os.Getenv(testenv.MongoEnv) != "" {
		if s := mongoServer(t); !s.caps.FerretDB {
			return s
		}
	}
	if err := dockerAnswers(); err != nil {
		const what = "MongoDB (a real one, from a Docker container)"
		skips.Record(what, "no Docker engine; FerretDB has no atomic conditional updates")
		t.Skipf("needs a real MongoDB: %s is FerretDB or unset, and no Docker engine answers (%v)", testenv.MongoEnv, err)
	}
	if os.Getenv(testenv.MongoEnv) == "" {
		return mongoServer(t) // filatest's container: a real MongoDB
	}
	realOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		realURL, realErr = startMongoContainer(ctx)
	})
	if realErr != nil {
		t.Fatalf("Docker answers but the MongoDB container did not start: %v", realErr)
	}
	s := &testServer{url: realURL}
	var err error
	s.client, s.caps, err = connectTestServer(realURL)
	if err != nil {
		t.Fatalf("MongoDB container %s: %v", realURL, err)
	}
	t.Cleanup(func() { _ = s.client.Disconnect(context.Background()) })
	return s
}

// connectTestServer connects a set-up client to url and detects what the
// server supports.
func connectTestServer(url string) (*gomongo.Client, Capabilities, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := gomongo.Connect(options.Client().ApplyURI(url))
	if err != nil {
		return nil, Capabilities{}, err
	}
	caps, err := detect(ctx, c)
	if err != nil {
		_ = c.Disconnect(ctx)
		return nil, Capabilities{}, err
	}
	return c, caps, nil
}

// dockerAnswers runs testcontainers' health check of the Docker engine.
func dockerAnswers() (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("testcontainers provider panicked: %v", r)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	p, err := testcontainers.ProviderDefault.GetProvider()
	if err != nil {
		return err
	}
	defer p.Close()
	return p.Health(ctx)
}

// startMongoContainer runs MongoDB 7 as a single-node replica set, as
// filatest does, reached through the mapped port.
func startMongoContainer(ctx context.Context) (string, error) {
	c, err := tcmongo.Run(ctx, "mongo:7", tcmongo.WithReplicaSet("rs0"))
	if err != nil {
		return "", err
	}
	s, err := c.ConnectionString(ctx)
	if err != nil {
		return "", err
	}
	u, err := url.Parse(s)
	if err != nil {
		return "", err
	}
	q := u.Query()
	q.Set("directConnection", "true")
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// TestUniquePeriodsAtomicOnMongoDB: on a real MongoDB, of concurrent
// callers taking over an expired mark exactly one wins (FerretDB v1 lets
// several win: its conditional update is not atomic), and four producers
// racing to enqueue one key with a unique period store one message per
// period.
func TestUniquePeriodsAtomicOnMongoDB(t *testing.T) {
	s := realMongoServer(t)
	db := testDatabase(t, s)
	drv := openDriver(t, s, map[string]string{"fila_database": db})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const racers = 8
	q := uniqueQueue("unique")
	for round := range 20 {
		name := fmt.Sprintf("m%d", round)
		if round%2 == 1 { // odd rounds take over an expired mark, even ones create
			if _, err := drv.MarkSet(ctx, q, name, time.Now().Add(-time.Second), false); err != nil {
				t.Fatal(err)
			}
		}
		var wins atomic.Int32
		var wg sync.WaitGroup
		start := make(chan struct{})
		for range racers {
			wg.Go(func() {
				<-start
				ok, err := drv.MarkSet(ctx, q, name, time.Now().Add(time.Hour), true)
				if err != nil {
					t.Error(err)
				}
				if ok {
					wins.Add(1)
				}
			})
		}
		close(start)
		wg.Wait()
		if n := wins.Load(); n != 1 {
			t.Errorf("round %d: %d of %d concurrent MarkSet(onlyNew) stored the mark; want exactly 1", round, n, racers)
		}
	}

	// The scenario of issue 38: producers race on one key with UniqueFor
	// while a consumer acks, so only the periods hold the key.
	c, err := fila.New(drv)
	if err != nil {
		t.Fatal(err)
	}
	const period, run = time.Second, 3500 * time.Millisecond
	uq := uniqueQueue("unique-enqueue")
	rctx, rcancel := context.WithCancel(ctx)
	defer rcancel()
	var consumer sync.WaitGroup
	consumer.Go(func() {
		for rctx.Err() == nil {
			ds, err := c.Receive(rctx, uq, fila.ReceiveParams{})
			if err != nil {
				return
			}
			for _, d := range ds {
				_ = d.Ack(ctx)
			}
		}
	})
	var stored atomic.Int32
	var wg sync.WaitGroup
	begin := time.Now()
	for range 4 {
		wg.Go(func() {
			for time.Since(begin) < run {
				_, err := c.Enqueue(ctx, uq, fila.Message{Kind: "k", DedupKey: "key", UniqueFor: period})
				switch {
				case err == nil:
					stored.Add(1)
				case !errors.Is(err, fila.ErrDuplicate):
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	rcancel()
	consumer.Wait()
	// Periods start at 0 and then no sooner than a period after the last
	// one started: at most 4 in 3.5 s.
	if n := stored.Load(); n < 1 || n > int32(run/period)+1 {
		t.Errorf("4 producers over %v with UniqueFor %v stored %d messages; want 1 to %d (one per period)", run, period, n, int(run/period)+1)
	}
}
