package dtqoutbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/internal/faultproxy"
	"github.com/dtq-io/dtq/internal/redistest"
)

// rig is a Redis prefix, a database schema and what talks to both.
type rig struct {
	ctx    context.Context
	rc     redis.UniversalClient
	prefix string
	db     *testDB
	d      *dtq.Deployment
	client *dtq.Client
	insp   *dtq.Inspector
}

func newRig(t *testing.T) *rig {
	t.Helper()
	s := redistest.New(t)
	d, err := dtq.Open(s.Client, &dtq.DeploymentConfig{KeyPrefix: s.Prefix})
	require.NoError(t, err)
	c, err := d.NewClient(nil)
	require.NoError(t, err)
	return &rig{ctx: context.Background(), rc: s.Client, prefix: s.Prefix, db: newDB(t), d: d, client: c, insp: d.Inspector()}
}

// relay runs a relay on the rig until the test ends.
func (g *rig) relay(t *testing.T, mod func(*RelayConfig)) *Relay {
	t.Helper()
	cfg := &RelayConfig{DB: g.db.db, Client: g.client, PollInterval: 50 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)}
	if mod != nil {
		mod(cfg)
	}
	r, err := NewRelay(cfg)
	require.NoError(t, err)
	g.run(t, r)
	return r
}

