package mongo

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"sort"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	gomongo "go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/fila-go/fila/backend"
)

// Index names Fila creates.
const (
	// claimIndex serves the claim: equality on the queue, the priority
	// from the highest level down (a level-0 message has no p field, which
	// sorts after every number), then range and sort on the due time, and
	// the id among equal due times.
	claimIndex = "fila_claim_p"
	// dueIndex serves what looks for the earliest due time whatever the
	// level: the next wake-up (nextDue) and ReceiveDelayed. Until
	// priorities it was the claim's index, under the name fila_claim.
	dueIndex = "fila_claim"
	// dedupIndex makes dedup keys unique among pending messages. It is
	// sparse, so messages without a key are not in it, and the messages
	// collection only holds pending messages (ack deletes, dead moves), so
	// the key is free again as soon as its holder is settled. No partial
	// index is needed.
	dedupIndex = "fila_dedup"
	// deadListIndex pages a queue's dead letters oldest first.
	deadListIndex = "fila_dead_list"
	// marksIndex serves MarkList (a queue's marks by name prefix) and
	// QueueDelete.
	marksIndex = "fila_marks"
	// marksExpiryIndex is a TTL index on the marks' expiry: the server
	// deletes expired marks by itself (every minute or so, by its own
	// clock). Servers without TTL indexes (FerretDB v1) go without it:
	// expired marks count as absent either way, and MarkList deletes the
	// ones it passes.
	marksExpiryIndex = "fila_marks_expiry"
)

// msgDoc is a pending message: ready, delayed or leased.
//
// One field, due, says when the message can next be claimed: its run-at
// while it waits, its lease deadline while it is leased. A claim therefore
// matches {q, due <= now} and a message whose lease expired is claimable
// again without any sweeper. l tells a leased message from a delayed one
// (for stats); r is the receipt of the current lease.
type msgDoc struct {
	ID          string    `bson:"_id"`
	Queue       string    `bson:"q"`
	Kind        string    `bson:"k"`
	Body        []byte    `bson:"b"`
	Headers     []header  `bson:"h,omitempty"`
	Due         time.Time `bson:"due"`
	Leased      bool      `bson:"l"`
	Receipt     string    `bson:"r,omitempty"`
	Attempts    int       `bson:"a"`
	MaxAttempts int       `bson:"ma,omitempty"`
	LastError   string    `bson:"le,omitempty"`
	// DedupKey is queue + "\x00" + key, so one sparse single-field unique
	// index covers every queue (queue names never hold a NUL).
	DedupKey   string    `bson:"dk,omitempty"`
	RunAt      time.Time `bson:"ra,omitempty"`
	EnqueuedAt time.Time `bson:"ea"`
	// Priority is the message's level; 0 is not stored.
	Priority int `bson:"p,omitempty"`
	// Hold is the run-at of a message taken early by ReceiveDelayed: its
	// due time never goes below it while that lease lasts (Extend keeps it).
	Hold time.Time `bson:"hold,omitempty"`
	// LeaseDeadline is the lease deadline of a message taken early (its
	// due time is the later run-at): ReceiveDelayed takes it again once
	// this has passed. Unset on every other message.
	LeaseDeadline time.Time `bson:"ld,omitempty"`
}

// header is one message header. Headers are stored as an array of pairs
// because header keys may hold '.' and '$', which field names may not.
type header struct {
	K string `bson:"k"`
	V string `bson:"v"`
}

// deadDoc is a dead letter, in its own collection so the hot collection
// stays small.
type deadDoc struct {
	ID          string    `bson:"_id"`
	Queue       string    `bson:"q"`
	Kind        string    `bson:"k"`
	Body        []byte    `bson:"b"`
	Headers     []header  `bson:"h,omitempty"`
	Attempts    int       `bson:"a"`
	MaxAttempts int       `bson:"ma,omitempty"`
	LastError   string    `bson:"le,omitempty"`
	DedupKey    string    `bson:"dedup,omitempty"` // the plain key, not indexed
	RunAt       time.Time `bson:"ra,omitempty"`
	EnqueuedAt  time.Time `bson:"ea"`
	Priority    int       `bson:"p,omitempty"`
	Reason      string    `bson:"rs"`
	DeadAt      time.Time `bson:"da"`
	// Receipt is the lease that dead-lettered the message; without
	// transactions it lets Dead undo its insert when the lease was lost.
	Receipt string `bson:"dr,omitempty"`
}

