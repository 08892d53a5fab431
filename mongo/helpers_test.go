package mongo

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"sync"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	gomongo "go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/internal/testenv"
)

// testServer is the server the tests run against and what it supports.
type testServer struct {
	url    string
	client *gomongo.Client // for test set-up, transactions and clean-up
	caps   Capabilities
}

var (
	serverOnce sync.Once
	server     testServer
	serverErr  error
)

// mongoServer returns the test server, connecting once per test binary.
func mongoServer(t testing.TB) *testServer {
	t.Helper()
	u := testenv.MongoURL(t)
	serverOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := gomongo.Connect(options.Client().ApplyURI(u))
		if err != nil {
			serverErr = err
			return
		}
		caps, err := detect(ctx, c)
		if err != nil {
			serverErr = err
			return
		}
		server = testServer{url: u, client: c, caps: caps}
	})
	if serverErr != nil {
		t.Fatalf("MongoDB test server %s: %v", u, serverErr)
	}
	return &server
}

// testDatabase returns a fresh database name, dropped when t ends.
func testDatabase(t testing.TB, s *testServer) string {
	t.Helper()
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := "fila_test_" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = s.client.Database(name).Drop(ctx)
	})
	return name
}

// driverURL is the server's URL with Fila parameters added.
func driverURL(t testing.TB, s *testServer, params map[string]string) *url.URL {
	t.Helper()
	u, err := url.Parse(s.url)
	if err != nil {
		t.Fatalf("parse %s: %v", s.url, err)
	}
	q := u.Query()
	for k, v := range params {
		q.Set(k, v)
	}
	u.RawQuery = q.Encode()
	return u
}

// openDriver opens a driver on database db, closed when t ends.
func openDriver(t testing.TB, s *testServer, params map[string]string) *Driver {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	drv, err := Open(ctx, driverURL(t, s, params), backend.OpenOptions{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = drv.Close() })
	return drv.(*Driver)
}

func uniqueQueue(prefix string) string {
	var b [5]byte
	_, _ = rand.Read(b[:])
	return prefix + "-" + hex.EncodeToString(b[:])
}

var _ = bson.D{}
