package testenv_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/redis/go-redis/v9"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/fila-go/fila/internal/testenv"
)

// uniqueName returns a name no other test run uses.
func uniqueName(prefix string) string {
	return fmt.Sprintf("%s_%d", prefix, time.Now().UnixNano())
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestPostgresSmoke(t *testing.T) {
	t.Parallel()
	url := testenv.PostgresURL(t)
	ctx := testContext(t)
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	defer conn.Close(context.Background())
	var one int
	if err := conn.QueryRow(ctx, "select 1").Scan(&one); err != nil {
		t.Fatalf("select 1: %v", err)
	}
	if one != 1 {
		t.Fatalf("select 1 returned %d", one)
	}
}

func TestRedisSmoke(t *testing.T) {
	t.Parallel()
	url := testenv.RedisURL(t)
	ctx := testContext(t)
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Fatalf("parse %s: %v", url, err)
	}
	c := redis.NewClient(opts)
	defer c.Close()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING: %v", err)
	}
	key := uniqueName("fila:testenv:smoke")
	defer c.Del(context.Background(), key)
	if err := c.Set(ctx, key, "v", time.Minute).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	got, err := c.Get(ctx, key).Result()
	if err != nil || got != "v" {
		t.Fatalf("GET = %q, %v; want \"v\"", got, err)
	}
}

func TestRabbitMQSmoke(t *testing.T) {
	t.Parallel()
	url := testenv.RabbitMQURL(t)
	conn, err := amqp.DialConfig(url, amqp.Config{Dial: amqp.DefaultDial(10 * time.Second)})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		t.Fatalf("open channel: %v", err)
	}
	defer ch.Close()
	name := uniqueName("fila.testenv.smoke")
	q, err := ch.QueueDeclare(name, false, true, false, false, nil)
	if err != nil {
		t.Fatalf("declare %s: %v", name, err)
	}
	if q.Name != name {
		t.Fatalf("declared %q, want %q", q.Name, name)
	}
	if _, err := ch.QueueDelete(name, false, false, false); err != nil {
		t.Fatalf("delete %s: %v", name, err)
	}
}

func TestMongoSmoke(t *testing.T) {
	t.Parallel()
	url := testenv.MongoURL(t)
	ctx := testContext(t)
	c, err := mongo.Connect(options.Client().ApplyURI(url).SetServerSelectionTimeout(10 * time.Second))
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer c.Disconnect(context.Background())
	if err := c.Ping(ctx, nil); err != nil {
		t.Fatalf("ping: %v", err)
	}

	var info bson.M
	if err := c.Database("admin").RunCommand(ctx, bson.D{{Key: "buildInfo", Value: 1}}).Decode(&info); err != nil {
		t.Fatalf("buildInfo: %v", err)
	}
	t.Logf("server: version %v, FerretDB %v", info["version"], testenv.IsFerretDBBuildInfo(info))

	coll := c.Database("fila_testenv").Collection(uniqueName("smoke"))
	defer coll.Drop(context.Background())
	if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: "a"}, {Key: "n", Value: 42}}); err != nil {
		t.Fatalf("insert: %v", err)
	}
	var doc struct {
		N int `bson:"n"`
	}
	if err := coll.FindOne(ctx, bson.D{{Key: "_id", Value: "a"}}).Decode(&doc); err != nil {
		t.Fatalf("find: %v", err)
	}
	if doc.N != 42 {
		t.Fatalf("found n=%d, want 42", doc.N)
	}
}
