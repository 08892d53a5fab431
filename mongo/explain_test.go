package mongo

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/fila-go/fila/backend"
)

// TestClaimUsesIndex checks with explain that the claim (the
// findOneAndUpdate) and the batch claim's read are served by the claim
// index (levels first), and the next-due query by the due index, not a
// collection scan or an in-memory sort.
func TestClaimUsesIndex(t *testing.T) {
	t.Parallel()
	s := mongoServer(t)
	if s.caps.FerretDB {
		t.Skip("FerretDB v1 explain output is its SQL backend's query plan, not MongoDB's winningPlan (and it sorts in its own process)")
	}
	db := testDatabase(t, s)
	drv := openDriver(t, s, map[string]string{"fila_database": db})
	q := uniqueQueue("explain")
	for i := 0; i < 20; i++ {
		enqueueOne(t, drv, q, backend.Message{Delay: time.Duration(i%3) * time.Hour})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	now := time.Now()
	index := map[string]string{"claim": claimIndex, "batch claim candidates": claimIndex, "next due time": dueIndex}
	cmds := map[string]bson.D{
		"claim": {{Key: "findAndModify", Value: drv.msgs.Name()}, {Key: "query", Value: claimFilter(q, now)},
			{Key: "sort", Value: claimSort}, {Key: "update", Value: claimUpdate("r", now, time.Minute)}, {Key: "new", Value: true}},
		"batch claim candidates": {{Key: "find", Value: drv.msgs.Name()}, {Key: "filter", Value: claimFilter(q, now)},
			{Key: "sort", Value: claimSort}, {Key: "limit", Value: 10}},
		"next due time": {{Key: "find", Value: drv.msgs.Name()}, {Key: "filter", Value: bson.D{{Key: "q", Value: q}}},
			{Key: "sort", Value: dueSort}, {Key: "limit", Value: 1}, {Key: "projection", Value: bson.D{{Key: "due", Value: 1}}}},
	}
	for name, cmd := range cmds {
		var out bson.Raw
		err := drv.client.Database(db).RunCommand(ctx, bson.D{{Key: "explain", Value: cmd}, {Key: "verbosity", Value: "queryPlanner"}}).Decode(&out)
		if err != nil {
			t.Fatalf("explain %s: %v", name, err)
		}
		plan, err := out.LookupErr("queryPlanner", "winningPlan")
		if err != nil {
			t.Fatalf("explain %s: no queryPlanner.winningPlan in %s", name, out)
		}
		text := plan.String()
		if !strings.Contains(text, "IXSCAN") || !strings.Contains(text, `"`+index[name]+`"`) {
			t.Errorf("%s: winning plan does not scan index %s: %s", name, index[name], text)
		}
		if strings.Contains(text, "COLLSCAN") || strings.Contains(text, `"SORT"`) {
			t.Errorf("%s: winning plan scans the collection or sorts in memory: %s", name, text)
		}
	}
}
