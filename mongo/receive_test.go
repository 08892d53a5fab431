package mongo

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	gomongo "go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/fila-go/fila/backend"
)

// commandLog records the commands a client sends and whether they carry
// maxTimeMS.
type commandLog struct {
	mu   sync.Mutex
	on   bool
	cmds []string
	max  []string
}

func (l *commandLog) started(_ context.Context, e *event.CommandStartedEvent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.on {
		return
	}
	l.cmds = append(l.cmds, e.CommandName)
	if _, err := e.Command.LookupErr("maxTimeMS"); err == nil {
		l.max = append(l.max, e.CommandName)
	}
}

func (l *commandLog) record(on bool) (cmds, withMax []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	cmds, withMax = l.cmds, l.max
	l.on, l.cmds, l.max = on, nil, nil
	return cmds, withMax
}

// TestReceiveDeadlineIsNotMaxTimeMS: a Receive that waits until its
// context deadline sends its claims and next-due reads without maxTimeMS
// (the mongo driver derives maxTimeMS from a context deadline). Otherwise
// every Receive that ends at its deadline would have the server time out a
// read, which FerretDB enforces by interrupting an SQLite connection that
// other clients' statements may be running on.
func TestReceiveDeadlineIsNotMaxTimeMS(t *testing.T) {
	s := mongoServer(t)
	db := testDatabase(t, s)
	log := &commandLog{}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client, err := gomongo.Connect(options.Client().ApplyURI(s.url).SetMonitor(&event.CommandMonitor{Started: log.started}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Disconnect(context.Background()) })
	drv, err := New(ctx, client, Options{Database: db, DisableChangeStreams: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = drv.Close() })
	queue := uniqueQueue("nomaxtime")
	enqueueOne(t, drv, queue, backend.Message{Body: []byte("x")})

	// The monitor sees maxTimeMS where a deadline reaches the server.
	log.record(true)
	_ = drv.msgs.FindOne(ctx, bson.D{{Key: "q", Value: queue}}).Err()
	if _, withMax := log.record(false); len(withMax) == 0 {
		t.Fatal("control: a find under a context deadline sent no maxTimeMS; the check below would prove nothing")
	}

	for _, max := range []int{1, 5} {
		if max == 1 {
			// Lease the message: the waits below read its lease deadline.
			if ds, err := drv.Receive(ctx, queue, backend.ReceiveParams{Max: 1, Lease: time.Minute}); err != nil || len(ds) != 1 {
				t.Fatalf("Receive: %v, %d deliveries", err, len(ds))
			}
		}
		log.record(true)
		rctx, rcancel := context.WithTimeout(ctx, 400*time.Millisecond)
		ds, err := drv.Receive(rctx, queue, backend.ReceiveParams{Max: max, Lease: time.Minute})
		rcancel()
		cmds, withMax := log.record(false)
		if !errors.Is(err, context.DeadlineExceeded) || len(ds) != 0 {
			t.Fatalf("Receive(Max %d) of a queue with nothing due: %d deliveries, %v; want context.DeadlineExceeded", max, len(ds), err)
		}
		if len(cmds) < 2 {
			t.Fatalf("Receive(Max %d) sent %v; want a claim and next-due reads", max, cmds)
		}
		if len(withMax) > 0 {
			t.Errorf("Receive(Max %d) sent maxTimeMS with %v (of %v)", max, withMax, cmds)
		}
	}
}
