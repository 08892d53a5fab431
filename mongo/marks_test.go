package mongo

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// TestMarkListSweeps: MarkList deletes the expired marks it passes, not
// only hides them, and leaves live marks and other queues alone.
func TestMarkListSweeps(t *testing.T) {
	t.Parallel()
	s := mongoServer(t)
	db := testDatabase(t, s)
	drv := openDriver(t, s, map[string]string{"fila_database": db})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	q, other := uniqueQueue("sweep"), uniqueQueue("sweep")
	past := time.Now().Add(-time.Minute)
	for i := range 5 {
		for _, qq := range []string{q, other} {
			if _, err := drv.MarkSet(ctx, qq, fmt.Sprintf("old/%d", i), past, false); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, name := range []string{"live", "later"} {
		until := time.Time{}
		if name == "later" {
			until = time.Now().Add(time.Hour)
		}
		if _, err := drv.MarkSet(ctx, q, name, until, false); err != nil {
			t.Fatal(err)
		}
	}
	names, err := drv.MarkList(ctx, q, "")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(names, []string{"later", "live"}) {
		t.Errorf("MarkList = %q, want [later live]", names)
	}
	count := func(queue string) int64 {
		t.Helper()
		n, err := drv.marks.CountDocuments(ctx, bson.D{{Key: "q", Value: queue}})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := count(q); n != 2 {
		t.Errorf("after MarkList, %d documents of the queue, want the 2 live marks", n)
	}
	if n := count(other); n == 0 && !hasIndex(t, drv, marksExpiryIndex) {
		t.Errorf("MarkList of one queue deleted another's marks")
	}
}

// TestMarksIndexCreatedOnOpen: opening a driver on a database prepared
// before marks existed creates the marks collection's index.
func TestMarksIndexCreatedOnOpen(t *testing.T) {
	t.Parallel()
	s := mongoServer(t)
	db := testDatabase(t, s)
	drv := openDriver(t, s, map[string]string{"fila_database": db})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := drv.marks.Drop(ctx); err != nil {
		t.Fatal(err)
	}
	drv = openDriver(t, s, map[string]string{"fila_database": db})
	if !hasIndex(t, drv, marksIndex) {
		t.Errorf("no index %s on %s after opening", marksIndex, drv.marks.Name())
	}
	if !s.caps.FerretDB && !hasIndex(t, drv, marksExpiryIndex) {
		t.Errorf("no TTL index %s on %s after opening", marksExpiryIndex, drv.marks.Name())
	}
}

func hasIndex(t *testing.T, drv *Driver, name string) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	names, err := indexNames(ctx, drv.marks)
	if err != nil {
		t.Fatal(err)
	}
	return slices.Contains(names, name)
}
