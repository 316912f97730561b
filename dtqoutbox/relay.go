package dtqoutbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/dtq-io/dtq"
)

// RelayConfig configures a Relay. DB and Client are required; the zero
// value of every other field selects its default.
type RelayConfig struct {
	// DB is the database holding dtq_outbox (see Migrate), opened with the
	// pgx driver ("pgx") for LISTEN/NOTIFY wake-ups; with another driver
	// the relay polls.
	DB *sql.DB
	// Client submits the rows' tasks.
	Client *dtq.Client
	// BatchSize is the most rows one pass takes. Default 100, at most 1000.
	BatchSize int
	// PollInterval is how often the relay looks for rows when no
	// notification woke it. Default 1s.
	PollInterval time.Duration
	// Concurrency is how many passes run at once (each takes its own rows:
	// FOR UPDATE SKIP LOCKED). Default 1.
	Concurrency int
	// KeyPrefix starts the idempotency key of a row without its own:
	// "<KeyPrefix>:<id>:<key_nonce>" (see docs/outbox.md). Default
	// "outbox", at most 128 printable ASCII characters. Give each database
	// that feeds one dtq deployment its own prefix: row ids repeat across
	// databases.
	KeyPrefix string
	// IdempotencyTTL must be the deployment's DTQ_IDEM_TTL_S
	// (DeploymentConfig.IdempotencyTTL). A row handed to dtq longer ago than
	// that and not marked sent is not submitted again: its key may have
	// been forgotten, so a second submission could make a second task. It
	// ends failed for a person to check. Default 24h.
	IdempotencyTTL time.Duration
	// Lease is how long a relay holds the rows it took before another may
	// take them. Default 30s.
	Lease time.Duration
	// MaxRowBytes bounds the submissions the relay reads: a row whose
	// submission's JSON text is longer ends failed, saying so, without
	// being read (dtq would refuse its payload anyway). Default
	// DefaultMaxRowBytes; for a Client with a larger MaxPayloadBytes,
	// 2 × MaxPayloadBytes + 64 KiB, as `dtq outbox relay` sets it.
	MaxRowBytes int
	// Retention is how long sent rows are kept before they are deleted.
	// Default 24h; NoPrune keeps them.
	Retention time.Duration
	// Logger receives the relay's log lines. Default slog.Default().
	Logger *slog.Logger
	// Metrics, when set, is updated by the relay (see NewMetrics).
	Metrics *Metrics
}

// DefaultMaxRowBytes is RelayConfig.MaxRowBytes's default: twice the
// default payload limit (the table's JSON text spaces out what the limit
// counts compact) and 64 KiB for the other fields, as the HTTP API bounds a
// submission's body.
const DefaultMaxRowBytes = 2*dtq.DefaultMaxPayloadBytes + 64<<10

// NoPrune is the RelayConfig.Retention that never deletes sent rows.
const NoPrune time.Duration = -1

// Relay submits committed outbox rows as tasks. Several relays, in any
// processes, may run on one table: each row is taken by one at a time.
type Relay struct {
	cfg  RelayConfig
	wake chan struct{}

	hook func(point string) // test seam: called at the named points of a pass
}

