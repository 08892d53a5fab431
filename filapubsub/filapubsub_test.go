package filapubsub

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/fila-go/fila"
	"gocloud.dev/gcerrors"
	"gocloud.dev/pubsub"
	"gocloud.dev/pubsub/batcher"
)

// openPair opens a topic and a subscription of it, with unique names, and
// ends the subscription when the test ends.
func openPair(t *testing.T, c *fila.Client, topts *TopicOptions, sopts *SubscriptionOptions) (*pubsub.Topic, *pubsub.Subscription, string, string) {
	t.Helper()
	ctx := context.Background()
	name := "pt-" + unique()
	queue := name + ".sub"
	if sopts == nil {
		sopts = &SubscriptionOptions{}
	}
	sopts.Topic = name
	// One receiver at a time: FerretDB can hand one message to two
	// concurrent claims (see the mongo package).
	sopts.ReceiveBatcherOptions = batcher.Options{MaxBatchSize: 10, MaxHandlers: 1}
	sub, err := OpenSubscription(ctx, c, queue, sopts)
	if err != nil {
		t.Fatal(err)
	}
	top := OpenTopic(c, name, topts)
	t.Cleanup(func() {
		if err := top.Shutdown(ctx); err != nil {
			t.Error(err)
		}
		if err := sub.Shutdown(ctx); err != nil {
			t.Error(err)
		}
		if err := c.TopicUnsubscribe(ctx, name, queue); err != nil {
			t.Error(err)
		}
	})
	return top, sub, name, queue
}

func receive(t *testing.T, sub *pubsub.Subscription) (*pubsub.Message, *fila.Delivery) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	m, err := sub.Receive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var d *fila.Delivery
	if !m.As(&d) {
		t.Fatal("Message.As(**fila.Delivery) failed")
	}
	return m, d
}

// Body and metadata come back byte for byte, including metadata keys Fila
// cannot store as they are (escaped) and the empty body.
func TestBodyAndMetadataExact(t *testing.T) {
	forEachBroker(t, func(t *testing.T, b broker, c *fila.Client) {
		ctx := context.Background()
		top, sub, name, _ := openPair(t, c, nil, nil)
		body := make([]byte, 256)
		for i := range body {
			body[i] = byte(i)
		}
		odd := map[string]string{
			"":               "the empty key",
			"__0x41__":       "a literal escape",
			"a\x00b\x1f\x7f": "control characters",
			"_":              "",
			"ü☺𝄞":            "unicode",
			"plain":          "a value with \x00 NUL, \n newline and \x7f",
			"Content-Type":   "application/json",
		}
		if err := top.Send(ctx, &pubsub.Message{Body: body, Metadata: odd}); err != nil {
			t.Fatal(err)
		}
		if err := top.Send(ctx, &pubsub.Message{}); err != nil {
			t.Fatal(err)
		}
		got := 0
		for got < 2 {
			m, d := receive(t, sub)
			m.Ack()
			got++
			if d.Kind != name {
				t.Errorf("kind %q, want the topic's name %q", d.Kind, name)
			}
			if len(m.Body) == 0 {
				if m.Metadata != nil {
					t.Errorf("empty message has metadata %q", m.Metadata)
				}
				continue
			}
			if !bytes.Equal(m.Body, body) {
				t.Errorf("body %q, want %q", m.Body, body)
			}
			if !maps.Equal(m.Metadata, odd) {
				t.Errorf("metadata %q, want %q", m.Metadata, odd)
			}
			// What Fila stores: plain keys as they are, the others escaped.
			want := map[string]string{
				"__0x__":                    "the empty key",
				"__0x5f___0x41__":           "a literal escape",
				"a__0x0__b__0x1f____0x7f__": "control characters",
				"_":                         "",
				"ü☺𝄞":                       "unicode",
				"plain":                     odd["plain"],
				"Content-Type":              "application/json",
			}
			if !maps.Equal(d.Headers, want) {
				t.Errorf("Fila headers %q, want %q", d.Headers, want)
			}
		}
	})
}