// ensureIndexes creates Fila's indexes where they are missing. It lists
// them first, so opening a driver on a prepared database only reads.
func (d *Driver) ensureIndexes(ctx context.Context) error {
	want := []struct {
		coll *gomongo.Collection
		name string
		keys bson.D
		opts *options.IndexOptionsBuilder
		// optional indexes are skipped where the server does not
		// implement them.
		optional bool
	}{
		{d.msgs, claimIndex, bson.D{{Key: "q", Value: 1}, {Key: "p", Value: -1}, {Key: "due", Value: 1}, {Key: "_id", Value: 1}}, options.Index(), false},
		{d.msgs, dueIndex, bson.D{{Key: "q", Value: 1}, {Key: "due", Value: 1}, {Key: "_id", Value: 1}}, options.Index(), false},
		{d.msgs, dedupIndex, bson.D{{Key: "dk", Value: 1}}, options.Index().SetUnique(true).SetSparse(true), false},
		{d.dead, deadListIndex, bson.D{{Key: "q", Value: 1}, {Key: "da", Value: 1}, {Key: "_id", Value: 1}}, options.Index(), false},
		{d.marks, marksIndex, bson.D{{Key: "q", Value: 1}, {Key: "n", Value: 1}}, options.Index(), false},
		{d.marks, marksExpiryIndex, bson.D{{Key: "u", Value: 1}}, options.Index().SetExpireAfterSeconds(0), true},
	}
	have := map[string]bool{}
	for _, c := range []*gomongo.Collection{d.msgs, d.dead, d.marks} {
		names, err := indexNames(ctx, c)
		if err != nil {
			return err
		}
		for _, n := range names {
			have[c.Name()+"."+n] = true
		}
	}
	for _, w := range want {
		if have[w.coll.Name()+"."+w.name] {
			continue
		}
		model := gomongo.IndexModel{Keys: w.keys, Options: w.opts.SetName(w.name)}
		if _, err := w.coll.Indexes().CreateOne(ctx, model); err != nil {
			if w.optional && notImplemented(err) {
				continue
			}
			return err
		}
	}
	return nil
}

// notImplemented reports whether err is the server refusing an operation
// or option it does not implement (FerretDB v1: NotImplemented for a TTL
// index's expireAfterSeconds).
func notImplemented(err error) bool {
	var se gomongo.ServerError
	return errors.As(err, &se) && (se.HasErrorCode(238) || // NotImplemented
		se.HasErrorCode(115) || // CommandNotSupported
		se.HasErrorCode(197)) // InvalidIndexSpecificationOption
}

// indexNames lists a collection's index names (none when it does not
// exist).
func indexNames(ctx context.Context, c *gomongo.Collection) ([]string, error) {
	cur, err := c.Indexes().List(ctx)
	if err != nil {
		var se gomongo.ServerError
		if errors.As(err, &se) && se.HasErrorCode(26) { // NamespaceNotFound
			return nil, nil
		}
		return nil, err
	}
	var rows []struct {
		Name string `bson:"name"`
	}
	if err := cur.All(ctx, &rows); err != nil {
		return nil, err
	}
	names := make([]string, len(rows))
	for i, r := range rows {
		names[i] = r.Name
	}
	return names, nil
}

// ceilMS rounds t up to the millisecond, the precision of BSON dates, so a
// stored run-at or deadline is never earlier than asked for.
func ceilMS(t time.Time) time.Time {
	r := t.Truncate(time.Millisecond)
	if r.Before(t) {
		r = r.Add(time.Millisecond)
	}
	return r.UTC()
}

// dueTime is the stored due time of something asked for at, decided at
// now: rounded up when it lies in the future (never early), else rounded
// down (claimable at once, not a delayed message for a moment).
func dueTime(now, at time.Time) time.Time {
	if at.After(now) {
		return ceilMS(at)
	}
	return floorMS(at)
}

// floorMS rounds t down to the millisecond: "now" in claim filters, so a
// message is never claimed before its due time.
func floorMS(t time.Time) time.Time { return t.Truncate(time.Millisecond).UTC() }