// NewRelay checks cfg and returns a relay; Run starts it.
func NewRelay(cfg *RelayConfig) (*Relay, error) {
	if cfg == nil || cfg.DB == nil || cfg.Client == nil {
		return nil, errors.New("dtqoutbox: NewRelay needs a DB and a Client")
	}
	c := *cfg
	switch {
	case c.BatchSize == 0:
		c.BatchSize = 100
	case c.BatchSize < 0 || c.BatchSize > 1000:
		return nil, errors.New("dtqoutbox: BatchSize must be 1..1000")
	}
	if c.PollInterval <= 0 {
		c.PollInterval = time.Second
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 1
	}
	if c.KeyPrefix == "" {
		c.KeyPrefix = "outbox"
	}
	if len(c.KeyPrefix) > maxKeyPrefix || strings.ContainsFunc(c.KeyPrefix, func(r rune) bool { return r < 0x20 || r > 0x7e }) {
		return nil, fmt.Errorf("dtqoutbox: KeyPrefix must be 1..%d printable ASCII characters", maxKeyPrefix)
	}
	if c.IdempotencyTTL <= 0 {
		c.IdempotencyTTL = 24 * time.Hour
	}
	if c.Lease <= 0 {
		c.Lease = 30 * time.Second
	}
	if c.MaxRowBytes <= 0 {
		c.MaxRowBytes = DefaultMaxRowBytes
	}
	if c.Retention == 0 {
		c.Retention = 24 * time.Hour
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return &Relay{cfg: c, wake: make(chan struct{}, 1), hook: func(string) {}}, nil
}

// housekeeping is how often a relay prunes sent rows, ends rows past the
// idempotency window and refreshes its gauges.
const housekeeping = 5 * time.Second

// Run relays until ctx ends, then returns nil. Database and Redis errors
// are logged and retried; rows are never lost by them.
func (r *Relay) Run(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.listen(ctx)
	}()
	passes := make(chan struct{}, r.cfg.Concurrency)
	for range r.cfg.Concurrency {
		go func() {
			defer func() { passes <- struct{}{} }()
			r.loop(ctx)
		}()
	}
	r.housekeep(ctx)
	tick := time.NewTicker(housekeeping)
	defer tick.Stop()
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-tick.C:
			r.housekeep(ctx)
		}
	}
	for range r.cfg.Concurrency {
		<-passes
	}
	<-done
	return nil
}

// loop runs passes: at once again after a full batch, else after a
// notification or the poll interval. Errors back off, doubling to 10 s.
func (r *Relay) loop(ctx context.Context) {
	backoff := time.Duration(0)
	for ctx.Err() == nil {
		n, err := r.pass(ctx)
		var wait time.Duration
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			backoff = min(max(2*backoff, 100*time.Millisecond), 10*time.Second)
			r.cfg.Logger.Warn("outbox relay pass failed; retrying", "err", err, "retry_in", backoff)
			r.cfg.Metrics.error("database")
			wait = backoff
		case n == r.cfg.BatchSize:
			backoff = 0
			continue
		default:
			backoff = 0
			wait = r.cfg.PollInterval
		}
		wake := r.wake
		if err != nil {
			wake = nil // a failing database is not hammered on notifications
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
		case <-t.C:
		case <-wake:
		}
		t.Stop()
	}
}

// maxKeyPrefix bounds RelayConfig.KeyPrefix, so that a row's key
// ("<prefix>:<id>:<32 hex digits>") stays within dtq.MaxIdempotencyKey.
const maxKeyPrefix = 128

// taken is a row a pass took: its body only when it is at most
// MaxRowBytes long.
type taken struct {
	id    int64
	nonce sql.NullString
	size  int64 // the submission's JSON text, bytes
	body  []byte
}

// key is the idempotency key of row t when its submission has none:
// "<prefix>:<id>:<nonce>". The nonce is random and written with the row,
// so no other producer can know a row's key before its relay has used it
// and claim it first with other work, which would end the row failed
// (row ids are a sequence anyone can guess). A row written before the
// table had nonces has none and keeps the key "<prefix>:<id>" it may
// already have been submitted under.
func (r *Relay) key(t *taken) string {
	k := r.cfg.KeyPrefix + ":" + strconv.FormatInt(t.id, 10)
	if t.nonce.Valid {
		k += ":" + t.nonce.String
	}
	return k
}

