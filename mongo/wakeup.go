package mongo

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/fila-go/fila/internal/outagelog"
	"github.com/fila-go/fila/internal/wake"
)

// notifier wakes blocked receivers of one driver instance (see wake.Board)
// and knows whether a change stream is watching.
type notifier struct {
	wake.Board
	mu      sync.Mutex
	healthy bool // a change stream is open
}

func newNotifier() *notifier { return &notifier{} }

func (n *notifier) setHealthy(h bool) {
	n.mu.Lock()
	n.healthy = h
	n.mu.Unlock()
}

func (n *notifier) isHealthy() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.healthy
}

// startWatch starts the change stream the first time a Receive blocks, so
// producers that never receive hold no stream.
func (d *Driver) startWatch() {
	if !d.caps.ChangeStreams {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.watching || d.isClosed {
		return
	}
	d.watching = true
	ctx, cancel := context.WithCancel(context.Background())
	d.stopWatch = cancel
	d.background.Add(1)
	go d.watch(ctx)
}

// watchPipeline keeps the events that can make a message claimable: inserts
// (enqueue, replay) and updates that end a lease (retry sets l to false).
// Claims, extends and deletes are filtered out on the server.
var watchPipeline = bson.A{
	bson.D{{Key: "$match", Value: bson.D{{Key: "$or", Value: bson.A{
		bson.D{{Key: "operationType", Value: "insert"}},
		bson.D{{Key: "operationType", Value: "update"}, {Key: "updateDescription.updatedFields.l", Value: false}},
	}}}}},
	bson.D{{Key: "$project", Value: bson.D{{Key: "operationType", Value: 1}, {Key: "fullDocument.q", Value: 1}}}},
}

// watch runs the change stream until ctx ends, reopening it after errors.
// While it is down, receivers poll (Options.PollInterval); each reopening
// wakes every receiver, so events missed in between cost no latency.
func (d *Driver) watch(ctx context.Context) {
	defer d.background.Done()
	backoff := 100 * time.Millisecond
	// Failures are logged with a bounded number of lines per outage.
	outage := outagelog.New(d.log)
	for ctx.Err() == nil {
		cs, err := d.watched.Watch(ctx, watchPipeline)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			outage.Down("fila: change stream failed to open; receivers poll meanwhile", slog.Any("error", err), slog.Duration("retry_in", backoff))
			if !sleepCtx(ctx, backoff) {
				return
			}
			backoff = min(backoff*2, 10*time.Second)
			continue
		}
		backoff = 100 * time.Millisecond
		outage.Up("fila: change stream open again")
		d.notify.setHealthy(true)
		d.notify.WakeAll()
		for cs.Next(ctx) {
			var ev struct {
				Op  string `bson:"operationType"`
				Doc struct {
					Queue string `bson:"q"`
				} `bson:"fullDocument"`
			}
			if err := cs.Decode(&ev); err == nil && ev.Doc.Queue != "" {
				d.notify.Wake(ev.Doc.Queue)
			} else {
				// An update names no queue: wake everyone, they re-check.
				d.notify.WakeAll()
			}
		}
		err = cs.Err()
		_ = cs.Close(context.Background())
		d.notify.setHealthy(false)
		d.notify.WakeAll()
		if ctx.Err() != nil {
			return
		}
		outage.Down("fila: change stream ended; reopening", slog.Any("error", err))
		if !sleepCtx(ctx, backoff) {
			return
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
