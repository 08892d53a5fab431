package redis

import (
	"testing"
	"time"
)

// A replica wait longer than go-redis's read timeout (3s by default) is not
// cut into an i/o timeout: Open raises read_timeout to outlast it.
func TestReadTimeoutOutlastsWait(t *testing.T) {
	for _, tc := range []struct {
		rt, wait time.Duration
		replicas int
		want     time.Duration
	}{
		{0, time.Second, 0, 0},
		{0, time.Second, 1, 4 * time.Second},
		{0, 15 * time.Second, 1, 18 * time.Second},
		{30 * time.Second, 15 * time.Second, 1, 30 * time.Second},
		{-1, 15 * time.Second, 1, -1},
	} {
		got := readTimeoutFor(tc.rt, Options{WaitReplicas: tc.replicas, WaitTimeout: tc.wait})
		if got != tc.want {
			t.Errorf("readTimeoutFor(%v, wait %v × %d) = %v, want %v", tc.rt, tc.wait, tc.replicas, got, tc.want)
		}
	}
}