// pass takes up to BatchSize rows, submits them and records the outcomes.
// It returns how many rows it took.
func (r *Relay) pass(ctx context.Context) (int, error) {
	rows, err := r.take(ctx)
	if err != nil || len(rows) == 0 {
		return 0, err
	}
	r.hook("taken")
	subs := make([]dtq.Submission, 0, len(rows))
	var idx []int // rows[idx[j]] is subs[j]
	var failed []outcome
	for i, t := range rows {
		if t.body == nil {
			failed = append(failed, outcome{id: t.id, err: fmt.Sprintf(
				"the row's submission is %d bytes of JSON, over the %d the relay reads (RelayConfig.MaxRowBytes; "+
					"2 × the payload limit and 64 KiB); not read, not submitted", t.size, r.cfg.MaxRowBytes)})
			continue
		}
		var s dtq.Submission
		if err := s.UnmarshalJSON(t.body); err != nil {
			failed = append(failed, outcome{id: t.id, err: "the row's submission is invalid: " + err.Error()})
			continue
		}
		if s.IdempotencyKey == "" {
			s.IdempotencyKey = r.key(&rows[i])
		}
		subs = append(subs, s)
		idx = append(idx, i)
	}
	var sent, retry []outcome
	if len(subs) > 0 {
		items, err := r.cfg.Client.SubmitBatch(ctx, subs)
		if err != nil {
			items = make([]dtq.BatchItem, len(subs))
			for j := range items {
				items[j].Err = err
			}
		}
		r.hook("submitted")
		for j, it := range items {
			id := rows[idx[j]].id
			taskID, kind, msg := classify(it)
			switch kind {
			case outcomeSent:
				sent = append(sent, outcome{id: id, taskID: taskID})
			case outcomeFailed:
				failed = append(failed, outcome{id: id, err: msg})
			default:
				retry = append(retry, outcome{id: id, err: msg})
			}
		}
	}
	if err := r.record(context.WithoutCancel(ctx), sent, failed, retry); err != nil {
		return len(rows), err
	}
	r.hook("recorded")
	r.cfg.Metrics.relayed(len(sent))
	for _, f := range failed {
		r.cfg.Logger.Error("outbox row will not be submitted", "row", f.id, "err", f.err)
		r.cfg.Metrics.error("invalid")
	}
	for _, f := range retry {
		r.cfg.Logger.Warn("outbox row not submitted yet; retrying", "row", f.id, "err", f.err)
		r.cfg.Metrics.error("submit")
	}
	return len(rows), nil
}

// take leases the oldest rows that are due, in one statement: no other
// relay takes them until the lease ends or they are recorded. A row's
// submission comes back only when its JSON text is at most MaxRowBytes
// long: the database measures it, so a huge row costs the relay nothing.
func (r *Relay) take(ctx context.Context) ([]taken, error) {
	q, err := r.cfg.DB.QueryContext(ctx, `
		UPDATE dtq_outbox o
		SET claimed_until = now() + $2 * interval '1 millisecond',
			first_claimed_at = COALESCE(o.first_claimed_at, now()),
			attempts = o.attempts + 1
		FROM (
			SELECT id, octet_length(submission::text) AS size FROM dtq_outbox
			WHERE sent_at IS NULL AND failed_at IS NULL
				AND (claimed_until IS NULL OR claimed_until < now())
				AND (first_claimed_at IS NULL OR first_claimed_at > now() - $3 * interval '1 millisecond')
			ORDER BY id LIMIT $1
			FOR UPDATE SKIP LOCKED) due
		WHERE o.id = due.id
		RETURNING o.id, o.key_nonce, due.size, CASE WHEN due.size <= $4 THEN o.submission END`,
		r.cfg.BatchSize, r.cfg.Lease.Milliseconds(), r.window().Milliseconds(), r.cfg.MaxRowBytes)
	if err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "42703" /* undefined_column */ {
			return nil, fmt.Errorf("dtqoutbox: take rows: dtq_outbox predates this relay; run dtq outbox migrate (dtqoutbox.Migrate): %w", err)
		}
		return nil, fmt.Errorf("dtqoutbox: take rows: %w", err)
	}
	defer func() { _ = q.Close() }()
	var out []taken
	for q.Next() {
		var t taken
		if err := q.Scan(&t.id, &t.nonce, &t.size, &t.body); err != nil {
			return nil, fmt.Errorf("dtqoutbox: take rows: %w", err)
		}
		out = append(out, t)
	}
	if err := q.Err(); err != nil {
		return nil, fmt.Errorf("dtqoutbox: take rows: %w", err)
	}
	return out, nil
}

