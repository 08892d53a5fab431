package testenv

import (
	"testing"

	"github.com/fila-go/fila/filatest"
	"github.com/fila-go/fila/internal/skips"
)

// Environment variables that point the tests at running servers.
const (
	// PostgresEnv holds a PostgreSQL URL, for example
	// postgres://postgres@127.0.0.1:5432/test?sslmode=disable.
	PostgresEnv = "FILA_TEST_POSTGRES_URL"
	// RedisEnv holds a Redis URL, for example redis://127.0.0.1:6379/0.
	RedisEnv = "FILA_TEST_REDIS_URL"
	// RabbitMQEnv holds an AMQP URL, for example amqp://guest:guest@127.0.0.1:5672/.
	RabbitMQEnv = "FILA_TEST_RABBITMQ_URL"
	// MongoEnv holds a MongoDB URL, for example mongodb://127.0.0.1:27017/.
	MongoEnv = "FILA_TEST_MONGO_URL"
	// MySQLEnv holds a MySQL or MariaDB URL, for example
	// mysql://root@127.0.0.1:3306/test.
	MySQLEnv = "FILA_TEST_MYSQL_URL"
)

// PostgresURL returns the URL of a PostgreSQL server for tests, or skips the
// test (fails it when CI is set) when none is available. A container's URL
// has user postgres, password postgres and database test.
func PostgresURL(tb testing.TB) string { tb.Helper(); return filatest.URL(tb, filatest.Postgres) }

// RedisURL returns the URL of a Redis server for tests, or skips the test
// (fails it when CI is set) when none is available.
func RedisURL(tb testing.TB) string { tb.Helper(); return filatest.URL(tb, filatest.Redis) }

// RabbitMQURL returns the AMQP URL of a RabbitMQ server for tests, or skips
// the test (fails it when CI is set) when none is available. A container's
// URL uses the guest user.
func RabbitMQURL(tb testing.TB) string { tb.Helper(); return filatest.URL(tb, filatest.RabbitMQ) }

// MongoURL returns the URL of a MongoDB-compatible server for tests, or skips
// the test (fails it when CI is set) when none is available.
//
// The server behind FILA_TEST_MONGO_URL may be FerretDB (scripts/services
// runs FerretDB where no MongoDB is packaged), which lacks transactions,
// change streams, partial and TTL indexes and atomic findOneAndUpdate; tests
// tell it apart with the buildInfo command (see [IsFerretDBBuildInfo]). A
// container is a real MongoDB single-node replica set.
func MongoURL(tb testing.TB) string { tb.Helper(); return filatest.URL(tb, filatest.Mongo) }

// MySQLURL returns the URL of a MySQL-compatible server for tests, or skips
// the test (fails it when CI is set) when none is available. The server
// behind FILA_TEST_MYSQL_URL may be MariaDB (scripts/services runs MariaDB
// 10.11, Debian's); a container is a real MySQL 8.4 with user root and
// database test.
func MySQLURL(tb testing.TB) string { tb.Helper(); return filatest.URL(tb, filatest.MySQL) }

// Main runs the tests of m, prints one line for each broker, cluster form
// or browser the tests were skipped for (see filatest.Main), and exits with
// m's code. Every test package that reaches a broker through this package
// calls it from its TestMain:
//
//	func TestMain(m *testing.M) { testenv.Main(m) }
func Main(m *testing.M) { skips.Main(m) }

// servicesHint is how to start the servers in this repository, added to the
// reason a test gives for skipping.
const servicesHint = `scripts/test starts the servers and runs every test`

func init() { skips.Hint = servicesHint }
