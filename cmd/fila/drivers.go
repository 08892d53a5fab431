package main

// The drivers the command can talk to. Each import registers its URL
// schemes with fila.Open.
import (
	_ "github.com/fila-go/fila/memory"   // mem://
	_ "github.com/fila-go/fila/mongo"    // mongodb://, mongodb+srv://
	_ "github.com/fila-go/fila/mysql"    // mysql://
	_ "github.com/fila-go/fila/postgres" // postgres://, postgresql://
	_ "github.com/fila-go/fila/rabbitmq" // amqp://, amqps://
	_ "github.com/fila-go/fila/redis"    // redis://, rediss://
)
