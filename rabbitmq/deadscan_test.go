package rabbitmq

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/fila-go/fila/backend"
)

// TestDeadScansDoNotHideLetters: a listing takes the dead letters off the
// dead queue while it reads them, so views and replays running at once, in
// one process or several, used to see part of the list (85 letters, 12
// parallel views: 50, 50, 46, 20 ... 4 rows) and report a letter being
// replayed by another view as gone. Scans now take turns (lockDeadScan).
func TestDeadScansDoNotHideLetters(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// Three instances: three connections, which the broker's lock
	// serializes; four goroutines each, which the driver's own does.
	ds := []*Driver{openTest(t), openTest(t), openTest(t)}
	d := ds[0]
	q := fmt.Sprintf("deadscan-%d", time.Now().UnixNano())
	t.Cleanup(func() { _ = openTest(t).QueueDelete(context.Background(), q) })
	const n = 30
	msgs := make([]backend.Message, n)
	for i := range msgs {
		msgs[i] = testMsg(fmt.Sprintf("%s-%02d", q, i))
	}
	if _, err := d.Enqueue(ctx, q, msgs); err != nil {
		t.Fatal(err)
	}
	for dead := 0; dead < n; {
		got, err := d.Receive(ctx, q, backend.ReceiveParams{Max: 10, Lease: time.Minute})
		if err != nil {
			t.Fatalf("Receive: %v", err)
		}
		for _, dl := range got {
			if err := d.Dead(ctx, backend.Ref{Queue: q, ID: dl.ID, Receipt: dl.Receipt}, "poison", dl.Attempt); err != nil {
				t.Fatalf("Dead: %v", err)
			}
			dead++
		}
	}

	one := msgs[7].ID
	var wg sync.WaitGroup
	var mu sync.Mutex
	var problems []string
	report := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		problems = append(problems, fmt.Sprintf(format, args...))
	}
	for i := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			page, err := ds[i%len(ds)].DeadList(ctx, q, backend.DeadListParams{Limit: 1000})
			if err != nil {
				report("view %d: %v", i, err)
				return
			}
			// Every letter, but the one replayed meanwhile if the view
			// came after the replay.
			seen := map[string]bool{}
			for _, l := range page.Letters {
				seen[l.ID] = true
			}
			missing := 0
			for _, m := range msgs {
				if !seen[m.ID] && m.ID != one {
					missing++
				}
			}
			if missing > 0 {
				report("view %d saw %d dead letters; %d of the %d never replayed were missing", i, len(page.Letters), missing, n-1)
			}
		}()
	}
	// Replays of one letter beside the views: exactly one replays it.
	replayed := make([]int, 6)
	for i := range replayed {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k, err := ds[i%len(ds)].DeadReplay(ctx, q, backend.DeadFilter{IDs: []string{one}})
			if err != nil {
				report("replay %d: %v", i, err)
			}
			replayed[i] = k
		}()
	}
	wg.Wait()
	total := 0
	for _, k := range replayed {
		total += k
	}
	if total != 1 {
		report("%d replays of one letter at once replayed %v; want exactly one to replay it", len(replayed), replayed)
	}
	page, err := d.DeadList(ctx, q, backend.DeadListParams{Limit: 1000})
	if err != nil || len(page.Letters) != n-1 {
		report("after the replay: %d dead letters, %v; want %d", len(page.Letters), err, n-1)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

// TestDeadScanLockGoesWithItsConnection: a scan waits while another
// connection holds the lock, and a process that dies holding it (its
// connection closes) does not keep it.
func TestDeadScanLockGoesWithItsConnection(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a, b := openTest(t), openTest(t)
	q := fmt.Sprintf("deadlock-%d", time.Now().UnixNano())
	t.Cleanup(func() { _ = openTest(t).QueueDelete(context.Background(), q) })
	if _, err := b.DeadList(ctx, q, backend.DeadListParams{Limit: 10}); err != nil {
		t.Fatalf("DeadList with no scan running: %v", err)
	}
	n, s, err := a.queueSession(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.lockDeadScan(ctx, s, q, n); err != nil {
		t.Fatalf("lockDeadScan: %v", err)
	}
	short, stop := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = b.DeadList(short, q, backend.DeadListParams{Limit: 10})
	stop()
	if err == nil {
		t.Fatal("DeadList ran while another connection held the scan lock")
	}
	_ = a.Close() // the holder dies: its connection closes
	if _, err := b.DeadList(ctx, q, backend.DeadListParams{Limit: 10}); err != nil {
		t.Fatalf("DeadList after the holder's connection closed: %v", err)
	}
}

// TestDeadImportsAtOnceStoreOnce: four imports of the same letters at once,
// two per connection, store each letter once (each checks the dead queue
// and publishes under the scan lock; when an import released the lock
// before publishing, the next one, handed the lock at once within its
// driver, stored the letters again).
func TestDeadImportsAtOnceStoreOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a, b := openTest(t), openTest(t)
	q := fmt.Sprintf("deadimport-%d", time.Now().UnixNano())
	t.Cleanup(func() { _ = openTest(t).QueueDelete(context.Background(), q) })
	letters := make([]backend.DeadLetter, 5)
	for i := range letters {
		letters[i] = backend.DeadLetter{Message: testMsg(fmt.Sprintf("%s-%d", q, i)), Queue: q, Attempts: 3, Reason: "moved"}
	}
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i, d := range []*Driver{a, a, b, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = d.DeadImport(ctx, q, letters)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("import %d: %v", i, err)
		}
	}
	page, err := a.DeadList(ctx, q, backend.DeadListParams{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, l := range page.Letters {
		count[l.ID]++
	}
	for _, l := range letters {
		if count[l.ID] != 1 {
			t.Errorf("letter %s stored %d times; want once", l.ID, count[l.ID])
		}
	}
}

// TestDeadScanPastItsWindow: scans read more letters than one window of
// unacked letters (scanPrefetch) without stalling, page through them in
// order with none twice, stop early for a first page, and find a letter
// by id at the end of the queue; the letters read go back in their places.
func TestDeadScanPastItsWindow(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	d := openTest(t)
	q := fmt.Sprintf("deadwindow-%d", time.Now().UnixNano())
	t.Cleanup(func() { _ = openTest(t).QueueDelete(context.Background(), q) })
	const n = 3*scanPrefetch + 17
	var ids []string
	for batch := 0; batch < n; batch += scanPrefetch * 2 / 3 {
		var letters []backend.DeadLetter
		for i := batch; i < min(batch+scanPrefetch*2/3, n); i++ {
			m := testMsg(fmt.Sprintf("%s-%04d", q, i))
			ids = append(ids, m.ID)
			letters = append(letters, backend.DeadLetter{Message: m, Queue: q, Attempts: 1, Reason: "r"})
		}
		// Each import scans what the queue holds already.
		if err := d.DeadImport(ctx, q, letters); err != nil {
			t.Fatalf("import from letter %d: %v", batch, err)
		}
	}
	var got []string
	cursor := ""
	for pages := 0; ; pages++ {
		page, err := d.DeadList(ctx, q, backend.DeadListParams{Limit: 100, Cursor: cursor, WithoutBodies: true})
		if err != nil {
			t.Fatalf("page %d: %v", pages, err)
		}
		for _, l := range page.Letters {
			got = append(got, l.ID)
		}
		if page.Next == "" {
			break
		}
		cursor = page.Next
	}
	if !slices.Equal(got, ids) {
		t.Fatalf("paging listed %d letters; want the %d imported, in order", len(got), len(ids))
	}
	last := ids[len(ids)-1]
	page, err := d.DeadList(ctx, q, backend.DeadListParams{Limit: 1, IDs: []string{last, "no-such-letter"}})
	if err != nil || len(page.Letters) != 1 || page.Letters[0].ID != last {
		t.Fatalf("DeadList of the last letter by id: %v, %v", page.Letters, err)
	}
	if n, err := d.DeadPurge(ctx, q, backend.DeadFilter{IDs: []string{ids[0], last}}); err != nil || n != 2 {
		t.Fatalf("DeadPurge of the first and last letters = %d, %v; want 2", n, err)
	}
	st, err := d.QueueStats(ctx, q)
	if err != nil || st.Dead != int64(len(ids)-2) {
		t.Errorf("after purging two, Dead = %d, %v; want %d (none lost by the scans)", st.Dead, err, len(ids)-2)
	}
}