// window is how long after a row was first handed to dtq it may still be
// submitted again: the idempotency TTL less a margin for clocks and for a
// pass under way.
func (r *Relay) window() time.Duration {
	return r.cfg.IdempotencyTTL - min(r.cfg.IdempotencyTTL/10, 5*time.Minute) - r.cfg.Lease
}

// outcome is what a pass learnt about one row.
type outcome struct {
	id     int64
	taskID string
	err    string
}

// Kinds of outcome.
const (
	outcomeSent = iota
	outcomeFailed
	outcomeRetry
)

// classify reads one submission's answer: sent (the task exists: created,
// replayed, or in progress under the row's key, which only this row's
// earlier submission can have made), failed (the submission is refused and
// always will be), or retry (nothing known to be wrong with the row).
func classify(it dtq.BatchItem) (taskID string, kind int, msg string) {
	if it.Err == nil {
		return it.Result.TaskID, outcomeSent, ""
	}
	var ce *dtq.IdempotencyConflictError
	switch {
	case errors.As(it.Err, &ce) && errors.Is(it.Err, dtq.ErrIdempotencyInProgress):
		return ce.TaskID, outcomeSent, ""
	case errors.Is(it.Err, dtq.ErrIdempotencyKeyMismatch):
		return "", outcomeFailed, it.Err.Error() + " (another submission used the row's idempotency key)"
	case errors.Is(it.Err, dtq.ErrInvalidTask), errors.Is(it.Err, dtq.ErrUnknownTaskType), errors.Is(it.Err, dtq.ErrPayloadTooLarge):
		return "", outcomeFailed, it.Err.Error()
	}
	return "", outcomeRetry, it.Err.Error()
}

