package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"

	"github.com/go-sql-driver/mysql"
)

// mysqlEnv holds an admin connection to the server of a mysql:// URL
// (MySQL or MariaDB); each system gets its own database, dropped at Close.
type mysqlEnv struct {
	url    string        // mysql://user[:pass]@host:port/db?params
	cfg    *mysql.Config // the URL as go-sql-driver's config
	db     *sql.DB       // admin pool on the URL's database
	suffix string
	// isoVar is the session variable that sets the isolation level:
	// transaction_isolation (MySQL 8, MariaDB 11.1+) or tx_isolation
	// (MariaDB before 11.1).
	isoVar string
}

// mysqlConfig turns a mysql:// URL into go-sql-driver's config: user and
// password, host:port over TCP, the path's database, and the query's
// parameters apart from Fila's own (fila_*), which go-sql-driver treats as
// DSN parameters (system variables it sets on each connection).
func mysqlConfig(raw string) (*mysql.Config, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, err
	}
	if u.Scheme != "mysql" {
		return nil, fmt.Errorf("not a mysql:// URL: %q", raw)
	}
	q := u.Query()
	for k := range q {
		if strings.HasPrefix(k, "fila_") {
			q.Del(k)
		}
	}
	var dsn strings.Builder
	if u.User != nil {
		dsn.WriteString(u.User.Username())
		if p, ok := u.User.Password(); ok {
			dsn.WriteString(":" + p)
		}
		dsn.WriteString("@")
	}
	host := u.Host
	if host == "" {
		host = "127.0.0.1:3306"
	} else if u.Port() == "" {
		host += ":3306"
	}
	fmt.Fprintf(&dsn, "tcp(%s)/%s", host, strings.TrimPrefix(u.Path, "/"))
	if len(q) > 0 {
		dsn.WriteString("?" + q.Encode())
	}
	return mysql.ParseDSN(dsn.String())
}

func newMySQLEnv(ctx context.Context, raw string) (*mysqlEnv, error) {
	cfg, err := mysqlConfig(raw)
	if err != nil {
		return nil, err
	}
	c, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(c)
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, err
	}
	e := &mysqlEnv{url: raw, cfg: cfg, db: db, suffix: randSuffix(), isoVar: "transaction_isolation"}
	var v string
	if err := db.QueryRowContext(ctx, `SELECT @@transaction_isolation`).Scan(&v); err != nil {
		e.isoVar = "tx_isolation"
	}
	return e, nil
}

// createDB makes an empty database for one system.
func (e *mysqlEnv) createDB(ctx context.Context, name string) error {
	if _, err := e.db.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+name+"`"); err != nil {
		return err
	}
	_, err := e.db.ExecContext(ctx, "CREATE DATABASE `"+name+"`")
	return err
}

func (e *mysqlEnv) dropDB(ctx context.Context, name string) error {
	_, err := e.db.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+name+"`")
	return err
}

func (e *mysqlEnv) filaDB() string { return "bench_fila_" + e.suffix }

// filaSystem opens Fila on its own database, migrated at open. Teardown
// deletes the run's queue from every table of that database with a queue
// column (fila_messages and whatever else the driver keeps per queue).
func (e *mysqlEnv) filaSystem(ctx context.Context) (*filaSystem, error) {
	name := e.filaDB()
	if err := e.createDB(ctx, name); err != nil {
		return nil, err
	}
	var (
		once   sync.Once
		tables []string
		terr   error
	)
	teardown := func(ctx context.Context, queue string) error {
		once.Do(func() {
			rows, err := e.db.QueryContext(ctx, `SELECT table_name FROM information_schema.columns
				WHERE table_schema = ? AND column_name = 'queue' ORDER BY table_name`, name)
			if err != nil {
				terr = err
				return
			}
			defer rows.Close()
			for rows.Next() {
				var t string
				if err := rows.Scan(&t); err != nil {
					terr = err
					return
				}
				tables = append(tables, t)
			}
			terr = rows.Err()
		})
		if terr != nil {
			return terr
		}
		var errs []error
		for _, t := range tables {
			_, err := e.db.ExecContext(ctx, "DELETE FROM `"+name+"`.`"+t+"` WHERE queue = ?", queue)
			errs = append(errs, err)
		}
		return errors.Join(errs...)
	}
	u, err := withDatabase(e.url, name)
	if err != nil {
		return nil, err
	}
	s, err := newFilaSystem(ctx, addParams(u, "fila_migrate=true"), teardown,
		func(ctx context.Context) error { return e.dropDB(ctx, name) })
	if err != nil {
		_ = e.dropDB(context.WithoutCancel(ctx), name)
		return nil, err
	}
	s.myDB = name
	return s, nil
}

// rawMySQLName is the raw baseline's name in the tables.
const rawMySQLName = "raw database/sql"

// rawMySQL is the raw database/sql baseline: what a hand-written SKIP
// LOCKED queue on MySQL/MariaDB does. A table like Fila's hot table; a claim
// of up to the free slots in one READ COMMITTED transaction (SELECT … ORDER
// BY visible_at, id LIMIT n FOR UPDATE SKIP LOCKED, then an UPDATE of the
// claimed rows' visible_at, then COMMIT); one autocommitted DELETE per
// finished job. Tuned as one would: the session runs at READ COMMITTED
// (set at connect, so a transaction starts with a plain START TRANSACTION),
// parameters are interpolated client-side (one round trip per statement
// rather than prepare + execute), and the pool keeps its connections.
type rawMySQL struct {
	env   *mysqlEnv
	db    *sql.DB
	name  string // database
	queue string
}

