package fila

// FlowWaiting reports how many of c's Receive calls on queue are waiting
// for room under its limits or for a pause to end, for tests.
func FlowWaiting(c *Client, queue string) int {
	qc := c.control(queue)
	qc.mu.Lock()
	defer qc.mu.Unlock()
	return qc.waiting
}
