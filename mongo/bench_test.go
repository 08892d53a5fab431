package mongo

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	gomongo "go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/fila-go/fila/backend"
)

// The benchmarks compare the driver with a raw mongo-driver loop doing the
// same operations (same documents, index and write concern) in the same
// run, and log the driver's throughput as a share of the raw loop's
// (target: at least 80%). Queues are kept small: FerretDB sorts in its own
// process, so claims slow down as a queue grows.
//
//	FILA_TEST_MONGO_URL=mongodb://127.0.0.1:27017/ go test -run '^$' -bench . ./mongo

// pair runs raw and fila as sub-benchmarks; the fila line reports its
// throughput as a percentage of raw's ("%raw").
func pair(b *testing.B, raw, fila func(b *testing.B)) {
	var rawNS float64
	b.Run("raw", func(b *testing.B) {
		raw(b)
		rawNS = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	})
	b.Run("fila", func(b *testing.B) {
		fila(b)
		if ns := float64(b.Elapsed().Nanoseconds()) / float64(b.N); rawNS > 0 && ns > 0 {
			b.ReportMetric(100*rawNS/ns, "%raw")
		}
	})
}

type benchEnv struct {
	drv *Driver
	raw *gomongo.Collection
}

func newBenchEnv(b *testing.B) *benchEnv {
	s := mongoServer(b)
	db := testDatabase(b, s)
	drv := openDriver(b, s, map[string]string{"fila_database": db})
	// The raw loop writes a collection of its own through the same client,
	// with the same index and write concern.
	raw := drv.client.Database(db).Collection("raw_messages", hotCollection(drv.wc))
	ctx := context.Background()
	for _, m := range []gomongo.IndexModel{
		{Keys: bson.D{{Key: "q", Value: 1}, {Key: "p", Value: -1}, {Key: "due", Value: 1}, {Key: "_id", Value: 1}}, Options: options.Index().SetName(claimIndex)},
		{Keys: bson.D{{Key: "q", Value: 1}, {Key: "due", Value: 1}, {Key: "_id", Value: 1}}, Options: options.Index().SetName(dueIndex)},
		{Keys: bson.D{{Key: "dk", Value: 1}}, Options: options.Index().SetName(dedupIndex).SetUnique(true).SetSparse(true)},
	} {
		if _, err := raw.Indexes().CreateOne(ctx, m); err != nil {
			b.Fatal(err)
		}
	}
	return &benchEnv{drv: drv, raw: raw}
}

var benchSeq struct {
	sync.Mutex
	n int
}

func benchMsgs(n int) []backend.Message {
	benchSeq.Lock()
	defer benchSeq.Unlock()
	now := time.Now()
	out := make([]backend.Message, n)
	for i := range out {
		benchSeq.n++
		out[i] = backend.Message{ID: fmt.Sprintf("%020d", benchSeq.n) + strconv.FormatInt(now.UnixNano(), 36), Kind: "bench", Body: []byte(`{"order":42}`), EnqueuedAt: now}
	}
	return out
}

func rawDocs(queue string, msgs []backend.Message) []any {
	now := time.Now()
	out := make([]any, len(msgs))
	for i := range msgs {
		out[i] = newMsgDoc(queue, &msgs[i], now)
	}
	return out
}

func BenchmarkEnqueue(b *testing.B) {
	e := newBenchEnv(b)
	ctx := context.Background()
	pair(b, func(b *testing.B) {
		q := uniqueQueue("raw")
		empty(b, e.raw)
		for i := 0; i < b.N; i++ {
			if _, err := e.raw.InsertOne(ctx, rawDocs(q, benchMsgs(1))[0]); err != nil {
				b.Fatal(err)
			}
		}
	}, func(b *testing.B) {
		q := uniqueQueue("fila")
		empty(b, e.drv.msgs)
		for i := 0; i < b.N; i++ {
			if _, err := e.drv.Enqueue(ctx, q, benchMsgs(1)); err != nil {
				b.Fatal(err)
			}
		}
	})
}

const benchBatch = 100

