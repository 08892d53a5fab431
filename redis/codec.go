package redis

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/fila-go/fila/backend"
)

// Field names of a message in a stream entry (see lua/prelude.lua).
const (
	fID         = "i"
	fPayload    = "p"
	fDedup      = "u"
	fAttempts   = "n"
	fLastError  = "e"
	fDeadAtt    = "a"
	fDeadReason = "r"
	fDeadAt     = "z"
	fLevel      = "l"
)

// encodePayload packs what the scripts never look into, so a stream entry
// has few fields (every field costs a Lua string in each script):
//
//	1 byte kind length, kind, 8 bytes enqueued-at (Unix ns), 4 bytes max
//	attempts, 4 bytes headers length, headers (JSON), body
//
// The kind comes first so the scripts can read it (dead-letter counts).
func encodePayload(m *backend.Message) ([]byte, error) {
	var h []byte
	if len(m.Headers) > 0 {
		var err error
		if h, err = json.Marshal(m.Headers); err != nil {
			return nil, fmt.Errorf("fila/redis: encode headers: %w", err)
		}
	}
	if len(m.Kind) > 255 {
		return nil, backend.Invalidf("kind is longer than 255 bytes")
	}
	b := make([]byte, 0, 17+len(m.Kind)+len(h)+len(m.Body))
	b = append(b, byte(len(m.Kind)))
	b = append(b, m.Kind...)
	b = binary.BigEndian.AppendUint64(b, uint64(m.EnqueuedAt.UnixNano()))
	b = binary.BigEndian.AppendUint32(b, uint32(m.MaxAttempts))
	b = binary.BigEndian.AppendUint32(b, uint32(len(h)))
	b = append(b, h...)
	return append(b, m.Body...), nil
}

// decodePayload fills m from a payload made by encodePayload.
func decodePayload(p string, m *backend.Message) error {
	bad := func() error { return fmt.Errorf("fila/redis: message %s: truncated payload (%d bytes)", m.ID, len(p)) }
	if len(p) < 1 {
		return bad()
	}
	n := int(p[0])
	if len(p) < 1+n+16 {
		return bad()
	}
	m.Kind = p[1 : 1+n]
	p = p[1+n:]
	m.EnqueuedAt = time.Unix(0, int64(binary.BigEndian.Uint64([]byte(p[:8]))))
	m.MaxAttempts = int(binary.BigEndian.Uint32([]byte(p[8:12])))
	hl := int(binary.BigEndian.Uint32([]byte(p[12:16])))
	p = p[16:]
	if len(p) < hl {
		return bad()
	}
	if hl > 0 {
		if err := json.Unmarshal([]byte(p[:hl]), &m.Headers); err != nil {
			return fmt.Errorf("fila/redis: message %s: bad headers: %w", m.ID, err)
		}
	}
	m.Body = []byte(p[hl:])
	return nil
}

// payloadKind returns the kind of a payload without decoding the rest.
func payloadKind(p string) string {
	if len(p) < 1 || len(p) < 1+int(p[0]) {
		return ""
	}
	return p[1 : 1+int(p[0])]
}

// appendFields appends m's stream fields to args and returns the new slice
// and the number of values appended. The message id comes first (the dead
// import script relies on it); attempts carried over from another broker
// become the entry's count of earlier deliveries.
func appendFields(args []any, m *backend.Message) ([]any, int, error) {
	p, err := encodePayload(m)
	if err != nil {
		return nil, 0, err
	}
	start := len(args)
	args = append(args, fID, m.ID, fPayload, p)
	if m.DedupKey != "" {
		args = append(args, fDedup, m.DedupKey)
	}
	if m.Attempts > 0 {
		args = append(args, fAttempts, m.Attempts)
	}
	if m.Priority > 0 {
		args = append(args, fLevel, level(m.Priority))
	}
	return args, len(args) - start, nil
}

// entryMessage decodes a stream entry's flat field list (as a script or a
// raw XREADGROUP returns it) into a message, the number of deliveries before
// this entry and its last error.
func entryMessage(v any) (m backend.Message, prior int, lastErr string, err error) {
	list, ok := v.([]any)
	if !ok || len(list)%2 != 0 {
		return m, 0, "", fmt.Errorf("fila/redis: unexpected stream entry %T", v)
	}
	var payload string
	for i := 0; i < len(list); i += 2 {
		k, _ := list[i].(string)
		switch val := str(list[i+1]); k {
		case fID:
			m.ID = val
		case fPayload:
			payload = val
		case fDedup:
			m.DedupKey = val
		case fAttempts:
			prior = int(toInt(val))
		case fLastError:
			lastErr = val
		case fLevel:
			m.Priority = parseLevel(val)
		}
	}
	return m, prior, lastErr, decodePayload(payload, &m)
}

