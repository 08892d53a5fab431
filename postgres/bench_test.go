package postgres_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/postgres"
)

// The benchmarks compare the driver, through the portable fila.Client, with
// the same work done by raw pgx on the same table in the same run:
//
//	go test -run '^$' -bench . -benchtime 2s ./postgres/
//
// Each reports msgs/s; the ratio driver/raw is the figure that matters.

type benchEnv struct {
	pool   *pgxpool.Pool
	schema string
	client *fila.Client
}

func newBenchEnv(b *testing.B) *benchEnv {
	pool := testPool(b)
	schema := migratedSchema(b, pool)
	drv := newDriver(b, pool, postgres.Options{Schema: schema})
	return &benchEnv{pool: pool, schema: schema, client: newClient(b, drv)}
}

func uuidString() string {
	var u [16]byte
	_, _ = rand.Read(u[:])
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:])
}

// rawCopy stores n messages in queue with pgx CopyFrom (the raw baseline
// for batched inserts, also used to fill queues for the claim benchmarks).
func (e *benchEnv) rawCopy(b *testing.B, queue string, n int, body []byte) {
	now := time.Now()
	rows := make([][]any, n)
	for i := range rows {
		rows[i] = []any{uuidString(), queue, "bench", body, now, now}
	}
	_, err := e.pool.CopyFrom(context.Background(), pgx.Identifier{e.schema, "messages"},
		[]string{"id", "queue", "kind", "body", "enqueued_at", "visible_at"}, pgx.CopyFromRows(rows))
	if err != nil {
		b.Fatal(err)
	}
}

// paired runs the raw baseline and the driver alternately, b.N times each
// (swapping which goes first), so drift in the machine's load (fsync-bound
// commits are noisy) hits both alike. It reports both rates and their ratio.
func paired(b *testing.B, msgsPerOp int, raw, driver func()) {
	var tRaw, tDrv time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%2 == 0 {
			t0 := time.Now()
			raw()
			t1 := time.Now()
			driver()
			tRaw, tDrv = tRaw+t1.Sub(t0), tDrv+time.Since(t1)
		} else {
			t0 := time.Now()
			driver()
			t1 := time.Now()
			raw()
			tDrv, tRaw = tDrv+t1.Sub(t0), tRaw+time.Since(t1)
		}
	}
	b.StopTimer()
	rawRate := float64(b.N*msgsPerOp) / tRaw.Seconds()
	drvRate := float64(b.N*msgsPerOp) / tDrv.Seconds()
	b.ReportMetric(rawRate, "raw_msgs/s")
	b.ReportMetric(drvRate, "fila_msgs/s")
	b.ReportMetric(drvRate/rawRate, "fila/raw")
}

var benchBody = []byte(`{"order_id":123456,"action":"send-confirmation"}`)

