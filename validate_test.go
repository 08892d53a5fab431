package fila

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestValidateQueueName(t *testing.T) {
	valid := []string{"a", "Q", "0", "emails", "orders.paid", "a_b-c.d", strings.Repeat("x", MaxQueueNameLen)}
	for _, n := range valid {
		if err := ValidateQueueName(n); err != nil {
			t.Errorf("ValidateQueueName(%q) = %v, want nil", n, err)
		}
	}
	invalid := []string{"", "-a", "_a", ".a", "a b", "a/b", "a:b", "a{b}", "é", "a\x00", strings.Repeat("x", MaxQueueNameLen+1)}
	for _, n := range invalid {
		if err := ValidateQueueName(n); !errors.Is(err, ErrInvalid) {
			t.Errorf("ValidateQueueName(%q) = %v, want ErrInvalid", n, err)
		}
	}
}

func TestPrepareRefusesBadMessages(t *testing.T) {
	c := &Client{opts: defaultOptions(), name: "test"}
	now := time.Now()
	cases := []struct {
		m    Message
		want error
	}{
		{Message{}, ErrInvalid},
		{Message{Kind: "k", Body: make([]byte, DefaultMaxBodyBytes+1)}, ErrTooLarge},
		{Message{Kind: "k", RunAt: now.Add(200 * 365 * 24 * time.Hour)}, ErrInvalid},
		{Message{Kind: "k", Delay: 200 * 365 * 24 * time.Hour}, ErrInvalid},
		{Message{Kind: "k", MaxAttempts: MaxAttemptsLimit + 1}, ErrInvalid},
		{Message{Kind: "k", DedupKey: "x"}, ErrUnsupported}, // c.dedup is false
		{Message{Kind: "k", DedupKey: "\xff"}, ErrInvalid},
		{Message{Kind: "k", DedupKey: "a\x00b"}, ErrInvalid},
	}
	for _, tc := range cases {
		if _, err := c.prepare(&tc.m, now); !errors.Is(err, tc.want) {
			t.Errorf("prepare(%+v) = %v, want %v", tc.m, err, tc.want)
		}
	}
	m, err := c.prepare(&Message{Kind: "k", Headers: map[string]string{"a": "b"}}, now)
	if err != nil {
		t.Fatalf("prepare: %v", err)
	}
	if m.Body == nil || len(m.Body) != 0 {
		t.Errorf("nil body prepared as %#v, want empty non-nil", m.Body)
	}
	if m.EnqueuedAt != now || m.ID == "" {
		t.Errorf("prepared message %+v lacks id or enqueue time", m)
	}
}

func TestCleanReason(t *testing.T) {
	long := strings.Repeat("é", MaxReasonBytes) // 2 bytes each
	got := cleanReason(long)
	if len(got) > MaxReasonBytes || !strings.HasPrefix(long, got) {
		t.Errorf("cleanReason kept %d bytes", len(got))
	}
	if got := cleanReason("bad \xff byte"); got != "bad \uFFFD byte" {
		t.Errorf("cleanReason(invalid UTF-8) = %q", got)
	}
}