// readEntries returns the entries of a one-stream XREADGROUP reply read
// without go-redis's typed parser (which builds a map per entry): RESP2
// answers [[stream, entries]], RESP3 {stream: entries}; each entry is [id,
// [field, value, …]].
func readEntries(v any) ([]any, error) {
	var streams []any
	switch x := v.(type) {
	case nil:
		return nil, nil
	case map[any]any:
		for _, es := range x {
			list, _ := es.([]any)
			return list, nil
		}
		return nil, nil
	case []any:
		streams = x
	default:
		return nil, fmt.Errorf("fila/redis: unexpected XREADGROUP reply %T", v)
	}
	if len(streams) == 0 {
		return nil, nil
	}
	s, ok := streams[0].([]any)
	if !ok || len(s) != 2 {
		return nil, fmt.Errorf("fila/redis: unexpected XREADGROUP stream reply %T", streams[0])
	}
	list, _ := s[1].([]any)
	return list, nil
}

// str converts a script reply element to a string.
func str(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case int64:
		return strconv.FormatInt(x, 10)
	case []byte:
		return string(x)
	case nil:
		return ""
	default:
		return fmt.Sprint(x)
	}
}

// messageFrom decodes a stream entry's fields into a message.
func messageFrom(f map[string]string) (backend.Message, error) {
	m := backend.Message{ID: f[fID], DedupKey: f[fDedup], Priority: parseLevel(f[fLevel])}
	return m, decodePayload(f[fPayload], &m)
}

// level is p within 0..backend.MaxPriority.
func level(p int) int { return min(max(p, 0), backend.MaxPriority) }

// parseLevel decodes an entry's level field; like the scripts' flevel, it
// takes a value outside 1..backend.MaxPriority for 0.
func parseLevel(s string) int {
	if n := int(toInt(s)); n >= 1 && n <= backend.MaxPriority {
		return n
	}
	return 0
}

// A stream id in a receipt names the stream too: "<ms>-<seq>" is an entry
// of the level 0 stream, "<level>:<ms>-<seq>" one of a level's stream
// (lua/prelude.lua's qsid), "d…" an early delivery (isPseudoID).

// splitSID returns the level and the stream id of a receipt's stream id;
// ok is false for a level out of 1..backend.MaxPriority.
func splitSID(q string) (lvl int, sid string, ok bool) {
	l, sid, found := strings.Cut(q, ":")
	if !found || isPseudoID(q) {
		return 0, q, true
	}
	if len(l) != 1 || l[0] < '1' || l[0] > '0'+backend.MaxPriority {
		return 0, q, false
	}
	return int(l[0] - '0'), sid, true
}

// makeReceipt joins a stream id and a lease token; parseReceipt splits them.
func makeReceipt(sid, token string) string { return sid + "/" + token }

func parseReceipt(r string) (sid, token string, ok bool) {
	sid, token, ok = strings.Cut(r, "/")
	_, _, lok := splitSID(sid)
	return sid, token, ok && lok && sid != "" && token != "" && !strings.ContainsRune(token, '\n')
}

// isPseudoID reports whether sid is the pseudo stream id of an early
// delivery ("d<run-at>-<message id>"; see lua/prelude.lua).
func isPseudoID(sid string) bool { return strings.HasPrefix(sid, "d") }

// sidLess reports whether stream id a ("<ms>-<seq>") sorts before b. An id
// that does not parse sorts by its text.
func sidLess(a, b string) bool {
	am, as, ok1 := parseSID(a)
	bm, bs, ok2 := parseSID(b)
	if !ok1 || !ok2 {
		return a < b
	}
	if am != bm {
		return am < bm
	}
	return as < bs
}

func parseSID(s string) (ms, seq uint64, ok bool) {
	a, b, found := strings.Cut(s, "-")
	if !found {
		return 0, 0, false
	}
	var err1, err2 error
	ms, err1 = strconv.ParseUint(a, 10, 64)
	seq, err2 = strconv.ParseUint(b, 10, 64)
	return ms, seq, err1 == nil && err2 == nil
}

// msTime converts Unix milliseconds to a time.
func msTime(ms int64) time.Time { return time.UnixMilli(ms) }

// ceilMS rounds d up to whole milliseconds, so a delay is never cut short.
func ceilMS(d time.Duration) int64 {
	ms := d / time.Millisecond
	if d%time.Millisecond != 0 {
		ms++
	}
	return int64(ms)
}

// unixCeilMS is t in Unix milliseconds, rounded up.
func unixCeilMS(t time.Time) int64 {
	ms := t.UnixMilli()
	if t.Sub(time.UnixMilli(ms)) > 0 {
		ms++
	}
	return ms
}

func toInt(v any) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case string:
		n, _ := strconv.ParseInt(x, 10, 64)
		return n
	default:
		return 0
	}
}
