package mongo

import (
	"context"
	"errors"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	gomongo "go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/internal/linger"
)

// claimSort orders claimable messages (claimIndex): the highest priority
// first, then the earliest due, then by id (time-ordered UUIDv7) so one
// consumer sees FIFO among equal due times.
var claimSort = bson.D{{Key: "p", Value: -1}, {Key: "due", Value: 1}, {Key: "_id", Value: 1}}

// dueSort orders messages by due time alone (dueIndex): for the next
// wake-up and for ReceiveDelayed, which takes delayed messages soonest
// first whatever their level.
var dueSort = bson.D{{Key: "due", Value: 1}, {Key: "_id", Value: 1}}

// Receive claims up to p.Max messages of queue, blocking until there is one
// or ctx ends. After an empty claim it waits for the first of: a
// change-stream event or a local enqueue for the queue, the next due time
// of the queue (a delay ending, a lease expiring), or the poll interval.
// A poll first reads the queue's next due time and claims only when a
// message is due, so idle receivers only read. The waits end when ctx
// does; a claim sent runs to its end (see claimContext), and what it
// claimed is returned with a nil error even when ctx ended meanwhile.
func (d *Driver) Receive(ctx context.Context, queue string, p backend.ReceiveParams) ([]backend.Delivery, error) {
	poll := MinPollInterval
	claimNow := true
	for {
		select {
		case <-d.closed:
			return nil, backend.ErrClosed
		default:
		}
		wake := d.notify.Sub(queue)
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		next, err := time.Time{}, error(nil)
		if !claimNow {
			if next, err = d.waitRead(ctx, queue); err != nil {
				return nil, d.mapErr(ctx, err, "next due time")
			}
			claimNow = !next.IsZero() && !next.After(time.Now())
		}
		if claimNow {
			ds, err := d.claim(ctx, queue, p)
			if len(ds) > 0 {
				return ds, nil
			}
			if err != nil {
				return nil, d.mapErr(ctx, err, "claim")
			}
			d.startWatch()
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			if next, err = d.waitRead(ctx, queue); err != nil {
				return nil, d.mapErr(ctx, err, "next due time")
			}
		}
		wait := poll
		if d.notify.isHealthy() {
			wait = SafetyPollInterval
		}
		atDue := false
		if !next.IsZero() {
			// +1ms: due times are whole milliseconds and the claim's "now"
			// is rounded down.
			if until := time.Until(next) + time.Millisecond; until < wait {
				wait, atDue = max(until, 0), true
			}
		}
		timer := time.NewTimer(wait)
		d.waits.Add(1)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, ctx.Err()
		case <-d.closed:
			timer.Stop()
			return nil, backend.ErrClosed
		case <-wake:
			timer.Stop()
			poll, claimNow = MinPollInterval, true
		case <-timer.C:
			claimNow = atDue
			if !atDue {
				poll = min(poll*2, d.opts.PollInterval)
			}
		}
	}
}

// waitRead reads the queue's next due time for a Receive that waits. The
// read ends as soon as ctx ends, but it is sent without ctx's deadline:
// the mongo driver turns a context deadline into the command's maxTimeMS,
// and a Receive's deadline bounds how long its caller waits, not the
// server's work on a millisecond read. Receives routinely end at their
// deadline, so with the deadline attached the read would often run out of
// time on the server, and a server's time-limit interruption is not always
// confined to the operation it was meant for (FerretDB v1 on SQLite can
// leave a pooled SQLite connection interrupted for good, failing every
// later statement on it, of any client, with "interrupted (9)"; see the
// package doc). A client-side cancellation only closes the mongo driver's
// connection that carried the read.
func (d *Driver) waitRead(ctx context.Context, queue string) (time.Time, error) {
	rctx, cancel := withoutDeadline(ctx)
	defer cancel()
	return d.nextDue(rctx, queue)
}

// withoutDeadline returns a context that is cancelled when ctx ends but
// has no deadline (so the mongo driver sends no maxTimeMS derived from it),
// and keeps ctx's values.
func withoutDeadline(ctx context.Context) (context.Context, context.CancelFunc) {
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, cancel)
	return rctx, func() { stop(); cancel() }
}

// claimTimeout bounds a claim that Receive has sent once the caller's
// context has ended (see claimContext).
const claimTimeout = 10 * time.Second

// claimContext returns the context of a claim that Receive sends: ctx's
// values, lasting while ctx does and claimTimeout after. A claim the server
// completes after the client gave up (a cancelled mongo call still runs
// there) would leave messages leased to nobody until their leases expire,
// so a claim sent runs to its end, however slow the server (FerretDB under
// load has taken over 10 s), and what it claimed is returned even though
// ctx has ended (the portable layer hands it out, or gives it back after
// Close). Like waitRead's, the context carries no deadline, so the claim
// carries no maxTimeMS.
func claimContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return linger.Context(ctx, claimTimeout)
}

// claim claims up to p.Max messages. What only reads (claimMany's look
// for candidates) ends with ctx; the writes that claim, and what must
// follow them, run under claimContext.
func (d *Driver) claim(ctx context.Context, queue string, p backend.ReceiveParams) ([]backend.Delivery, error) {
	if p.Max <= 1 {
		cctx, cancel := claimContext(ctx)
		defer cancel()
		doc, err := d.claimOne(cctx, queue, p.Lease)
		if err != nil || doc == nil {
			return nil, err
		}
		return []backend.Delivery{doc.delivery()}, nil
	}
	return d.claimMany(ctx, queue, p)
}

