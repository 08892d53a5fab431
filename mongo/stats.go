package mongo

import (
	"context"
	"errors"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	gomongo "go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/fila-go/fila/backend"
)

// QueueStats counts the queue's messages with count queries on the due
// index (one $group over the ready messages for ReadyByPriority, and one
// over its dead letters for DeadByKind), using only aggregation stages
// every MongoDB-compatible server has. A message whose
// lease expired counts as ready, since the next claim takes it; its
// OldestReadyAt is its lease deadline.
func (d *Driver) QueueStats(ctx context.Context, queue string) (backend.Stats, error) {
	var s backend.Stats
	now := floorMS(time.Now())
	dueLTE := bson.D{{Key: "$lte", Value: now}}
	dueGT := bson.D{{Key: "$gt", Value: now}}
	counts := []struct {
		dst    *int64
		filter bson.D
	}{
		{&s.Ready, bson.D{{Key: "q", Value: queue}, {Key: "due", Value: dueLTE}}},
		{&s.Delayed, bson.D{{Key: "q", Value: queue}, {Key: "due", Value: dueGT}, {Key: "l", Value: false}}},
		{&s.Leased, bson.D{{Key: "q", Value: queue}, {Key: "due", Value: dueGT}, {Key: "l", Value: true}}},
	}
	for _, c := range counts {
		n, err := d.msgsReport.CountDocuments(ctx, c.filter)
		if err != nil {
			return backend.Stats{}, d.mapErr(ctx, err, "stats")
		}
		*c.dst = n
	}
	if s.Ready > 0 {
		var doc struct {
			Due time.Time `bson:"due"`
		}
		err := d.msgsReport.FindOne(ctx, counts[0].filter,
			options.FindOne().SetSort(dueSort).SetProjection(bson.D{{Key: "due", Value: 1}})).Decode(&doc)
		if err != nil && !errors.Is(err, gomongo.ErrNoDocuments) {
			return backend.Stats{}, d.mapErr(ctx, err, "stats")
		}
		s.OldestReadyAt = doc.Due
	}
	s.ReadyByPriority = make([]int64, backend.MaxPriority+1)
	if s.Ready > 0 {
		cur, err := d.msgsReport.Aggregate(ctx, bson.A{
			bson.D{{Key: "$match", Value: counts[0].filter}},
			bson.D{{Key: "$group", Value: bson.D{{Key: "_id", Value: "$p"}, {Key: "n", Value: bson.D{{Key: "$sum", Value: 1}}}}}},
		})
		if err != nil {
			return backend.Stats{}, d.mapErr(ctx, err, "stats")
		}
		var levels []struct {
			Level *int  `bson:"_id"` // nil: level 0, which is not stored
			N     int64 `bson:"n"`
		}
		if err := cur.All(ctx, &levels); err != nil {
			return backend.Stats{}, d.mapErr(ctx, err, "stats")
		}
		for _, l := range levels {
			if l.Level == nil {
				s.ReadyByPriority[0] += l.N
			} else if *l.Level >= 0 && *l.Level <= backend.MaxPriority {
				s.ReadyByPriority[*l.Level] += l.N
			}
		}
	}
	cur, err := d.deadReport.Aggregate(ctx, bson.A{
		bson.D{{Key: "$match", Value: bson.D{{Key: "q", Value: queue}}}},
		bson.D{{Key: "$group", Value: bson.D{{Key: "_id", Value: "$k"}, {Key: "n", Value: bson.D{{Key: "$sum", Value: 1}}}}}},
	})
	if err != nil {
		return backend.Stats{}, d.mapErr(ctx, err, "stats")
	}
	var rows []struct {
		Kind string `bson:"_id"`
		N    int64  `bson:"n"`
	}
	if err := cur.All(ctx, &rows); err != nil {
		return backend.Stats{}, d.mapErr(ctx, err, "stats")
	}
	s.DeadByKind = make(map[string]int64, len(rows))
	for _, r := range rows {
		s.DeadByKind[r.Kind] += r.N
		s.Dead += r.N
	}
	return s, nil
}
