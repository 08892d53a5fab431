package main

import (
	"context"
	"fmt"
	"time"

	"github.com/fila-go/fila"
)

// The routing scenario measures what routing by kind pattern costs a
// publish: publish throughput to a topic of routeSubs subscriptions made
// without patterns, against the same with a pattern each that every
// published kind matches (the cost of matching alone: the same copies are
// stored) and with patterns only one subscription's matches (the copies
// routing saves). The three are measured in interleaved slices in one run,
// so a load spike lands on all of them alike, and reported with their
// ratios to the first.

// routeSubs is the number of subscriptions of each topic of the scenario.
const routeSubs = 5

// routeKind is the kind every publish of the scenario carries.
const routeKind = "bench.0.created"

// router is a fanouter that subscribes with a kind pattern and publishes a
// given kind.
type router interface {
	fanouter
	subscribeKinds(ctx context.Context, topic, queue, pattern string) error
	publishKind(ctx context.Context, topic, kind string, bodies [][]byte, subs int) error
}

func (s *filaSystem) subscribeKinds(ctx context.Context, topic, queue, pattern string) error {
	return s.client.TopicSubscribe(ctx, topic, queue, fila.KindPattern(pattern))
}

func (s *filaSystem) publishKind(ctx context.Context, topic, kind string, bodies [][]byte, subs int) error {
	msgs := make([]fila.Message, len(bodies))
	for i, b := range bodies {
		msgs[i] = fila.Message{Kind: kind, Body: b}
	}
	res, err := s.client.PublishBatch(ctx, topic, msgs)
	if err != nil {
		return err
	}
	// -1: the driver knows only that some subscription got them (RabbitMQ).
	if res.Subscriptions != subs && res.Subscriptions != -1 {
		return fmt.Errorf("publish to %s reached %d subscriptions; want %d", topic, res.Subscriptions, subs)
	}
	return nil
}

// routePublisher is a router whose Enqueue publishes routeKind to its topic.
type routePublisher struct {
	router
	topic string
	subs  int
}

func (p routePublisher) Enqueue(ctx context.Context, bodies [][]byte) error {
	return p.publishKind(ctx, p.topic, routeKind, bodies, p.subs)
}

// routeCase is one topic of the scenario: how its subscriptions are made.
type routeCase struct {
	label   string
	pattern func(i int) string // subscription i's pattern ("": none)
	subs    int                // subscriptions that take routeKind
}

var routeCases = []routeCase{
	{"no patterns", func(int) string { return "" }, routeSubs},
	{"a pattern each, all match", func(int) string { return "bench.#" }, routeSubs},
	{"a pattern each, one matches", func(i int) string { return fmt.Sprintf("bench.%d.*", i) }, 1},
}

// routingScenario runs the scenario on s when it is a router, for a
// single publish and a batch of 100, each case for d in all.
func routingScenario(ctx context.Context, broker string, s System, d time.Duration) ([]result, error) {
	r, ok := s.(router)
	if !ok {
		return nil, nil
	}
	if err := s.Setup(ctx); err != nil {
		return nil, err
	}
	defer func() {
		if terr := s.Teardown(ctx); terr != nil {
			logf("%s teardown: %v", s.Name(), terr)
		}
	}()
	runs := make([]*topicRun, len(routeCases))
	defer func() {
		for _, t := range runs {
			if t == nil {
				continue
			}
			if err := t.close(ctx); err != nil {
				logf("%s: %v", s.Name(), err)
			}
		}
	}()
	for ci, c := range routeCases {
		t := &topicRun{f: r, topic: "bench-route-" + randSuffix()}
		runs[ci] = t
		for i := range routeSubs {
			q := fmt.Sprintf("%s-sub%02d", t.topic, i)
			var err error
			if p := c.pattern(i); p == "" {
				err = r.subscribe(ctx, t.topic, q)
			} else {
				err = r.subscribeKinds(ctx, t.topic, q, p)
			}
			if err != nil {
				return nil, fmt.Errorf("routing: subscribe %s: %w", q, err)
			}
			t.queues = append(t.queues, q)
		}
	}
	var out []result
	for _, batch := range []int{1, 100} {
		const rounds = 4
		slice := d / rounds
		n := make([]int64, len(routeCases))
		el := make([]time.Duration, len(routeCases))
		for round := range rounds {
			for k := range routeCases {
				ci := (k + round) % len(routeCases) // each case first in turn
				progress.set(fmt.Sprintf("%s %s: routing, batch of %d, %s", broker, s.Name(), batch, routeCases[ci].label))
				got, took, err := timedEnqueue(ctx, routePublisher{r, runs[ci].topic, routeCases[ci].subs}, 1, batch, slice)
				if err != nil {
					return out, fmt.Errorf("routing, %s: %w", routeCases[ci].label, err)
				}
				n[ci], el[ci] = n[ci]+got, el[ci]+took
			}
		}
		base := float64(n[0]) / el[0].Seconds()
		for ci, c := range routeCases {
			rate := float64(n[ci]) / el[ci].Seconds()
			res := result{Broker: broker, System: s.Name(), Unit: "msg/s", Higher: true, Value: rate,
				Scenario: fmt.Sprintf("publish to %d subscriptions, batch of %d, %s", routeSubs, batch, c.label)}
			if ci > 0 && base > 0 {
				res.Note = fmt.Sprintf("routing: ×%.2f of no patterns, same run", rate/base)
			}
			out = append(out, res)
		}
	}
	return out, nil
}
