package main

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/fila-go/fila"
)

// The priority scenario measures what priority levels cost a consumer: the
// burn-down of a backlog whose messages cycle through the four levels,
// against the burn-down of the same backlog at one level, measured before
// and after it in the same run (their mean is the baseline).

// leveled is a Fila system whose enqueues cycle through the levels 0 to
// fila.MaxPriority.
type leveled struct {
	*filaSystem
	next atomic.Int64
}

func (s *leveled) Enqueue(ctx context.Context, bodies [][]byte) error {
	msgs := make([]fila.Message, len(bodies))
	for i, b := range bodies {
		msgs[i] = fila.Message{Kind: "bench", Body: b, Priority: int(s.next.Add(1) % (fila.MaxPriority + 1))}
	}
	_, err := s.client.EnqueueBatch(ctx, s.queue, msgs)
	return err
}

// priorityScenario runs the scenario on s when it is a Fila system whose
// driver has priorities.
func priorityScenario(ctx context.Context, broker string, s System, n, conc int, limit time.Duration, batch int) ([]result, error) {
	fs, ok := s.(*filaSystem)
	if !ok {
		return nil, nil
	}
	label := fmt.Sprintf("burn-down c=%d of %d", conc, n)
	if err := fs.Setup(ctx); err != nil {
		return nil, err
	}
	_, err := fs.client.Enqueue(ctx, fs.queue, fila.Message{Kind: "probe", Priority: 1})
	if terr := fs.Teardown(ctx); terr != nil {
		logf("%s teardown: %v", fs.Name(), terr)
	}
	if errors.Is(err, fila.ErrUnsupported) {
		return []result{{Broker: broker, System: fs.Name(), Scenario: label + ", 4 levels mixed", Skipped: true, Note: err.Error()}}, nil
	}
	if err != nil {
		return nil, err
	}
	var one [2]float64
	var four result
	for i, sys := range []System{fs, &leveled{filaSystem: fs}, fs} {
		rs, err := burnDownScenario(ctx, broker, sys, n, []int{conc}, limit, batch)
		if err != nil {
			return nil, err
		}
		switch i {
		case 1:
			four = rs[0]
		case 0:
			one[0] = rs[0].Value
		case 2:
			one[1] = rs[0].Value
		}
	}
	base := (one[0] + one[1]) / 2
	four.Scenario = label + ", 4 levels mixed"
	if base > 0 {
		four.Note = fmt.Sprintf("priorities: ×%.2f of one level (the mean of one before and one after, %.0f and %.0f msg/s), same run", four.Value/base, one[0], one[1])
	}
	return []result{
		{Broker: broker, System: fs.Name(), Scenario: label + ", 1 level", Value: base, Unit: four.Unit, Higher: true},
		four,
	}, nil
}
