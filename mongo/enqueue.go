package mongo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	gomongo "go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/fila-go/fila/backend"
)

// Enqueue stores msgs with one insert. Where the server has transactions a
// batch of more than one message is stored in a transaction (all or
// nothing) unless Options.DisableAtomicBatches is set.
func (d *Driver) Enqueue(ctx context.Context, queue string, msgs []backend.Message) ([]backend.EnqueueResult, error) {
	if d.atomicBatch && len(msgs) > 1 {
		res, err := d.enqueueAtomic(ctx, queue, msgs)
		if err != nil {
			return nil, d.mapErr(ctx, err, "enqueue")
		}
		d.notify.Wake(queue)
		return res, nil
	}
	res, err := d.insert(ctx, d.msgs, queue, msgs, false)
	if err != nil {
		return nil, d.mapErr(ctx, err, "enqueue")
	}
	d.notify.Wake(queue)
	return res, nil
}

func (d *Driver) enqueueAtomic(ctx context.Context, queue string, msgs []backend.Message) ([]backend.EnqueueResult, error) {
	sess, err := d.client.StartSession()
	if err != nil {
		return nil, err
	}
	defer sess.EndSession(context.WithoutCancel(ctx))
	txOpts := options.Transaction().SetWriteConcern(d.wc)
	for try := 0; ; try++ {
		out, err := sess.WithTransaction(ctx, func(sctx context.Context) (any, error) {
			return d.insert(sctx, d.msgs, queue, msgs, true)
		}, txOpts)
		if errors.Is(err, errDedupRace) && try+1 < backend.DedupRounds {
			continue // the key's holder is visible now
		}
		if err != nil {
			return nil, err
		}
		return out.([]backend.EnqueueResult), nil
	}
}

// EnqueueTx enqueues msgs inside the caller's MongoDB transaction, so they
// commit or roll back with the caller's own writes. tx is either the
// *mongo.Session (go.mongodb.org/mongo-driver/v2/mongo) running the
// transaction, or a context.Context carrying it: the ctx handed to the
// callback of Session.WithTransaction, or one made with
// mongo.NewSessionContext. The session must have a transaction in
// progress; it may come from any client connected to the same deployment
// (the insert goes through the session's client). A dedup key taken by a
// concurrent enqueue while the transaction runs makes the server abort the
// caller's transaction (the error says so); retrying the transaction then
// reports the duplicate normally. Servers without transactions (standalone, FerretDB)
// return ErrUnsupported.
func (d *Driver) EnqueueTx(ctx context.Context, tx any, queue string, msgs []backend.Message) ([]backend.EnqueueResult, error) {
	var sess *gomongo.Session
	switch v := tx.(type) {
	case *gomongo.Session:
		sess = v
	case context.Context:
		sess = gomongo.SessionFromContext(v)
	}
	if sess == nil {
		return nil, backend.Invalidf("mongo EnqueueTx: tx is a %T; want a *mongo.Session or a context.Context carrying one (the ctx of Session.WithTransaction's callback, or mongo.NewSessionContext)", tx)
	}
	if !d.caps.Transactions {
		return nil, &backend.UnsupportedError{Driver: "mongo", Capability: "transactional enqueue (the server has no transactions: it is not a replica set member or mongos)"}
	}
	if !sess.TransactionRunning() {
		return nil, backend.Invalidf("mongo EnqueueTx: the session has no transaction in progress (call StartTransaction or use WithTransaction)")
	}
	// The session may come from another client than the driver's (the
	// application's own): write through that client.
	coll := d.msgs
	if c := sess.Client(); c != d.client {
		coll = c.Database(d.opts.Database).Collection(d.msgs.Name(), hotCollection(d.wc))
	}
	res, err := d.insert(gomongo.NewSessionContext(ctx, sess), coll, queue, msgs, true)
	if errors.Is(err, errDedupRace) {
		return nil, fmt.Errorf("fila/mongo: enqueue in transaction: %w; the server aborted the transaction, retry it", err)
	}
	if err != nil {
		return nil, d.mapErr(ctx, err, "enqueue in transaction")
	}
	return res, nil
}

