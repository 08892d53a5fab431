package backend

import (
	"errors"
	"reflect"
	"testing"
)

func TestStoreRounds(t *testing.T) {
	var calls [][]int
	// Every round one message's holder vanishes again.
	err := StoreRounds([]int{0, 1, 2}, func(p []int) ([]int, error) {
		calls = append(calls, p)
		return p[:1], nil
	})
	if !errors.Is(err, ErrUnavailable) || len(calls) != DedupRounds {
		t.Errorf("StoreRounds with a key that keeps changing hands = %v after %d calls; want ErrUnavailable after %d", err, len(calls), DedupRounds)
	}
	calls = nil
	err = StoreRounds([]int{0, 1, 2}, func(p []int) ([]int, error) {
		calls = append(calls, p)
		if len(calls) == 1 {
			return []int{2}, nil
		}
		return nil, nil
	})
	if err != nil || !reflect.DeepEqual(calls, [][]int{{0, 1, 2}, {2}}) {
		t.Errorf("StoreRounds = %v with calls %v; want nil after [[0 1 2] [2]]", err, calls)
	}
	boom := errors.New("boom")
	if err := StoreRounds([]int{0}, func([]int) ([]int, error) { return []int{0}, boom }); err != boom {
		t.Errorf("StoreRounds with a failing store = %v, want its error", err)
	}
	if err := StoreRounds(nil, func([]int) ([]int, error) { t.Fatal("store called for nothing"); return nil, nil }); err != nil {
		t.Error(err)
	}
}

func TestBatchDuplicates(t *testing.T) {
	msgs := []Message{{DedupKey: "a"}, {}, {DedupKey: "b"}, {DedupKey: "a"}, {}, {DedupKey: "b"}, {DedupKey: "a"}}
	if got, want := BatchDuplicates(msgs), map[int]int{3: 0, 5: 2, 6: 0}; !reflect.DeepEqual(got, want) {
		t.Errorf("BatchDuplicates = %v, want %v", got, want)
	}
	if got := BatchDuplicates([]Message{{DedupKey: "a"}, {DedupKey: "b"}, {}}); got != nil {
		t.Errorf("BatchDuplicates without shared keys = %v, want nil", got)
	}
}
