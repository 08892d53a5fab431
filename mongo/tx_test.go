package mongo

import (
	"context"
	"errors"
	"testing"
	"time"

	gomongo "go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/fila-go/fila/backend"
)

func txMsg(id string) []backend.Message {
	return []backend.Message{{ID: id, Kind: "tx", Body: []byte{}, EnqueuedAt: time.Now()}}
}

// TestEnqueueTxForms: EnqueueTx takes the *mongo.Session or the context of
// Session.WithTransaction's callback, commits and rolls back with the
// caller's transaction, and refuses other values. Without transactions it
// returns ErrUnsupported.
func TestEnqueueTxForms(t *testing.T) {
	t.Parallel()
	s := mongoServer(t)
	drv := openDriver(t, s, map[string]string{"fila_database": testDatabase(t, s)})
	q := uniqueQueue("tx")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := drv.EnqueueTx(ctx, "not a session", q, txMsg("x")); !errors.Is(err, backend.ErrInvalid) {
		t.Errorf("EnqueueTx(string): want ErrInvalid, got %v", err)
	}
	// The application's own client, not the driver's.
	sess, err := s.client.StartSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.EndSession(ctx)
	if !s.caps.Transactions {
		_, err := drv.EnqueueTx(ctx, sess, q, txMsg("x"))
		if !errors.Is(err, backend.ErrUnsupported) {
			t.Errorf("EnqueueTx without server transactions: want ErrUnsupported, got %v", err)
		}
		return
	}
	if _, err := drv.EnqueueTx(ctx, sess, q, txMsg("x")); !errors.Is(err, backend.ErrInvalid) {
		t.Errorf("EnqueueTx with a session without a transaction: want ErrInvalid, got %v", err)
	}
	errRollback := errors.New("roll back")
	for _, commit := range []bool{false, true} {
		_, err := sess.WithTransaction(ctx, func(sctx context.Context) (any, error) {
			if _, err := drv.EnqueueTx(sctx, sctx, q, txMsg("ctx-"+map[bool]string{true: "c", false: "r"}[commit])); err != nil {
				return nil, err
			}
			if _, err := drv.EnqueueTx(sctx, gomongo.SessionFromContext(sctx), q, txMsg("sess-"+map[bool]string{true: "c", false: "r"}[commit])); err != nil {
				return nil, err
			}
			if !commit {
				return nil, errRollback
			}
			return nil, nil
		})
		if commit && err != nil || !commit && !errors.Is(err, errRollback) {
			t.Fatalf("WithTransaction(commit %v): %v", commit, err)
		}
	}
	st, err := drv.QueueStats(ctx, q)
	if err != nil || st.Ready != 2 {
		t.Errorf("after one committed and one rolled-back transaction: stats %+v, %v; want 2 ready", st, err)
	}
}

// TestDeadWithoutTransactions runs the ordered dead-letter path (write the
// letter, then delete the message, both fenced) on any server.
func TestDeadWithoutTransactions(t *testing.T) {
	t.Parallel()
	s := mongoServer(t)
	drv := openDriver(t, s, map[string]string{"fila_database": testDatabase(t, s)})
	q := uniqueQueue("dead")
	enqueueOne(t, drv, q, backend.Message{Kind: "poison"})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ds, err := drv.Receive(ctx, q, backend.ReceiveParams{Max: 1, Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	ref := backend.Ref{Queue: q, ID: ds[0].ID, Receipt: ds[0].Receipt}
	stale := ref
	stale.Receipt = "stale"
	if err := drv.deadOrdered(ctx, stale, "no", 1); !errors.Is(err, backend.ErrLeaseLost) {
		t.Errorf("dead with a stale receipt: want ErrLeaseLost, got %v", err)
	}
	if err := drv.deadOrdered(ctx, ref, "bad input", 1); err != nil {
		t.Fatalf("dead: %v", err)
	}
	if err := drv.deadOrdered(ctx, ref, "again", 1); !errors.Is(err, backend.ErrLeaseLost) {
		t.Errorf("second dead: want ErrLeaseLost, got %v", err)
	}
	st, err := drv.QueueStats(ctx, q)
	if err != nil || st.Dead != 1 || st.Ready+st.Leased+st.Delayed != 0 {
		t.Errorf("stats %+v, %v; want one dead letter and nothing pending", st, err)
	}
}

// TestAckManyReportsEachRef: one Ack call with a current ref and a stale
// one (the message was taken over) acks the first and reports
// ErrLeaseLost for the second, leaving the new holder's lease alone.
func TestAckManyReportsEachRef(t *testing.T) {
	t.Parallel()
	s := mongoServer(t)
	drv := openDriver(t, s, map[string]string{"fila_database": testDatabase(t, s)})
	q := uniqueQueue("ack")
	enqueueOne(t, drv, q, backend.Message{})
	enqueueOne(t, drv, q, backend.Message{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ds, err := drv.Receive(ctx, q, backend.ReceiveParams{Max: 2, Lease: time.Minute})
	if err != nil || len(ds) != 2 {
		t.Fatalf("Receive = %d, %v", len(ds), err)
	}
	// Take the second message over: its first receipt goes stale.
	if err := drv.Retry(ctx, backend.Ref{Queue: q, ID: ds[1].ID, Receipt: ds[1].Receipt}, 0, ""); err != nil {
		t.Fatal(err)
	}
	again, err := drv.Receive(ctx, q, backend.ReceiveParams{Max: 1, Lease: time.Minute})
	if err != nil || len(again) != 1 || again[0].ID != ds[1].ID {
		t.Fatalf("Receive again = %+v, %v", again, err)
	}
	errs, err := drv.Ack(ctx, []backend.Ref{
		{Queue: q, ID: ds[0].ID, Receipt: ds[0].Receipt},
		{Queue: q, ID: ds[1].ID, Receipt: ds[1].Receipt},
	})
	if err != nil || errs[0] != nil || !errors.Is(errs[1], backend.ErrLeaseLost) {
		t.Fatalf("Ack = %v, %v; want [nil ErrLeaseLost]", errs, err)
	}
	errs, err = drv.Ack(ctx, []backend.Ref{{Queue: q, ID: again[0].ID, Receipt: again[0].Receipt}})
	if err != nil || errs[0] != nil {
		t.Errorf("new holder's Ack = %v, %v", errs, err)
	}
}
