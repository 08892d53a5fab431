package redis

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/fila-go/fila/backend"
)

// scanChunk is how many dead letters one XRANGE reads while listing or
// selecting.
const scanChunk = 500

// deadLetter decodes one entry of a dead-letter stream.
func deadLetter(queue string, e goredis.XMessage) (backend.DeadLetter, error) {
	f := make(map[string]string, len(e.Values))
	for k, v := range e.Values {
		f[k] = str(v)
	}
	m, err := messageFrom(f)
	if err != nil {
		return backend.DeadLetter{}, err
	}
	dl := backend.DeadLetter{Message: m, Queue: queue, Reason: f[fDeadReason]}
	dl.Attempts, _ = strconv.Atoi(f[fDeadAtt])
	if ms, err := strconv.ParseInt(f[fDeadAt], 10, 64); err == nil {
		dl.DeadAt = msTime(ms)
	}
	return dl, nil
}

// DeadList lists dead letters oldest first. The cursor is the stream id of
// the last letter of the previous page.
func (d *Driver) DeadList(ctx context.Context, queue string, p backend.DeadListParams) (backend.DeadPage, error) {
	k := d.keys(queue)
	start := "-"
	if p.Cursor != "" {
		if !validStreamID(p.Cursor) {
			return backend.DeadPage{}, backend.Invalidf("dead-letter cursor %.40q is not one this driver returned", p.Cursor)
		}
		start = "(" + p.Cursor
	}
	if p.IDs != nil {
		return d.deadListByID(ctx, queue, k, p)
	}
	var page backend.DeadPage
	var ids []string
	for {
		es, err := d.c.XRangeN(ctx, k.dead, start, "+", scanChunk).Result()
		if err != nil {
			return backend.DeadPage{}, d.fail(ctx, err)
		}
		for _, e := range es {
			if p.Kind != "" && payloadKind(str(e.Values[fPayload])) != p.Kind {
				continue
			}
			if len(page.Letters) == p.Limit {
				// One more match exists: there is a next page.
				page.Next = ids[len(ids)-1]
				return page, nil
			}
			dl, err := deadLetter(queue, e)
			if err != nil {
				return backend.DeadPage{}, err
			}
			if p.WithoutBodies {
				dl.Body = nil
			}
			page.Letters = append(page.Letters, dl)
			ids = append(ids, e.ID)
		}
		if len(es) < scanChunk {
			return page, nil
		}
		start = "(" + es[len(es)-1].ID
	}
}

// deadListByID lists the dead letters p.IDs names, found through the
// index of message ids (deadIDs) and read one entry each, so that a page
// showing one letter reads that letter and not the stream before it.
func (d *Driver) deadListByID(ctx context.Context, queue string, k keys, p backend.DeadListParams) (backend.DeadPage, error) {
	var page backend.DeadPage
	sids, err := d.c.HMGet(ctx, k.deadIDs, p.IDs...).Result()
	if err != nil {
		return page, d.fail(ctx, err)
	}
	pipe := d.c.Pipeline()
	var cmds []*goredis.XMessageSliceCmd
	for _, v := range sids {
		sid, ok := v.(string)
		if !ok || (p.Cursor != "" && !sidLess(p.Cursor, sid)) {
			continue
		}
		cmds = append(cmds, pipe.XRange(ctx, k.dead, sid, sid))
	}
	if len(cmds) == 0 {
		return page, nil
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, goredis.Nil) {
		return page, d.fail(ctx, err)
	}
	want := make(map[string]bool, len(p.IDs))
	for _, id := range p.IDs {
		want[id] = true
	}
	var es []goredis.XMessage
	for _, c := range cmds {
		es = append(es, c.Val()...) // none when the index is ahead of a trim
	}
	slices.SortFunc(es, func(a, b goredis.XMessage) int {
		switch {
		case sidLess(a.ID, b.ID):
			return -1
		case sidLess(b.ID, a.ID):
			return 1
		}
		return 0
	})
	last := ""
	for _, e := range es {
		if p.Kind != "" && payloadKind(str(e.Values[fPayload])) != p.Kind {
			continue
		}
		dl, err := deadLetter(queue, e)
		if err != nil {
			return backend.DeadPage{}, err
		}
		if !want[dl.ID] {
			continue
		}
		if len(page.Letters) == p.Limit {
			page.Next = last
			return page, nil
		}
		last = e.ID
		if p.WithoutBodies {
			dl.Body = nil
		}
		page.Letters = append(page.Letters, dl)
	}
	return page, nil
}

// selectDead calls fn with chunks of the stream ids of the dead letters f
// selects.
func (d *Driver) selectDead(ctx context.Context, k keys, f backend.DeadFilter, fn func([]string) error) error {
	var want map[string]bool
	if f.IDs != nil {
		want = make(map[string]bool, len(f.IDs))
		for _, id := range f.IDs {
			want[id] = true
		}
	}
	start := "-"
	for {
		es, err := d.c.XRangeN(ctx, k.dead, start, "+", scanChunk).Result()
		if err != nil {
			return d.fail(ctx, err)
		}
		var sel []string
		for _, e := range es {
			if want != nil && !want[str(e.Values[fID])] {
				continue
			}
			if f.Kind != "" && payloadKind(str(e.Values[fPayload])) != f.Kind {
				continue
			}
			sel = append(sel, e.ID)
		}
		if len(sel) > 0 {
			if err := fn(sel); err != nil {
				return err
			}
		}
		if len(es) < scanChunk {
			return nil
		}
		start = "(" + es[len(es)-1].ID
	}
}

// DeadReplay moves the selected dead letters back to the stream as fresh
// messages (attempts reset, dedup keys dropped); each move is atomic.
func (d *Driver) DeadReplay(ctx context.Context, queue string, f backend.DeadFilter) (int, error) {
	k := d.keys(queue)
	total := 0
	err := d.selectDead(ctx, k, f, func(sids []string) error {
		args := make([]any, 0, len(sids)+1)
		args = append(args, group)
		for _, s := range sids {
			args = append(args, s)
		}
		n, err := runOnce(ctx, d.c, scriptReplay, k.list(), args...).Int()
		if err != nil {
			return d.fail(ctx, err)
		}
		total += n
		return nil
	})
	return total, err
}

// DeadPurge deletes the selected dead letters.
func (d *Driver) DeadPurge(ctx context.Context, queue string, f backend.DeadFilter) (int, error) {
	k := d.keys(queue)
	if f.IDs == nil && f.Kind == "" {
		n, err := runOnce(ctx, d.c, scriptPurge, k.list(), "*").Int()
		return n, d.fail(ctx, err)
	}
	total := 0
	err := d.selectDead(ctx, k, f, func(sids []string) error {
		args := make([]any, len(sids))
		for i, s := range sids {
			args[i] = s
		}
		n, err := runOnce(ctx, d.c, scriptPurge, k.list(), args...).Int()
		if err != nil {
			return d.fail(ctx, err)
		}
		total += n
		return nil
	})
	return total, err
}

// validStreamID reports whether s looks like a stream id ("<ms>-<seq>").
func validStreamID(s string) bool {
	ms, seq, ok := strings.Cut(s, "-")
	if !ok {
		return false
	}
	_, err1 := strconv.ParseUint(ms, 10, 64)
	_, err2 := strconv.ParseUint(seq, 10, 64)
	return err1 == nil && err2 == nil
}
