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

// ARGV: group, max, lease (ms), token, early scan limit. Returns {now,
// deadline, then per delivery: pseudo stream id, attempt, fields, run-at}.
// Expired early leases (found among the first ARGV[5] expired leases) go back
// to waiting first, so they can be taken again. The messages keep their
// fields in the payloads hash while taken; see scripts.go.
const luaReceiveDelayed = `
local g = ARGV[1]
local want, lease, tok, scan = tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4], tonumber(ARGV[5])
local now = now_ms()
local deadline = now + lease
unearly_expired(g, now, scan)
local out = {now, deadline}
local a = redis.call('ZRANGEBYSCORE', KD, '(' .. now, '(+inf', 'WITHSCORES', 'LIMIT', 0, want)
local dls = string.format('%d', deadline)
local hs, zs = {}, {}
for i = 1, #a, 2 do
  local mid, runat = a[i], string.format('%d', tonumber(a[i + 1]))
  redis.call('ZREM', KD, mid)
  local f = early_fields(mid)
  if f then
    local n, dedup = 0, ''
    for j = 1, #f, 2 do
      local k = f[j]
      if k == 'n' then n = tonumber(f[j + 1]) elseif k == 'u' then dedup = f[j + 1] end
    end
    local sid = 'd' .. runat .. '-' .. mid
    hs[#hs + 1] = sid; hs[#hs + 1] = rec_make(tok, n + 1, mid, dedup)
    zs[#zs + 1] = dls; zs[#zs + 1] = sid
    out[#out + 1] = sid; out[#out + 1] = n + 1; out[#out + 1] = f; out[#out + 1] = runat
  end
end
if #hs > 0 then
  redis.call('HSET', KL, PAD, '', unpack(hs))
  redis.call('ZADD', KX, 'inf', PAD, unpack(zs))
end
return out
`

// ARGV: cap (0 = unbounded), then per letter: number of fields, fields (the
// message id first). Letters whose message id has a dead letter already are
// skipped. Returns how many were stored.
const luaDeadImport = `
local cap = tonumber(ARGV[1])
local i, n = 2, 0
while i <= #ARGV do
  local nf = tonumber(ARGV[i])
  local first, last = i + 1, i + nf
  i = last + 1
  local mid, kind = ARGV[first + 1], ''
  for j = first, last, 2 do
    if ARGV[j] == 'p' then kind = pkind(ARGV[j + 1]) end
  end
  local have = redis.call('HGET', KDI, mid)
  if not (have and #redis.call('XRANGE', KDEAD, have, have) > 0) then
    local f = {}
    for j = first, last do f[#f + 1] = ARGV[j] end
    dead_add(f, mid, kind)
    n = n + 1
  end
end
dead_trim(cap)
return n
`

var (
	scriptReceiveDelayed = script(luaReceiveDelayed)
	scriptDeadImport     = script(luaDeadImport)
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
		if err := d.runDurable(ctx, scriptDeadImport, k, args...).Err(); err != nil && err != goredis.Nil {
			return d.fail(ctx, err)
		}
	}
	return nil
}
