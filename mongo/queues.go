package mongo

import (
	"context"
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"
	gomongo "go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// QueueList names the queues that hold a pending message (ready, delayed or
// leased) or a dead letter, sorted: the distinct values of the queue field
// of the messages and dead-letter collections, merged. Each is read with the
// reporting read concern by an aggregation that sorts on the queue field
// and groups by it (the sort on the leading field of the collection's
// index lets MongoDB read the index rather than sort). It is not the
// distinct command because FerretDB v1 refuses that command's maxTimeMS,
// which a context deadline sets.
func (d *Driver) QueueList(ctx context.Context) ([]string, error) {
	pipeline := bson.A{
		bson.D{{Key: "$sort", Value: bson.D{{Key: "q", Value: 1}}}},
		bson.D{{Key: "$group", Value: bson.D{{Key: "_id", Value: "$q"}}}},
	}
	var names []string
	for _, c := range []*gomongo.Collection{d.msgsReport, d.deadReport} {
		cur, err := c.Aggregate(ctx, pipeline)
		if err != nil {
			return nil, d.mapErr(ctx, err, "list queues")
		}
		var rows []struct {
			Queue string `bson:"_id"`
		}
		if err := cur.All(ctx, &rows); err != nil {
			return nil, d.mapErr(ctx, err, "list queues")
		}
		for _, r := range rows {
			names = append(names, r.Queue)
		}
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}

// QueueDelete deletes everything queue holds: its pending messages (ready,
// delayed and leased; their dedup keys live in them), its dead letters and
// its marks, with one deleteMany on each collection. Where the server has
// transactions all three commit together; without, the messages go first,
// then the dead letters, then the marks, so a Dead racing the delete
// (which writes its letter before deleting the message) finds its lease
// lost and takes its letter back or has it deleted here. A delivery leased
// from the queue then gets ErrLeaseLost when settled. Nothing else is kept
// per queue, so an unknown queue is not an error and the queue can be used
// again at once.
func (d *Driver) QueueDelete(ctx context.Context, queue string) error {
	var err error
	if d.caps.Transactions {
		err = d.queueDeleteTx(ctx, queue)
	} else {
		err = d.queueDeleteOrdered(ctx, queue)
	}
	return d.mapErr(ctx, err, "delete queue")
}

func (d *Driver) queueDeleteTx(ctx context.Context, queue string) error {
	sess, err := d.client.StartSession()
	if err != nil {
		return err
	}
	defer sess.EndSession(context.WithoutCancel(ctx))
	_, err = sess.WithTransaction(ctx, func(sctx context.Context) (any, error) {
		return nil, d.queueDeleteOrdered(sctx, queue)
	}, options.Transaction().SetWriteConcern(d.wc))
	return err
}

func (d *Driver) queueDeleteOrdered(ctx context.Context, queue string) error {
	filter := bson.D{{Key: "q", Value: queue}}
	if _, err := d.msgs.DeleteMany(ctx, filter); err != nil {
		return err
	}
	if _, err := d.dead.DeleteMany(ctx, filter); err != nil {
		return err
	}
	_, err := d.marks.DeleteMany(ctx, filter)
	return err
}