// A subscription without a topic consumes a plain queue, such as the jobs
// Fila producers enqueue, with their headers as metadata.
func TestPlainQueue(t *testing.T) {
	forEachBroker(t, func(t *testing.T, b broker, c *fila.Client) {
		ctx := context.Background()
		queue := "pq-" + unique()
		id, err := c.Enqueue(ctx, queue, fila.Message{Kind: "job", Body: []byte("work"), Headers: map[string]string{"tenant": "7"}})
		if err != nil {
			t.Fatal(err)
		}
		sub, err := OpenSubscription(ctx, c, queue, &SubscriptionOptions{Lease: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Shutdown(ctx)
		m, d := receive(t, sub)
		m.Ack()
		if m.LoggableID != id || string(m.Body) != "work" || !maps.Equal(m.Metadata, map[string]string{"tenant": "7"}) || d.Kind != "job" {
			t.Errorf("got %s %q %q kind %q; want %s", m.LoggableID, m.Body, m.Metadata, d.Kind, id)
		}
		if left := time.Until(d.Deadline()); left > 5*time.Second || left < 3*time.Second {
			t.Errorf("lease ends in %v, want about 5s", left)
		}
		if err := sub.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
		_ = c.QueueDelete(ctx, queue, fila.QueueDeleteParams{Force: true}) // not on every driver
	})
}

// A nack is a Fila retry: the message comes back with its attempt one
// higher, and a message nacked up to its max attempts is dead-lettered.
func TestNackRetriesThenDeadLetters(t *testing.T) {
	forEachBroker(t, func(t *testing.T, b broker, c *fila.Client) {
		ctx := context.Background()
		const max = 3
		top, sub, _, queue := openPair(t, c, &TopicOptions{MaxAttempts: max}, nil)
		if err := top.Send(ctx, &pubsub.Message{Body: []byte("poison")}); err != nil {
			t.Fatal(err)
		}
		// Receive and nack until the message is dead-lettered: the claim
		// that finds it exhausted dead-letters it instead of handing it
		// out.
		var attempts []int
		var dead fila.DeadPage
		eventually(t, 20*time.Second, "dead letter", func() bool {
			rctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			defer cancel()
			if m, err := sub.Receive(rctx); err == nil {
				var d *fila.Delivery
				m.As(&d)
				if d.Attempt > 1 && d.LastError != NackReason {
					t.Errorf("attempt %d has last error %q, want %q", d.Attempt, d.LastError, NackReason)
				}
				attempts = append(attempts, d.Attempt)
				m.Nack()
				return false
			}
			var err error
			dead, err = c.DeadList(ctx, queue, fila.DeadListParams{})
			if err != nil {
				t.Fatal(err)
			}
			return len(dead.Letters) > 0
		})
		// Each nack counts one attempt. On RabbitMQ a message the driver
		// was pushed and gave back unused counts one too (see package
		// rabbitmq), so attempts may skip there.
		want := []int{1, 2, 3}
		if b.name == "rabbitmq" {
			for i := 1; i < len(attempts); i++ {
				if attempts[i] <= attempts[i-1] || attempts[i] > max {
					t.Errorf("attempts %v do not increase up to %d", attempts, max)
				}
			}
		} else if !slices.Equal(attempts, want) {
			t.Errorf("attempts %v, want %v", attempts, want)
		}
		if l := dead.Letters[0]; l.Reason != fila.ReasonMaxAttempts || l.Attempts != max || string(l.Body) != "poison" {
			t.Errorf("dead letter %+v", l)
		}
	})
}

// Publishing fans out: each subscription gets its own copy.
func TestFanOut(t *testing.T) {
	forEachBroker(t, func(t *testing.T, b broker, c *fila.Client) {
		ctx := context.Background()
		top, sub1, name, _ := openPair(t, c, nil, nil)
		queue2 := name + ".second"
		sub2, err := OpenSubscription(ctx, c, queue2, &SubscriptionOptions{Topic: name,
			ReceiveBatcherOptions: batcher.Options{MaxBatchSize: 10, MaxHandlers: 1}})
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := sub2.Shutdown(ctx); err != nil {
				t.Error(err)
			}
			if err := c.TopicUnsubscribe(ctx, name, queue2); err != nil {
				t.Error(err)
			}
		}()
		for _, body := range []string{"a", "b", "c"} {
			if err := top.Send(ctx, &pubsub.Message{Body: []byte(body), Metadata: map[string]string{"k": body}}); err != nil {
				t.Fatal(err)
			}
		}
		for i, sub := range []*pubsub.Subscription{sub1, sub2} {
			got := map[string]bool{}
			ids := map[string]bool{}
			for range 3 {
				m, d := receive(t, sub)
				m.Ack()
				if m.Metadata["k"] != string(m.Body) {
					t.Errorf("sub %d: metadata %q for body %q", i, m.Metadata, m.Body)
				}
				got[string(m.Body)] = true
				ids[d.ID] = true
			}
			if len(got) != 3 || len(ids) != 3 {
				t.Errorf("sub %d got %v (ids %v), want a, b and c once each", i, got, ids)
			}
		}
	})
}

// As and ErrorAs on every broker, RabbitMQ included (drivertest's TestAs
// cannot run there; see README.md).
func TestAsOnEveryBroker(t *testing.T) {
	forEachBroker(t, func(t *testing.T, b broker, c *fila.Client) {
		ctx := context.Background()
		top, sub, name, _ := openPair(t, c, nil, nil)
		var tc, sc *fila.Client
		if !top.As(&tc) || !sub.As(&sc) || tc != c || sc != c {
			t.Error("As(**fila.Client) failed")
		}
		var info PublishInfo
		err := top.Send(ctx, &pubsub.Message{Body: []byte("x"), AfterSend: func(as func(any) bool) error {
			if !as(&info) {
				return errors.New("AfterSend As(*PublishInfo) failed")
			}
			return nil
		}})
		if err != nil {
			t.Fatal(err)
		}
		m, _ := receive(t, sub)
		m.Ack()
		if want := fila.CopyID(info.ID, name+".sub"); m.LoggableID != want {
			t.Errorf("LoggableID %s, want the copy's id %s", m.LoggableID, want)
		}
		nobody := OpenTopic(c, "nobody-"+unique(), &TopicOptions{RequireSubscription: true})
		defer nobody.Shutdown(ctx)
		err = nobody.Send(ctx, &pubsub.Message{Body: []byte("x")})
		var nf *NotFoundError
		if gcerrors.Code(err) != gcerrors.NotFound || !nobody.ErrorAs(err, &nf) || nf.Queue != "" {
			t.Errorf("send to a topic without subscriptions: %v, want NotFound", err)
		}
		// Invalid names fail at Send with InvalidArgument, and ErrorAs
		// gives nothing that is not an error.
		bad := OpenTopic(c, "bad name", nil)
		defer bad.Shutdown(ctx)
		err = bad.Send(ctx, &pubsub.Message{})
		if gcerrors.Code(err) != gcerrors.InvalidArgument || !errors.Is(err, fila.ErrInvalid) || bad.ErrorAs(err, &tc) {
			t.Errorf("send to an invalid topic name: %v (%v)", err, gcerrors.Code(err))
		}
	})
}

// ReceiveBatch gives gocloud an empty batch after ReceiveWait when that is
// set, and returns at once when its context ends.
func TestReceiveBatchReturnsPromptly(t *testing.T) {
	forEachBroker(t, func(t *testing.T, b broker, c *fila.Client) {
		ctx := context.Background()
		s, err := newSubscription(ctx, c, "rp-"+unique(), &SubscriptionOptions{ReceiveWait: 200 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		ms, err := s.ReceiveBatch(ctx, 10)
		if err != nil || len(ms) != 0 {
			t.Fatalf("ReceiveBatch on an empty queue: %v, %v", ms, err)
		}
		if d := time.Since(start); d < 200*time.Millisecond || d > 5*time.Second {
			t.Errorf("empty ReceiveBatch took %v, want about 200ms", d)
		}
		s.opts.ReceiveWait = 0 // until a message comes
		cctx, cancel := context.WithCancel(ctx)
		time.AfterFunc(100*time.Millisecond, cancel)
		start = time.Now()
		if _, err := s.ReceiveBatch(cctx, 10); !errors.Is(err, context.Canceled) {
			t.Errorf("ReceiveBatch whose context ended: %v, want context.Canceled", err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("ReceiveBatch took %v to see its context end", d)
		}
	})
}

// Open-time validation of subscription options.
func TestSubscriptionOptionsValidated(t *testing.T) {
	ctx := context.Background()
	c := client(t, "mem://filapubsub")
	for _, o := range []SubscriptionOptions{
		{Lease: time.Microsecond},
		{Lease: 8 * 24 * time.Hour},
		{NackDelay: -time.Second},
		{ReceiveWait: -time.Second},
		{Topic: "bad topic"},
	} {
		if _, err := OpenSubscription(ctx, c, "q", &o); !errors.Is(err, fila.ErrInvalid) {
			t.Errorf("OpenSubscription(%+v): %v, want ErrInvalid", o, err)
		}
	}
	if _, err := OpenSubscription(ctx, c, "bad queue", nil); !errors.Is(err, fila.ErrInvalid) {
		t.Errorf("OpenSubscription(bad queue): %v, want ErrInvalid", err)
	}
}

// A receive waiting on a subscription that someone ends fails with
// NotFound within the check interval.
func TestUnsubscribedWhileWaiting(t *testing.T) {
	forEachBroker(t, func(t *testing.T, b broker, c *fila.Client) {
		if !b.listsSubscriptions {
			t.Skipf("%s cannot list subscriptions: the wait goes on (see README.md)", b.name)
		}
		ctx := context.Background()
		name := "uw-" + unique()
		queue := name + ".sub"
		sub, err := OpenSubscription(ctx, c, queue, &SubscriptionOptions{Topic: name, CheckInterval: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Shutdown(ctx)
		// A Receive that gives up leaves gocloud's ReceiveBatch waiting on
		// the empty queue.
		short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		if m, err := sub.Receive(short); err == nil {
			t.Fatalf("received %s from an empty queue", m.LoggableID)
		}
		if err := c.TopicUnsubscribe(ctx, name, queue); err != nil {
			t.Fatal(err)
		}
		errc := make(chan error, 1)
		go func() {
			_, err := sub.Receive(ctx)
			errc <- err
		}()
		select {
		case err := <-errc:
			var nf *NotFoundError
			if gcerrors.Code(err) != gcerrors.NotFound || !sub.ErrorAs(err, &nf) || nf.Queue != queue {
				t.Errorf("receive: %v, want NotFound", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the receive still waits 10s after its subscription ended")
		}
	})
}
