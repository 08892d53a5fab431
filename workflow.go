package fila

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fila-go/fila/backend"
	"github.com/fila-go/fila/internal/uuidtext"
)

// Workflows (workflow.go, workflow_ack.go). A workflow is a set of steps,
// each a message for a queue, some of which wait for others. The portable
// layer keeps its bookkeeping in the broker, on every driver alike, in a
// queue of its own named workflowQueuePrefix+id:
//
//   - a dead letter holding the manifest (every step's name, queue, id and
//     dependencies, and the messages of the steps that wait), written once
//     at start;
//   - a dead letter per step result;
//   - marks: "started" (an id is used once), "live" (neither cancelled nor
//     deleted: the one mark an ack reads first), "cancelled", one per
//     finished step ("e/<D>/<b>/<X>":
//     X done, as a dependency of D, in D's bucket b; "d/<X>" for a step
//     nothing waits for), "f/<D>/<b>" (bucket b of D's dependencies all
//     done, for steps with more than workflowBucket dependencies),
//     "rel/<D>" (D was released, or dead-lettered by a cancel: of the two,
//     whoever creates it first acts) and "enq/<D>" (and has been enqueued
//     or dead-lettered: a redelivered dependency need not do it again).
//
// A step waits out of the broker's queues (in the manifest) until the ack
// of its last dependency releases it. docs/design.md has the reasoning.

// Headers the portable layer sets on a workflow step's message.
const (
	// HeaderWorkflow is the header carrying a step's workflow id.
	HeaderWorkflow = "fila-workflow"
	// HeaderStep is the header carrying a step's name.
	HeaderStep = "fila-step"
)

// Limits of workflows.
const (
	// MaxWorkflowSteps is the most steps a workflow may have.
	MaxWorkflowSteps = 50_000
	// MaxStepNameLen is the longest step name, in bytes.
	MaxStepNameLen = 64
	// MaxWorkflowIDLen is the longest workflow id, in bytes.
	MaxWorkflowIDLen = 64
	// MaxResultBytes is the largest result a step may leave
	// (Delivery.SetResult), in bytes.
	MaxResultBytes = 64 << 10
	// MaxWorkflowManifestBytes bounds the stored definition of a workflow:
	// its steps' names, queues and dependencies, and the messages of the
	// steps that wait for others, encoded as JSON.
	MaxWorkflowManifestBytes = 8 << 20
)

// ReasonWorkflowCancelled is the dead-letter reason of a step that had
// not run when its workflow was cancelled.
const ReasonWorkflowCancelled = "workflow cancelled"

// ErrWorkflowNotFound is returned for a workflow id the broker holds no
// workflow under (never started, or deleted).
var ErrWorkflowNotFound = errors.New("fila: workflow not found")

const (
	workflowQueuePrefix = "fila.wf."
	workflowKind        = "fila.workflow"
	workflowResultKind  = "fila.workflow.result"
	// workflowBucket is how many of a step's dependencies one mark listing
	// covers when counting how many are done.
	workflowBucket = 100
)

// WorkflowStep is one step of a workflow: a message for a queue, enqueued
// once every step named in After has completed (was acked).
type WorkflowStep struct {
	// Name identifies the step within its workflow: 1 to MaxStepNameLen
	// bytes of ASCII letters, digits, '.', '_' and '-'.
	Name string
	// Queue is where the step's message goes; steps may use different
	// queues, run by different workers.
	Queue string
	// Message is the step's message. It may not set DedupKey or UniqueFor
	// (the workflow sets its own dedup key where the driver has them). A
	// Delay counts from when the step is released, a RunAt is absolute.
	Message Message
	// After names the steps this one waits for. Empty: the step is
	// enqueued when the workflow starts.
	After []string
}

// WorkflowParams define a workflow for WorkflowStart.
type WorkflowParams struct {
	// ID, when set, names the workflow (1 to MaxWorkflowIDLen bytes of
	// ASCII letters, digits, '.', '_' and '-', starting with a letter or
	// digit); starting a second workflow of the same id returns
	// ErrDuplicate. Empty: a new unique id.
	ID string
	// Steps are the workflow's steps, in any order; at least one has no
	// After. There is no cycle.
	Steps []WorkflowStep
}

