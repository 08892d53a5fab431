package ui_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/ui"
)

// TestReadyByLevel: where the broker counts ready messages per priority
// level, the queue page shows them, highest first, once something above
// level 0 is ready; a queue of level 0 alone shows no such line.
func TestReadyByLevel(t *testing.T) {
	forEachBroker(t, func(t *testing.T, b broker, c *fila.Client) {
		q := newQueue(t, c, "uilevels")
		enqueue(t, c, q, fila.Message{Kind: "plain"}, fila.Message{Kind: "plain"})
		o := ui.Options{}
		if b.rabbit {
			o.Queues = []string{q}
		}
		d := newDash(t, c, o)
		if body := d.get("/queues/"+q, http.StatusOK).body; strings.Contains(body, "ready by level") {
			t.Errorf("a queue of level 0 alone shows ready counts by level:\n%s", mainText(body))
		}
		if _, err := c.Enqueue(t.Context(), q, fila.Message{Kind: "urgent", Priority: 3}); err != nil {
			t.Skipf("the driver takes no priorities: %v", err)
		}
		if stats(t, c, q).ReadyByPriority == nil {
			t.Skip("the driver does not count ready messages per level")
		}
		body := d.get("/queues/"+q, http.StatusOK).body
		want := `ready by level: <span class="level">3: <b>1</b></span> <span class="level">2: <b>0</b></span> <span class="level">1: <b>0</b></span> <span class="level">0: <b>2</b></span>`
		if !strings.Contains(body, want) {
			t.Errorf("the queue page lacks %s:\n%s", want, mainText(body))
		}
	})
}
