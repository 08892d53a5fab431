package mongo

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	gomongo "go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/fila-go/fila/backend"
)

// Dead moves the message to the dead-letter collection. With transactions
// the delete (fenced by the receipt) and the insert commit together.
// Without, it reads the message (fenced), upserts the dead letter, then
// deletes the message (fenced); if the delete finds the lease lost it
// removes the dead letter it wrote and returns ErrLeaseLost. A crash between
// the two writes leaves the message both pending and dead: it can be
// delivered again and then show twice, but it is never lost.
func (d *Driver) Dead(ctx context.Context, ref backend.Ref, reason string, attempts int) error {
	var err error
	if d.caps.Transactions {
		err = d.deadTx(ctx, ref, reason, attempts)
	} else {
		err = d.deadOrdered(ctx, ref, reason, attempts)
	}
	return d.mapErr(ctx, err, "dead-letter")
}

func (d *Driver) deadTx(ctx context.Context, ref backend.Ref, reason string, attempts int) error {
	sess, err := d.client.StartSession()
	if err != nil {
		return err
	}
	defer sess.EndSession(context.WithoutCancel(ctx))
	_, err = sess.WithTransaction(ctx, func(sctx context.Context) (any, error) {
		var doc msgDoc
		err := d.msgs.FindOneAndDelete(sctx, leaseFilter(ref)).Decode(&doc)
		if errors.Is(err, gomongo.ErrNoDocuments) {
			return nil, backend.ErrLeaseLost
		}
		if err != nil {
			return nil, err
		}
		_, err = d.dead.ReplaceOne(sctx, bson.D{{Key: "_id", Value: doc.ID}}, doc.deadDoc(reason, "", attempts, time.Now()), options.Replace().SetUpsert(true))
		return nil, err
	}, options.Transaction().SetWriteConcern(d.wc))
	return err
}

func (d *Driver) deadOrdered(ctx context.Context, ref backend.Ref, reason string, attempts int) error {
	var doc msgDoc
	err := d.msgs.FindOne(ctx, leaseFilter(ref)).Decode(&doc)
	if errors.Is(err, gomongo.ErrNoDocuments) {
		return backend.ErrLeaseLost
	}
	if err != nil {
		return err
	}
	if _, err := d.dead.ReplaceOne(ctx, bson.D{{Key: "_id", Value: doc.ID}}, doc.deadDoc(reason, ref.Receipt, attempts, time.Now()), options.Replace().SetUpsert(true)); err != nil {
		return err
	}
	res, err := d.msgs.DeleteOne(ctx, leaseFilter(ref))
	if err != nil {
		return err // both pending and dead: a duplicate, never a loss
	}
	if res.DeletedCount == 0 {
		// Someone took the message over between the read and the delete:
		// take back our dead letter (only ours, by receipt).
		if _, err := d.dead.DeleteOne(ctx, bson.D{{Key: "_id", Value: doc.ID}, {Key: "dr", Value: ref.Receipt}}); err != nil {
			return err
		}
		return backend.ErrLeaseLost
	}
	return nil
}

// deadFilter selects a queue's dead letters by ids and kind.
func deadFilter(queue string, f backend.DeadFilter) bson.D {
	filter := bson.D{{Key: "q", Value: queue}}
	if f.IDs != nil {
		filter = append(filter, bson.E{Key: "_id", Value: bson.D{{Key: "$in", Value: f.IDs}}})
	}
	if f.Kind != "" {
		filter = append(filter, bson.E{Key: "k", Value: f.Kind})
	}
	return filter
}

var deadSort = bson.D{{Key: "da", Value: 1}, {Key: "_id", Value: 1}}

// DeadList lists the queue's dead letters oldest first. The cursor is the
// dead-letter time (Unix milliseconds) and id of the last letter of the
// previous page.
func (d *Driver) DeadList(ctx context.Context, queue string, p backend.DeadListParams) (backend.DeadPage, error) {
	filter := deadFilter(queue, backend.DeadFilter{Kind: p.Kind, IDs: p.IDs})
	if p.Cursor != "" {
		ms, id, ok := strings.Cut(p.Cursor, ".")
		n, err := strconv.ParseInt(ms, 10, 64)
		if !ok || err != nil || id == "" {
			return backend.DeadPage{}, backend.Invalidf("dead-letter cursor %q is not one this driver returned", p.Cursor)
		}
		at := time.UnixMilli(n).UTC()
		filter = append(filter, bson.E{Key: "$or", Value: bson.A{
			bson.D{{Key: "da", Value: bson.D{{Key: "$gt", Value: at}}}},
			bson.D{{Key: "da", Value: at}, {Key: "_id", Value: bson.D{{Key: "$gt", Value: id}}}},
		}})
	}
	opts := options.Find().SetSort(deadSort).SetLimit(int64(p.Limit) + 1)
	if p.WithoutBodies {
		opts.SetProjection(bson.D{{Key: "b", Value: 0}})
	}
	cur, err := d.deadReport.Find(ctx, filter, opts)
	if err != nil {
		return backend.DeadPage{}, d.mapErr(ctx, err, "list dead letters")
	}
	var docs []deadDoc
	if err := cur.All(ctx, &docs); err != nil {
		return backend.DeadPage{}, d.mapErr(ctx, err, "list dead letters")
	}
	var page backend.DeadPage
	if len(docs) > p.Limit {
		docs = docs[:p.Limit]
		last := docs[len(docs)-1]
		page.Next = strconv.FormatInt(last.DeadAt.UnixMilli(), 10) + "." + last.ID
	}
	page.Letters = make([]backend.DeadLetter, len(docs))
	for i := range docs {
		page.Letters[i] = docs[i].letter()
	}
	return page, nil
}