// rawMySQLPool is the raw baseline's pool size: the same as Fila's MySQL
// driver opens from a URL by default (mysql.DefaultMaxConns,
// fila_max_conns), so both sides have as many commits in flight.
const rawMySQLPool = 20

func (e *mysqlEnv) rawSystem(ctx context.Context) (*rawMySQL, error) {
	name := "bench_raw_" + e.suffix
	if err := e.createDB(ctx, name); err != nil {
		return nil, err
	}
	cfg := e.cfg.Clone()
	cfg.DBName = name
	cfg.InterpolateParams = true
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params[e.isoVar] = "'READ-COMMITTED'"
	c, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(c)
	db.SetMaxOpenConns(rawMySQLPool)
	db.SetMaxIdleConns(rawMySQLPool)
	s := &rawMySQL{env: e, db: db, name: name}
	_, err = db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS bench_raw_jobs (
	id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
	queue VARBINARY(255) NOT NULL,
	body BLOB NOT NULL,
	visible_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
	attempts INT NOT NULL DEFAULT 0,
	KEY jobs_claim (queue, visible_at, id)
) ENGINE=InnoDB`)
	if err != nil {
		_ = db.Close()
		_ = e.dropDB(context.WithoutCancel(ctx), name)
		return nil, err
	}
	return s, nil
}

func (s *rawMySQL) Name() string { return rawMySQLName }

func (s *rawMySQL) Setup(context.Context) error {
	s.queue = "bench-" + randSuffix()
	return nil
}

func (s *rawMySQL) Enqueue(ctx context.Context, bodies [][]byte) error {
	if len(bodies) == 1 {
		_, err := s.db.ExecContext(ctx, `INSERT INTO bench_raw_jobs (queue, body) VALUES (?, ?)`, s.queue, bodies[0])
		return err
	}
	// One multi-row INSERT.
	var q strings.Builder
	q.Grow(48 + 7*len(bodies))
	q.WriteString(`INSERT INTO bench_raw_jobs (queue, body) VALUES `)
	args := make([]any, 0, 2*len(bodies))
	for i, b := range bodies {
		if i > 0 {
			q.WriteString(",")
		}
		q.WriteString("(?,?)")
		args = append(args, s.queue, b)
	}
	_, err := s.db.ExecContext(ctx, q.String(), args...)
	return err
}

type myJob struct {
	id   int64
	body []byte
}

// claim leases up to n visible jobs for 30 s: START TRANSACTION, SELECT …
// FOR UPDATE SKIP LOCKED, UPDATE … WHERE id IN (…), COMMIT (four round
// trips, one commit).
func (s *rawMySQL) claim(ctx context.Context, n int) (jobs []myJob, err error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	rows, err := tx.QueryContext(ctx, `SELECT id, body FROM bench_raw_jobs
	WHERE queue = ? AND visible_at <= NOW(6)
	ORDER BY visible_at, id LIMIT ? FOR UPDATE SKIP LOCKED`, s.queue, n)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var j myJob
		if err := rows.Scan(&j.id, &j.body); err != nil {
			rows.Close()
			return nil, err
		}
		jobs = append(jobs, j)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(jobs) == 0 {
		return nil, tx.Commit()
	}
	var q strings.Builder
	q.WriteString(`UPDATE bench_raw_jobs SET attempts = attempts + 1, visible_at = NOW(6) + INTERVAL 30 SECOND WHERE id IN (`)
	args := make([]any, len(jobs))
	for i, j := range jobs {
		if i > 0 {
			q.WriteString(",")
		}
		q.WriteString("?")
		args[i] = j.id
	}
	q.WriteString(")")
	if _, err := tx.ExecContext(ctx, q.String(), args...); err != nil {
		return nil, err
	}
	return jobs, tx.Commit()
}

func (s *rawMySQL) Start(ctx context.Context, concurrency int, onStart func([]byte)) (Consumer, error) {
	fetch := func(ctx context.Context, n int) ([]myJob, error) {
		jobs, err := s.claim(ctx, n)
		if err == nil && len(jobs) == 0 {
			sleepCtx(ctx, rawPollInterval) // empty: poll again shortly
		}
		return jobs, err
	}
	handle := func(ctx context.Context, j myJob) bool {
		onStart(j.body)
		_, err := s.db.ExecContext(context.WithoutCancel(ctx), `DELETE FROM bench_raw_jobs WHERE id = ?`, j.id)
		if err != nil {
			logf("%s ack: %v", rawMySQLName, err)
		}
		return err == nil
	}
	return startSlotLoop(ctx, concurrency, 1000, fetch, handle), nil
}

func (s *rawMySQL) Teardown(ctx context.Context) error {
	_, err := s.db.ExecContext(ctx, `DELETE FROM bench_raw_jobs WHERE queue = ?`, s.queue)
	return err
}

func (s *rawMySQL) Close(ctx context.Context) error {
	err := s.db.Close()
	if derr := s.env.dropDB(ctx, s.name); err == nil {
		err = derr
	}
	return err
}
