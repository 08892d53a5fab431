package fila

import (
	"regexp"
	"sync"
	"testing"
)

var uuidV7 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

func TestNewIDIsOrderedUniqueUUIDv7(t *testing.T) {
	const n = 20000
	ids := make([]string, n)
	for i := range ids {
		ids[i] = newID()
	}
	seen := make(map[string]bool, n)
	for i, id := range ids {
		if !uuidV7.MatchString(id) {
			t.Fatalf("id %q is not a UUIDv7", id)
		}
		if seen[id] {
			t.Fatalf("id %q generated twice", id)
		}
		seen[id] = true
		if i > 0 && id <= ids[i-1] {
			t.Fatalf("ids out of order: %s then %s", ids[i-1], id)
		}
	}
}

func TestNewIDConcurrent(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]bool{}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			local := make([]string, 2000)
			for i := range local {
				local[i] = newID()
			}
			mu.Lock()
			defer mu.Unlock()
			for _, id := range local {
				if seen[id] {
					t.Errorf("duplicate id %s", id)
				}
				seen[id] = true
			}
		}()
	}
	wg.Wait()
}

func BenchmarkNewID(b *testing.B) {
	for b.Loop() {
		newID()
	}
}
