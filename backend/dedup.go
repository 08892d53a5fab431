package backend

import "fmt"

// DedupRounds bounds how many times a driver stores the messages of one
// Enqueue: a message refused for its dedup key whose holder is gone by the
// time the driver looks the holder up (acked or dead-lettered in between)
// is stored again, in the next round. Three rounds end any realistic race;
// StoreRounds fails with ErrUnavailable past them. Drivers whose enqueue is
// atomic with the dedup check (one script, one lock) need no rounds.
const DedupRounds = 3

// StoreRounds calls store with the indexes of the messages to store, then
// again with the indexes store returns (the messages whose dedup key's
// holder vanished), until it returns none. It makes at most DedupRounds
// calls; messages still left after them fail the call with an error
// matching ErrUnavailable. An error from store ends it at once.
func StoreRounds(pending []int, store func(pending []int) (retry []int, err error)) error {
	for round := 0; len(pending) > 0; round++ {
		if round == DedupRounds {
			return fmt.Errorf("%w: %d dedup keys kept changing hands over %d rounds", ErrUnavailable, len(pending), DedupRounds)
		}
		var err error
		if pending, err = store(pending); err != nil {
			return err
		}
	}
	return nil
}

// BatchDuplicates returns, for every message whose dedup key an earlier
// message of the same batch has, the index of the first message with that
// key: a batch stores only the first, and the others are its duplicates
// (EnqueueResult{ID: that message's ID, Duplicate: true} once it is
// stored). It returns nil when no two messages share a key.
func BatchDuplicates(msgs []Message) map[int]int {
	var first map[string]int
	var dups map[int]int
	for i := range msgs {
		k := msgs[i].DedupKey
		if k == "" {
			continue
		}
		if first == nil {
			first = map[string]int{}
		}
		if j, ok := first[k]; ok {
			if dups == nil {
				dups = map[int]int{}
			}
			dups[i] = j
			continue
		}
		first[k] = i
	}
	return dups
}
