package mysql_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/backend"
)

// TestBadInput: what the portable layer cannot check reaches the driver
// and gets a typed error, changing nothing: receipts and ids it did not
// make, a cursor it did not return, a transaction value that is no
// *sql.Tx, ids that are no UUIDs.
func TestBadInput(t *testing.T) {
	db := testDB(t)
	d := openDriver(t, freshPrefix(t, db))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	queue := "bad-input"
	if _, err := d.Enqueue(ctx, queue, []backend.Message{{ID: uuidFor(1, queue), Kind: "k", Body: []byte("kept"), EnqueuedAt: time.Now()}}); err != nil {
		t.Fatal(err)
	}
	ds, err := d.Receive(ctx, queue, backend.ReceiveParams{Max: 1, Lease: time.Minute})
	if err != nil || len(ds) != 1 {
		t.Fatalf("receive: %v, %d", err, len(ds))
	}
	good := ds[0]
	for _, ref := range []backend.Ref{
		{Queue: queue, ID: good.ID, Receipt: "not-a-receipt"},
		{Queue: queue, ID: good.ID, Receipt: "00112233445566778899aabbccddeeff"},
		{Queue: queue, ID: "not-a-uuid", Receipt: good.Receipt},
		{Queue: queue, ID: "'; DROP TABLE x; --", Receipt: good.Receipt},
	} {
		errs, err := d.Ack(ctx, []backend.Ref{ref})
		if err != nil || len(errs) != 1 || !errors.Is(errs[0], fila.ErrLeaseLost) {
			t.Errorf("Ack(%+v) = %v, %v; want ErrLeaseLost", ref, errs, err)
		}
		errs, err = d.Ack(ctx, []backend.Ref{ref, ref})
		if err != nil || len(errs) != 2 || !errors.Is(errs[0], fila.ErrLeaseLost) || !errors.Is(errs[1], fila.ErrLeaseLost) {
			t.Errorf("Ack of two (%+v) = %v, %v; want ErrLeaseLost twice", ref, errs, err)
		}
		if err := d.Retry(ctx, ref, 0, "x"); !errors.Is(err, fila.ErrLeaseLost) {
			t.Errorf("Retry(%+v) = %v; want ErrLeaseLost", ref, err)
		}
		if err := d.Dead(ctx, ref, "x", 1); !errors.Is(err, fila.ErrLeaseLost) {
			t.Errorf("Dead(%+v) = %v; want ErrLeaseLost", ref, err)
		}
		if _, err := d.Extend(ctx, ref, time.Minute); !errors.Is(err, fila.ErrLeaseLost) {
			t.Errorf("Extend(%+v) = %v; want ErrLeaseLost", ref, err)
		}
	}
	if _, err := d.DeadList(ctx, queue, backend.DeadListParams{Limit: 10, Cursor: "bogus"}); !errors.Is(err, fila.ErrInvalid) {
		t.Errorf("DeadList with a bogus cursor: %v; want ErrInvalid", err)
	}
	if _, err := d.EnqueueTx(ctx, "not a tx", queue, []backend.Message{{ID: uuidFor(2, queue), Kind: "k", Body: []byte{}}}); !errors.Is(err, fila.ErrInvalid) {
		t.Errorf("EnqueueTx with a string: %v; want ErrInvalid", err)
	}
	if _, err := d.Enqueue(ctx, queue, []backend.Message{{ID: "not-a-uuid", Kind: "k", Body: []byte{}}}); !errors.Is(err, fila.ErrInvalid) {
		t.Errorf("Enqueue with a bad id: %v; want ErrInvalid", err)
	}
	if err := d.DeadImport(ctx, queue, []backend.DeadLetter{{Message: backend.Message{ID: "nope", Kind: "k"}}}); !errors.Is(err, fila.ErrInvalid) {
		t.Errorf("DeadImport with a bad id: %v; want ErrInvalid", err)
	}
	if n, err := d.DeadPurge(ctx, queue, backend.DeadFilter{IDs: []string{"nope"}}); err != nil || n != 0 {
		t.Errorf("DeadPurge of no UUID = %d, %v; want 0, nil", n, err)
	}
	// Nothing changed: the lease is still current and its message intact.
	errs, err := d.Ack(ctx, []backend.Ref{{Queue: queue, ID: good.ID, Receipt: good.Receipt}})
	if err != nil || errs[0] != nil {
		t.Fatalf("Ack of the good delivery after the bad calls: %v, %v", errs, err)
	}
	st, err := d.QueueStats(ctx, queue)
	if err != nil || st.Ready+st.Delayed+st.Leased+st.Dead != 0 {
		t.Errorf("stats after: %+v, %v; want an empty queue", st, err)
	}
}