// replayChunk is how many dead letters one replay step moves.
const replayChunk = 500

// DeadReplay moves the selected dead letters back to ready, attempts reset
// and dedup keys dropped, a chunk at a time: insert into the messages
// collection, then delete from the dead letters (in one transaction where
// the server has them). Without transactions a crash in between leaves a
// letter both ready and dead, never neither.
func (d *Driver) DeadReplay(ctx context.Context, queue string, f backend.DeadFilter) (int, error) {
	total := 0
	for {
		var n int
		var more bool
		var err error
		if d.caps.Transactions {
			n, more, err = d.replayChunkTx(ctx, queue, f)
		} else {
			n, more, err = d.replayChunk(ctx, queue, f)
		}
		total += n
		if err != nil {
			return total, d.mapErr(ctx, err, "replay dead letters")
		}
		if n > 0 {
			d.notify.Wake(queue)
		}
		if !more || n == 0 {
			return total, nil
		}
	}
}

func (d *Driver) replayChunkTx(ctx context.Context, queue string, f backend.DeadFilter) (int, bool, error) {
	sess, err := d.client.StartSession()
	if err != nil {
		return 0, false, err
	}
	defer sess.EndSession(context.WithoutCancel(ctx))
	type result struct {
		n    int
		more bool
	}
	out, err := sess.WithTransaction(ctx, func(sctx context.Context) (any, error) {
		n, more, err := d.replayChunk(sctx, queue, f)
		return result{n, more}, err
	}, options.Transaction().SetWriteConcern(d.wc))
	if err != nil {
		return 0, false, err
	}
	r := out.(result)
	return r.n, r.more, nil
}

func (d *Driver) replayChunk(ctx context.Context, queue string, f backend.DeadFilter) (int, bool, error) {
	cur, err := d.dead.Find(ctx, deadFilter(queue, f), options.Find().SetSort(deadSort).SetLimit(replayChunk))
	if err != nil {
		return 0, false, err
	}
	var docs []deadDoc
	if err := cur.All(ctx, &docs); err != nil {
		return 0, false, err
	}
	if len(docs) == 0 {
		return 0, false, nil
	}
	now := time.Now()
	ids := make([]string, len(docs))
	for i := range docs {
		ids[i] = docs[i].ID
	}
	// A letter whose dead-lettering or earlier replay crashed half way is
	// pending already: leave it be (inside a transaction a duplicate-key
	// error would abort the whole replay).
	pending, err := d.existing(ctx, ids)
	if err != nil {
		return 0, false, err
	}
	var batch []any
	for i := range docs {
		if !pending[docs[i].ID] {
			batch = append(batch, docs[i].replayDoc(now))
		}
	}
	if len(batch) > 0 {
		if _, err := d.msgs.InsertMany(ctx, batch, options.InsertMany().SetOrdered(false)); err != nil {
			if _, dupOnly := dupKeyIndexes(err); !dupOnly {
				return 0, false, err
			}
		}
	}
	res, err := d.dead.DeleteMany(ctx, bson.D{{Key: "q", Value: queue}, {Key: "_id", Value: bson.D{{Key: "$in", Value: ids}}}})
	if err != nil {
		return 0, false, err
	}
	return int(res.DeletedCount), len(docs) == replayChunk, nil
}

// DeadPurge deletes the selected dead letters.
func (d *Driver) DeadPurge(ctx context.Context, queue string, f backend.DeadFilter) (int, error) {
	res, err := d.dead.DeleteMany(ctx, deadFilter(queue, f))
	if err != nil {
		return 0, d.mapErr(ctx, err, "purge dead letters")
	}
	return int(res.DeletedCount), nil
}

// existing reports which of ids are pending messages.
func (d *Driver) existing(ctx context.Context, ids []string) (map[string]bool, error) {
	cur, err := d.msgs.Find(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: ids}}}},
		options.Find().SetProjection(bson.D{{Key: "_id", Value: 1}}))
	if err != nil {
		return nil, err
	}
	var rows []struct {
		ID string `bson:"_id"`
	}
	if err := cur.All(ctx, &rows); err != nil {
		return nil, err
	}
	out := make(map[string]bool, len(rows))
	for _, r := range rows {
		out[r.ID] = true
	}
	return out, nil
}
