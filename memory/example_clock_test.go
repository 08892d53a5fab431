package memory_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fila-go/fila"
	"github.com/fila-go/fila/memory"
)

// A FakeClock makes delays and leases testable without sleeping: the
// broker's time moves only when the test advances it.
func ExampleFakeClock() {
	ctx := context.Background()
	clk := memory.NewFakeClock(time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC))
	c, err := fila.New(memory.NewBroker(memory.BrokerOptions{Clock: clk}).Open())
	if err != nil {
		panic(err)
	}
	defer c.Close()

	_, _ = c.Enqueue(ctx, "reports", fila.Message{Kind: "report.daily", Delay: time.Hour})
	st, _ := c.QueueStats(ctx, "reports")
	fmt.Println("at 09:00 ready", st.Ready, "delayed", st.Delayed)

	clk.Advance(time.Hour)
	st, _ = c.QueueStats(ctx, "reports")
	fmt.Println("at 10:00 ready", st.Ready, "delayed", st.Delayed)

	// A lease ends when the clock passes its deadline: the message comes
	// back with its next attempt, and the old receipt is refused.
	ds, _ := c.Receive(ctx, "reports", fila.ReceiveParams{Lease: time.Minute})
	fmt.Println("lease ends", ds[0].Deadline().Format("15:04"))
	clk.Advance(2 * time.Minute)
	again, _ := c.Receive(ctx, "reports", fila.ReceiveParams{Lease: time.Minute})
	fmt.Println("attempt", again[0].Attempt, "stale ack lease lost:", errors.Is(ds[0].Ack(ctx), fila.ErrLeaseLost))
	// Output:
	// at 09:00 ready 0 delayed 1
	// at 10:00 ready 1 delayed 0
	// lease ends 10:01
	// attempt 2 stale ack lease lost: true
}