// wfManifest is what a workflow's manifest dead letter holds, as JSON.
type wfManifest struct {
	V       int       `json:"v"`
	ID      string    `json:"id"`
	Created time.Time `json:"created"`
	Steps   []wfStep  `json:"steps"`
}

type wfStep struct {
	Name  string   `json:"name"`
	Queue string   `json:"queue"`
	ID    string   `json:"msg_id"`
	After []string `json:"after,omitempty"`
	// Msg is the message of a step that waits (After not empty).
	Msg *wfMessage `json:"msg,omitempty"`
}

type wfMessage struct {
	Kind        string            `json:"kind"`
	Body        []byte            `json:"body"`
	Headers     map[string]string `json:"headers,omitempty"`
	Delay       time.Duration     `json:"delay,omitempty"`
	RunAt       time.Time         `json:"run_at,omitzero"`
	MaxAttempts int               `json:"max_attempts,omitempty"`
	Priority    int               `json:"priority,omitempty"`
}

// wfIndex is a manifest with what the ack path needs, computed once.
type wfIndex struct {
	m      wfManifest
	byName map[string]int
	// deps[i] are the indexes of step i's dependencies, in After's order.
	deps [][]int
	// next[x] are the steps waiting for step x, each with the bucket x
	// falls in among that step's dependencies.
	next [][]wfEdge
}

type wfEdge struct{ step, bucket int }

func (ix *wfIndex) buckets(d int) int { return (len(ix.deps[d]) + workflowBucket - 1) / workflowBucket }

// doneMark is the mark whose presence says step x completed.
func (ix *wfIndex) doneMark(x int) string {
	if len(ix.next[x]) == 0 {
		return "d/" + ix.m.Steps[x].Name
	}
	e := ix.next[x][0]
	return ix.edgeMark(e.step, e.bucket, x)
}

func (ix *wfIndex) edgeMark(d, b, x int) string {
	return ix.bucketPrefix(d, b) + ix.m.Steps[x].Name
}

func (ix *wfIndex) bucketPrefix(d, b int) string {
	return "e/" + ix.m.Steps[d].Name + "/" + strconv.Itoa(b) + "/"
}

func (ix *wfIndex) fullPrefix(d int) string { return "f/" + ix.m.Steps[d].Name + "/" }

func workflowQueue(id string) string { return workflowQueuePrefix + id }

// workflowDerivedID is a stable UUID-shaped id for a workflow's own dead
// letters (manifest, results), so writing one twice stores it once.
func workflowDerivedID(id, what string) string {
	h := sha256.Sum256([]byte("fila-workflow\x00" + id + "\x00" + what))
	var b [16]byte
	copy(b[:], h[:16])
	b[6] = b[6]&0x0f | 0x80 // version 8: custom
	b[8] = b[8]&0x3f | 0x80 // RFC 9562 variant
	return uuidtext.Format(b)
}

// validateWorkflowName checks a workflow id or step name (what names it,
// for the error): 1 to max bytes of the queue-name alphabet.
func validateWorkflowName(what string, max int, name string) error {
	if name == "" || len(name) > max {
		return invalidf("%s %.40q must be 1 to %d bytes", what, name, max)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if i == 0 && !alnum {
			return invalidf("%s %q must start with a letter or digit", what, name)
		}
		if !alnum && c != '.' && c != '_' && c != '-' {
			return invalidf("%s %q has %q; use letters, digits, '.', '_' and '-'", what, name, c)
		}
	}
	return nil
}

// ValidateWorkflowID reports whether id is a valid workflow id.
func ValidateWorkflowID(id string) error {
	return validateWorkflowName("workflow id", MaxWorkflowIDLen, id)
}

