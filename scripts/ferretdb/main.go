// Command ferretdb runs FerretDB v1 with its SQLite handler for Fila's tests.
//
// It exists because `go install github.com/FerretDB/FerretDB/cmd/ferretdb@v1.24.2`
// builds a binary that panics at start: the module's embedded
// build/version/version.txt is empty outside FerretDB's own git checkout.
// FerretDB's embeddable package (github.com/FerretDB/FerretDB/ferretdb) does
// not read that file, so this tiny main wraps it instead.
//
// The embeddable package has no debug HTTP server, so this command serves
// /debug/livez and /debug/readyz itself: readyz answers 200 only after a
// MongoDB client ping over the TCP listener succeeds, the same check that
// FerretDB's own readyz probe performs. scripts/services builds and starts it;
// it lives in its own Go module so that it is not part of the root module's
// `./...` build and test.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/FerretDB/FerretDB/ferretdb"
	"go.mongodb.org/mongo-driver/mongo"
	"go.mongodb.org/mongo-driver/mongo/options"
)

func main() {
	listen := flag.String("listen-addr", "127.0.0.1:27017", "MongoDB wire protocol TCP address")
	debugAddr := flag.String("debug-addr", "127.0.0.1:27088", "debug HTTP address serving /debug/livez and /debug/readyz")
	dataDir := flag.String("data-dir", "/var/lib/ferretdb", "directory for the SQLite handler's databases")
	flag.Parse()

	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if err := run(logger, *listen, *debugAddr, *dataDir); err != nil {
		logger.Error("ferretdb failed", "err", err)
		os.Exit(1)
	}
}

// run starts FerretDB and the debug HTTP server and blocks until SIGINT or SIGTERM.
func run(logger *slog.Logger, listen, debugAddr, dataDir string) error {
	abs, err := filepath.Abs(dataDir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	f, err := ferretdb.New(&ferretdb.Config{
		Listener:  ferretdb.ListenerConfig{TCP: listen},
		Logger:    logger,
		Handler:   "sqlite",
		SQLiteURL: "file:" + abs + "/",
	})
	if err != nil {
		return err
	}
	uri := f.MongoDBURI()

	dl, err := net.Listen("tcp", debugAddr)
	if err != nil {
		return fmt.Errorf("debug listener: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/livez", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
	})
	mux.HandleFunc("/debug/readyz", func(w http.ResponseWriter, r *http.Request) {
		if err := ping(r.Context(), uri); err != nil {
			logger.Warn("readyz probe failed", "err", err)
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(dl); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("debug server failed", "err", err)
		}
	}()
	defer srv.Close()

	logger.Info("ferretdb listening", "uri", uri, "debug", "http://"+dl.Addr().String()+"/debug/readyz", "data", abs)
	return f.Run(ctx)
}

// ping runs the MongoDB ping command against uri.
func ping(ctx context.Context, uri string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c, err := mongo.Connect(ctx, options.Client().ApplyURI(uri).SetServerSelectionTimeout(3*time.Second))
	if err != nil {
		return err
	}
	defer c.Disconnect(context.Background())
	return c.Ping(ctx, nil)
}
