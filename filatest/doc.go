// Package filatest gives your tests a Fila client on a real broker, with a
// queue of the test's own that is deleted when the test ends:
//
//	import (
//		"github.com/fila-go/fila/filatest"
//		_ "github.com/fila-go/fila/postgres" // the driver, as for fila.Open
//	)
//
//	func TestSignup(t *testing.T) {
//		c := filatest.Open(t, "postgres") // closed when the test ends
//		q := filatest.Queue(t, c)         // unique name, deleted at the end
//		// ... run the code under test on c and q, then Receive from q ...
//	}
//
//	func TestMain(m *testing.M) { filatest.Main(m) } // says what was skipped
//
// The brokers are "memory", "postgres", "redis", "rabbitmq", "mongo" and
// "mysql".
//
// # Where the server comes from
//
// [URL] and [Open] look for a server of the broker in this order:
//
//  1. the environment variable FILA_TEST_<BROKER>_URL: FILA_TEST_POSTGRES_URL,
//     FILA_TEST_REDIS_URL, FILA_TEST_RABBITMQ_URL, FILA_TEST_MONGO_URL or
//     FILA_TEST_MYSQL_URL, for example
//     postgres://postgres@127.0.0.1:5432/test?sslmode=disable or
//     mysql://root@127.0.0.1:3306/test;
//  2. otherwise, when a Docker engine answers, a container started with
//     testcontainers-go;
//  3. otherwise the test is skipped with one line naming the variable to set.
//     When the CI environment variable is non-empty a missing server fails
//     the test instead, so a CI run cannot pass while testing nothing.
//
// "memory" needs no server: each test gets an in-process broker of its own.
//
// Only point these variables at servers whose data you can lose: tests
// create and delete queues there, and on PostgreSQL and MySQL [Open] creates
// Fila's tables (fila_migrate=true).
//
// # Docker
//
// Whether a Docker engine answers is decided once per test binary by
// testcontainers' health check (the engine's Info call); without an engine
// it answers at once, so the tests skip at once; a hanging engine is given
// 5 s. Each broker's container starts on first use, once per test binary,
// and is shared by the binary's tests. It is never stopped here:
// testcontainers' reaper container (Ryuk) removes it when the test binary
// exits (with TESTCONTAINERS_RYUK_DISABLED=true the containers are left
// running). Images: postgres:15-alpine (user postgres, password postgres,
// database test), redis:7-alpine, rabbitmq:3.12-management-alpine
// (guest/guest), mongo:7 as a single-node replica set "rs0", so
// transactions and change streams work, and mysql:8.4 (user root, password
// filatest, database test).
//
// # Isolation
//
// The tests of a binary share each server, and later runs find what earlier
// ones left unless it was deleted. [Queue] returns a name made of the test's
// name and a random suffix and deletes that queue, with everything in it, at
// the end of the test; [QueueName] returns such a name without the deletion.
//
// # Seeing what was skipped
//
// go test prints a bare "ok" for a passing package, even when its broker
// tests all skipped. A TestMain calling [Main] prints one line per broker
// after the tests ran, for example
//
//	fila: PostgreSQL tests skipped in example.com/app (3 tests): no server: set FILA_TEST_POSTGRES_URL or start a Docker engine
//
// even where go test would hide a passing package's output (see [Main]).
package filatest
