package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/internal/testenv"
)

// diamond is a workflow A → B, A → C, B+C → D started for a test, on
// queues q1 (A, B) and q2 (C, D), deleted when the test ends.
type diamond struct {
	id     string
	q1, q2 string
	// msg are the steps' message ids by name.
	msg map[string]string
}

// startDiamond starts a diamond workflow, or skips the test when the
// driver cannot run workflows.
func startDiamond(t *testing.T, c *fila.Client, b broker) diamond {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w := diamond{id: unique("wf"), q1: unique("wfq1"), q2: unique("wfq2"), msg: map[string]string{}}
	testenv.CleanupQueue(t, c, w.q1)
	testenv.CleanupQueue(t, c, w.q2)
	step := func(name, q string, after ...string) fila.WorkflowStep {
		return fila.WorkflowStep{Name: name, Queue: q, After: after,
			Message: fila.Message{Kind: "wf." + name, Body: []byte("<b>body of " + name + "</b>")}}
	}
	_, err := c.WorkflowStart(ctx, fila.WorkflowParams{ID: w.id, Steps: []fila.WorkflowStep{
		step("A", w.q1), step("B", w.q1, "A"), step("C", w.q2, "A"), step("D", w.q2, "B", "C"),
	}})
	if errors.Is(err, fila.ErrUnsupported) {
		t.Skipf("the %s driver cannot run workflows: %v", b.name, err)
	}
	if err != nil {
		t.Fatalf("WorkflowStart: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = c.WorkflowDelete(ctx, w.id)
	})
	st, err := c.WorkflowShow(ctx, w.id)
	if err != nil {
		t.Fatalf("WorkflowShow: %v", err)
	}
	for _, s := range st.Steps {
		w.msg[s.Name] = s.MessageID
	}
	return w
}

// receiveStep receives from queue until it gets the message id, which it
// returns leased for a minute; it fails on any other message (the test's
// queues hold only its own steps).
func receiveStep(t *testing.T, c *fila.Client, queue, id string) *fila.Delivery {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		ds, err := c.Receive(ctx, queue, fila.ReceiveParams{Max: 1, Lease: time.Minute})
		if err != nil {
			t.Fatalf("receiving step %s from %s: %v", id, queue, err)
		}
		for _, d := range ds {
			if d.ID != id {
				t.Fatalf("received %s (%v) from %s, want step %s", d.ID, d.Headers, queue, id)
			}
			return d
		}
	}
}

// stepRow is one row of fila workflow show's step table.
type stepRow struct {
	queue, status, attempt, after, id, note string
}

// stepRows parses the step table of fila workflow show's output, by step
// name.
func stepRows(t *testing.T, out string) map[string]stepRow {
	t.Helper()
	_, table, ok := strings.Cut(out, "\nSTEP ")
	if !ok {
		t.Fatalf("no step table in\n%s", out)
	}
	rows := map[string]stepRow{}
	for _, line := range strings.Split(table, "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 6 {
			continue
		}
		rows[f[0]] = stepRow{queue: f[1], status: f[2], attempt: f[3], after: f[4], id: f[5], note: strings.Join(f[6:], " ")}
	}
	return rows
}

