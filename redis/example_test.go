package redis_test

import (
	"context"
	"fmt"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/redis"
)

// ExampleNew builds a driver over a go-redis client the application already
// has, here a single node; a *goredis.ClusterClient or a failover client
// works the same way. The driver does not close the client.
func ExampleNew() {
	rdb := goredis.NewClient(&goredis.Options{Addr: "localhost:6379"})
	defer rdb.Close()

	drv, err := redis.New(rdb, redis.Options{Prefix: "jobs"})
	if err != nil {
		fmt.Println(err)
		return
	}
	client, err := fila.New(drv)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer client.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := client.Ping(ctx); err != nil {
		fmt.Println("redis is not answering:", err)
		return
	}
	id, err := client.Enqueue(ctx, "emails", fila.Message{Kind: "email.welcome", Body: []byte(`{"user_id":42}`)})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("enqueued", id)
}