func BenchmarkEnqueueBatch100(b *testing.B) {
	e := newBenchEnv(b)
	ctx := context.Background()
	pair(b, func(b *testing.B) {
		q := uniqueQueue("raw")
		empty(b, e.raw)
		for i := 0; i < b.N; i++ {
			if _, err := e.raw.InsertMany(ctx, rawDocs(q, benchMsgs(benchBatch)), options.InsertMany().SetOrdered(false)); err != nil {
				b.Fatal(err)
			}
		}
	}, func(b *testing.B) {
		q := uniqueQueue("fila")
		empty(b, e.drv.msgs)
		for i := 0; i < b.N; i++ {
			if _, err := e.drv.Enqueue(ctx, q, benchMsgs(benchBatch)); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// empty deletes what earlier runs left in coll, outside the timer: FerretDB
// scans the whole collection for every query.
func empty(b *testing.B, coll *gomongo.Collection) {
	b.StopTimer()
	if _, err := coll.DeleteMany(context.Background(), bson.D{}); err != nil {
		b.Fatal(err)
	}
	b.StartTimer()
}

// refill keeps a small stock of ready messages outside the timer.
func refill(b *testing.B, coll *gomongo.Collection, q string, n int) {
	b.StopTimer()
	if _, err := coll.InsertMany(context.Background(), rawDocs(q, benchMsgs(n))); err != nil {
		b.Fatal(err)
	}
	b.StartTimer()
}

const benchStock = 50

func BenchmarkReceiveAck(b *testing.B) {
	e := newBenchEnv(b)
	ctx := context.Background()
	pair(b, func(b *testing.B) {
		q := uniqueQueue("raw")
		empty(b, e.raw)
		for i := 0; i < b.N; i++ {
			if i%benchStock == 0 {
				refill(b, e.raw, q, benchStock)
			}
			now := time.Now()
			receipt := newReceipt()
			var doc msgDoc
			err := e.raw.FindOneAndUpdate(ctx, claimFilter(q, now), claimUpdate(receipt, now, time.Minute),
				options.FindOneAndUpdate().SetSort(claimSort).SetReturnDocument(options.After)).Decode(&doc)
			if err != nil {
				b.Fatal(err)
			}
			res, err := e.raw.DeleteOne(ctx, bson.D{{Key: "_id", Value: doc.ID}, {Key: "q", Value: q}, {Key: "r", Value: receipt}})
			if err != nil || res.DeletedCount != 1 {
				b.Fatal(err, res)
			}
		}
	}, func(b *testing.B) {
		q := uniqueQueue("fila")
		empty(b, e.drv.msgs)
		for i := 0; i < b.N; i++ {
			if i%benchStock == 0 {
				refill(b, e.drv.msgs, q, benchStock)
			}
			ds, err := e.drv.Receive(ctx, q, backend.ReceiveParams{Max: 1, Lease: time.Minute})
			if err != nil || len(ds) != 1 {
				b.Fatal(err, len(ds))
			}
			errs, err := e.drv.Ack(ctx, []backend.Ref{{Queue: q, ID: ds[0].ID, Receipt: ds[0].Receipt}})
			if err != nil || errs[0] != nil {
				b.Fatal(err, errs)
			}
		}
	})
}

const benchRecvBatch = 10

// BenchmarkReceiveAckBatch10 measures receive of 10 and ack of 10; one op
// is one message.
func BenchmarkReceiveAckBatch10(b *testing.B) {
	e := newBenchEnv(b)
	ctx := context.Background()
	pair(b, func(b *testing.B) {
		q := uniqueQueue("raw")
		empty(b, e.raw)
		for i := 0; i < b.N; i += benchRecvBatch {
			if i%benchStock == 0 {
				refill(b, e.raw, q, benchStock)
			}
			now := time.Now()
			cur, err := e.raw.Find(ctx, claimFilter(q, now), options.Find().SetSort(claimSort).SetLimit(benchRecvBatch))
			if err != nil {
				b.Fatal(err)
			}
			var docs []msgDoc
			if err := cur.All(ctx, &docs); err != nil {
				b.Fatal(err)
			}
			which := make(bson.A, len(docs))
			for j, d := range docs {
				which[j] = bson.D{{Key: "_id", Value: d.ID}, {Key: "a", Value: d.Attempts}}
			}
			receipt := newReceipt()
			filter := append(bson.D{{Key: "$or", Value: which}}, claimFilter(q, now)...)
			if _, err := e.raw.UpdateMany(ctx, filter, claimUpdate(receipt, now, time.Minute)); err != nil {
				b.Fatal(err)
			}
			or := make(bson.A, len(docs))
			for j, d := range docs {
				or[j] = bson.D{{Key: "_id", Value: d.ID}, {Key: "q", Value: q}, {Key: "r", Value: receipt}}
			}
			res, err := e.raw.DeleteMany(ctx, bson.D{{Key: "$or", Value: or}})
			if err != nil || res.DeletedCount != int64(len(docs)) || len(docs) != benchRecvBatch {
				b.Fatal(err, res, len(docs))
			}
		}
	}, func(b *testing.B) {
		q := uniqueQueue("fila")
		empty(b, e.drv.msgs)
		for i := 0; i < b.N; i += benchRecvBatch {
			if i%benchStock == 0 {
				refill(b, e.drv.msgs, q, benchStock)
			}
			ds, err := e.drv.Receive(ctx, q, backend.ReceiveParams{Max: benchRecvBatch, Lease: time.Minute})
			if err != nil || len(ds) != benchRecvBatch {
				b.Fatal(err, len(ds))
			}
			refs := make([]backend.Ref, len(ds))
			for j, d := range ds {
				refs[j] = backend.Ref{Queue: q, ID: d.ID, Receipt: d.Receipt}
			}
			errs, err := e.drv.Ack(ctx, refs)
			if err != nil || errors.Join(errs...) != nil {
				b.Fatal(err, errs)
			}
		}
	})
}
