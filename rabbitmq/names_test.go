package rabbitmq

import (
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
