package main

import (
	"context"
	"errors"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// mongoEnv holds a client used by the raw baseline and for cleanup; each
// system gets its own database, dropped at Close.
type mongoEnv struct {
	url    string
	client *mongo.Client
	suffix string
}

func newMongoEnv(ctx context.Context, url string) (*mongoEnv, error) {
	c, err := mongo.Connect(options.Client().ApplyURI(url))
	if err != nil {
		return nil, err
	}
	if err := c.Ping(ctx, nil); err != nil {
		_ = c.Disconnect(ctx)
		return nil, err
	}
	return &mongoEnv{url: url, client: c, suffix: randSuffix()}, nil
}

func (e *mongoEnv) filaSystem(ctx context.Context) (*filaSystem, error) {
	db := "bench_fila_" + e.suffix
	url := addParams(e.url, "fila_database="+db)
	drop := func(ctx context.Context) error { return e.client.Database(db).Drop(ctx) }
	s, err := newFilaSystem(ctx, url, nil, drop)
	if s != nil {
		// FerretDB deletes slowly: drop the database after each run and
		// reopen (which recreates the collections and indexes).
		s.fresh = drop
	}
	return s, err
}

// rawMongo is the raw mongo-driver baseline: InsertOne / InsertMany, and
// per consumer goroutine a findOneAndUpdate claim (sorted by due time) and
// a deleteOne fenced by the claim's token.
type rawMongo struct {
	env   *mongoEnv
	coll  *mongo.Collection
	queue string
}

func (e *mongoEnv) rawSystem(context.Context) (*rawMongo, error) {
	return &rawMongo{env: e, coll: e.client.Database("bench_raw_" + e.suffix).Collection("jobs")}, nil
}

func (s *rawMongo) Name() string { return "raw mongo-driver" }

func (s *rawMongo) Setup(ctx context.Context) error {
	s.queue = "bench-" + randSuffix()
	_, err := s.coll.Indexes().CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "q", Value: 1}, {Key: "due", Value: 1}}})
	return err
}

func (s *rawMongo) Enqueue(ctx context.Context, bodies [][]byte) error {
	now := time.Now()
	if len(bodies) == 1 {
		_, err := s.coll.InsertOne(ctx, bson.D{{Key: "q", Value: s.queue}, {Key: "due", Value: now}, {Key: "b", Value: bodies[0]}})
		return err
	}
	docs := make([]any, len(bodies))
	for i, b := range bodies {
		docs[i] = bson.D{{Key: "q", Value: s.queue}, {Key: "due", Value: now}, {Key: "b", Value: b}}
	}
	_, err := s.coll.InsertMany(ctx, docs)
	return err
}

func (s *rawMongo) Start(ctx context.Context, concurrency int, onStart func([]byte)) (Consumer, error) {
	claimOpts := options.FindOneAndUpdate().
		SetSort(bson.D{{Key: "due", Value: 1}}).
		SetReturnDocument(options.After) // FerretDB implements no projection here
	step := func(ctx context.Context) (bool, error) {
		now := time.Now()
		tok := randSuffix() + randSuffix()
		var doc struct {
			ID any    `bson:"_id"`
			B  []byte `bson:"b"`
		}
		err := s.coll.FindOneAndUpdate(ctx,
			bson.D{{Key: "q", Value: s.queue}, {Key: "due", Value: bson.D{{Key: "$lte", Value: now}}}},
			bson.D{{Key: "$set", Value: bson.D{{Key: "due", Value: now.Add(30 * time.Second)}, {Key: "tok", Value: tok}}}},
			claimOpts).Decode(&doc)
		if errors.Is(err, mongo.ErrNoDocuments) {
			sleepCtx(ctx, 5*time.Millisecond)
			return false, nil
		}
		if err != nil {
			return false, err
		}
		onStart(doc.B)
		res, err := s.coll.DeleteOne(context.WithoutCancel(ctx), bson.D{{Key: "_id", Value: doc.ID}, {Key: "tok", Value: tok}})
		if err != nil {
			return false, err
		}
		// FerretDB's findOneAndUpdate is not atomic: a message claimed twice
		// counts once, for the claim whose token is stored.
		return res.DeletedCount == 1, nil
	}
	return startGoLoop(ctx, concurrency, step), nil
}

// Teardown drops the collection (FerretDB deletes documents slowly, and a
// large DeleteMany fails there with "too many SQL variables"); Setup
// recreates it with its index.
func (s *rawMongo) Teardown(ctx context.Context) error { return s.coll.Drop(ctx) }

func (s *rawMongo) Close(ctx context.Context) error {
	return s.coll.Database().Drop(ctx)
}
