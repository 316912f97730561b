package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"log/slog"
	"math"
	"net/url"
	"os"
	"slices"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver
	"github.com/redis/go-redis/v9"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/dtqoutbox"
)

// outboxBench measures the Postgres outbox (docs/outbox.md): commit ->
// queued latency at an open-loop rate (one row per transaction; queued is
// the task's created_at, stamped by the relay's submission in this
// process, against the time tx.Commit returned), then the relay's
// throughput on a backlog of rows committed beforehand. PostgreSQL is
// DTQ_BENCH_POSTGRES_URL (default the loopback server the tests use); the
// bench works in a schema of its own and drops it.
func outboxBench(ctx context.Context, rc *redis.Client, n, rate int) result {
	db, drop := benchSchema(ctx)
	defer drop()
	if err := dtqoutbox.Migrate(ctx, db); err != nil {
		panic(err)
	}
	d, err := dtq.Open(rc, nil)
	if err != nil {
		panic(err)
	}
	c, err := d.NewClient(&dtq.ClientConfig{MaxQueueDepth: 10_000_000})
	if err != nil {
		panic(err)
	}
	insp := d.Inspector()
	relay, err := dtqoutbox.NewRelay(&dtqoutbox.RelayConfig{DB: db, Client: c, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- relay.Run(rctx) }()

	// Latency: one committed row every 1/rate s.
	committed := make(map[int64]time.Time, n)
	tick := time.NewTicker(time.Second / time.Duration(rate))
	for range n {
		<-tick.C
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			panic(err)
		}
		id, err := dtqoutbox.Insert(ctx, tx, dtq.Submission{Queue: "outbox", Type: "job", Payload: map[string]int{"n": 1}})
		if err != nil {
			panic(err)
		}
		if err := tx.Commit(); err != nil {
			panic(err)
		}
		committed[id] = time.Now()
	}
	tick.Stop()
	waitSent(ctx, db)
	var lat []float64
	rows, err := db.QueryContext(ctx, `SELECT id, task_id FROM dtq_outbox`)
	if err != nil {
		panic(err)
	}
	for rows.Next() {
		var id int64
		var taskID string
		if err := rows.Scan(&id, &taskID); err != nil {
			panic(err)
		}
		ti, err := insp.GetTask(ctx, taskID)
		if err != nil {
			panic(err)
		}
		lat = append(lat, math.Max(0, float64(ti.CreatedAt.Sub(committed[id]).Microseconds())/1000))
	}
	if err := rows.Err(); err != nil {
		panic(err)
	}
	_ = rows.Close()
	slices.Sort(lat)
	p := func(q float64) float64 { return lat[int(math.Min(float64(len(lat)-1), q*float64(len(lat))))] }

	// Throughput: a backlog of 10 n rows, committed in transactions of
	// 1000 while the relay waits, then drained.
	stop()
	if err := <-done; err != nil {
		panic(err)
	}
	backlog := 10 * n
	for i := 0; i < backlog; i += 1000 {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			panic(err)
		}
		for range min(1000, backlog-i) {
			if _, err := dtqoutbox.Insert(ctx, tx, dtq.Submission{Queue: "outbox", Type: "job", Payload: map[string]int{"n": 1}}); err != nil {
				panic(err)
			}
		}
		if err := tx.Commit(); err != nil {
			panic(err)
		}
	}
	before := readStats(ctx, rc)
	rctx, stop = context.WithCancel(ctx)
	go func() { done <- relay.Run(rctx) }()
	start := time.Now()
	waitSent(ctx, db)
	el := time.Since(start)
	after := readStats(ctx, rc)
	stop()
	<-done
	r := result{Tasks: int64(backlog), Seconds: el.Seconds(), PerSecond: float64(backlog) / el.Seconds(), P50ms: p(0.50), P99ms: p(0.99),
		Note: fmt.Sprintf("p50/p99 (p90 %.2f, max %.2f ms): commit->queued of %d rows at %d/s, one per transaction; rate: a backlog of %d rows relayed (batch 100, 1 pass at a time)",
			p(0.90), lat[len(lat)-1], n, rate, backlog)}
	charge(&r, before, after, int64(backlog))
	return r
}

// waitSent waits until no row of dtq_outbox is pending.
func waitSent(ctx context.Context, db *sql.DB) {
	for {
		var pending int
		if err := db.QueryRowContext(ctx, `SELECT count(*) FROM dtq_outbox WHERE sent_at IS NULL`).Scan(&pending); err != nil {
			panic(err)
		}
		if pending == 0 {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// benchSchema opens a schema of its own on the bench's PostgreSQL and
// returns a function that drops it.
func benchSchema(ctx context.Context) (*sql.DB, func()) {
	base := os.Getenv("DTQ_BENCH_POSTGRES_URL")
	if base == "" {
		base = "postgres://postgres:postgres@127.0.0.1:5432/postgres?sslmode=disable"
	}
	admin, err := sql.Open("pgx", base)
	if err != nil {
		panic(err)
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	schema := "dtq_bench_" + hex.EncodeToString(b)
	if _, err := admin.ExecContext(ctx, `CREATE SCHEMA `+schema); err != nil {
		panic(fmt.Errorf("the outbox bench needs PostgreSQL at %s (DTQ_BENCH_POSTGRES_URL): %w", base, err))
	}
	u, err := url.Parse(base)
	if err != nil {
		panic(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	db, err := sql.Open("pgx", u.String())
	if err != nil {
		panic(err)
	}
	return db, func() {
		_ = db.Close()
		_, _ = admin.ExecContext(context.Background(), `DROP SCHEMA `+schema+` CASCADE`)
		_ = admin.Close()
	}
}