// TestWorkflowCommands runs fila workflow list, show, cancel and delete on
// a diamond workflow in progress, on every broker: the statuses shown,
// a dead step's reason escaped and what it blocks, the cancel
// dead-lettering the pending step, and the errors of an unknown id.
func TestWorkflowCommands(t *testing.T) {
	t.Parallel()
	forEachBroker(t, func(t *testing.T, url string, b broker) {
		c := client(t, url)
		ctx := context.Background()
		w := startDiamond(t, c, b)
		// queued: where the driver cannot tell a ready step from a
		// running one (it cannot list messages).
		ready, running := "ready", "running"
		if b.noQueueList {
			ready, running = "queued", "queued"
		}

		// Before anything ran: A in its queue, the rest pending.
		out := ok(t, "", "--url", url, "workflow", "show", w.id)
		for _, want := range []string{"id:        " + w.id + "\n", "cancelled: no\n", "steps:     4: 1 " + ready + ", 3 pending\n"} {
			if !strings.Contains(out, want) {
				t.Errorf("workflow show lacks %q:\n%s", want, out)
			}
		}
		rows := stepRows(t, out)
		if r := rows["A"]; r.queue != w.q1 || r.status != ready || r.after != "-" || r.id != w.msg["A"] {
			t.Errorf("step A before it ran: %+v\n%s", r, out)
		}
		if r := rows["D"]; r.queue != w.q2 || r.status != "pending" || r.after != "B,C" || r.note != "" {
			t.Errorf("step D before A ran: %+v\n%s", r, out)
		}

		// A done releases B and C; B runs, C waits.
		if err := receiveStep(t, c, w.q1, w.msg["A"]).Ack(ctx); err != nil {
			t.Fatal(err)
		}
		dB := receiveStep(t, c, w.q1, w.msg["B"])
		out = ok(t, "", "--url", url, "workflow", "show", w.id)
		rows = stepRows(t, out)
		want := map[string]string{"A": "done", "B": running, "C": ready, "D": "pending"}
		for name, st := range want {
			if rows[name].status != st {
				t.Errorf("step %s is %q, want %q (A acked, B received)\n%s", name, rows[name].status, st, out)
			}
		}
		if !b.noQueueList && rows["B"].attempt != "1" {
			t.Errorf("running step B shows attempt %q, want 1\n%s", rows["B"].attempt, out)
		}

		// --json says the same, with every field.
		var j workflowJSON
		if err := json.Unmarshal([]byte(ok(t, "", "--url", url, "workflow", "show", w.id, "--json")), &j); err != nil {
			t.Fatal(err)
		}
		if j.ID != w.id || j.Cancelled || j.Done || len(j.Steps) != 4 || j.Counts["done"] != 1 || j.Counts["pending"] != 1 || j.Created.IsZero() {
			t.Errorf("workflow show --json = %+v", j)
		}
		for _, s := range j.Steps {
			if s.Status != want[s.Name] || s.MessageID != w.msg[s.Name] {
				t.Errorf("--json step %+v; want status %s, message id %s", s, want[s.Name], w.msg[s.Name])
			}
		}

		// C dies with a reason holding markup and terminal escapes: it is
		// shown escaped, first line only, and D is blocked by it.
		const reason = "<script>x</script> \x1b]0;pwned\x07\x1b[2J gone\nsecond line"
		if err := receiveStep(t, c, w.q2, w.msg["C"]).Dead(ctx, reason); err != nil {
			t.Fatal(err)
		}
		out = ok(t, "", "--url", url, "workflow", "show", w.id)
		if strings.ContainsAny(out, "\x1b\x07") {
			t.Errorf("workflow show printed a control character of the reason:\n%q", out)
		}
		rows = stepRows(t, out)
		if r := rows["C"]; r.status != "dead" || r.attempt != "1" || r.note != `<script>x</script> \x1b]0;pwned\a\x1b[2J gone …` {
			t.Errorf("dead step C: %+v\n%s", r, out)
		}
		if r := rows["D"]; r.status != "pending" || r.note != "blocked by C" {
			t.Errorf("step D after C died: %+v\n%s", r, out)
		}
		if !strings.Contains(out, "replay it (fila dead replay -q QUEUE --id MESSAGE-ID)") {
			t.Errorf("workflow show does not say how to unblock the workflow:\n%s", out)
		}
		if err := json.Unmarshal([]byte(ok(t, "", "--url", url, "workflow", "show", w.id, "--json")), &j); err != nil {
			t.Fatal(err)
		}
		for _, s := range j.Steps {
			if s.Name == "C" && s.Reason != reason || s.Name == "D" && strings.Join(s.BlockedBy, ",") != "C" {
				t.Errorf("--json step %+v after C died", s)
			}
		}

		// list names it (where the driver lists queues).
		r := cli(t, "", "--url", url, "workflow", "list")
		if b.noQueueList {
			if r.code != exitUnsupported || !strings.Contains(r.stderr, "fila workflow show ID") {
				t.Errorf("workflow list without queue listing: exit %d, stderr %q; want 4 and a hint", r.code, r.stderr)
			}
		} else if r.code != 0 || !strings.Contains("\n"+r.stdout, "\n"+w.id+"\n") {
			t.Errorf("workflow list: exit %d, stdout %q, stderr %q; want it to list %s", r.code, r.stdout, r.stderr, w.id)
		}

		// An unfinished workflow is not deleted without --force.
		fails(t, exitError, "is not finished (1 done, 1 "+running+", 1 pending, 1 dead); nothing deleted (cancel it first with 'fila workflow cancel "+w.id+"'", "",
			"--url", url, "workflow", "delete", w.id, "--yes")

		// Cancel: D, pending, is dead-lettered with the cancel's reason;
		// B, running, is dead-lettered at its ack.
		out = ok(t, "", "--url", url, "workflow", "cancel", w.id)
		if !strings.HasPrefix(out, fmt.Sprintf("cancelled workflow %s: 1 pending step(s) dead-lettered with reason %q; 1 step(s) in their queues ", w.id, fila.ReasonWorkflowCancelled)) ||
			!strings.HasSuffix(out, "; 1 done and 1 dead before left as they were\n") {
			t.Errorf("workflow cancel printed %q", out)
		}
		page, err := c.DeadList(ctx, w.q2, fila.DeadListParams{IDs: []string{w.msg["D"]}, Limit: 1})
		if err != nil || len(page.Letters) != 1 || page.Letters[0].Reason != fila.ReasonWorkflowCancelled {
			t.Errorf("dead letters of %s after the cancel: %+v, %v; want step D with reason %q", w.q2, page.Letters, err, fila.ReasonWorkflowCancelled)
		}
		if err := dB.Ack(ctx); !errors.Is(err, fila.ErrCancelled) {
			t.Errorf("ack of running step B after the cancel: %v, want ErrCancelled", err)
		}
		out = ok(t, "", "--url", url, "workflow", "show", w.id)
		rows = stepRows(t, out)
		if !strings.Contains(out, "cancelled: yes\n") || rows["D"].status != "dead" || rows["D"].note != fila.ReasonWorkflowCancelled ||
			rows["B"].status != "dead" || rows["A"].status != "done" || strings.Contains(out, "replay it") {
			t.Errorf("workflow show after the cancel:\n%s", out)
		}
		if out := ok(t, "", "--url", url, "workflow", "cancel", w.id); out != "workflow "+w.id+" was cancelled already; nothing changed\n" {
			t.Errorf("a second cancel printed %q", out)
		}

		// Delete, after the confirmation; then the id is unknown.
		fails(t, exitError, "aborted; nothing deleted", "n\n", "--url", url, "workflow", "delete", w.id)
		r = cli(t, "y\n", "--url", url, "workflow", "delete", w.id)
		if r.code != 0 || r.stdout != "deleted workflow "+w.id+"\n" || !strings.Contains(r.stderr, "Delete workflow "+w.id+" (4 steps: 1 done, 3 dead) for good? [y/N]") {
			t.Fatalf("workflow delete: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
		}
		fails(t, exitError, "no workflow "+w.id+": never started, deleted, or mistyped (fila workflow list shows", "", "--url", url, "workflow", "show", w.id)
		if !b.noQueueList {
			if out := ok(t, "", "--url", url, "workflow", "list"); strings.Contains(out, w.id) {
				t.Errorf("workflow list after the delete still names %s:\n%s", w.id, out)
			}
		}
	})
}

// TestWorkflowErrors: unknown and invalid ids, and wrong arguments, exit
// with codes and messages that say what to do.
func TestWorkflowErrors(t *testing.T) {
	t.Parallel()
	forEachBroker(t, func(t *testing.T, url string, b broker) {
		missing := unique("nowf")
		fails(t, exitError, "no workflow "+missing+": never started, deleted, or mistyped (fila workflow list shows the ids", "", "--url", url, "workflow", "show", missing)
		fails(t, exitError, "no workflow "+missing, "", "--url", url, "workflow", "cancel", missing)
		r := cli(t, "", "--url", url, "workflow", "delete", missing, "--yes")
		if r.code != 0 || r.stdout != "nothing to delete: no workflow "+missing+"\n" || !strings.Contains(r.stderr, "fila: warning: no workflow "+missing) {
			t.Errorf("workflow delete of an unknown id: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
		}
		if b.name != "memory" {
			return // the rest never reaches the broker
		}
		for _, sub := range []string{"show", "cancel", "delete"} {
			fails(t, exitUsage, "workflow id \"bad/id\" has '/'", "", "--url", url, "workflow", sub, "bad/id")
			fails(t, exitUsage, "name one workflow id (fila workflow "+sub+" ID)", "", "--url", url, "workflow", sub)
			fails(t, exitUsage, "For usage, see 'fila workflow "+sub+" --help'.", "", "--url", url, "workflow", sub, "a", "b")
		}
		fails(t, exitUsage, "takes no arguments", "", "--url", url, "workflow", "list", "x")
	})
}

// TestWorkflowUnsupported: a driver without workflows exits 4, naming it.
func TestWorkflowUnsupported(t *testing.T) {
	t.Parallel()
	url := "clitest-uncounted://" + unique("wfunsup")
	for _, args := range [][]string{{"show", "x"}, {"cancel", "x"}} {
		fails(t, exitUnsupported, "workflows", "", append([]string{"--url", url, "workflow"}, args...)...)
	}
}

// TestWorkflowCancelReport: the cancel's output on a driver that cannot
// cancel the steps in queues says they will run.
func TestWorkflowCancelReport(t *testing.T) {
	st := fila.WorkflowState{ID: "w", Steps: []fila.StepState{{Status: fila.StepDone}, {Status: "queued"}, {Status: fila.StepPending}, {Status: fila.StepPending}}}
	got := workflowCancelReport(&st, false)
	want := "cancelled workflow w: 2 pending step(s) dead-lettered with reason \"workflow cancelled\"; 1 step(s) in their queues will run, and be dead-lettered at their ack (the broker cannot cancel messages); 1 done and 0 dead before left as they were\n"
	if got != want {
		t.Errorf("workflowCancelReport = %q\nwant %q", got, want)
	}
	if got := statusCounts(&st); got != "1 done, 1 queued, 2 pending" {
		t.Errorf("statusCounts = %q", got)
	}
	names := []string{"a", "b\x1b", "c", "d", "e"}
	if got := shortNames(names); got != `a,b\x1b,c +2 more` {
		t.Errorf("shortNames = %q", got)
	}
}