// newIndex checks m's graph and indexes it.
func newIndex(m wfManifest) (*wfIndex, error) {
	n := len(m.Steps)
	ix := &wfIndex{m: m, byName: make(map[string]int, n), deps: make([][]int, n), next: make([][]wfEdge, n)}
	for i, s := range m.Steps {
		if err := validateWorkflowName("step name", MaxStepNameLen, s.Name); err != nil {
			return nil, err
		}
		if _, dup := ix.byName[s.Name]; dup {
			return nil, invalidf("two steps are named %q", s.Name)
		}
		ix.byName[s.Name] = i
	}
	for d, s := range m.Steps {
		seen := make(map[int]bool, len(s.After))
		for _, a := range s.After {
			x, ok := ix.byName[a]
			if !ok {
				return nil, invalidf("step %q waits for %q, which is not a step of the workflow", s.Name, a)
			}
			if x == d {
				return nil, invalidf("step %q waits for itself", s.Name)
			}
			if seen[x] {
				return nil, invalidf("step %q names %q twice in After", s.Name, a)
			}
			seen[x] = true
			ix.next[x] = append(ix.next[x], wfEdge{step: d, bucket: len(ix.deps[d]) / workflowBucket})
			ix.deps[d] = append(ix.deps[d], x)
		}
	}
	// Kahn's algorithm: every step must be reachable from the roots.
	indeg := make([]int, n)
	var ready []int
	for d := range m.Steps {
		indeg[d] = len(ix.deps[d])
		if indeg[d] == 0 {
			ready = append(ready, d)
		}
	}
	if len(ready) == 0 {
		return nil, invalidf("every step waits for another: a workflow needs a step without After")
	}
	seen := 0
	for len(ready) > 0 {
		x := ready[len(ready)-1]
		ready = ready[:len(ready)-1]
		seen++
		for _, e := range ix.next[x] {
			if indeg[e.step]--; indeg[e.step] == 0 {
				ready = append(ready, e.step)
			}
		}
	}
	if seen != n {
		for d := range indeg {
			if indeg[d] > 0 {
				return nil, invalidf("step %q is on a cycle of After", m.Steps[d].Name)
			}
		}
	}
	return ix, nil
}

// workflowDriver returns the driver's capabilities workflows need.
func (c *Client) workflowDriver() (backend.DeadLetterer, backend.DeadImporter, error) {
	dl, ok1 := c.drv.(backend.DeadLetterer)
	di, ok2 := c.drv.(backend.DeadImporter)
	if c.marker == nil || !ok1 || !ok2 {
		return nil, nil, &UnsupportedError{Driver: c.name, Capability: "workflows (marks, dead-letter management and import)"}
	}
	return dl, di, nil
}

