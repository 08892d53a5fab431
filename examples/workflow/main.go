// Command workflow shows Fila's workflows on a short story: resize 200
// photos into thumbnails, then build the album, which waits for all of
// them. One WorkflowStart stores the 201 steps; the thumbnails go to the
// queue at once, and the album step waits outside it until the ack of the
// last thumbnail releases it. Each thumbnail leaves a small result (its
// file name, Delivery.SetResult) that the album reads
// (Client.WorkflowResults); one worker runs both kinds. At the end
// WorkflowShow counts the steps by state. It runs on the in-memory broker
// by default; set FILA_URL to run the same code on a real broker:
//
//	go run ./examples/workflow
//	go run ./examples/workflow -v   # with the worker's logs on stderr
//	FILA_URL=postgres://postgres@127.0.0.1:5432/test?fila_migrate=true go run ./examples/workflow
//	FILA_URL=redis://127.0.0.1:6379/0 go run ./examples/workflow
//	FILA_URL=amqp://guest:guest@127.0.0.1:5672/ go run ./examples/workflow
//	FILA_URL=mongodb://127.0.0.1:27017/fila go run ./examples/workflow
//	FILA_URL='mysql://root@127.0.0.1:3306/test?fila_migrate=true' go run ./examples/workflow
//
// On a real broker the queue and the workflow id end with a random suffix
// (photos-<random>, album-<random>), so that runs side by side never
// share them; at the end the workflow's bookkeeping (WorkflowDelete) and
// the queue are deleted. On PostgreSQL, fila_migrate=true creates Fila's
// tables (schema "fila") if they are missing; they are left in place.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/fila-go/fila"
	_ "github.com/fila-go/fila/memory"
	_ "github.com/fila-go/fila/mongo"
	_ "github.com/fila-go/fila/mysql"
	_ "github.com/fila-go/fila/postgres"
	_ "github.com/fila-go/fila/rabbitmq"
	_ "github.com/fila-go/fila/redis"
	"github.com/fila-go/fila/worker"
)

// Thumbnail and Album are the steps' arguments: ids, not images.
type (
	Thumbnail struct {
		PhotoID int `json:"photo_id"`
	}
	Album struct {
		AlbumID int `json:"album_id"`
	}
)

// The kinds, declared once for the workflow and the worker.
var (
	ThumbnailJob = worker.Kind[Thumbnail]{Name: "photo.thumbnail"}
	AlbumJob     = worker.Kind[Album]{Name: "album.build"}
)

// photos is how many thumbnails the album waits for.
const photos = 200

func main() {
	verbose := flag.Bool("v", false, "log the worker's records (queue, kind, id, attempt) to stderr")
	flag.Parse()
	u := os.Getenv("FILA_URL")
	if u == "" {
		u = "mem://"
	}
	logs := io.Discard
	if *verbose {
		logs = os.Stderr
	}
	if err := run(u, os.Stdout, logs); err != nil {
		fmt.Fprintln(os.Stderr, "workflow example:", err)
		os.Exit(1)
	}
}

// run tells the story on the broker at rawURL, writing it to out and the
// client's and worker's logs to logs.
func run(rawURL string, out, logs io.Writer) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c, err := fila.Open(ctx, rawURL, fila.WithLogger(logger))
	if err != nil {
		return err
	}
	defer c.Close()

	queue, id := "photos", "album-2026"
	if u, err := url.Parse(rawURL); err == nil && u.Scheme != "mem" {
		sfx := suffix()
		queue, id = queue+"-"+sfx, "album-"+sfx
	}
	fmt.Fprintf(out, "broker %s\n", fila.Redact(rawURL))
	// The queue and the workflow's bookkeeping go at the end, whatever
	// happened.
	defer func() {
		dctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := c.WorkflowDelete(dctx, id); err != nil {
			fmt.Fprintf(out, "deleting workflow %s: %v\n", id, err)
		}
		if err := c.QueueDelete(dctx, queue, fila.QueueDeleteParams{Force: true}); err != nil {
			fmt.Fprintf(out, "deleting queue %s: %v\n", queue, err)
		}
	}()

	// The workflow: 200 thumbnails, then the album, After all of them.
	steps := make([]fila.WorkflowStep, 0, photos+1)
	var names []string
	for p := 1; p <= photos; p++ {
		m, err := ThumbnailJob.Message(Thumbnail{PhotoID: p})
		if err != nil {
			return err
		}
		name := fmt.Sprintf("thumb-%03d", p)
		steps = append(steps, fila.WorkflowStep{Name: name, Queue: queue, Message: m})
		names = append(names, name)
	}
	m, err := AlbumJob.Message(Album{AlbumID: 2026})
	if err != nil {
		return err
	}
	steps = append(steps, fila.WorkflowStep{Name: "album", Queue: queue, Message: m, After: names})
	if _, err := c.WorkflowStart(ctx, fila.WorkflowParams{ID: id, Steps: steps}); err != nil {
		return err
	}
	fmt.Fprintf(out, "workflow %s: %d thumbnails, then the album\n", id, photos)

	// One worker runs both kinds; it stops once the album is built.
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var (
		mu      sync.Mutex
		summary []string
		failed  []string
	)
	w, err := worker.New(c, worker.Config{
		Queues:  map[string]worker.QueueConfig{queue: {Concurrency: 8}},
		Backoff: worker.ConstantBackoff(100 * time.Millisecond),
		Logger:  logger,
		OnJobEnd: func(ev worker.JobEvent) {
			mu.Lock()
			defer mu.Unlock()
			switch {
			case ev.Outcome == worker.OutcomeDead:
				failed = append(failed, fmt.Sprintf("%s %s: %s", ev.Kind, ev.ID, ev.Reason))
				stop()
			case ev.Kind == AlbumJob.Name && ev.Outcome == worker.OutcomeAck:
				stop()
			}
		},
	})
	if err != nil {
		return err
	}
	worker.Handle(w, ThumbnailJob, func(ctx context.Context, args Thumbnail, d *fila.Delivery) error {
		// Resizing would go here; the thumbnail's name is the result the
		// album reads.
		return d.SetResult(fmt.Appendf(nil, "thumb-%03d.jpg", args.PhotoID))
	})
	worker.Handle(w, AlbumJob, func(ctx context.Context, args Album, d *fila.Delivery) error {
		results, err := c.WorkflowResults(ctx, d)
		if err != nil {
			return err
		}
		files := make([]string, 0, len(results))
		for _, r := range results {
			files = append(files, string(r))
		}
		slices.Sort(files)
		line := fmt.Sprintf("album %d: %d thumbnails", args.AlbumID, len(files))
		if len(files) > 0 {
			line += fmt.Sprintf(", %s to %s", files[0], files[len(files)-1])
		}
		mu.Lock()
		summary = append(summary, line)
		mu.Unlock()
		return nil
	})
	if err := w.Run(runCtx); err != nil {
		return err
	}
	if len(failed) > 0 {
		return fmt.Errorf("steps were dead-lettered: %v", failed)
	}
	if ctx.Err() != nil {
		return errors.New("the workflow did not finish within two minutes")
	}
	for _, line := range summary {
		fmt.Fprintln(out, line)
	}

	st, err := c.WorkflowShow(ctx, id)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "steps: %d done, %d pending, %d ready, %d running, %d dead; done: %v\n",
		st.Count(fila.StepDone), st.Count(fila.StepPending), st.Count(fila.StepReady),
		st.Count(fila.StepRunning), st.Count(fila.StepDead), st.Done())
	return nil
}

func suffix() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
