package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/worker"
)

// TestQueueWorkers: fila queue workers lists a running worker from its
// presence record (table and JSON), and nothing once it stopped; RabbitMQ,
// which cannot list the records, exits 4.
func TestQueueWorkers(t *testing.T) {
	forEachBroker(t, func(t *testing.T, url string, b broker) {
		q := unique("workers")
		c := client(t, url)
		if b.name == "rabbitmq" {
			fails(t, 4, "does not support listing marks", "", "--url", url, "queue", "workers", q)
			return
		}
		w, err := worker.New(c, worker.Config{
			Queues:   map[string]worker.QueueConfig{q: {Concurrency: 4}},
			Presence: time.Minute,
			Periodic: []worker.Periodic{{Name: "sweep", Queue: q, Every: time.Hour, Message: fila.Message{Kind: "sweep.run"}}},
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- w.Run(ctx) }()
		stopped := false
		stop := func() {
			if stopped {
				return
			}
			stopped = true
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run: %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("Run did not return within 30s")
			}
		}
		t.Cleanup(stop)
		deadline := time.Now().Add(20 * time.Second)
		for {
			ps, err := worker.PresenceList(context.Background(), c, q)
			if err != nil {
				t.Fatal(err)
			}
			ss, err := worker.ScheduleList(context.Background(), c, q)
			if err != nil {
				t.Fatal(err)
			}
			if len(ps) == 1 && len(ss) == 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no presence record within 20s: %+v", ps)
			}
			time.Sleep(10 * time.Millisecond)
		}
		host, _ := os.Hostname()
		out := ok(t, "", "--url", url, "queue", "workers", q)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 5 || !strings.HasPrefix(lines[0], "ID") || !strings.Contains(lines[0], "CONCURRENCY") ||
			lines[2] != "" || !strings.HasPrefix(lines[3], "SCHEDULE") {
			t.Fatalf("fila queue workers printed %q; want a header and one row, a blank line, a header and one schedule", out)
		}
		if f := strings.Fields(lines[4]); len(f) < 6 || f[0] != "sweep" || f[1] != "every" || f[2] != "1h0m0s" || f[3] != "sweep.run" || f[4] != "-" {
			t.Errorf("schedule row %q; want sweep, every 1h0m0s, sweep.run, no last tick", lines[4])
		}
		if f := strings.Fields(lines[1]); len(f) != 6 || f[1] != host || f[2] != fmt.Sprint(os.Getpid()) || f[3] != "4" || f[4] != "-" {
			t.Errorf("row %q; want host %s, pid %d, concurrency 4, no shared slots", lines[1], host, os.Getpid())
		}
		var doc struct {
			Schedules []struct {
				Name    string     `json:"name"`
				EveryMS int64      `json:"every_ms"`
				Last    *time.Time `json:"last"`
				Next    *time.Time `json:"next"`
			} `json:"schedules"`
			Queue   string `json:"queue"`
			Workers []struct {
				Host        string    `json:"host"`
				PID         int       `json:"pid"`
				Concurrency int       `json:"concurrency"`
				Started     time.Time `json:"started"`
			} `json:"workers"`
		}
		if err := json.Unmarshal([]byte(ok(t, "", "--url", url, "queue", "workers", q, "--json")), &doc); err != nil {
			t.Fatal(err)
		}
		if doc.Queue != q || len(doc.Workers) != 1 || doc.Workers[0].PID != os.Getpid() || doc.Workers[0].Concurrency != 4 ||
			time.Since(doc.Workers[0].Started) > time.Minute {
			t.Errorf("--json = %+v", doc)
		}
		if len(doc.Schedules) != 1 || doc.Schedules[0].Name != "sweep" || doc.Schedules[0].EveryMS != 3600000 ||
			doc.Schedules[0].Last != nil || doc.Schedules[0].Next == nil || doc.Schedules[0].Next.Minute() != 0 {
			t.Errorf("--json schedules = %+v", doc.Schedules)
		}
		stop()
		if out := ok(t, "", "--url", url, "queue", "workers", q); !strings.HasPrefix(out, "no worker is running") {
			t.Errorf("after the worker stopped: %q", out)
		}
		fails(t, 2, "invalid argument", "", "--url", url, "queue", "workers", "not a queue")
		fails(t, 2, "name one queue", "", "--url", url, "queue", "workers")
	})
}