// WorkflowStart stores a workflow and enqueues its steps that wait for no
// other, and returns the workflow's id. Each step's message carries the
// headers HeaderWorkflow and HeaderStep; its id is fixed now (the step's
// StepState.MessageID). Every later step is enqueued exactly once, by the
// ack of its last dependency (see the package documentation, Workflows,
// for the guarantee on each broker).
//
// The start is not atomic: a call that fails part way may leave a workflow
// whose first steps were not all enqueued. The error says so; cancel it
// with WorkflowCancel, or delete it with WorkflowDelete, and start again.
func (c *Client) WorkflowStart(ctx context.Context, p WorkflowParams) (string, error) {
	_, di, err := c.workflowDriver()
	if err != nil {
		return "", err
	}
	if p.ID == "" {
		p.ID = newID()
	} else if err := ValidateWorkflowID(p.ID); err != nil {
		return "", err
	}
	if len(p.Steps) == 0 {
		return "", invalidf("workflow %s has no steps", p.ID)
	}
	if len(p.Steps) > MaxWorkflowSteps {
		return "", invalidf("workflow has %d steps; the limit is %d", len(p.Steps), MaxWorkflowSteps)
	}
	now := time.Now()
	m := wfManifest{V: 1, ID: p.ID, Created: now.UTC(), Steps: make([]wfStep, len(p.Steps))}
	roots := map[string][]backend.Message{}
	var rootQueues []string
	for i := range p.Steps {
		s := &p.Steps[i]
		if err := ValidateQueueName(s.Queue); err != nil {
			return "", fmt.Errorf("step %q: %w", s.Name, err)
		}
		if strings.HasPrefix(s.Queue, workflowQueuePrefix) || strings.HasPrefix(s.Queue, topicMarkQueue) {
			return "", invalidf("step %q: queue %q is reserved for Fila's bookkeeping", s.Name, s.Queue)
		}
		if s.Message.DedupKey != "" || s.Message.UniqueFor != 0 {
			return "", invalidf("step %q: a workflow step cannot set DedupKey or UniqueFor", s.Name)
		}
		bm, err := c.prepare(&s.Message, now)
		if err != nil {
			return "", fmt.Errorf("step %q: %w", s.Name, err)
		}
		m.Steps[i] = wfStep{Name: s.Name, Queue: s.Queue, ID: bm.ID, After: s.After}
		if len(s.After) > 0 {
			m.Steps[i].Msg = &wfMessage{Kind: s.Message.Kind, Body: bm.Body, Headers: s.Message.Headers,
				Delay: s.Message.Delay, RunAt: s.Message.RunAt, MaxAttempts: s.Message.MaxAttempts, Priority: s.Message.Priority}
		}
	}
	ix, err := newIndex(m)
	if err != nil {
		return "", err
	}
	for i := range p.Steps {
		// Every step's message is checked as it will be enqueued (with
		// the workflow's headers), so no release can fail validation.
		bm, err := c.stepMessage(ix, i, &p.Steps[i].Message, now)
		if err != nil {
			return "", err
		}
		if len(ix.deps[i]) > 0 {
			continue
		}
		q := p.Steps[i].Queue
		if roots[q] == nil {
			rootQueues = append(rootQueues, q)
		}
		roots[q] = append(roots[q], bm)
	}
	body, err := json.Marshal(m)
	if err != nil {
		return "", err
	}
	if len(body) > MaxWorkflowManifestBytes {
		return "", fmt.Errorf("%w: the workflow's definition is %d bytes; the limit is %d (keep waiting steps' bodies small: send ids, not objects)",
			ErrTooLarge, len(body), MaxWorkflowManifestBytes)
	}
	home := workflowQueue(p.ID)
	err = c.call(ctx, func(ctx context.Context) error {
		fresh, err := c.marker.MarkSet(ctx, home, "started", time.Time{}, true)
		if err != nil {
			return err
		}
		if !fresh {
			return fmt.Errorf("%w: workflow %s was started already", ErrDuplicate, p.ID)
		}
		if _, err := c.marker.MarkSet(ctx, home, "live", time.Time{}, true); err != nil {
			return fmt.Errorf("storing workflow %s failed, nothing was enqueued (delete it with WorkflowDelete and start again): %w", p.ID, err)
		}
		letter := backend.DeadLetter{
			Message: backend.Message{ID: workflowDerivedID(p.ID, "manifest"), Kind: workflowKind, Body: body, EnqueuedAt: now},
			Queue:   home, Reason: "workflow manifest", DeadAt: now,
		}
		if err := di.DeadImport(ctx, home, []backend.DeadLetter{letter}); err != nil {
			return fmt.Errorf("storing workflow %s failed, nothing was enqueued (delete it with WorkflowDelete and start again): %w", p.ID, err)
		}
		for _, q := range rootQueues {
			for start := 0; start < len(roots[q]); start += MaxBatch {
				batch := roots[q][start:min(start+MaxBatch, len(roots[q]))]
				if _, err := c.drv.Enqueue(ctx, q, batch); err != nil {
					return fmt.Errorf("workflow %s is started only in part: enqueueing its first steps on queue %s failed (cancel it with WorkflowCancel): %w", p.ID, q, err)
				}
			}
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	c.wfCache.put(p.ID, ix)
	return p.ID, nil
}

// stepMessage is the backend message of step i: the step's own id and
// headers, and a dedup key derived from the workflow where the driver has
// them, so a release repeated after a crash finds the step still pending.
func (c *Client) stepMessage(ix *wfIndex, i int, m *Message, now time.Time) (backend.Message, error) {
	s := ix.m.Steps[i]
	mm := *m
	mm.Headers = make(map[string]string, len(m.Headers)+2)
	for k, v := range m.Headers {
		mm.Headers[k] = v
	}
	mm.Headers[HeaderWorkflow] = ix.m.ID
	mm.Headers[HeaderStep] = s.Name
	if c.dedup {
		mm.DedupKey = "fila-wf:" + ix.m.ID + ":" + s.Name
	}
	bm, err := c.prepare(&mm, now)
	if err != nil {
		return backend.Message{}, fmt.Errorf("step %q: %w", s.Name, err)
	}
	bm.ID = s.ID
	return bm, nil
}

// wfCache keeps the manifests this client read: they never change (a
// workflow deleted and started again under its id is a new manifest).
type wfCache struct {
	mu      sync.Mutex
	m       map[string]*wfIndex
	loading map[string]*wfLoad
}

// wfLoad is a read of a manifest in progress, which other acks wait for.
type wfLoad struct {
	done chan struct{}
	ix   *wfIndex
	err  error
}

const wfCacheSize = 256

func (w *wfCache) get(id string) *wfIndex {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.m[id]
}

func (w *wfCache) put(id string, ix *wfIndex) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil {
		w.m = map[string]*wfIndex{}
	}
	if len(w.m) >= wfCacheSize {
		for k := range w.m { // drop one at random
			delete(w.m, k)
			break
		}
	}
	w.m[id] = ix
}

func (w *wfCache) drop(id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.m, id)
}

// workflow returns workflow id's index. With step and msgID it may use the
// manifest this client read before, unless that names another message id
// for step (the workflow was deleted and started again under its id);
// without, it reads the manifest (WorkflowShow and WorkflowCancel must see
// a workflow deleted by another client).
func (c *Client) workflow(ctx context.Context, id, step, msgID string) (*wfIndex, error) {
	fits := func(ix *wfIndex) bool {
		x, ok := ix.byName[step]
		return ok && ix.m.Steps[x].ID == msgID
	}
	if step == "" {
		return c.readWorkflow(ctx, id)
	}
	if ix := c.wfCache.get(id); ix != nil && fits(ix) {
		return ix, nil
	}
	// The first acks of a new process come in batches: one read of a
	// manifest (which can be megabytes) serves the acks waiting for it.
	c.wfCache.mu.Lock()
	l := c.wfCache.loading[id]
	if l == nil {
		l = &wfLoad{done: make(chan struct{})}
		if c.wfCache.loading == nil {
			c.wfCache.loading = map[string]*wfLoad{}
		}
		c.wfCache.loading[id] = l
		c.wfCache.mu.Unlock()
		l.ix, l.err = c.readWorkflow(ctx, id)
		c.wfCache.mu.Lock()
		delete(c.wfCache.loading, id)
		c.wfCache.mu.Unlock()
		close(l.done)
		return l.ix, l.err
	}
	c.wfCache.mu.Unlock()
	select {
	case <-l.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if l.err == nil && fits(l.ix) {
		return l.ix, nil
	}
	return c.readWorkflow(ctx, id)
}

// readWorkflow reads workflow id's manifest and caches its index.
func (c *Client) readWorkflow(ctx context.Context, id string) (*wfIndex, error) {
	dl, _, err := c.workflowDriver()
	if err != nil {
		return nil, err
	}
	page, err := dl.DeadList(ctx, workflowQueue(id), backend.DeadListParams{Limit: 1, IDs: []string{workflowDerivedID(id, "manifest")}})
	if err != nil {
		return nil, err
	}
	var body []byte
	for _, l := range page.Letters {
		if l.ID == workflowDerivedID(id, "manifest") {
			body = l.Body
		}
	}
	if body == nil {
		c.wfCache.drop(id)
		return nil, fmt.Errorf("%w: %s", ErrWorkflowNotFound, id)
	}
	var m wfManifest
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, fmt.Errorf("fila: workflow %s: reading its manifest: %w", id, err)
	}
	if m.ID != id {
		return nil, fmt.Errorf("fila: workflow %s: its manifest names workflow %q", id, m.ID)
	}
	ix, err := newIndex(m)
	if err != nil {
		return nil, fmt.Errorf("fila: workflow %s: its manifest: %w", id, err)
	}
	c.wfCache.put(id, ix)
	return ix, nil
}

// StepStatus is a workflow step's state.
type StepStatus string

// The states of a workflow step.
const (
	// StepPending: waiting for dependencies; not in any queue yet.
	StepPending StepStatus = "pending"
	// StepReady: in its queue, ready or delayed (a retry's backoff).
	StepReady StepStatus = "ready"
	// StepRunning: leased by a consumer.
	StepRunning StepStatus = "running"
	// StepDone: completed (acked).
	StepDone StepStatus = "done"
	// StepDead: in its queue's dead letters (its Reason says why;
	// ReasonWorkflowCancelled after a cancel). Replaying it lets the
	// workflow go on.
	StepDead StepStatus = "dead"
	// StepQueued: in its queue, ready, delayed or running: the driver
	// cannot list pending messages to tell which (RabbitMQ).
	StepQueued StepStatus = "queued"
	// StepUnknown: released, and found neither in its queue nor in its
	// dead letters (it moved between two reads).
	StepUnknown StepStatus = "unknown"
)

// StepState is one step of a WorkflowState.
type StepState struct {
	Name      string
	Queue     string
	MessageID string
	After     []string
	Status    StepStatus
	// Attempt is the delivery count of a ready, running or dead step, as
	// the broker reports it.
	Attempt int
	// Reason is a dead step's dead-letter reason (its latest error).
	Reason string
	// BlockedBy names, for a pending step, the dependencies that are dead.
	BlockedBy []string
}

// WorkflowState is a workflow's state, read step by step: it is exact on a
// workflow nothing changes meanwhile.
type WorkflowState struct {
	ID        string
	Created   time.Time
	Cancelled bool
	Steps     []StepState
}

// Done reports whether every step completed.
func (s *WorkflowState) Done() bool {
	for i := range s.Steps {
		if s.Steps[i].Status != StepDone {
			return false
		}
	}
	return true
}

// Count returns how many steps are in status st.
func (s *WorkflowState) Count(st StepStatus) int {
	n := 0
	for i := range s.Steps {
		if s.Steps[i].Status == st {
			n++
		}
	}
	return n
}

// WorkflowShow reads the state of workflow id and of each of its steps.
// It lists marks, pending messages and dead letters, a few broker reads per
// queue the workflow uses (one per step on a driver that cannot list marks,
// RabbitMQ).
func (c *Client) WorkflowShow(ctx context.Context, id string) (WorkflowState, error) {
	if err := ValidateWorkflowID(id); err != nil {
		return WorkflowState{}, err
	}
	var st WorkflowState
	err := c.call(ctx, func(ctx context.Context) error {
		ix, err := c.workflow(ctx, id, "", "")
		if err != nil {
			return err
		}
		st, err = c.workflowState(ctx, ix)
		return err
	})
	return st, err
}

func (c *Client) workflowState(ctx context.Context, ix *wfIndex) (WorkflowState, error) {
	home := workflowQueue(ix.m.ID)
	st := WorkflowState{ID: ix.m.ID, Created: ix.m.Created, Steps: make([]StepState, len(ix.m.Steps))}
	cancelled, err := c.marker.MarkGet(ctx, home, "cancelled")
	if err != nil {
		return st, err
	}
	st.Cancelled = cancelled
	has, err := c.workflowMarks(ctx, ix, func(yield func(string) bool) {
		for x := range ix.m.Steps {
			if !yield(ix.doneMark(x)) {
				return
			}
			if len(ix.deps[x]) > 0 && !yield("rel/"+ix.m.Steps[x].Name) {
				return
			}
		}
	})
	if err != nil {
		return st, err
	}
	// Steps released and not done, by queue: their messages say the rest.
	open := map[string][]int{}
	var queues []string
	for x, s := range ix.m.Steps {
		st.Steps[x] = StepState{Name: s.Name, Queue: s.Queue, MessageID: s.ID, After: s.After}
		switch {
		case has[ix.doneMark(x)]:
			st.Steps[x].Status = StepDone
		case len(ix.deps[x]) > 0 && !has["rel/"+s.Name]:
			st.Steps[x].Status = StepPending
		default:
			if open[s.Queue] == nil {
				queues = append(queues, s.Queue)
			}
			open[s.Queue] = append(open[s.Queue], x)
			st.Steps[x].Status = StepUnknown
			if _, ok := c.drv.(backend.MessageLister); !ok {
				st.Steps[x].Status = StepQueued
			}
		}
	}
	dl, _, _ := c.workflowDriver()
	ml, _ := c.drv.(backend.MessageLister)
	for _, q := range queues {
		xs := open[q]
		for start := 0; start < len(xs); start += MaxReceive {
			chunk := xs[start:min(start+MaxReceive, len(xs))]
			ids := make([]string, len(chunk))
			at := make(map[string]int, len(chunk))
			for i, x := range chunk {
				ids[i] = ix.m.Steps[x].ID
				at[ids[i]] = x
			}
			if ml != nil {
				page, err := ml.MessageList(ctx, q, backend.MessageListParams{IDs: ids, Limit: len(ids), WithoutBodies: true})
				if err != nil && !errors.Is(err, ErrUnsupported) {
					return st, err
				}
				for _, pm := range page.Messages {
					x, ok := at[pm.ID]
					if !ok {
						continue
					}
					s := &st.Steps[x]
					s.Attempt = pm.Attempts
					if pm.State == backend.StateLeased {
						s.Status = StepRunning
					} else {
						s.Status = StepReady
					}
				}
			}
			page, err := dl.DeadList(ctx, q, backend.DeadListParams{IDs: ids, Limit: len(ids), WithoutBodies: true})
			if err != nil {
				return st, err
			}
			for _, l := range page.Letters {
				x, ok := at[l.ID]
				if !ok {
					continue
				}
				s := &st.Steps[x]
				s.Status, s.Attempt = StepDead, l.Attempts
				s.Reason, _ = splitErrors(l.Reason)
			}
		}
	}
	for x := range st.Steps {
		if st.Steps[x].Status != StepPending {
			continue
		}
		for _, d := range ix.deps[x] {
			if st.Steps[d].Status == StepDead {
				st.Steps[x].BlockedBy = append(st.Steps[x].BlockedBy, ix.m.Steps[d].Name)
			}
		}
	}
	return st, nil
}

// workflowMarks reports which of the marks names yields exist: with one
// listing per prefix where the driver lists marks, else one read each.
func (c *Client) workflowMarks(ctx context.Context, ix *wfIndex, names func(func(string) bool)) (map[string]bool, error) {
	home := workflowQueue(ix.m.ID)
	has := map[string]bool{}
	if c.lister != nil {
		for _, prefix := range []string{"e/", "d/", "rel/"} {
			got, err := c.lister.MarkList(ctx, home, prefix)
			if err != nil {
				return nil, err
			}
			for _, n := range got {
				has[n] = true
			}
		}
		return has, nil
	}
	var err error
	names(func(n string) bool {
		var ok bool
		ok, err = c.marker.MarkGet(ctx, home, n)
		if err != nil {
			return false
		}
		has[n] = ok
		return true
	})
	return has, err
}

// WorkflowCancel cancels workflow id: no step is released any more; every
// pending step is dead-lettered in its queue with reason
// ReasonWorkflowCancelled; steps already in their queues are cancelled with
// MessageCancel where the driver can (not RabbitMQ), and a step that
// completes after the cancel is dead-lettered at its ack instead
// (Delivery.Ack returns ErrCancelled). Cancelling twice is not an error.
func (c *Client) WorkflowCancel(ctx context.Context, id string) error {
	if err := ValidateWorkflowID(id); err != nil {
		return err
	}
	_, di, err := c.workflowDriver()
	if err != nil {
		return err
	}
	var released []int
	var ix *wfIndex
	err = c.call(ctx, func(ctx context.Context) error {
		var err error
		ix, err = c.workflow(ctx, id, "", "")
		if err != nil {
			return err
		}
		home := workflowQueue(id)
		if _, err := c.marker.MarkSet(ctx, home, "cancelled", time.Time{}, false); err != nil {
			return err
		}
		if err := c.marker.MarkDelete(ctx, home, "live"); err != nil {
			return err
		}
		st, err := c.workflowState(ctx, ix)
		if err != nil {
			return err
		}
		now := time.Now()
		for x := range st.Steps {
			s := st.Steps[x]
			switch s.Status {
			case StepDone, StepDead:
				continue
			case StepPending:
				won, err := c.marker.MarkSet(ctx, home, "rel/"+s.Name, time.Time{}, true)
				if err != nil {
					return err
				}
				if !won { // released meanwhile
					released = append(released, x)
					continue
				}
				// No recovering release enqueues it after this.
				if _, err := c.marker.MarkSet(ctx, home, "enq/"+s.Name, time.Time{}, true); err != nil {
					return err
				}
				bm, err := c.stepMessage(ix, x, ix.m.Steps[x].Msg.message(), now)
				if err != nil {
					return err
				}
				bm.DedupKey = ""
				letter := backend.DeadLetter{Message: bm, Queue: s.Queue, Reason: withError("", 0, now, ReasonWorkflowCancelled), DeadAt: now}
				if err := di.DeadImport(ctx, s.Queue, []backend.DeadLetter{letter}); err != nil {
					return err
				}
			default:
				released = append(released, x)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if c.lister == nil {
		return nil
	}
	for _, x := range released {
		s := ix.m.Steps[x]
		if err := c.MessageCancel(ctx, s.Queue, s.ID); err != nil {
			return err
		}
	}
	return nil
}

func (w *wfMessage) message() *Message {
	return &Message{Kind: w.Kind, Body: w.Body, Headers: w.Headers, Delay: w.Delay, RunAt: w.RunAt,
		MaxAttempts: w.MaxAttempts, Priority: w.Priority}
}

// WorkflowDelete deletes workflow id's bookkeeping (its manifest, results
// and marks). Its steps already in queues stay there and run as plain
// messages: their acks release nothing. Deleting an unknown id is not an
// error. It needs a driver that deletes queues.
func (c *Client) WorkflowDelete(ctx context.Context, id string) error {
	if err := ValidateWorkflowID(id); err != nil {
		return err
	}
	qd, ok := c.drv.(backend.QueueDeleter)
	if !ok {
		return &UnsupportedError{Driver: c.name, Capability: "deleting workflows (queue delete)"}
	}
	c.wfCache.drop(id)
	return c.call(ctx, func(ctx context.Context) error { return qd.QueueDelete(ctx, workflowQueue(id)) })
}

// WorkflowList returns the ids of the workflows the broker holds, sorted.
// It needs a driver that lists queues.
func (c *Client) WorkflowList(ctx context.Context) ([]string, error) {
	qs, err := c.queueListAll(ctx)
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, q := range qs {
		if id, ok := strings.CutPrefix(q, workflowQueuePrefix); ok {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids, nil
}

// SetResult leaves a result of at most MaxResultBytes for the steps that
// wait for this one (Client.WorkflowResults); the ack stores it, before
// it releases them. Set it before the ack; the result of the ack that
// completes the step is kept (after a crash and a second run, the first
// stored result stays). It returns an ErrInvalid error for a message that
// is not a workflow step, ErrTooLarge for a longer result.
func (d *Delivery) SetResult(result []byte) error {
	if d.Headers[HeaderWorkflow] == "" || d.Headers[HeaderStep] == "" {
		return invalidf("message %s is not a workflow step: only steps leave results", d.ID)
	}
	if len(result) > MaxResultBytes {
		return fmt.Errorf("%w: result is %d bytes; the limit is %d", ErrTooLarge, len(result), MaxResultBytes)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.result = append([]byte{}, result...)
	return nil
}

// Workflow returns the workflow id and step name of a step's delivery, as
// its headers carry them; empty for other messages.
func (d *Delivery) Workflow() (id, step string) {
	return d.Headers[HeaderWorkflow], d.Headers[HeaderStep]
}

// WorkflowResults returns the results the dependencies of d's step left
// (Delivery.SetResult), by step name; a dependency that left none is
// absent. It returns an ErrInvalid error when d is not a workflow step.
func (c *Client) WorkflowResults(ctx context.Context, d *Delivery) (map[string][]byte, error) {
	id, step := d.Workflow()
	if id == "" || step == "" {
		return nil, invalidf("message %s is not a workflow step", d.ID)
	}
	if err := ValidateWorkflowID(id); err != nil {
		return nil, err
	}
	dl, _, err := c.workflowDriver()
	if err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	err = c.call(ctx, func(ctx context.Context) error {
		ix, err := c.workflow(ctx, id, step, d.ID)
		if err != nil {
			return err
		}
		x, ok := ix.byName[step]
		if !ok || ix.m.Steps[x].ID != d.ID {
			return invalidf("message %s is not step %q of workflow %s", d.ID, step, id)
		}
		deps := ix.deps[x]
		for start := 0; start < len(deps); start += MaxReceive {
			chunk := deps[start:min(start+MaxReceive, len(deps))]
			ids := make([]string, len(chunk))
			name := make(map[string]string, len(chunk))
			for i, y := range chunk {
				ids[i] = workflowDerivedID(id, "result/"+ix.m.Steps[y].Name)
				name[ids[i]] = ix.m.Steps[y].Name
			}
			page, err := dl.DeadList(ctx, workflowQueue(id), backend.DeadListParams{IDs: ids, Limit: len(ids)})
			if err != nil {
				return err
			}
			for _, l := range page.Letters {
				if n, ok := name[l.ID]; ok {
					b := l.Body
					if b == nil {
						b = []byte{}
					}
					out[n] = b
				}
			}
		}
		return nil
	})
	return out, err
}
