package redis

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/fila-go/fila/backend"
)

// Message listing (backend.MessageLister): one read-only script
// (lua/browse.lua) walks a queue's keys in the order of its listing, as a
// list of sources (listSources), and returns a page and the key of the
// last message it examined. It runs no command that writes: no
// XREADGROUP or XCLAIM (a listed message keeps its pending entry,
// delivery count and lease), no promotion of due delayed messages and no
// putting back of expired leases, which is why it classifies them itself,
// on the server's clock, as QueueStats counts them:
//
//   - ready: level by level from the highest, the level's expired leases
//     in the order a claim takes them over, then its never-delivered stream
//     entries in stream order, then its due delayed messages by run-at (a
//     claim appends them to the stream in that order), then its expired
//     early leases (ReceiveDelayed) whose run-at has passed: the order
//     Receive hands them out;
//   - delayed: by run-at, then the expired early leases whose run-at is
//     ahead;
//   - leased: by lease deadline, then consumer, each consumer's entries
//     level by level from the highest; then entries of consumers that have
//     no deadline (foreign or orphaned reads; Due is zero).
//
// A subscription queue's topic events not copied into it yet (QueueStats
// counts them as ready) are not listed: they are not in the queue's slot,
// have no place in its streams until a claim copies them, and a copy may
// pass them over (kind patterns).
var scriptBrowse = script("browse.lua")

var _ backend.MessageLister = (*Driver)(nil)

// browseBudget bounds how many messages one listing call examines beyond
// its page (those the ids or the level leave out), so a search by id in a
// long queue takes several calls (pages, some of them empty) rather than
// one long script.
const browseBudget = 5000

// listSources are, per state, the sources a listing walks, in order (see
// lua/browse.lua): a kind letter and a level digit.
var listSources = func() map[backend.MessageState][]string {
	var ready []string
	for l := backend.MaxPriority; l >= 0; l-- {
		for _, k := range "xnde" {
			ready = append(ready, string(k)+strconv.Itoa(l))
		}
	}
	delayed := []string{"D0", "E0"}
	leased := []string{"L0", "F0"}
	all := append(append(append([]string{}, ready...), delayed...), leased...)
	return map[backend.MessageState][]string{
		backend.StateReady: ready, backend.StateDelayed: delayed, backend.StateLeased: leased, "": all,
	}
}()

// listCursor is a position in a listing: the state listed, the index
// (from 1) of a source in its listSources, and the key of the last message
// examined in that source.
type listCursor struct {
	state backend.MessageState
	src   int
	key   [3]string
}

func (c listCursor) encode() string {
	b, _ := json.Marshal([]string{string(c.state), strconv.Itoa(c.src), c.key[0], c.key[1], c.key[2]})
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodeListCursor parses a cursor of a listing of state, checking each
// key part as the script will use it.
func decodeListCursor(s string, state backend.MessageState) (listCursor, error) {
	bad := backend.Invalidf("message cursor %.40q is not one this driver returned for state %q", s, state)
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return listCursor{}, bad
	}
	var parts []string
	if json.Unmarshal(b, &parts) != nil || len(parts) != 5 || backend.MessageState(parts[0]) != state {
		return listCursor{}, bad
	}
	c := listCursor{state: state, key: [3]string{parts[2], parts[3], parts[4]}}
	srcs := listSources[state]
	c.src, err = strconv.Atoi(parts[1])
	if err != nil || c.src < 1 || c.src > len(srcs) {
		return listCursor{}, bad
	}
	num := func(v string) bool { _, err := strconv.ParseInt(v, 10, 64); return err == nil }
	k := c.key
	ok := false
	switch srcs[c.src-1][0] {
	case 'n':
		ok = validStreamID(k[0])
	case 'x':
		ok = num(k[0]) && validStreamID(k[2])
	case 'd', 'D', 'e', 'E':
		ok = num(k[0])
	case 'L':
		if ok = num(k[0]); ok && k[2] != "" {
			lvl, sid, lok := splitSID(k[2])
			ok = lok && validStreamID(sid) && (lvl > 0 || sid == k[2])
		}
	case 'F':
		lvl, err := strconv.Atoi(k[0])
		ok = err == nil && lvl >= 0 && lvl <= backend.MaxPriority && validStreamID(k[2])
	}
	if !ok {
		return listCursor{}, bad
	}
	return c, nil
}

// MessageList lists queue's pending messages in one state (or those p.IDs
// names, whatever their state) in the order described above; the cursor is
// the place of the last message examined.
func (d *Driver) MessageList(ctx context.Context, queue string, p backend.MessageListParams) (backend.MessagePage, error) {
	srcs, ok := listSources[p.State]
	if !ok || (p.State == "" && p.IDs == nil) {
		return backend.MessagePage{}, backend.Invalidf("message list: unknown state %q", p.State)
	}
	if p.IDs != nil && len(p.IDs) == 0 {
		return backend.MessagePage{}, nil
	}
	cur := listCursor{state: p.State}
	if p.Cursor != "" {
		var err error
		if cur, err = decodeListCursor(p.Cursor, p.State); err != nil {
			return backend.MessagePage{}, err
		}
	}
	limit := max(p.Limit, 1)
	bodies := "1"
	if p.WithoutBodies {
		bodies = "0"
	}
	args := make([]any, 0, 10+len(srcs)+len(p.IDs))
	args = append(args, group, limit, limit+browseBudget, bodies, len(srcs))
	for _, s := range srcs {
		args = append(args, s)
	}
	args = append(args, cur.src, cur.key[0], cur.key[1], cur.key[2])
	for _, id := range p.IDs {
		args = append(args, id)
	}
	v, err := scriptBrowse.Run(ctx, d.c, d.keys(queue).list(), args...).Slice()
	if err != nil {
		return backend.MessagePage{}, d.fail(ctx, err)
	}
	if len(v) < 6 || (len(v)-6)%4 != 0 {
		return backend.MessagePage{}, fmt.Errorf("fila/redis: message list script returned %d values", len(v))
	}
	var page backend.MessagePage
	if toInt(v[1]) == 1 {
		page.Next = listCursor{state: p.State, src: int(toInt(v[2])), key: [3]string{str(v[3]), str(v[4]), str(v[5])}}.encode()
	}
	for i := 6; i+3 < len(v); i += 4 {
		m, _, lastErr, err := entryMessage(v[i+3])
		if err != nil {
			return backend.MessagePage{}, err
		}
		pm := backend.PendingMessage{Message: m, LastError: lastErr}
		switch str(v[i]) {
		case "r":
			pm.State = backend.StateReady
		case "d":
			pm.State = backend.StateDelayed
		default:
			pm.State = backend.StateLeased
		}
		if due := toInt(v[i+1]); due >= 0 {
			pm.Due = msTime(due)
		}
		pm.Attempts = int(toInt(v[i+2]))
		if p.WithoutBodies {
			pm.Body = nil
		}
		page.Messages = append(page.Messages, pm)
	}
	return page, nil
}