// claimOne is the claim: one findOneAndUpdate that matches a message of
// the queue whose due time has come (ready, delayed past its run-at, or
// leased past its deadline), sorted by due time, and atomically sets a new
// receipt and deadline and increments its attempts.
func (d *Driver) claimOne(ctx context.Context, queue string, lease time.Duration) (*msgDoc, error) {
	now := time.Now()
	var doc msgDoc
	err := d.msgs.FindOneAndUpdate(ctx, claimFilter(queue, now), claimUpdate(newReceipt(), now, lease),
		options.FindOneAndUpdate().SetSort(claimSort).SetReturnDocument(options.After),
	).Decode(&doc)
	if errors.Is(err, gomongo.ErrNoDocuments) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &doc, nil
}

func claimFilter(queue string, now time.Time) bson.D {
	return bson.D{{Key: "q", Value: queue}, {Key: "due", Value: bson.D{{Key: "$lte", Value: floorMS(now)}}}}
}

func claimUpdate(receipt string, now time.Time, lease time.Duration) bson.D {
	return bson.D{
		{Key: "$set", Value: bson.D{{Key: "due", Value: ceilMS(now.Add(lease))}, {Key: "l", Value: true}, {Key: "r", Value: receipt}}},
		{Key: "$unset", Value: bson.D{{Key: "hold", Value: ""}, {Key: "ld", Value: ""}}},
		{Key: "$inc", Value: bson.D{{Key: "a", Value: 1}}},
	}
}

// claimMany claims up to p.Max messages in two round trips whatever p.Max:
// read the first claimable messages, then claim them with one updateMany
// whose filter names each by id and attempt count and re-checks that it is
// still claimable (each document's update is atomic). A message claimed by
// someone else in between has another attempt count or due time and is
// skipped. When all were claimed the deliveries are built from the read;
// otherwise a third round trip reads back those carrying this call's
// receipt. Receipts are unique per call; a ref also names the message id,
// so fencing stays per message.
//
// The read of the candidates ends with ctx (nothing is claimed yet); the
// updateMany and the read-back after it run under claimContext.
func (d *Driver) claimMany(ctx context.Context, queue string, p backend.ReceiveParams) ([]backend.Delivery, error) {
	for try := 0; try < 3; try++ {
		now := time.Now()
		filter := claimFilter(queue, now)
		cands, err := d.candidates(ctx, filter, p.Max)
		if err != nil {
			return nil, err
		}
		if len(cands) == 0 {
			return nil, nil
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		out, again, err := d.claimCandidates(ctx, cands, filter, now, p.Lease)
		if again {
			continue // competing consumers took them all; look again
		}
		return out, err
	}
	return nil, nil
}

// candidates reads the first claimable messages of filter, ending when ctx
// does, without ctx's deadline (see waitRead).
func (d *Driver) candidates(ctx context.Context, filter bson.D, limit int) ([]msgDoc, error) {
	rctx, cancel := withoutDeadline(ctx)
	defer cancel()
	cur, err := d.msgs.Find(rctx, filter, options.Find().SetSort(claimSort).SetLimit(int64(limit)))
	if err != nil {
		return nil, err
	}
	var cands []msgDoc
	if err := cur.All(rctx, &cands); err != nil {
		return nil, err
	}
	return cands, nil
}

// claimCandidates claims what it can of cands with one updateMany, under
// claimContext, and returns the deliveries; again when none could be
// claimed.
func (d *Driver) claimCandidates(ctx context.Context, cands []msgDoc, filter bson.D, now time.Time, lease time.Duration) (_ []backend.Delivery, again bool, _ error) {
	ctx, cancel := claimContext(ctx)
	defer cancel()
	ids := make([]string, len(cands))
	which := make(bson.A, len(cands))
	for i := range cands {
		ids[i] = cands[i].ID
		which[i] = bson.D{{Key: "_id", Value: cands[i].ID}, {Key: "a", Value: cands[i].Attempts}}
	}
	receipt := newReceipt()
	deadline := ceilMS(now.Add(lease))
	upd := append(bson.D{{Key: "$or", Value: which}}, filter...)
	res, err := d.msgs.UpdateMany(ctx, upd, claimUpdate(receipt, now, lease))
	if err != nil {
		return nil, false, err
	}
	if res.ModifiedCount == 0 {
		return nil, true, nil
	}
	if int(res.ModifiedCount) == len(cands) {
		out := make([]backend.Delivery, len(cands))
		for i := range cands {
			doc := &cands[i]
			doc.Attempts++
			doc.Receipt, doc.Due, doc.Leased = receipt, deadline, true
			out[i] = doc.delivery()
		}
		return out, false, nil
	}
	order := make(map[string]int, len(cands))
	for i, id := range ids {
		order[id] = i
	}
	cur, err := d.msgs.Find(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: ids}}}, {Key: "r", Value: receipt}})
	if err != nil {
		return nil, false, err
	}
	var docs []msgDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, false, err
	}
	placed := make([]*msgDoc, len(cands))
	for i := range docs {
		placed[order[docs[i].ID]] = &docs[i]
	}
	out := make([]backend.Delivery, 0, len(docs))
	for _, doc := range placed {
		if doc != nil {
			out = append(out, doc.delivery())
		}
	}
	return out, false, nil
}

// nextDue returns the earliest due time of the queue's messages (zero when
// it has none): when a delay ends or a lease expires.
func (d *Driver) nextDue(ctx context.Context, queue string) (time.Time, error) {
	var doc struct {
		Due time.Time `bson:"due"`
	}
	err := d.msgs.FindOne(ctx, bson.D{{Key: "q", Value: queue}},
		options.FindOne().SetSort(dueSort).SetProjection(bson.D{{Key: "due", Value: 1}})).Decode(&doc)
	if errors.Is(err, gomongo.ErrNoDocuments) {
		return time.Time{}, nil
	}
	return doc.Due, err
}
