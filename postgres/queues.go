package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/fila-go/fila/backend"
)

// QueueList returns the names of the queues that have a row in messages
// (ready, delayed or leased) or in dead, bytewise sorted, with one statement
// that probes the two tables' queue-leading indexes once per queue (a loose
// index scan) instead of reading every row.
func (d *Driver) QueueList(ctx context.Context) ([]string, error) {
	if d.isClosed() {
		return nil, backend.ErrClosed
	}
	rows, err := d.pool.Query(ctx, d.q.queueList)
	if err != nil {
		return nil, mapErr(ctx, "queue list", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, mapErr(ctx, "queue list", err)
	}
	if names == nil {
		names = []string{}
	}
	return names, nil
}

// QueueDelete deletes queue's rows from messages, dead and marks in one
// statement (so in one transaction). Its dedup keys live on its message
// rows and go with them; a delivery leased from it then finds no row to settle and gets
// ErrLeaseLost. A message enqueued concurrently, committed after the delete
// took its snapshot, is kept.
func (d *Driver) QueueDelete(ctx context.Context, queue string) error {
	if d.isClosed() {
		return backend.ErrClosed
	}
	if _, err := d.pool.Exec(ctx, d.q.queueDelete, queue); err != nil {
		return mapErr(ctx, "queue delete", err)
	}
	return nil
}