func dedupField(queue, key string) string {
	if key == "" {
		return ""
	}
	return queue + "\x00" + key
}

func plainKey(field string) string {
	if i := strings.IndexByte(field, 0); i >= 0 {
		return field[i+1:]
	}
	return field
}

func encodeHeaders(h map[string]string) []header {
	if len(h) == 0 {
		return nil
	}
	out := make([]header, 0, len(h))
	for k, v := range h {
		out = append(out, header{K: k, V: v})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].K < out[j].K })
	return out
}

func decodeHeaders(h []header) map[string]string {
	if len(h) == 0 {
		return nil
	}
	out := make(map[string]string, len(h))
	for _, kv := range h {
		out[kv.K] = kv.V
	}
	return out
}

func newMsgDoc(queue string, m *backend.Message, now time.Time) *msgDoc {
	doc := &msgDoc{
		ID:          m.ID,
		Queue:       queue,
		Kind:        m.Kind,
		Body:        m.Body,
		Headers:     encodeHeaders(m.Headers),
		Due:         dueTime(now, m.Due(now)),
		Attempts:    m.Attempts,
		MaxAttempts: m.MaxAttempts,
		DedupKey:    dedupField(queue, m.DedupKey),
		EnqueuedAt:  m.EnqueuedAt.UTC(),
		Priority:    m.Priority,
	}
	if !m.RunAt.IsZero() {
		doc.RunAt = m.RunAt.UTC()
	}
	return doc
}

func (doc *msgDoc) message() backend.Message {
	return backend.Message{
		ID:          doc.ID,
		Kind:        doc.Kind,
		Body:        doc.Body,
		Headers:     decodeHeaders(doc.Headers),
		RunAt:       doc.RunAt,
		DedupKey:    plainKey(doc.DedupKey),
		MaxAttempts: doc.MaxAttempts,
		EnqueuedAt:  doc.EnqueuedAt,
		Priority:    doc.Priority,
	}
}

func (doc *msgDoc) delivery() backend.Delivery {
	return backend.Delivery{
		Message:   doc.message(),
		Attempt:   doc.Attempts,
		Receipt:   doc.Receipt,
		Deadline:  doc.Due,
		LastError: doc.LastError,
	}
}

func (doc *msgDoc) deadDoc(reason, receipt string, attempts int, now time.Time) *deadDoc {
	return &deadDoc{
		ID:          doc.ID,
		Queue:       doc.Queue,
		Kind:        doc.Kind,
		Body:        doc.Body,
		Headers:     doc.Headers,
		Attempts:    attempts,
		MaxAttempts: doc.MaxAttempts,
		LastError:   doc.LastError,
		DedupKey:    plainKey(doc.DedupKey),
		RunAt:       doc.RunAt,
		EnqueuedAt:  doc.EnqueuedAt,
		Priority:    doc.Priority,
		Reason:      reason,
		DeadAt:      now.UTC(),
		Receipt:     receipt,
	}
}

func (dd *deadDoc) letter() backend.DeadLetter {
	return backend.DeadLetter{
		Message: backend.Message{
			ID:          dd.ID,
			Kind:        dd.Kind,
			Body:        dd.Body,
			Headers:     decodeHeaders(dd.Headers),
			RunAt:       dd.RunAt,
			DedupKey:    dd.DedupKey,
			MaxAttempts: dd.MaxAttempts,
			EnqueuedAt:  dd.EnqueuedAt,
			Priority:    dd.Priority,
		},
		Queue:    dd.Queue,
		Attempts: dd.Attempts,
		Reason:   dd.Reason,
		DeadAt:   dd.DeadAt,
	}
}

// replayDoc turns a dead letter back into a ready message: attempts reset,
// dedup key dropped.
func (dd *deadDoc) replayDoc(now time.Time) *msgDoc {
	return &msgDoc{
		ID:          dd.ID,
		Queue:       dd.Queue,
		Kind:        dd.Kind,
		Body:        dd.Body,
		Headers:     dd.Headers,
		Due:         floorMS(now),
		MaxAttempts: dd.MaxAttempts,
		EnqueuedAt:  dd.EnqueuedAt,
		Priority:    dd.Priority,
	}
}

// newReceipt returns a fresh lease token.
func newReceipt() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
