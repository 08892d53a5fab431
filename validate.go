package fila

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/fila-go/fila/backend"
)

var invalidf = backend.Invalidf

// ValidateQueueName reports whether name is a valid queue name: 1 to 128
// bytes of ASCII letters, digits, '.', '_' and '-', starting with a letter or
// digit. The same rule holds for every driver, so a queue can move between
// brokers under its name.
func ValidateQueueName(name string) error {
	if name == "" {
		return invalidf("queue name is empty")
	}
	if len(name) > MaxQueueNameLen {
		return invalidf("queue name %.20q… is %d bytes; the limit is %d", name, len(name), MaxQueueNameLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if i == 0 && !alnum {
			return invalidf("queue name %q must start with a letter or digit", name)
		}
		if !alnum && c != '.' && c != '_' && c != '-' {
			return invalidf("queue name %q has %q; use letters, digits, '.', '_' and '-'", name, c)
		}
	}
	return nil
}

// printable reports whether s is valid UTF-8 without control characters.
func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return false
		}
	}
	return true
}

func validateKind(kind string) error {
	if kind == "" {
		return invalidf("message kind is empty; a kind names the handler (for example %q)", "email.send")
	}
	if len(kind) > MaxKindLen || !printable(kind) {
		return invalidf("message kind %.40q must be 1 to %d bytes of printable UTF-8", kind, MaxKindLen)
	}
	return nil
}

func validateHeaders(h map[string]string) error {
	size := 0
	for k, v := range h {
		if k == "" {
			return invalidf("header key is empty")
		}
		if len(k) > MaxHeaderKeyLen || !printable(k) {
			return invalidf("header key %.40q must be 1 to %d bytes of printable UTF-8", k, MaxHeaderKeyLen)
		}
		if !utf8.ValidString(v) {
			return invalidf("header %q has a value that is not valid UTF-8", k)
		}
		size += len(k) + len(v)
	}
	if size > MaxHeaderBytes {
		return fmt.Errorf("%w: headers total %d bytes; the limit is %d", ErrTooLarge, size, MaxHeaderBytes)
	}
	return nil
}

func validateDelay(d time.Duration, what string) error {
	if d < 0 {
		return invalidf("%s %v is negative", what, d)
	}
	if d > MaxDelay {
		return invalidf("%s %v is longer than 100 years", what, d)
	}
	return nil
}

func validateLease(d time.Duration) error {
	if d < MinLease || d > MaxLease {
		return invalidf("lease %v must be between %v and %v", d, MinLease, MaxLease)
	}
	return nil
}

// prepare validates m and turns it into a backend message with a fresh id.
func (c *Client) prepare(m *Message, now time.Time) (backend.Message, error) {
	if err := validateKind(m.Kind); err != nil {
		return backend.Message{}, err
	}
	if len(m.Body) > c.opts.maxBodyBytes {
		return backend.Message{}, fmt.Errorf("%w: body is %d bytes; the limit is %d (send ids, not objects, or raise WithMaxBodyBytes)",
			ErrTooLarge, len(m.Body), c.opts.maxBodyBytes)
	}
	if err := validateHeaders(m.Headers); err != nil {
		return backend.Message{}, err
	}
	if err := validateDelay(m.Delay, "delay"); err != nil {
		return backend.Message{}, err
	}
	if !m.RunAt.IsZero() && m.Delay != 0 {
		return backend.Message{}, invalidf("set RunAt or Delay, not both")
	}
	if !m.RunAt.IsZero() && m.RunAt.Sub(now) > MaxDelay {
		return backend.Message{}, invalidf("run-at %v is more than 100 years away", m.RunAt)
	}
	if m.MaxAttempts < 0 || m.MaxAttempts > MaxAttemptsLimit {
		return backend.Message{}, invalidf("max attempts %d must be between 0 (client default) and %d", m.MaxAttempts, MaxAttemptsLimit)
	}
	if m.Priority < 0 || m.Priority > MaxPriority {
		return backend.Message{}, invalidf("priority %d must be between 0 (the default, lowest) and %d (highest)", m.Priority, MaxPriority)
	}
	if m.Priority > 0 && !c.priorities {
		return backend.Message{}, &UnsupportedError{Driver: c.name, Capability: "priorities"}
	}
	if m.DedupKey != "" {
		if len(m.DedupKey) > MaxDedupKeyLen || !utf8.ValidString(m.DedupKey) || strings.IndexByte(m.DedupKey, 0) >= 0 {
			return backend.Message{}, invalidf("dedup key must be at most %d bytes of UTF-8 without NUL", MaxDedupKeyLen)
		}
		if !c.dedup {
			return backend.Message{}, &UnsupportedError{Driver: c.name, Capability: "dedup keys"}
		}
	}
	if m.UniqueFor != 0 {
		if m.UniqueFor < 0 || m.UniqueFor > MaxDelay {
			return backend.Message{}, invalidf("unique period %v must be positive and at most 100 years", m.UniqueFor)
		}
		if m.DedupKey == "" {
			return backend.Message{}, invalidf("a unique period (UniqueFor) needs a dedup key")
		}
		if c.marker == nil {
			return backend.Message{}, &UnsupportedError{Driver: c.name, Capability: "unique periods (marks)"}
		}
	}
	body := m.Body
	if body == nil {
		body = []byte{}
	}
	var headers map[string]string
	if len(m.Headers) > 0 {
		headers = make(map[string]string, len(m.Headers))
		for k, v := range m.Headers {
			headers[k] = v
		}
	}
	return backend.Message{
		ID:          newID(),
		Kind:        m.Kind,
		Body:        body,
		Headers:     headers,
		RunAt:       m.RunAt,
		Delay:       m.Delay,
		DedupKey:    m.DedupKey,
		MaxAttempts: m.MaxAttempts,
		Priority:    m.Priority,
		EnqueuedAt:  now,
	}, nil
}

// messageBytes is what m counts against MaxBatchBytes: its body and headers.
func messageBytes(m *backend.Message) int {
	n := len(m.Body)
	for k, v := range m.Headers {
		n += len(k) + len(v)
	}
	return n
}

// cleanReason makes a reason storable everywhere: valid UTF-8, at most
// MaxReasonBytes. A NUL stays (PostgreSQL's text cannot hold one: the
// postgres driver stores it as U+FFFD; see errhistory.go).
func cleanReason(s string) string {
	return cutReason(s, MaxReasonBytes)
}

// cutReason makes s valid UTF-8 of at most limit bytes, cut at a
// character boundary.
func cutReason(s string, limit int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= limit {
		return s
	}
	s = s[:limit]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}
