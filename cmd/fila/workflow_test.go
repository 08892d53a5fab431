package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/internal/testenv"
)

// startDiamond starts a diamond workflow (testenv.StartDiamond) on queues
// deleted when the test ends, or skips the test when the driver cannot run
// workflows.
func startDiamond(t *testing.T, c *fila.Client, b broker) testenv.Diamond {
	t.Helper()
	q1, q2 := unique("wfq1"), unique("wfq2")
	testenv.CleanupQueue(t, c, q1)
	testenv.CleanupQueue(t, c, q2)
	return testenv.StartDiamond(t, c, b.name, unique("wf"), q1, q2,
		func(step string) []byte { return []byte("<b>body of " + step + "</b>") })
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
		out := ok(t, "", "--url", url, "workflow", "show", w.ID)
		for _, want := range []string{"id:        " + w.ID + "\n", "cancelled: no\n", "steps:     4: 1 " + ready + ", 3 pending\n"} {
			if !strings.Contains(out, want) {
				t.Errorf("workflow show lacks %q:\n%s", want, out)
			}
		}
		rows := stepRows(t, out)
		if r := rows["A"]; r.queue != w.Q1 || r.status != ready || r.after != "-" || r.id != w.Msg["A"] {
			t.Errorf("step A before it ran: %+v\n%s", r, out)
		}
		if r := rows["D"]; r.queue != w.Q2 || r.status != "pending" || r.after != "B,C" || r.note != "" {
			t.Errorf("step D before A ran: %+v\n%s", r, out)
		}

		// A done releases B and C; B runs, C waits.
		if err := testenv.ReceiveStep(t, c, w.Q1, w.Msg["A"]).Ack(ctx); err != nil {
			t.Fatal(err)
		}
		dB := testenv.ReceiveStep(t, c, w.Q1, w.Msg["B"])
		out = ok(t, "", "--url", url, "workflow", "show", w.ID)
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
		if err := json.Unmarshal([]byte(ok(t, "", "--url", url, "workflow", "show", w.ID, "--json")), &j); err != nil {
			t.Fatal(err)
		}
		if j.ID != w.ID || j.Cancelled || j.Done || len(j.Steps) != 4 || j.Counts["done"] != 1 || j.Counts["pending"] != 1 || j.Created.IsZero() {
			t.Errorf("workflow show --json = %+v", j)
		}
		for _, s := range j.Steps {
			if s.Status != want[s.Name] || s.MessageID != w.Msg[s.Name] {
				t.Errorf("--json step %+v; want status %s, message id %s", s, want[s.Name], w.Msg[s.Name])
			}
		}

		// C dies with a reason holding markup and terminal escapes: it is
		// shown escaped, first line only, and D is blocked by it.
		const reason = "<script>x</script> \x1b]0;pwned\x07\x1b[2J gone\nsecond line"
		if err := testenv.ReceiveStep(t, c, w.Q2, w.Msg["C"]).Dead(ctx, reason); err != nil {
			t.Fatal(err)
		}
		out = ok(t, "", "--url", url, "workflow", "show", w.ID)
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
		if err := json.Unmarshal([]byte(ok(t, "", "--url", url, "workflow", "show", w.ID, "--json")), &j); err != nil {
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
		} else if r.code != 0 || !strings.Contains("\n"+r.stdout, "\n"+w.ID+"\n") {
			t.Errorf("workflow list: exit %d, stdout %q, stderr %q; want it to list %s", r.code, r.stdout, r.stderr, w.ID)
		}

		// An unfinished workflow is not deleted without --force.
		fails(t, exitError, "is not finished (1 done, 1 "+running+", 1 pending, 1 dead); nothing deleted (cancel it first with 'fila workflow cancel "+w.ID+"'", "",
			"--url", url, "workflow", "delete", w.ID, "--yes")

		// Cancel: D, pending, is dead-lettered with the cancel's reason;
		// B, running, is dead-lettered at its ack.
		out = ok(t, "", "--url", url, "workflow", "cancel", w.ID)
		if !strings.HasPrefix(out, fmt.Sprintf("cancelled workflow %s: 1 pending step(s) dead-lettered with reason %q; 1 step(s) in their queues ", w.ID, fila.ReasonWorkflowCancelled)) ||
			!strings.HasSuffix(out, "; 1 done and 1 dead before left as they were\n") {
			t.Errorf("workflow cancel printed %q", out)
		}
		page, err := c.DeadList(ctx, w.Q2, fila.DeadListParams{IDs: []string{w.Msg["D"]}, Limit: 1})
		if err != nil || len(page.Letters) != 1 || page.Letters[0].Reason != fila.ReasonWorkflowCancelled {
			t.Errorf("dead letters of %s after the cancel: %+v, %v; want step D with reason %q", w.Q2, page.Letters, err, fila.ReasonWorkflowCancelled)
		}
		if err := dB.Ack(ctx); !errors.Is(err, fila.ErrCancelled) {
			t.Errorf("ack of running step B after the cancel: %v, want ErrCancelled", err)
		}
		out = ok(t, "", "--url", url, "workflow", "show", w.ID)
		rows = stepRows(t, out)
		if !strings.Contains(out, "cancelled: yes\n") || rows["D"].status != "dead" || rows["D"].note != fila.ReasonWorkflowCancelled ||
			rows["B"].status != "dead" || rows["A"].status != "done" || strings.Contains(out, "replay it") {
			t.Errorf("workflow show after the cancel:\n%s", out)
		}
		if out := ok(t, "", "--url", url, "workflow", "cancel", w.ID); out != "workflow "+w.ID+" was cancelled already; nothing changed\n" {
			t.Errorf("a second cancel printed %q", out)
		}

		// Delete, after the confirmation; then the id is unknown.
		fails(t, exitError, "aborted; nothing deleted", "n\n", "--url", url, "workflow", "delete", w.ID)
		r = cli(t, "y\n", "--url", url, "workflow", "delete", w.ID)
		if r.code != 0 || r.stdout != "deleted workflow "+w.ID+"\n" || !strings.Contains(r.stderr, "Delete workflow "+w.ID+" (4 steps: 1 done, 3 dead) for good? [y/N]") {
			t.Fatalf("workflow delete: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
		}
		fails(t, exitError, "no workflow "+w.ID+": never started, deleted, or mistyped (fila workflow list shows", "", "--url", url, "workflow", "show", w.ID)
		if !b.noQueueList {
			if out := ok(t, "", "--url", url, "workflow", "list"); strings.Contains(out, w.ID) {
				t.Errorf("workflow list after the delete still names %s:\n%s", w.ID, out)
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
