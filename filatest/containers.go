package filatest

import (
	"context"
	"fmt"
	"net/url"
	"sync"
	"time"

	"github.com/testcontainers/testcontainers-go"
	tcmongo "github.com/testcontainers/testcontainers-go/modules/mongodb"
	tcpostgres "github.com/testcontainers/testcontainers-go/modules/postgres"
	tcredis "github.com/testcontainers/testcontainers-go/modules/redis"
	"github.com/testcontainers/testcontainers-go/wait"
)

// Container images used when a Docker engine answers and no FILA_TEST_*
// variable is set.
const (
	postgresImage = "postgres:15-alpine"
	redisImage    = "redis:7-alpine"
	rabbitmqImage = "rabbitmq:3.12-management-alpine"
	mongoImage    = "mongo:7"
	mysqlImage    = "mysql:8.4"
	// mongoReplicaSet is the name of the single-node replica set the Mongo
	// container runs, so that change streams and transactions work.
	mongoReplicaSet = "rs0"
	// mysqlPassword is the root password of the MySQL container.
	mysqlPassword = "filatest"
)

// dockerCheckTimeout bounds the Docker engine health check. Without an engine
// the check fails at once (no socket); the timeout only matters for an engine
// that hangs.
const dockerCheckTimeout = 5 * time.Second

// containerStartTimeout bounds the start of one container, image pull included.
const containerStartTimeout = 5 * time.Minute

var (
	dockerOnce sync.Once
	dockerErr  error
)

// dockerAvailable reports whether a Docker engine answers, using
// testcontainers' provider health check. The answer is computed once per test
// binary; err says why Docker is not usable.
func dockerAvailable() error {
	dockerOnce.Do(func() {
		dockerErr = checkDocker()
	})
	return dockerErr
}

// checkDocker runs testcontainers' provider health check (the Docker Info
// call), turning the panics some provider setups raise into errors.
func checkDocker() (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("testcontainers provider panicked: %v", r)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), dockerCheckTimeout)
	defer cancel()
	p, err := testcontainers.ProviderDefault.GetProvider()
	if err != nil {
		return err
	}
	defer p.Close()
	return p.Health(ctx)
}

// container is one broker container shared by all tests of a test binary.
// It is started on first use and never stopped by this package: testcontainers'
// reaper (Ryuk) removes it when the test binary exits.
type container struct {
	once sync.Once
	url  string
	err  error
}

// get starts the container on first call and returns its URL.
func (c *container) get(start func(ctx context.Context) (string, error)) (string, error) {
	c.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), containerStartTimeout)
		defer cancel()
		c.url, c.err = start(ctx)
	})
	return c.url, c.err
}

var (
	postgresContainer container
	redisContainer    container
	rabbitmqContainer container
	mongoContainer    container
	mysqlContainer    container
)

// startPostgres runs PostgreSQL with user postgres, password postgres and
// database test.
func startPostgres(ctx context.Context) (string, error) {
	c, err := tcpostgres.Run(ctx, postgresImage,
		tcpostgres.WithDatabase("test"),
		tcpostgres.WithUsername("postgres"),
		tcpostgres.WithPassword("postgres"),
		tcpostgres.BasicWaitStrategies(),
	)
	if err != nil {
		return "", err
	}
	return c.ConnectionString(ctx, "sslmode=disable")
}

// startRedis runs Redis and returns a redis:// URL for database 0.
func startRedis(ctx context.Context) (string, error) {
	c, err := tcredis.Run(ctx, redisImage)
	if err != nil {
		return "", err
	}
	return c.ConnectionString(ctx)
}

// startRabbitMQ runs RabbitMQ with the guest user and returns its AMQP URL.
//
// It uses a generic container: testcontainers' rabbitmq module (v0.40.0, the
// newest published) does not compile against testcontainers-go v0.45.0. The
// wait strategy is the module's: the "Server startup complete" log line, then
// the AMQP port accepting connections.
func startRabbitMQ(ctx context.Context) (string, error) {
	c, err := testcontainers.Run(ctx, rabbitmqImage,
		testcontainers.WithExposedPorts("5672/tcp"),
		testcontainers.WithWaitStrategyAndDeadline(2*time.Minute,
			wait.ForLog(".*Server startup complete.*").AsRegexp(),
			wait.ForListeningPort("5672/tcp"),
		),
	)
	if err != nil {
		return "", err
	}
	hostPort, err := c.PortEndpoint(ctx, "5672/tcp", "")
	if err != nil {
		return "", err
	}
	return "amqp://guest:guest@" + hostPort + "/", nil
}

// startMongo runs a real MongoDB as a single-node replica set, so that
// transactions and change streams work. The URL sets directConnection=true:
// the replica set member is registered under the container's internal
// address, which the host may not reach (Docker Desktop), while the mapped
// port always works.
func startMongo(ctx context.Context) (string, error) {
	c, err := tcmongo.Run(ctx, mongoImage, tcmongo.WithReplicaSet(mongoReplicaSet))
	if err != nil {
		return "", err
	}
	s, err := c.ConnectionString(ctx)
	if err != nil {
		return "", err
	}
	u, err := url.Parse(s)
	if err != nil {
		return "", err
	}
	q := u.Query()
	q.Set("directConnection", "true")
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// startMySQL runs MySQL with the root user, password mysqlPassword and
// database test, and returns a mysql:// URL for them.
//
// It uses a generic container, as startRabbitMQ does: go.mod has no
// testcontainers mysql module. The wait strategy is that module's: the
// image's entrypoint first runs a temporary server (on port 0) to create
// the database, so only the log line of the real server on port 3306 says
// it is ready; then the port accepting connections.
func startMySQL(ctx context.Context) (string, error) {
	c, err := testcontainers.Run(ctx, mysqlImage,
		testcontainers.WithExposedPorts("3306/tcp"),
		testcontainers.WithEnv(map[string]string{
			"MYSQL_ROOT_PASSWORD": mysqlPassword,
			"MYSQL_DATABASE":      "test",
		}),
		testcontainers.WithWaitStrategyAndDeadline(2*time.Minute,
			wait.ForLog("port: 3306  MySQL Community Server"),
			wait.ForListeningPort("3306/tcp"),
		),
	)
	if err != nil {
		return "", err
	}
	hostPort, err := c.PortEndpoint(ctx, "3306/tcp", "")
	if err != nil {
		return "", err
	}
	u := url.URL{Scheme: "mysql", User: url.UserPassword("root", mysqlPassword), Host: hostPort, Path: "/test"}
	return u.String(), nil
}
