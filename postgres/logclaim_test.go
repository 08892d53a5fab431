package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/postgres"
)

// logRows counts a queue's rows of one log table, copies included.
func logRows(t *testing.T, pool *pgxpool.Pool, schema, table, queue string) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), fmt.Sprintf(`SELECT count(*) FROM %s.%s WHERE queue = $1`, schema, table), queue).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// enqueueN enqueues n messages to q in one batch.
func enqueueN(t *testing.T, c *fila.Client, q string, n int) {
	t.Helper()
	msgs := make([]fila.Message, n)
	for i := range msgs {
		msgs[i] = fila.Message{Kind: "k", Body: []byte(fmt.Sprintf("m%d", i))}
	}
	if _, err := c.EnqueueBatch(context.Background(), q, msgs); err != nil {
		t.Fatal(err)
	}
}

// TestLogClaimWholeBatch: a receive of a batch writes one claim row and no
// lease rows, and an ack of the whole batch one settlement row; a second ack
// of the same receipts settles nothing.
func TestLogClaimWholeBatch(t *testing.T) {
	pool := testPool(t)
	schema := migratedSchema(t, pool)
	c := openLog(t, schema, time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	enqueueN(t, c, "whole", 50)
	ds := receiveAll(t, c, "whole", 50, 10*time.Second)
	claims, leases := logRows(t, pool, schema, "log_claims", "whole"), logRows(t, pool, schema, "log_leases", "whole")
	if claims < 1 || claims > 2 || leases != 0 {
		t.Errorf("receiving 50 wrote %d claim rows and %d lease rows; want one claim (two at most: the batch may be split by a tick) and no lease", claims, leases)
	}
	var batch []*fila.Delivery
	for _, d := range ds {
		batch = append(batch, d)
	}
	if err := c.AckBatch(ctx, batch); err != nil {
		t.Fatalf("AckBatch: %v", err)
	}
	if n := logRows(t, pool, schema, "log_settles", "whole"); n != claims {
		t.Errorf("acking the whole batch wrote %d settlement rows, want one per claim (%d)", n, claims)
	}
	if st, err := c.QueueStats(ctx, "whole"); err != nil || st.Ready+st.Leased+st.Delayed != 0 {
		t.Errorf("QueueStats after the ack: %+v, %v; want empty", st, err)
	}
	if err := batch[0].Ack(ctx); !errors.Is(err, fila.ErrLeaseLost) {
		t.Errorf("second ack of a member: %v, want ErrLeaseLost", err)
	}
}

// TestLogClaimPartial: members acked alone are settled alone, and when the
// claim's deadline passes only the others are delivered again.
func TestLogClaimPartial(t *testing.T) {
	pool := testPool(t)
	schema := migratedSchema(t, pool)
	c := openLog(t, schema, time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	enqueueN(t, c, "partial", 10)
	rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
	ds, err := c.Receive(rctx, "partial", fila.ReceiveParams{Max: 10, Lease: time.Second})
	rcancel()
	if err != nil {
		t.Fatal(err)
	}
	acked := map[string]bool{}
	for _, d := range ds[:len(ds)/2] {
		if err := d.Ack(ctx); err != nil {
			t.Fatal(err)
		}
		acked[d.ID] = true
	}
	again := map[string]bool{}
	for len(again) < len(ds)-len(acked) {
		d := receiveOneLog(t, c, "partial", 10*time.Second)
		if acked[d.ID] {
			t.Fatalf("acked member %s delivered again", d.ID)
		}
		if d.Attempt != 2 {
			t.Errorf("member %s redelivered at attempt %d, want 2", d.ID, d.Attempt)
		}
		again[d.ID] = true
		if err := d.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range ds {
		if !acked[d.ID] {
			if err := d.Ack(ctx); !errors.Is(err, fila.ErrLeaseLost) {
				t.Errorf("ack with the expired claim's receipt: %v, want ErrLeaseLost", err)
			}
		}
	}
}

// TestLogClaimExtendedMember: a member extended alone follows its own
// deadline, and once it expired and was delivered again an ack of the whole
// claim with the old receipts settles the others, not it.
func TestLogClaimExtendedMember(t *testing.T) {
	pool := testPool(t)
	schema := migratedSchema(t, pool)
	c := openLog(t, schema, time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	enqueueN(t, c, "extended", 3)
	ds := receiveAll(t, c, "extended", 3, 10*time.Second)
	var batch []*fila.Delivery
	for _, d := range ds {
		batch = append(batch, d)
	}
	short := batch[0]
	if err := short.Extend(ctx, 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	d := receiveOneLog(t, c, "extended", 10*time.Second) // after the 300 ms
	if d.ID != short.ID || d.Attempt != 2 {
		t.Fatalf("got %s attempt %d, want the shortened member %s at attempt 2", d.ID, d.Attempt, short.ID)
	}
	if err := c.AckBatch(ctx, batch); !errors.Is(err, fila.ErrLeaseLost) {
		t.Fatalf("AckBatch with one lost member: %v, want ErrLeaseLost for it", err)
	}
	// All the members the receive returned, but one has a lease of its
	// own: not settled as a whole.
	if n := postgres.WholeAcks(c.Driver().(*postgres.Driver)); n != 0 {
		t.Errorf("%d claims settled whole; want none (a member was extended alone)", n)
	}
	// The two others are settled; the redelivery alone is leased.
	if st, err := c.QueueStats(ctx, "extended"); err != nil || st.Leased != 1 || st.Ready != 0 {
		t.Errorf("QueueStats after the batch ack: %+v, %v; want only the redelivery leased", st, err)
	}
	if err := d.Ack(ctx); err != nil {
		t.Errorf("ack of the redelivery: %v", err)
	}
	if st, err := c.QueueStats(ctx, "extended"); err != nil || st.Leased+st.Ready != 0 {
		t.Errorf("QueueStats at the end: %+v, %v; want empty", st, err)
	}
}

// TestLogClaimRotation: a claim with an unsettled member survives
// rotations, its member can be acked after them, and then rotation drops
// the claim and its message rows.
func TestLogClaimRotation(t *testing.T) {
	pool := testPool(t)
	schema := migratedSchema(t, pool)
	c := openLog(t, schema, 100*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	enqueueN(t, c, "kept", 5)
	ds := receiveAll(t, c, "kept", 5, 10*time.Second)
	var kept *fila.Delivery
	for _, d := range ds {
		if kept == nil {
			kept = d
			continue
		}
		if err := d.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// expiring: the same, with a lease that ends after the rotations.
	enqueueN(t, c, "expiring", 5)
	rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
	eds, err := c.Receive(rctx, "expiring", fila.ReceiveParams{Max: 5, Lease: 3 * time.Second})
	rcancel()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range eds[1:] {
		if err := d.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
	waitRotations(t, pool, schema, 4)
	// The acked members' settlements are gone with their generation: the
	// claim's copy must not hold them, or they come back at its deadline.
	// One receive takes every expired member at once.
	rctx, rcancel = context.WithTimeout(ctx, 10*time.Second)
	again, err := c.Receive(rctx, "expiring", fila.ReceiveParams{Max: 10})
	rcancel()
	if err != nil {
		t.Fatal(err)
	}
	if len(again) != 1 {
		t.Fatalf("after the claim's deadline %d members came back, want 1 (the four others were acked)", len(again))
	}
	d := again[0]
	if d.ID != eds[0].ID || d.Attempt != 2 {
		t.Errorf("after the claim's deadline got %s attempt %d, want the unsettled member %s at attempt 2", d.ID, d.Attempt, eds[0].ID)
	}
	if err := d.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	if n := queueRows(t, pool, schema, "kept"); n != 1 {
		t.Errorf("after rotations the queue holds %d message rows, want 1 (the unsettled member's)", n)
	}
	if err := kept.Ack(ctx); err != nil {
		t.Fatalf("ack of the member held across rotations: %v", err)
	}
	waitRotations(t, pool, schema, 4)
	if n := queueRows(t, pool, schema, "kept"); n != 0 {
		t.Errorf("after everything was settled the queue holds %d message rows", n)
	}
	if n := logRows(t, pool, schema, "log_claims", "kept"); n != 0 {
		t.Errorf("after everything was settled %d claim rows remain", n)
	}
}

// TestLogClaimRuns: a claim stores its members' positions as runs, not a
// row's worth per member, and each member's receipt names its claim and its
// position: a receipt whose position is not a member's, or whose position
// is another member's, settles nothing.
func TestLogClaimRuns(t *testing.T) {
	pool := testPool(t)
	schema := migratedSchema(t, pool)
	c := openLog(t, schema, time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	enqueueN(t, c, "runs", 200)
	ds, err := c.Receive(ctx, "runs", fila.ReceiveParams{Max: 200, Lease: time.Minute})
	if err != nil || len(ds) != 200 {
		t.Fatalf("Receive: %d, %v; want 200", len(ds), err)
	}
	var runs, size int
	if err := pool.QueryRow(ctx, fmt.Sprintf(`SELECT cardinality(runs), pg_column_size(k.*) FROM %s.log_claims k WHERE queue = 'runs'`, schema)).Scan(&runs, &size); err != nil {
		t.Fatal(err)
	}
	// One enqueue's rows are consecutive positions: one run, unless a
	// concurrent statement of the test server took positions in between.
	if runs < 2 || runs > 8 || size > 200 {
		t.Errorf("a claim of 200 consecutive rows: %d run bounds, %d bytes; want a run or a few, under 200 bytes", runs, size)
	}
	receipts := make(map[string]bool, len(ds))
	for _, d := range ds {
		r := d.Receipt()
		if receipts[r] {
			t.Fatalf("receipt %s given to two members", r)
		}
		receipts[r] = true
		if r[14] != '0' || r[:19] != ds[0].Receipt()[:19] {
			t.Fatalf("member receipt %s: want version nibble 0 and the claim's prefix %s", r, ds[0].Receipt()[:19])
		}
	}
	drv := newDriver(t, pool, postgres.Options{Schema: schema, Mode: postgres.ModeLog})
	// Another member's position under this member's id; a position past
	// the claim's; a position with another claim's prefix.
	forged := []backend.Ref{
		{Queue: "runs", ID: ds[0].ID, Receipt: ds[1].Receipt()},
		{Queue: "runs", ID: ds[0].ID, Receipt: ds[0].Receipt()[:19] + "7fff-ffffffffffff"},
		{Queue: "runs", ID: ds[0].ID, Receipt: "00000000-0000-0000" + ds[0].Receipt()[18:]},
	}
	for _, ref := range forged {
		if errs, err := drv.Ack(ctx, []backend.Ref{ref}); err != nil || !errors.Is(errs[0], backend.ErrLeaseLost) {
			t.Errorf("Ack(%s with receipt %s) = %v, %v; want ErrLeaseLost", ref.ID, ref.Receipt, errs, err)
		}
		if _, err := drv.Extend(ctx, ref, time.Minute); !errors.Is(err, backend.ErrLeaseLost) {
			t.Errorf("Extend(%s with receipt %s) = %v; want ErrLeaseLost", ref.ID, ref.Receipt, err)
		}
	}
	// The real receipts still hold, and the whole claim is settled by one row.
	if err := c.AckBatch(ctx, ds); err != nil {
		t.Fatalf("AckBatch: %v", err)
	}
	if n := logRows(t, pool, schema, "log_settles", "runs"); n != 1 {
		t.Errorf("acking the whole claim wrote %d settlement rows, want 1", n)
	}
	// From its token and runs alone.
	if n := postgres.WholeAcks(c.Driver().(*postgres.Driver)); n != 1 {
		t.Errorf("%d claims settled by log_ack_whole; want 1", n)
	}
}

// TestClaimRuns: the runs the driver computes from receipts are the
// claim's, and receipts that are not all of one claim's members, each
// once, are left to log_ack.
func TestClaimRuns(t *testing.T) {
	rcpt := func(key string, pos uint64) string {
		return fmt.Sprintf("%s-%04x-%012x", key, pos>>48, pos&(1<<48-1))
	}
	const key = "0123abcd-ef01-0234"
	_, runs, ok := postgres.ClaimRuns([]string{rcpt(key, 7), rcpt(key, 5), rcpt(key, 6), rcpt(key, 9), rcpt(key, 1<<40)})
	if want := []int64{5, 7, 9, 9, 1 << 40, 1 << 40}; !ok || !slices.Equal(runs, want) {
		t.Errorf("ClaimRuns = %v, %v; want %v", runs, ok, want)
	}
	for _, rs := range [][]string{
		{rcpt(key, 1)}, // one lease: log_ack
		{rcpt(key, 1), rcpt(key, 1)},
		{rcpt(key, 1), rcpt("0123abcd-ef01-0235", 2)},
		{rcpt(key, 1), "0123abcd-ef01-4234-8000-000000000002"}, // a lease's own token
		{rcpt(key, 1), rcpt(key, 1<<62)},                       // not a position
	} {
		if _, _, ok := postgres.ClaimRuns(rs); ok {
			t.Errorf("ClaimRuns(%v) took them as one claim's members", rs)
		}
	}
}

// TestLogClaimMadeBeforeRuns: a claim made at schema version 10, whose
// members' receipts are its token, is converted by the migration, and
// those receipts still settle their members, alone and together; a member
// left unsettled is delivered again after the claim's deadline.
func TestLogClaimMadeBeforeRuns(t *testing.T) {
	pool := testPool(t)
	schema := freshSchema(t, pool)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := postgres.MigrateTo(ctx, pool, schema, 10); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, fmt.Sprintf(`INSERT INTO %[1]s.log_messages (gen, queue, id, kind, body, enqueued_at, run_at)
		SELECT (SELECT cur FROM %[1]s.log_state), 'old', gen_random_uuid(), 'k', 'b', now(), now() FROM generate_series(1, 6)`, schema)); err != nil {
		t.Fatal(err)
	}
	var refs []backend.Ref
	rows, err := pool.Query(ctx, fmt.Sprintf(`SELECT id, token FROM %s.log_receive('old', 6, 3000000)`, schema))
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var r backend.Ref
		if err := rows.Scan(&r.ID, &r.Receipt); err != nil {
			t.Fatal(err)
		}
		r.Queue = "old"
		refs = append(refs, r)
	}
	if rows.Err() != nil || len(refs) != 6 || refs[0].Receipt != refs[5].Receipt {
		t.Fatalf("version 10 receive: %d refs (%v); want 6 sharing the claim's token", len(refs), rows.Err())
	}
	if err := postgres.Migrate(ctx, pool, schema); err != nil {
		t.Fatal(err)
	}
	drv := newDriver(t, pool, postgres.Options{Schema: schema, Mode: postgres.ModeLog})
	if st, err := drv.QueueStats(ctx, "old"); err != nil || st.Leased != 6 {
		t.Errorf("QueueStats after the migration: %+v, %v; want 6 leased", st, err)
	}
	if errs, err := drv.Ack(ctx, refs[:1]); err != nil || errs[0] != nil {
		t.Fatalf("Ack of one member with its old receipt: %v, %v", errs, err)
	}
	if _, err := drv.Extend(ctx, refs[1], time.Minute); err != nil {
		t.Fatalf("Extend of a member with its old receipt: %v", err)
	}
	if errs, err := drv.Ack(ctx, refs[1:5]); err != nil || slices.ContainsFunc(errs, func(e error) bool { return e != nil }) {
		t.Fatalf("Ack of four members with their old receipts: %v, %v", errs, err)
	}
	if errs, err := drv.Ack(ctx, refs[:1]); err != nil || !errors.Is(errs[0], backend.ErrLeaseLost) {
		t.Errorf("second Ack of a member: %v, %v; want ErrLeaseLost", errs, err)
	}
	c := newClient(t, drv)
	d := receiveOneLog(t, c, "old", 15*time.Second)
	if d.ID != refs[5].ID || d.Attempt != 2 {
		t.Errorf("delivered again: %s at attempt %d; want the unsettled member %s at attempt 2", d.ID, d.Attempt, refs[5].ID)
	}
	if err := d.Ack(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestLogFunctionsNoJIT: every PL/pgSQL function of the log mode that runs
// queries turns JIT compilation off. With it on, a claim's members expanded
// from their runs (estimated at a million rows) compiled a plan at each
// call, 170 ms a claim, and a crashed worker's claims held up receives for
// seconds.
func TestLogFunctionsNoJIT(t *testing.T) {
	pool := testPool(t)
	schema := migratedSchema(t, pool)
	rows, err := pool.Query(context.Background(), `SELECT p.proname FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
		WHERE p.pronamespace = $1::regnamespace AND p.proname LIKE 'log\_%' AND l.lanname = 'plpgsql'
			AND p.proname <> 'log_copy_id' AND NOT ('jit=off' = ANY (COALESCE(p.proconfig, '{}')))
		ORDER BY 1`, schema)
	if err != nil {
		t.Fatal(err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if len(names) > 0 {
		t.Errorf("log mode functions that may JIT-compile their queries: %v", names)
	}
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_proc WHERE pronamespace = $1::regnamespace
		AND proname LIKE 'log\_%' AND 'jit=off' = ANY (proconfig)`, schema).Scan(&n); err != nil || n < 10 {
		t.Errorf("%d log mode functions turn JIT off (%v); want all of them, at least 10", n, err)
	}
}

// TestLogClaimExtendedMemberOutlivesClaim: a member extended alone keeps its
// lease after rotation has left its claim behind (the claim had no other
// live member): its receipt still extends and acks it. (Fencing looked for
// the claim first, and a worker's heartbeat lost the lease at the claim's
// deadline.)
func TestLogClaimExtendedMemberOutlivesClaim(t *testing.T) {
	pool := testPool(t)
	schema := migratedSchema(t, pool)
	c := openLog(t, schema, 300*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	enqueueN(t, c, "outlive", 1)
	d := receiveOneLog(t, c, "outlive", 10*time.Second)
	if err := d.Extend(ctx, 20*time.Second); err != nil {
		t.Fatalf("Extend: %v", err)
	}
	// Rotation runs only while something is written.
	for logRows(t, pool, schema, "log_claims", "outlive") > 0 {
		if _, err := c.Enqueue(ctx, "outlive-other", fila.Message{Kind: "k"}); err != nil {
			t.Fatal(err)
		}
		select {
		case <-ctx.Done():
			t.Fatal("rotation never dropped the claim of the extended member")
		case <-time.After(50 * time.Millisecond):
		}
	}
	if err := d.Extend(ctx, 20*time.Second); err != nil {
		t.Fatalf("Extend after the claim was rotated away: %v", err)
	}
	if err := d.Ack(ctx); err != nil {
		t.Fatalf("Ack after the claim was rotated away: %v", err)
	}
}

// TestLogReceiveForOlderDrivers: log_receive, which drivers before schema
// version 12 call, still returns member receipts as whole UUIDs (log_claim
// returns them short, for the driver to write out), and those receipts
// settle their members. An older driver running against the migrated
// schema during an upgrade would otherwise lose every ack.
func TestLogReceiveForOlderDrivers(t *testing.T) {
	pool := testPool(t)
	schema := migratedSchema(t, pool)
	c := openLog(t, schema, time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	enqueueN(t, c, "older", 3)
	rows, err := pool.Query(ctx, fmt.Sprintf(`SELECT id, token FROM %s.log_receive('older', 10, 60000000)`, schema))
	if err != nil {
		t.Fatal(err)
	}
	var refs []backend.Ref
	for rows.Next() {
		var ref backend.Ref
		if err := rows.Scan(&ref.ID, &ref.Receipt); err != nil {
			t.Fatal(err)
		}
		ref.Queue = "older"
		refs = append(refs, ref)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(refs) != 3 {
		t.Fatalf("log_receive returned %d rows, want 3", len(refs))
	}
	for _, ref := range refs {
		if len(ref.Receipt) != 36 || ref.Receipt[8] != '-' || ref.Receipt[23] != '-' || ref.Receipt[14] != '0' {
			t.Errorf("log_receive gave receipt %q; want a member's receipt written out as a UUID", ref.Receipt)
		}
	}
	errs, err := c.Driver().Ack(ctx, refs)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range errs {
		if e != nil {
			t.Errorf("ack of %s with receipt %s: %v", refs[i].ID, refs[i].Receipt, e)
		}
	}
	if st, err := c.QueueStats(ctx, "older"); err != nil || st.Ready+st.Leased+st.Delayed != 0 {
		t.Errorf("QueueStats after the acks: %+v, %v; want empty", st, err)
	}
}