// insert stores msgs and resolves dedup keys. Outside a transaction it
// inserts first (unordered) and looks up the holders of refused keys, so a
// batch without duplicates costs one round trip. Inside a transaction any
// write error aborts the transaction, so it looks the keys up first and
// returns errDedupRace when a key was taken after the look-up.
func (d *Driver) insert(ctx context.Context, coll *gomongo.Collection, queue string, msgs []backend.Message, inTx bool) ([]backend.EnqueueResult, error) {
	now := time.Now()
	res := make([]backend.EnqueueResult, len(msgs))
	docs := make([]*msgDoc, len(msgs))
	dupOfBatch := backend.BatchDuplicates(msgs) // index → earlier index with the same key
	var pending []int
	hasKeys := false
	for i := range msgs {
		res[i].ID = msgs[i].ID
		docs[i] = newMsgDoc(queue, &msgs[i], now)
		hasKeys = hasKeys || msgs[i].DedupKey != ""
		if _, dup := dupOfBatch[i]; !dup {
			pending = append(pending, i)
		}
	}
	if inTx && hasKeys {
		var keys []string
		for _, i := range pending {
			if docs[i].DedupKey != "" {
				keys = append(keys, docs[i].DedupKey)
			}
		}
		holders, err := holdersOf(ctx, coll, keys)
		if err != nil {
			return nil, err
		}
		pending = markHeld(pending, docs, res, holders)
	}
	// Keys whose holder is gone by the look-up are inserted again, in the
	// next round.
	err := backend.StoreRounds(pending, func(pending []int) ([]int, error) {
		batch := make([]any, len(pending))
		for n, i := range pending {
			batch[n] = docs[i]
		}
		_, err := coll.InsertMany(ctx, batch, options.InsertMany().SetOrdered(inTx))
		if err == nil {
			return nil, nil
		}
		idx, dupOnly := dupKeyIndexes(err)
		if !dupOnly {
			return nil, err
		}
		if inTx {
			return nil, errDedupRace
		}
		refused := make([]int, 0, len(idx))
		var keys []string
		for _, n := range idx {
			i := pending[n]
			if docs[i].DedupKey == "" {
				continue // its own _id: a retried insert that had succeeded
			}
			refused = append(refused, i)
			keys = append(keys, docs[i].DedupKey)
		}
		holders, err := holdersOf(ctx, coll, keys)
		if err != nil {
			return nil, err
		}
		return markHeld(refused, docs, res, holders), nil
	})
	if err != nil {
		return nil, err
	}
	for i, j := range dupOfBatch {
		res[i] = backend.EnqueueResult{ID: res[j].ID, Duplicate: true}
	}
	return res, nil
}

// markHeld marks the messages whose keys are held by another message as
// duplicates and returns the rest.
func markHeld(idx []int, docs []*msgDoc, res []backend.EnqueueResult, holders map[string]string) []int {
	rest := idx[:0:0]
	for _, i := range idx {
		h, ok := holders[docs[i].DedupKey]
		switch {
		case !ok || docs[i].DedupKey == "":
			rest = append(rest, i)
		case h != docs[i].ID:
			res[i] = backend.EnqueueResult{ID: h, Duplicate: true}
		default:
			// stored already (a retried insert that had succeeded)
		}
	}
	return rest
}

// holders maps dedup fields to the ids of the pending messages holding them.
func holdersOf(ctx context.Context, coll *gomongo.Collection, keys []string) (map[string]string, error) {
	out := map[string]string{}
	if len(keys) == 0 {
		return out, nil
	}
	cur, err := coll.Find(ctx, bson.D{{Key: "dk", Value: bson.D{{Key: "$in", Value: keys}}}},
		options.Find().SetProjection(bson.D{{Key: "_id", Value: 1}, {Key: "dk", Value: 1}}))
	if err != nil {
		return nil, err
	}
	var rows []struct {
		ID string `bson:"_id"`
		DK string `bson:"dk"`
	}
	if err := cur.All(ctx, &rows); err != nil {
		return nil, err
	}
	for _, r := range rows {
		out[r.DK] = r.ID
	}
	return out, nil
}