func BenchmarkEnqueueBatch(b *testing.B) {
	e := newBenchEnv(b)
	for _, size := range []int{100, 1000} {
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) {
			qRaw, qDrv := "bench-copy-"+randHex(4), "bench-enq-"+randHex(4)
			msgs := make([]fila.Message, size)
			for i := range msgs {
				msgs[i] = fila.Message{Kind: "bench", Body: benchBody}
			}
			ctx := context.Background()
			paired(b, size, func() { e.rawCopy(b, qRaw, size, benchBody) }, func() {
				if _, err := e.client.EnqueueBatch(ctx, qDrv, msgs); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}

// rawClaimSQL is a minimal SKIP LOCKED claim, the raw baseline: of level 0
// only (the raw rows' level), one range of messages_claim.
func rawClaimSQL(schema string) string {
	return `UPDATE ` + schema + `.messages m SET attempts = m.attempts + 1, lease_token = gen_random_uuid(),
	visible_at = now() + interval '30 seconds'
FROM (SELECT id FROM ` + schema + `.messages WHERE queue = $1 AND priority = 0 AND visible_at <= now()
	ORDER BY visible_at, id LIMIT $2 FOR UPDATE SKIP LOCKED) c
WHERE m.id = c.id RETURNING m.id, m.body, m.lease_token`
}

// BenchmarkReceiveAck100 claims 100 messages and acks them (raw: the claim
// statement and a DELETE by ids; fila: Receive(Max 100) and AckBatch).
func BenchmarkReceiveAck100(b *testing.B) {
	e := newBenchEnv(b)
	const size = 100
	qRaw, qDrv := "bench-rawclaim-"+randHex(4), "bench-claim-"+randHex(4)
	e.rawCopy(b, qRaw, b.N*size, benchBody)
	e.rawCopy(b, qDrv, b.N*size, benchBody)
	claim, ack := rawClaimSQL(e.schema), `DELETE FROM `+e.schema+`.messages WHERE id = ANY($1)`
	ctx := context.Background()
	paired(b, size, func() {
		rows, err := e.pool.Query(ctx, claim, qRaw, size)
		if err != nil {
			b.Fatal(err)
		}
		ids := make([]string, 0, size)
		for rows.Next() {
			var id, tok string
			var body []byte
			if err := rows.Scan(&id, &body, &tok); err != nil {
				b.Fatal(err)
			}
			ids = append(ids, id)
		}
		if err := rows.Err(); err != nil || len(ids) != size {
			b.Fatalf("claimed %d: %v", len(ids), err)
		}
		if _, err := e.pool.Exec(ctx, ack, ids); err != nil {
			b.Fatal(err)
		}
	}, func() {
		ds, err := e.client.Receive(ctx, qDrv, fila.ReceiveParams{Max: size, Lease: 30 * time.Second})
		if err != nil || len(ds) != size {
			b.Fatalf("received %d: %v", len(ds), err)
		}
		if err := e.client.AckBatch(ctx, ds); err != nil {
			b.Fatal(err)
		}
	})
}

// BenchmarkEnqueueOne stores one message per call (raw: one INSERT; fila:
// Enqueue, whose INSERT is pipelined with pg_notify).
func BenchmarkEnqueueOne(b *testing.B) {
	e := newBenchEnv(b)
	qRaw, qDrv := "bench-rawins-"+randHex(4), "bench-ins-"+randHex(4)
	sql := `INSERT INTO ` + e.schema + `.messages (id, queue, kind, body, enqueued_at, visible_at) VALUES ($1, $2, 'bench', $3, now(), now())`
	ctx := context.Background()
	paired(b, 1, func() {
		if _, err := e.pool.Exec(ctx, sql, uuidString(), qRaw, benchBody); err != nil {
			b.Fatal(err)
		}
	}, func() {
		if _, err := e.client.Enqueue(ctx, qDrv, fila.Message{Kind: "bench", Body: benchBody}); err != nil {
			b.Fatal(err)
		}
	})
}

// BenchmarkReceiveOne claims one message per call, without acking.
func BenchmarkReceiveOne(b *testing.B) {
	e := newBenchEnv(b)
	qRaw, qDrv := "bench-rawone-"+randHex(4), "bench-one-"+randHex(4)
	e.rawCopy(b, qRaw, b.N, benchBody)
	e.rawCopy(b, qDrv, b.N, benchBody)
	claim := rawClaimSQL(e.schema)
	ctx := context.Background()
	paired(b, 1, func() {
		var id, tok string
		var body []byte
		if err := e.pool.QueryRow(ctx, claim, qRaw, 1).Scan(&id, &body, &tok); err != nil {
			b.Fatal(err)
		}
	}, func() {
		ds, err := e.client.Receive(ctx, qDrv, fila.ReceiveParams{Max: 1, Lease: 30 * time.Second})
		if err != nil || len(ds) != 1 {
			b.Fatalf("received %d: %v", len(ds), err)
		}
	})
}

// BenchmarkWakeUp measures the time from the start of an Enqueue to the
// return of a Receive that was blocked on the empty queue in another driver
// instance (LISTEN/NOTIFY), reported as wake_ms.
func BenchmarkWakeUp(b *testing.B) {
	e := newBenchEnv(b)
	consumer := newDriver(b, e.pool, postgres.Options{Schema: e.schema})
	c := newClient(b, consumer)
	q := "bench-wake-" + randHex(4)
	ctx := context.Background()
	var total time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		got := make(chan time.Time, 1)
		go func() {
			ds, err := c.Receive(ctx, q, fila.ReceiveParams{})
			at := time.Now()
			if err != nil {
				b.Error(err)
			} else if err := c.AckBatch(ctx, ds); err != nil {
				b.Error(err)
			}
			got <- at
		}()
		for postgres.Sleeping(consumer) != 1 || !postgres.ListenerUp(consumer) {
			time.Sleep(time.Millisecond)
		}
		start := time.Now()
		if _, err := e.client.Enqueue(ctx, q, fila.Message{Kind: "wake"}); err != nil {
			b.Fatal(err)
		}
		total += (<-got).Sub(start)
	}
	b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "wake_ms")
}
