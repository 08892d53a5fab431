package redis

import (
	"context"
	"fmt"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/fila-go/fila/backend"
)

// Capabilities for moving queues between brokers.
var (
	_ backend.DelayedReceiver = (*Driver)(nil)
	_ backend.DeadImporter    = (*Driver)(nil)
)

// earlyScan bounds how many expired leases ReceiveDelayed looks through for
// expired early leases to put back before it takes delayed messages.
const earlyScan = 1000

// maxImportScript is the most dead letters one import script call stores.
const maxImportScript = 500

var (
	// scriptReceiveDelayed leases delayed messages before their run-at:
	// lua/receive_delayed.lua.
	scriptReceiveDelayed = script("receive_delayed.lua")
	// scriptDeadImport stores imported dead letters: lua/dead_import.lua.
	scriptDeadImport = script("dead_import.lua")
)

// ReceiveDelayed claims, without blocking, up to p.Max delayed messages whose
// run-at has not come (earliest first), leasing them like Receive. Such a
// message gets no stream entry while it is taken: its fields stay with the
// delayed payloads and its lease is recorded under a pseudo stream id that
// carries the run-at. Ack, Dead and Extend work on it as on any delivery.
// It never becomes ready before its run-at: Retry (or Release) makes it ready
// at the later of its run-at and now + delay, and if its lease expires
// unsettled it waits for its run-at again (or becomes ready if the run-at has
// passed meanwhile), keeping the attempt.
func (d *Driver) ReceiveDelayed(ctx context.Context, queue string, p backend.ReceiveParams) ([]backend.Delivery, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	k := d.keys(queue)
	tok := d.token()
	v, err := runOnce(ctx, d.c, scriptReceiveDelayed, k.list(), group, p.Max, ceilMS(p.Lease), tok, earlyScan).Slice()
	if err != nil {
		return nil, d.fail(ctx, err)
	}
	if len(v) < 2 || (len(v)-2)%4 != 0 {
		return nil, fmt.Errorf("fila/redis: receive-delayed script returned %d values", len(v))
	}
	out, err := d.deliveries(ctx, queue, tok, v[2:], msTime(toInt(v[1])), 4)
	if out == nil && err == nil {
		out = []backend.Delivery{}
	}
	return out, err
}

// DeadImport appends dead letters taken from another broker to the queue's
// dead-letter stream, with their reasons, attempts and times (a letter
// without a dead-at gets the current time). A letter whose message id the
// dead-letter stream holds already is skipped, so an import can be repeated.
// Each script call stores up to 500 letters atomically. Imported letters are
// listed after the queue's own, in import order, and count in DeadByKind.
func (d *Driver) DeadImport(ctx context.Context, queue string, letters []backend.DeadLetter) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	k := d.keys(queue)
	now := time.Now()
	for start := 0; start < len(letters); start += maxImportScript {
		chunk := letters[start:min(start+maxImportScript, len(letters))]
		args := make([]any, 0, 1+len(chunk)*13)
		args = append(args, d.o.DeadCap)
		for i := range chunk {
			l := &chunk[i]
			m := l.Message
			if m.EnqueuedAt.IsZero() {
				m.EnqueuedAt = now
			}
			deadAt := l.DeadAt
			if deadAt.IsZero() {
				deadAt = now
			}
			args = append(args, 0)
			at := len(args) - 1
			var n int
			var err error
			m.Attempts = 0
			if args, n, err = appendFields(args, &m); err != nil {
				return err
			}
			args = append(args, fDeadAtt, max(l.Attempts, 0), fDeadReason, l.Reason, fDeadAt, strconv.FormatInt(deadAt.UnixMilli(), 10))
			args[at] = n + 6
		}
		if err := d.runDurable(ctx, scriptDeadImport, k.list(), args...).Err(); err != nil && err != goredis.Nil {
			return d.fail(ctx, err)
		}
	}
	return nil
}
