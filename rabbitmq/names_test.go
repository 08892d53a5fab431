package rabbitmq

import (
	"strings"
	"testing"
	"time"
)

func TestBucketMS(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want int64
	}{
		{0, 0},
		{time.Microsecond, 1},
		{99 * time.Millisecond, 99},
		{1234 * time.Millisecond, 1200},
		{1234*time.Millisecond + time.Microsecond, 1200},
		{time.Second, 1000},
		{time.Hour, 3_600_000},
		{time.Hour + time.Millisecond, 3_600_000},
		{365 * 24 * time.Hour, maxBucketMS},
	} {
		if got := bucketMS(tc.d); got != tc.want {
			t.Errorf("bucketMS(%v) = %d, want %d", tc.d, got, tc.want)
		}
		if got := bucketMS(tc.d); time.Duration(got)*time.Millisecond > tc.d+time.Millisecond {
			t.Errorf("bucketMS(%v) = %d ms is longer than the delay", tc.d, got)
		}
	}
}

// TestMarkNames: a mark's queue name fits RabbitMQ's limit for the longest
// prefix and queue name, keeps at least 11 hash characters, and stays apart
// from the queue's other names and from other marks.
func TestMarkNames(t *testing.T) {
	for _, tc := range []struct{ prefix, queue string }{
		{"fila", "q"},
		{strings.Repeat("p", maxPrefix), strings.Repeat("q", 128)},
	} {
		d := &Driver{opts: Options{Prefix: tc.prefix}}
		n, err := d.names(tc.queue)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{n.main: true, n.dead: true, n.delay(maxBucketMS): true, n.markRegistry(false): true, n.markRegistry(true): true}
		for _, name := range []string{"pause", "pause ", "Pause", strings.Repeat("x", 600), strings.Repeat("x", 599)} {
			mq := n.mark(name)
			if len(mq) > maxNameLen {
				t.Errorf("mark %.20q of queue %.20q: name is %d bytes", name, tc.queue, len(mq))
			}
			if h := len(mq) - len(n.main+markInfix); h < 11 {
				t.Errorf("mark %.20q: only %d hash characters", name, h)
			}
			if seen[mq] {
				t.Errorf("mark %.20q: name %q taken", name, mq)
			}
			seen[mq] = true
			if n.mark(name) != mq {
				t.Errorf("mark %.20q: name not stable", name)
			}
		}
	}
}
