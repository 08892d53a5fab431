package main

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// mysqlSustainedScenario is the sustained scenario on MySQL/MariaDB: a fixed
// offered rate for d on Fila, sampled every interval, in each of phases:
// false without and true with an idle REPEATABLE READ transaction held open
// on another connection. InnoDB keeps the undo logs of every change a read
// view may still need, server-wide, so while that transaction's snapshot is
// open purge cannot remove the delete-marked rows of acked messages nor the
// old versions of claimed ones: the history list length grows instead of
// PostgreSQL's dead tuples. There is no VACUUM to run: purge threads work
// all the time.
func mysqlSustainedScenario(ctx context.Context, env *mysqlEnv, systems []*filaSystem, rate float64, d, interval time.Duration, c int, phases []bool) ([]sustainedRun, error) {
	var out []sustainedRun
	var version string
	var purge int
	_ = env.db.QueryRowContext(ctx, `SELECT @@version, @@innodb_purge_threads`).Scan(&version, &purge)
	for _, s := range systems {
		for _, idle := range phases {
			run, err := mysqlSustainedOnce(ctx, env, s, rate, d, interval, c, idle)
			run.Note = joinNote(fmt.Sprintf("server %s, innodb_purge_threads=%d", version, purge), run.Note)
			if err != nil {
				return out, fmt.Errorf("%s: %w", s.Name(), err)
			}
			out = append(out, run)
		}
	}
	return out, nil
}

// mysqlHistoryLen is InnoDB's history list length: undo logs of committed
// transactions not yet purged.
func (e *mysqlEnv) historyLen(ctx context.Context) (int64, error) {
	var n int64
	err := e.db.QueryRowContext(ctx, `SELECT count FROM information_schema.INNODB_METRICS WHERE name = 'trx_rseg_history_len'`).Scan(&n)
	return n, err
}

// tableSizes is data_length + index_length summed over the tables of
// database db (InnoDB's estimate), and their names.
func (e *mysqlEnv) tableSizes(ctx context.Context, db string) (int64, string, error) {
	rows, err := e.db.QueryContext(ctx, `SELECT table_name, coalesce(data_length, 0) + coalesce(index_length, 0)
		FROM information_schema.tables WHERE table_schema = ? ORDER BY table_name`, db)
	if err != nil {
		return 0, "", err
	}
	defer rows.Close()
	var sum int64
	var names []string
	for rows.Next() {
		var name string
		var n int64
		if err := rows.Scan(&name, &n); err != nil {
			return 0, "", err
		}
		sum += n
		names = append(names, name)
	}
	return sum, strings.Join(names, ", "), rows.Err()
}

func mysqlSustainedOnce(ctx context.Context, env *mysqlEnv, s *filaSystem, rate float64, d, interval time.Duration, c int, idle bool) (sustainedRun, error) {
	run := sustainedRun{Broker: "mysql", System: s.Name(), Phase: susPhaseName(idle), Tables: "every table of database " + s.myDB}
	if err := s.Setup(ctx); err != nil {
		return run, err
	}
	defer func() {
		if err := s.Teardown(context.WithoutCancel(ctx)); err != nil {
			logf("%s teardown: %v", s.Name(), err)
		}
	}()
	if idle {
		conn, err := env.db.Conn(ctx)
		if err != nil {
			return run, err
		}
		defer func() {
			_, _ = conn.ExecContext(context.WithoutCancel(ctx), `ROLLBACK`)
			_ = conn.Close()
		}()
		// WITH CONSISTENT SNAPSHOT opens the read view at once; the SELECT
		// reads through it. From then on, while the transaction sits idle,
		// purge keeps every undo log newer than that view.
		for _, q := range []string{
			`SET TRANSACTION ISOLATION LEVEL REPEATABLE READ`,
			`START TRANSACTION WITH CONSISTENT SNAPSHOT`,
		} {
			if _, err := conn.ExecContext(ctx, q); err != nil {
				return run, fmt.Errorf("%s: %w", q, err)
			}
		}
		var n int64
		if err := conn.QueryRowContext(ctx, "SELECT count(*) FROM `"+s.myDB+"`.fila_messages").Scan(&n); err != nil {
			return run, err
		}
	}
	err := sustainedDrive(ctx, "mysql", s, rate, d, interval, c, &run, func(ctx context.Context, smp *sample) string {
		smp.HistLen, _ = env.historyLen(ctx)
		var names string
		smp.SizeBytes, names, _ = env.tableSizes(ctx, s.myDB)
		if names != "" {
			run.Tables = s.myDB + ": " + names
		}
		return fmt.Sprintf("history list %d size %s", smp.HistLen, humanBytes(smp.SizeBytes))
	})
	return run, err
}