func (g *rig) run(t *testing.T, r *Relay) {
	t.Helper()
	ctx, cancel := context.WithCancel(g.ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
}

// insert commits (or rolls back) one transaction holding a business row
// and an outbox row for task "job" with payload {"row": mark}.
func (g *rig) insert(t *testing.T, mark int, commit bool) int64 {
	t.Helper()
	tx, err := g.db.db.BeginTx(g.ctx, nil)
	require.NoError(t, err)
	id, err := Insert(g.ctx, tx, dtq.Submission{Queue: "outbox", Type: "job", Payload: map[string]any{"row": mark}})
	require.NoError(t, err)
	if commit {
		require.NoError(t, tx.Commit())
	} else {
		require.NoError(t, tx.Rollback())
	}
	return id
}

// insertQuiet is insert for a goroutine other than the test's.
func (g *rig) insertQuiet(mark int, commit bool) error {
	tx, err := g.db.db.BeginTx(g.ctx, nil)
	if err != nil {
		return err
	}
	if _, err := Insert(g.ctx, tx, dtq.Submission{Queue: "outbox", Type: "job", Payload: map[string]any{"row": mark}}); err != nil {
		_ = tx.Rollback()
		return err
	}
	if commit {
		return tx.Commit()
	}
	return tx.Rollback()
}

// settled waits until no row is pending.
func (g *rig) settled(t *testing.T) {
	t.Helper()
	require.Eventually(t, func() bool {
		var n int
		require.NoError(t, g.db.db.QueryRow(`SELECT count(*) FROM dtq_outbox WHERE sent_at IS NULL AND failed_at IS NULL`).Scan(&n))
		return n == 0
	}, 60*time.Second, 10*time.Millisecond, "rows still pending")
}

// exact checks that every committed row (marks) became exactly one task:
// the queue holds as many tasks as rows were committed, each row's task is
// its own, and no rolled-back mark appears.
func (g *rig) exact(t *testing.T, committed map[int]bool) {
	t.Helper()
	rows, err := g.db.db.Query(`SELECT id, key_nonce, submission, task_id FROM dtq_outbox ORDER BY id`)
	require.NoError(t, err)
	defer func() { _ = rows.Close() }()
	seen := map[int]bool{}
	for rows.Next() {
		var id int64
		var nonce string
		var body []byte
		var taskID sql.NullString
		require.NoError(t, rows.Scan(&id, &nonce, &body, &taskID))
		require.True(t, taskID.Valid, "row %d has no task", id)
		ti, err := g.insp.GetTask(g.ctx, taskID.String)
		require.NoError(t, err, "row %d", id)
		var p struct{ Row int }
		require.NoError(t, json.Unmarshal(ti.Payload, &p))
		var s struct{ Payload struct{ Row int } }
		require.NoError(t, json.Unmarshal(body, &s))
		require.Equal(t, s.Payload.Row, p.Row, "row %d's task is its own", id)
		require.False(t, seen[p.Row], "mark %d twice", p.Row)
		seen[p.Row] = true
		require.Len(t, nonce, 32)
		require.Equal(t, fmt.Sprintf("outbox:%d:%s", id, nonce), *ti.IdempotencyKey)
	}
	require.NoError(t, rows.Err())
	for m, c := range committed {
		require.Equal(t, c, seen[m], "mark %d committed=%v", m, c)
	}
	n := 0
	for _, c := range committed {
		if c {
			n++
		}
	}
	q, err := g.insp.GetQueue(g.ctx, "outbox")
	require.NoError(t, err)
	require.EqualValues(t, n, q.Depth, "the queue holds one task per committed row")
}

func TestMigrateIsRepeatable(t *testing.T) {
	t.Parallel()
	d := newDB(t) // migrated once
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() { errs <- Migrate(context.Background(), d.db) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

func TestInsertWritesTheSubmissionsHTTPForm(t *testing.T) {
	t.Parallel()
	at := time.Date(2027, 1, 2, 3, 4, 5, 6_000_000, time.UTC)
	cases := []struct {
		name string
		in   dtq.Submission
		want string // the row's JSON
	}{
		{"minimal", dtq.Submission{Type: "echo"}, `{"task_type":"echo"}`},
		{"every field", dtq.Submission{Queue: "emails", Type: "send", Payload: map[string]any{"to": "a"},
			Metadata: json.RawMessage(`{"src":"db"}`), Priority: new(7), MaxAttempts: 3, Timeout: 90 * time.Second,
			RunAt: at, ExpiresAt: at.Add(time.Hour), IdempotencyKey: "order-1", ConcurrencyKey: "acme",
			Retention: 2 * time.Hour, KeepPayload: true},
			`{"task_type":"send","queue":"emails","payload":{"to":"a"},"metadata":{"src":"db"},"priority":7,"max_attempts":3,
			"timeout_ms":90000,"run_at":"2027-01-02T03:04:05.006Z","expires_at":"2027-01-02T04:04:05.006Z",
			"idempotency_key":"order-1","concurrency_key":"acme","retention_seconds":7200,"keep_payload":true}`},
		{"delay and ttl", dtq.Submission{Type: "x", Delay: 1500 * time.Millisecond, TTL: time.Minute}, `{"task_type":"x","delay_ms":1500,"ttl_seconds":60}`},
		{"no retention", dtq.Submission{Type: "x", Retention: dtq.NoRetention}, `{"task_type":"x","retention_seconds":0}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			b, err := encode(&c.in)
			require.NoError(t, err)
			require.JSONEq(t, c.want, string(b))
			var back dtq.Submission
			require.NoError(t, back.UnmarshalJSON(b)) // what the relay reads
			again, err := encode(&back)
			require.NoError(t, err)
			require.JSONEq(t, c.want, string(again), "the relay reads the row as it was written")
		})
	}
	bad := []struct {
		name string
		in   dtq.Submission
		msg  string
	}{
		{"no type", dtq.Submission{}, "Type is required"},
		{"payload not an object", dtq.Submission{Type: "x", Payload: []int{1}}, "payload: must be a JSON object"},
		{"sub-millisecond timeout", dtq.Submission{Type: "x", Timeout: 1500 * time.Microsecond}, "timeout_ms: must be a non-negative whole number of 1ms"},
		{"fractional retention", dtq.Submission{Type: "x", Retention: 1500 * time.Millisecond}, "retention_seconds: must be"},
	}
	for _, c := range bad {
		_, err := encode(&c.in)
		require.ErrorIs(t, err, ErrInvalidSubmission, c.name)
		require.ErrorContains(t, err, c.msg, c.name)
	}
}

// TestCommittedRowsBecomeOneTaskEach: rows of committed transactions become
// one task each, rows of rolled-back ones none, with two relays sharing the
// table while the rows come in.
func TestCommittedRowsBecomeOneTaskEach(t *testing.T) {
	t.Parallel()
	g := newRig(t)
	g.relay(t, func(c *RelayConfig) { c.BatchSize = 7 })
	g.relay(t, func(c *RelayConfig) { c.BatchSize = 5; c.Concurrency = 2 })
	committed := map[int]bool{}
	for i := range 300 {
		commit := i%5 != 0
		g.insert(t, i, commit)
		committed[i] = commit
	}
	g.settled(t)
	g.exact(t, committed)
}

// TestRowWithTheSubmissionsOwnKey: a row's own idempotency key is used;
// another row under that key with other work ends failed, not retried.
func TestRowWithTheSubmissionsOwnKey(t *testing.T) {
	t.Parallel()
	g := newRig(t)
	tx, err := g.db.db.BeginTx(g.ctx, nil)
	require.NoError(t, err)
	first, err := Insert(g.ctx, tx, dtq.Submission{Queue: "outbox", Type: "job", IdempotencyKey: "order-9", Payload: map[string]any{"n": 1}})
	require.NoError(t, err)
	other, err := Insert(g.ctx, tx, dtq.Submission{Queue: "outbox", Type: "job", IdempotencyKey: "order-9", Payload: map[string]any{"n": 2}})
	require.NoError(t, err)
	require.NoError(t, tx.Commit())
	g.relay(t, nil)
	g.settled(t)
	var taskID string
	require.NoError(t, g.db.db.QueryRow(`SELECT task_id FROM dtq_outbox WHERE id = $1 AND sent_at IS NOT NULL`, first).Scan(&taskID))
	ti, err := g.insp.GetTask(g.ctx, taskID)
	require.NoError(t, err)
	require.Equal(t, "order-9", *ti.IdempotencyKey)
	var msg string
	var attempts int
	require.NoError(t, g.db.db.QueryRow(`SELECT last_error, attempts FROM dtq_outbox WHERE id = $1 AND failed_at IS NOT NULL`, other).Scan(&msg, &attempts))
	require.Contains(t, msg, "another submission used the row's idempotency key")
	require.Equal(t, 1, attempts)
}

// TestInvalidRowsEndFailed: a row that is not a valid submission (written
// by hand, or refused by the client) ends failed with the reason, at once.
func TestInvalidRowsEndFailed(t *testing.T) {
	t.Parallel()
	g := newRig(t)
	strict, err := g.d.NewClient(&dtq.ClientConfig{TaskTypes: []string{"job"}})
	require.NoError(t, err)
	for _, body := range []string{`{"task_type":"job","bogus":1}`, `{"task_type":"nope"}`, `{"task_type":"job","priority":12}`, `[1]`} {
		_, err := g.db.db.Exec(`INSERT INTO dtq_outbox (submission) VALUES ($1)`, body)
		require.NoError(t, err)
	}
	good := g.insert(t, 1, true)
	g.relay(t, func(c *RelayConfig) { c.Client = strict })
	g.settled(t)
	rows, err := g.db.db.Query(`SELECT id, failed_at IS NOT NULL, coalesce(last_error, ''), attempts FROM dtq_outbox ORDER BY id`)
	require.NoError(t, err)
	defer func() { _ = rows.Close() }()
	var errs []string
	for rows.Next() {
		var id int64
		var failed bool
		var msg string
		var attempts int
		require.NoError(t, rows.Scan(&id, &failed, &msg, &attempts))
		require.Equal(t, id != good, failed, "row %d", id)
		require.Equal(t, 1, attempts, "row %d is not retried", id)
		errs = append(errs, msg)
	}
	require.NoError(t, rows.Err())
	require.Contains(t, errs[0], "bogus: is not a known field")
	require.Contains(t, errs[1], "is not a registered task type")
	require.Contains(t, errs[2], "priority")
	require.Contains(t, errs[3], "not a JSON object")
	require.Empty(t, errs[4])
}

// TestRelayThroughARedisOutage: rows committed while Redis is unreachable
// for 2 s are submitted once it is back, each exactly once, while replies
// are also lost now and then (a submission sent again is a replay).
func TestRelayThroughARedisOutage(t *testing.T) {
	t.Parallel()
	g := newRig(t)
	srv := redistest.Shared(t)
	p, err := faultproxy.Start(srv.Addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	rc := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = rc.Close() })
	d, err := dtq.Open(rc, &dtq.DeploymentConfig{KeyPrefix: g.prefix})
	require.NoError(t, err)
	c, err := d.NewClient(nil)
	require.NoError(t, err)
	g.relay(t, func(cfg *RelayConfig) { cfg.Client = c })
	committed := map[int]bool{}
	for i := range 40 {
		if i == 10 {
			p.SetDown(true)
		}
		if i == 30 {
			p.SetDown(false)
		}
		if i%4 == 0 {
			p.CutAfter([]byte("outbox:"), 1) // the ingest reaches Redis, its reply does not come back
		}
		committed[i] = i%7 != 0
		g.insert(t, i, committed[i])
		if i >= 10 && i < 30 {
			time.Sleep(100 * time.Millisecond) // 2 s of outage while rows come in
		}
	}
	g.settled(t)
	g.exact(t, committed)
	require.Positive(t, p.Cuts())
}

// TestRowsPastTheIdempotencyWindowAreNotResubmitted: a row handed to dtq
// longer ago than the idempotency window and never marked sent (its relay
// died, and no relay ran for that long) ends failed, saying so; it is not
// submitted again.
func TestRowsPastTheIdempotencyWindowAreNotResubmitted(t *testing.T) {
	t.Parallel()
	g := newRig(t)
	id := g.insert(t, 1, true)
	_, err := g.db.db.Exec(`UPDATE dtq_outbox SET first_claimed_at = now() - interval '2 hours', attempts = 1 WHERE id = $1`, id)
	require.NoError(t, err)
	fresh := g.insert(t, 2, true)
	m, err := NewMetrics(promRegistry())
	require.NoError(t, err)
	g.relay(t, func(c *RelayConfig) { c.IdempotencyTTL = time.Hour; c.Metrics = m })
	g.settled(t)
	var msg string
	require.NoError(t, g.db.db.QueryRow(`SELECT last_error FROM dtq_outbox WHERE id = $1 AND failed_at IS NOT NULL AND task_id IS NULL`, id).Scan(&msg))
	require.True(t, strings.HasPrefix(msg, "outcome unknown"), msg)
	var sent bool
	require.NoError(t, g.db.db.QueryRow(`SELECT sent_at IS NOT NULL FROM dtq_outbox WHERE id = $1`, fresh).Scan(&sent))
	require.True(t, sent)
	q, err := g.insp.GetQueue(g.ctx, "outbox")
	require.NoError(t, err)
	require.EqualValues(t, 1, q.Depth, "only the fresh row made a task")
	require.Equal(t, 1.0, counterValue(t, m.unknownTotal))
}
