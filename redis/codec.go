package redis

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/fila-go/fila/backend"
)

// Field names of a message in a stream entry (see scripts.go).
const (
	fID          = "i"
	fKind        = "k"
	fBody        = "b"
	fEnqueuedAt  = "t"
	fHeaders     = "h"
	fMaxAttempts = "m"
	fDedup       = "u"
	fAttempts    = "n"
	fLastError   = "e"
	fDeadAtt     = "a"
	fDeadReason  = "r"
	fDeadAt      = "z"
)

// appendFields appends m's stream fields to args and returns the new slice
// and the number of values appended.
func appendFields(args []any, m *backend.Message) ([]any, int, error) {
	start := len(args)
	args = append(args, fID, m.ID, fKind, m.Kind, fBody, m.Body, fEnqueuedAt, strconv.FormatInt(m.EnqueuedAt.UnixNano(), 10))
	if len(m.Headers) > 0 {
		h, err := json.Marshal(m.Headers)
		if err != nil {
			return nil, 0, fmt.Errorf("fila/redis: encode headers: %w", err)
		}
		args = append(args, fHeaders, h)
	}
	if m.MaxAttempts > 0 {
		args = append(args, fMaxAttempts, strconv.Itoa(m.MaxAttempts))
	}
	if m.DedupKey != "" {
		args = append(args, fDedup, m.DedupKey)
	}
	return args, len(args) - start, nil
}

// fieldMap turns a script's flat field list into a map.
func fieldMap(v any) (map[string]string, error) {
	list, ok := v.([]any)
	if !ok || len(list)%2 != 0 {
		return nil, fmt.Errorf("fila/redis: unexpected stream entry %T", v)
	}
	m := make(map[string]string, len(list)/2)
	for i := 0; i < len(list); i += 2 {
		k, _ := list[i].(string)
		m[k] = str(list[i+1])
	}
	return m, nil
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
	m := backend.Message{ID: f[fID], Kind: f[fKind], Body: []byte(f[fBody]), DedupKey: f[fDedup]}
	if t := f[fEnqueuedAt]; t != "" {
		ns, err := strconv.ParseInt(t, 10, 64)
		if err != nil {
			return m, fmt.Errorf("fila/redis: message %s: bad enqueue time %q", m.ID, t)
		}
		m.EnqueuedAt = time.Unix(0, ns)
	}
	if h := f[fHeaders]; h != "" {
		if err := json.Unmarshal([]byte(h), &m.Headers); err != nil {
			return m, fmt.Errorf("fila/redis: message %s: bad headers: %w", m.ID, err)
		}
	}
	if s := f[fMaxAttempts]; s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			return m, fmt.Errorf("fila/redis: message %s: bad max attempts %q", m.ID, s)
		}
		m.MaxAttempts = n
	}
	return m, nil
}

// makeReceipt joins a stream id and a lease token; parseReceipt splits them.
func makeReceipt(sid, token string) string { return sid + "/" + token }

func parseReceipt(r string) (sid, token string, ok bool) {
	sid, token, ok = strings.Cut(r, "/")
	return sid, token, ok && sid != "" && token != ""
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