// record writes a pass's outcomes in one transaction: sent rows get their
// task id, failed rows their error, rows to retry their error and a lease
// that ends after a backoff.
func (r *Relay) record(ctx context.Context, sent, failed, retry []outcome) error {
	tx, err := r.cfg.DB.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("dtqoutbox: record: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	if len(sent) > 0 {
		ids, tasks := make([]int64, len(sent)), make([]string, len(sent))
		for i, o := range sent {
			ids[i], tasks[i] = o.id, o.taskID
		}
		if _, err := tx.ExecContext(ctx, `
			UPDATE dtq_outbox o SET sent_at = now(), task_id = v.task_id, claimed_until = NULL, last_error = NULL
			FROM unnest($1::bigint[], $2::text[]) AS v(id, task_id)
			WHERE o.id = v.id AND o.sent_at IS NULL`, ids, tasks); err != nil {
			return fmt.Errorf("dtqoutbox: record sent rows: %w", err)
		}
	}
	for _, o := range failed {
		if _, err := tx.ExecContext(ctx, `
			UPDATE dtq_outbox SET failed_at = now(), last_error = $2, claimed_until = NULL
			WHERE id = $1 AND sent_at IS NULL`, o.id, o.err); err != nil {
			return fmt.Errorf("dtqoutbox: record failed row: %w", err)
		}
	}
	for _, o := range retry {
		// 200 ms doubling per attempt to a minute, jittered.
		if _, err := tx.ExecContext(ctx, `
			UPDATE dtq_outbox SET last_error = $2,
				claimed_until = now() + least(60000, 200 * 2 ^ least(attempts - 1, 9)) * $3 * interval '1 millisecond'
			WHERE id = $1 AND sent_at IS NULL`, o.id, o.err, 0.75+rand.Float64()/2); err != nil {
			return fmt.Errorf("dtqoutbox: record row to retry: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("dtqoutbox: record: %w", err)
	}
	return nil
}

// housekeep ends rows past the idempotency window, prunes sent rows past
// the retention and refreshes the gauges. Errors are logged: the next
// round tries again.
func (r *Relay) housekeep(ctx context.Context) {
	res, err := r.cfg.DB.ExecContext(ctx, `
		UPDATE dtq_outbox SET failed_at = now(), claimed_until = NULL,
			last_error = 'outcome unknown: handed to dtq at ' || first_claimed_at ||
				' and not marked sent within the idempotency window; not submitted again, since its key may be forgotten. ' ||
				'Check for a task with its idempotency key, then clear failed_at to submit it again, or delete the row'
		WHERE sent_at IS NULL AND failed_at IS NULL
			AND first_claimed_at <= now() - $1 * interval '1 millisecond'
			AND (claimed_until IS NULL OR claimed_until < now())`, r.window().Milliseconds())
	if err != nil {
		if ctx.Err() == nil {
			r.cfg.Logger.Warn("outbox housekeeping failed", "err", err)
		}
		return
	}
	if n, _ := res.RowsAffected(); n > 0 {
		r.cfg.Logger.Error("outbox rows past the idempotency window ended failed: a relay was down or stuck too long",
			"rows", n, "window", r.cfg.IdempotencyTTL)
		r.cfg.Metrics.unknown(int(n))
	}
	if r.cfg.Retention > 0 {
		if _, err := r.cfg.DB.ExecContext(ctx, `DELETE FROM dtq_outbox WHERE sent_at < now() - $1 * interval '1 millisecond'`,
			r.cfg.Retention.Milliseconds()); err != nil && ctx.Err() == nil {
			r.cfg.Logger.Warn("outbox prune failed", "err", err)
		}
	}
	if r.cfg.Metrics != nil {
		var pending, failed int64
		var oldest sql.NullFloat64
		if err := r.cfg.DB.QueryRowContext(ctx, `
			SELECT count(*) FILTER (WHERE failed_at IS NULL), count(*) FILTER (WHERE failed_at IS NOT NULL),
				extract(epoch FROM now() - min(created_at) FILTER (WHERE failed_at IS NULL))
			FROM dtq_outbox WHERE sent_at IS NULL`).Scan(&pending, &failed, &oldest); err != nil {
			if ctx.Err() == nil {
				r.cfg.Logger.Warn("outbox gauges not read", "err", err)
			}
			return
		}
		r.cfg.Metrics.gauges(pending, failed, oldest.Float64, r.cfg.IdempotencyTTL)
	}
}

// listen wakes the passes on each notification of Channel, through a
// connection of its own; it reconnects with backoff, and gives up quietly
// when the driver is not pgx (the relay then polls).
func (r *Relay) listen(ctx context.Context) {
	backoff := time.Duration(0)
	for ctx.Err() == nil {
		err := r.listenOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, errNotPgx) {
			r.cfg.Logger.Info("outbox relay polls: the database driver is not pgx", "poll_interval", r.cfg.PollInterval)
			return
		}
		backoff = min(max(2*backoff, 100*time.Millisecond), 10*time.Second)
		r.cfg.Logger.Warn("outbox LISTEN connection lost; polling until it is back", "err", err, "retry_in", backoff)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
}

var errNotPgx = errors.New("dtqoutbox: not a pgx connection")

func (r *Relay) listenOnce(ctx context.Context) error {
	conn, err := r.cfg.DB.Conn(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	return conn.Raw(func(dc any) error {
		sc, ok := dc.(*stdlib.Conn)
		if !ok {
			return errNotPgx
		}
		pc := sc.Conn()
		if _, err := pc.Exec(ctx, "LISTEN "+Channel); err != nil {
			return err
		}
		// A connection left listening must not go back to the pool.
		defer func() { _, _ = pc.Exec(context.WithoutCancel(ctx), "UNLISTEN "+Channel) }()
		r.signal() // rows committed while nobody listened
		for {
			if _, err := pc.WaitForNotification(ctx); err != nil {
				return err
			}
			r.signal()
		}
	})
}

// signal wakes one waiting pass (the others wake on their poll).
func (r *Relay) signal() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}
