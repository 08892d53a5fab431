package fila_test

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/fila-go/fila"
	_ "github.com/fila-go/fila/memory"
)

// receiveSteps receives n steps of queue and returns them with their
// step names, sorted by name (steps released together are ready in no
// promised order).
func receiveSteps(ctx context.Context, c *fila.Client, queue string, n int) ([]*fila.Delivery, []string) {
	var ds []*fila.Delivery
	for len(ds) < n {
		got, err := c.Receive(ctx, queue, fila.ReceiveParams{Max: n - len(ds), Lease: time.Minute})
		if err != nil {
			panic(err)
		}
		ds = append(ds, got...)
	}
	slices.SortFunc(ds, func(a, b *fila.Delivery) int {
		_, x := a.Workflow()
		_, y := b.Workflow()
		switch {
		case x < y:
			return -1
		case x > y:
			return 1
		}
		return 0
	})
	names := make([]string, len(ds))
	for i, d := range ds {
		_, names[i] = d.Workflow()
	}
	return ds, names
}

// A diamond: fetch, then resize and thumbnail (both released by fetch's
// ack), then publish, released once by the ack of the last of the two.
func ExampleClient_WorkflowStart() {
	ctx := context.Background()
	c, err := fila.Open(ctx, "mem://example-workflow-start")
	if err != nil {
		panic(err)
	}
	defer c.Close()

	id, err := c.WorkflowStart(ctx, fila.WorkflowParams{ID: "photo-7", Steps: []fila.WorkflowStep{
		{Name: "fetch", Queue: "images", Message: fila.Message{Kind: "image.fetch"}},
		{Name: "resize", Queue: "images", Message: fila.Message{Kind: "image.resize"}, After: []string{"fetch"}},
		{Name: "thumbnail", Queue: "images", Message: fila.Message{Kind: "image.thumbnail"}, After: []string{"fetch"}},
		{Name: "publish", Queue: "images", Message: fila.Message{Kind: "image.publish"}, After: []string{"resize", "thumbnail"}},
	}})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("started", id)

	// Each round runs what is in the queue: the steps whose
	// dependencies are all done.
	ran := map[string]int{}
	for _, n := range []int{1, 2, 1} {
		ds, names := receiveSteps(ctx, c, "images", n)
		fmt.Println("run:", names)
		for _, name := range names {
			ran[name]++
		}
		for _, d := range ds {
			if err := d.Ack(ctx); err != nil { // releases the steps waiting for it
				fmt.Println(err)
				return
			}
		}
	}
	st, _ := c.QueueStats(ctx, "images")
	show, _ := c.WorkflowShow(ctx, id)
	fmt.Printf("publish ran %d time(s); queue: %d ready; steps done: %d of %d\n",
		ran["publish"], st.Ready, show.Count(fila.StepDone), len(show.Steps))
	// Output:
	// started photo-7
	// run: [fetch]
	// run: [resize thumbnail]
	// run: [publish]
	// publish ran 1 time(s); queue: 0 ready; steps done: 4 of 4
}

// A step leaves a result with SetResult before its ack; the steps that
// wait for it read it with WorkflowResults.
func ExampleDelivery_SetResult() {
	ctx := context.Background()
	c, err := fila.Open(ctx, "mem://example-workflow-result")
	if err != nil {
		panic(err)
	}
	defer c.Close()

	_, err = c.WorkflowStart(ctx, fila.WorkflowParams{ID: "order-12", Steps: []fila.WorkflowStep{
		{Name: "charge", Queue: "billing", Message: fila.Message{Kind: "order.charge"}},
		{Name: "receipt", Queue: "billing", Message: fila.Message{Kind: "order.receipt"}, After: []string{"charge"}},
	}})
	if err != nil {
		fmt.Println(err)
		return
	}

	ds, _ := c.Receive(ctx, "billing", fila.ReceiveParams{})
	_ = ds[0].SetResult([]byte("payment pi_3001")) // stored by the ack
	_ = ds[0].Ack(ctx)

	ds, _ = c.Receive(ctx, "billing", fila.ReceiveParams{})
	results, err := c.WorkflowResults(ctx, ds[0])
	_, step := ds[0].Workflow()
	fmt.Printf("%s reads charge's result: %s %v\n", step, results["charge"], err)
	_ = ds[0].Ack(ctx)
	// Output:
	// receipt reads charge's result: payment pi_3001 <nil>
}

// Cancelling a workflow dead-letters its pending steps with reason
// ReasonWorkflowCancelled; nothing is released any more.
func ExampleClient_WorkflowCancel() {
	ctx := context.Background()
	c, err := fila.Open(ctx, "mem://example-workflow-cancel")
	if err != nil {
		panic(err)
	}
	defer c.Close()

	id, err := c.WorkflowStart(ctx, fila.WorkflowParams{ID: "export-3", Steps: []fila.WorkflowStep{
		{Name: "dump", Queue: "exports", Message: fila.Message{Kind: "export.dump"}},
		{Name: "upload", Queue: "exports", Message: fila.Message{Kind: "export.upload"}, After: []string{"dump"}},
	}})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := c.WorkflowCancel(ctx, id); err != nil {
		fmt.Println(err)
		return
	}

	st, _ := c.WorkflowShow(ctx, id)
	fmt.Println("cancelled:", st.Cancelled)
	for _, s := range st.Steps {
		if s.Name == "upload" {
			fmt.Printf("upload: %s, reason %q, the cancel's: %v\n", s.Status, s.Reason, s.Reason == fila.ReasonWorkflowCancelled)
		}
	}
	// Output:
	// cancelled: true
	// upload: dead, reason "workflow cancelled", the cancel's: true
}
