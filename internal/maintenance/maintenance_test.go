package maintenance_test

import (
	"context"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/internal/maintenance"
	"github.com/dtq-io/dtq/internal/rdb"
	"github.com/dtq-io/dtq/internal/redistest"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

// t0 is the start of every test's clock. Time only moves when a test says
// so: the scripts take "now" as an argument.
var t0 = time.UnixMilli(1_750_000_000_000)

type bundle struct {
	ctx      context.Context
	rc       *redis.Client
	r        *rdb.RDB
	keys     rdb.Keys
	settings *rdb.WorkerSettings
	client   *dtq.Client // submits with its clock fixed at t0
}

func setup(t *testing.T) *bundle {
	t.Helper()
	s := redistest.New(t)
	redistest.CheckSlots(t, s.Client, rdb.HashSlot)
	d, err := dtq.Open(s.Client, &dtq.DeploymentConfig{KeyPrefix: s.Prefix, Clock: func() time.Time { return t0 }})
	require.NoError(t, err)
	c, err := d.NewClient(nil)
	require.NoError(t, err)
	return &bundle{
		ctx: context.Background(), rc: s.Client, r: rdb.New(s.Client, s.Prefix), keys: rdb.NewKeys(s.Prefix),
		settings: &rdb.WorkerSettings{WorkerID: "w1", Lease: 30 * time.Second, EventsMaxLen: 100000,
			SucceededRetention: time.Hour, FailedRetention: time.Hour, ResultRetention: time.Hour, DLQEnabled: true, DLQMaxLen: 1000},
		client: c,
	}
}

func (b *bundle) config(clock func() time.Time) maintenance.Config {
	return maintenance.Config{RDB: b.r, Settings: b.settings, Clock: clock, Logger: slog.New(slog.DiscardHandler), MaxSleep: time.Minute}
}

// spec is a task for the factory to write.
type spec struct {
	status   dtqtype.Status // pending, queued, retrying or running
	due      time.Time      // available_at; the schedule score when pending or retrying
	expires  time.Time      // zero = no deadline
	attempt  int            // 0 = 1
	priority int
}

// addTasks writes tasks straight into Redis, field for field as ingest.lua
// (and, for retrying and running tasks, the claim and retry scripts) leave
// them: task hash, stream entry or schedule entry, expiry index, listing
// index and depth. It writes no lifecycle events, so a test sees only the
// events of the code under test.
func (b *bundle) addTasks(t *testing.T, queue string, specs ...spec) []string {
	t.Helper()
	num, err := b.r.QueueNumber(b.ctx, queue)
	require.NoError(t, err)
	require.NoError(t, b.r.EnsureGroups(b.ctx, queue))
	ids := make([]string, len(specs))
	pipe := b.rc.Pipeline()
	for i, s := range specs {
		id := rdb.NewTaskID(num, t0)
		ids[i] = id
		tk := b.keys.Task(queue, id)
		attempt := max(s.attempt, 1)
		fields := []any{"type", "test", "payload", "{}", "priority", s.priority, "max_attempts", 10,
			"attempt", attempt, "timeout_ms", 30000, "status", string(s.status),
			"created_at", t0.UnixMilli(), "available_at", s.due.UnixMilli()}
		if !s.expires.IsZero() {
			fields = append(fields, "expires_at", s.expires.UnixMilli())
			pipe.ZAdd(b.ctx, b.keys.Expiry(queue), redis.Z{Score: float64(s.expires.UnixMilli()), Member: id})
		}
		switch s.status {
		case dtqtype.StatusPending, dtqtype.StatusRetrying:
			pipe.ZAdd(b.ctx, b.keys.Schedule(queue), redis.Z{Score: float64(s.due.UnixMilli()), Member: id})
		case dtqtype.StatusQueued:
			sid := b.rc.XAdd(b.ctx, &redis.XAddArgs{Stream: b.keys.Stream(queue, s.priority),
				Values: []any{"t", id, "a", strconv.Itoa(attempt)}}).Val()
			fields = append(fields, "stream_id", sid)
		case dtqtype.StatusRunning:
			fields = append(fields, "worker_id", "w0", "started_at", t0.UnixMilli())
			pipe.ZAdd(b.ctx, b.keys.Lease(queue), redis.Z{Score: float64(t0.Add(time.Hour).UnixMilli()), Member: id})
		}
		pipe.HSet(b.ctx, tk, fields...)
		pipe.LPush(b.ctx, b.keys.Recent(queue), id[:28])
		pipe.Incr(b.ctx, b.keys.Depth(queue))
	}
	_, err = pipe.Exec(b.ctx)
	require.NoError(t, err)
	return ids
}

// makeRetrying turns a queued task into a retrying one due at due, as a claim
// followed by a retryable failure would leave it.
func (b *bundle) makeRetrying(t *testing.T, queue, id string, due time.Time) {
	t.Helper()
	tk := b.keys.Task(queue, id)
	h := b.rc.HMGet(b.ctx, tk, "stream_id", "priority").Val()
	sid, _ := h[0].(string)
	prio, _ := strconv.Atoi(h[1].(string))
	require.NotEmpty(t, sid)
	pipe := b.rc.TxPipeline()
	pipe.XDel(b.ctx, b.keys.Stream(queue, prio), sid)
	pipe.HDel(b.ctx, tk, "stream_id")
	pipe.HSet(b.ctx, tk, "status", "retrying", "retryable", "1", "available_at", due.UnixMilli())
	pipe.ZAdd(b.ctx, b.keys.Schedule(queue), redis.Z{Score: float64(due.UnixMilli()), Member: id})
	_, err := pipe.Exec(b.ctx)
	require.NoError(t, err)
}

func (b *bundle) hash(t *testing.T, queue, id string) map[string]string {
	t.Helper()
	h, err := b.rc.HGetAll(b.ctx, b.keys.Task(queue, id)).Result()
	require.NoError(t, err)
	require.NotEmpty(t, h, "task %s", id)
	return h
}

// event is one lifecycle event as stored.
type event struct{ typ, attempt string }

func (b *bundle) events(t *testing.T, queue string) map[string][]event {
	t.Helper()
	msgs, err := b.rc.XRange(b.ctx, b.keys.Events(queue), "-", "+").Result()
	require.NoError(t, err)
	out := map[string][]event{}
	for _, m := range msgs {
		id, _ := m.Values["task_id"].(string)
		typ, _ := m.Values["type"].(string)
		att, _ := m.Values["attempt"].(string)
		out[id] = append(out[id], event{typ, att})
	}
	return out
}

// entries returns task id -> number of stream entries across every band.
func (b *bundle) entries(t *testing.T, queue string) (map[string]int, map[string]map[string]any) {
	t.Helper()
	count := map[string]int{}
	last := map[string]map[string]any{}
	for band := range rdb.NumBands {
		msgs, err := b.rc.XRange(b.ctx, b.keys.Stream(queue, band), "-", "+").Result()
		require.NoError(t, err)
		for _, m := range msgs {
			id := m.Values["t"].(string)
			count[id]++
			vals := map[string]any{"band": band, "entry": m.ID}
			for k, v := range m.Values {
				vals[k] = v
			}
			last[id] = vals
		}
	}
	return count, last
}

func (b *bundle) depth(t *testing.T, queue string) string {
	t.Helper()
	return b.rc.Get(b.ctx, b.keys.Depth(queue)).Val()
}

func TestPromoteMovesOnlyDueTasks(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const q = "promo"
	sub, err := b.client.Submit(b.ctx, dtq.Submission{Queue: q, Type: "echo", Delay: 10 * time.Second, Priority: new(7)})
	require.NoError(t, err)
	require.Equal(t, dtqtype.StatusPending, sub.Task.Status)
	pending := sub.TaskID
	retrying := b.addTasks(t, q, spec{status: dtqtype.StatusRetrying, due: t0.Add(20 * time.Second), attempt: 2, priority: 3})[0]
	later := b.addTasks(t, q, spec{status: dtqtype.StatusPending, due: t0.Add(time.Hour)})[0]

	// Before anything is due: nothing moves; the next due time is reported.
	n, next, err := b.promote(q, b.settings, t0.Add(9999*time.Millisecond))
	require.NoError(t, err)
	require.Zero(t, n)
	require.Equal(t, t0.Add(10*time.Second).UnixMilli(), next.UnixMilli())
	count, _ := b.entries(t, q)
	require.Empty(t, count)
	require.EqualValues(t, 3, b.rc.ZCard(b.ctx, b.keys.Schedule(q)).Val())

	// The pending task is due: queued, one stream entry in its band, TASK_QUEUED.
	n, next, err = b.promote(q, b.settings, t0.Add(10*time.Second))
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, t0.Add(20*time.Second).UnixMilli(), next.UnixMilli())
	h := b.hash(t, q, pending)
	require.Equal(t, "queued", h["status"])
	require.Equal(t, "1", h["attempt"])
	count, last := b.entries(t, q)
	require.Equal(t, map[string]int{pending: 1}, count)
	require.Equal(t, 7, last[pending]["band"])
	require.Equal(t, "1", last[pending]["a"])
	require.Equal(t, h["stream_id"], last[pending]["entry"], "the hash records its entry")
	require.Equal(t, []event{{"TASK_PENDING", "1"}, {"TASK_QUEUED", "1"}}, b.events(t, q)[pending])

	// The retrying task is due: queued with attempt+1, TASK_RETRIED.
	n, next, err = b.promote(q, b.settings, t0.Add(30*time.Second))
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, t0.Add(time.Hour).UnixMilli(), next.UnixMilli())
	h = b.hash(t, q, retrying)
	require.Equal(t, "queued", h["status"])
	require.Equal(t, "3", h["attempt"])
	count, last = b.entries(t, q)
	require.Equal(t, 1, count[retrying])
	require.Equal(t, 3, last[retrying]["band"])
	require.Equal(t, "3", last[retrying]["a"])
	require.Equal(t, []event{{"TASK_RETRIED", "3"}}, b.events(t, q)[retrying])

	// Promotion moves tasks within the queue: depth is unchanged.
	require.Equal(t, "3", b.depth(t, q))
	require.Equal(t, "pending", b.hash(t, q, later)["status"])
	require.Equal(t, []string{later}, b.rc.ZRange(b.ctx, b.keys.Schedule(q), 0, -1).Val())

	// Promoting again at the same time is a no-op.
	n, _, err = b.promote(q, b.settings, t0.Add(30*time.Second))
	require.NoError(t, err)
	require.Zero(t, n)
	count, _ = b.entries(t, q)
	require.Len(t, count, 2)
}

func TestPromoteEmptyScheduleReportsNoNextDue(t *testing.T) {
	t.Parallel()
	b := setup(t)
	n, next, err := b.promote("empty", b.settings, t0)
	require.NoError(t, err)
	require.Zero(t, n)
	require.True(t, next.IsZero())
}

func TestPromoteExpiresOverdueTask(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const q = "promo-exp"
	// The deadline to start passed during the retry backoff.
	id := b.addTasks(t, q, spec{status: dtqtype.StatusRetrying, due: t0.Add(10 * time.Second), expires: t0.Add(5 * time.Second), attempt: 2})[0]
	n, _, err := b.promote(q, b.settings, t0.Add(10*time.Second))
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, "expired", b.hash(t, q, id)["status"])
	count, _ := b.entries(t, q)
	require.Empty(t, count, "an expired task is never enqueued")
	require.Zero(t, b.rc.ZCard(b.ctx, b.keys.Expiry(q)).Val())
	require.Equal(t, "0", b.depth(t, q))
	require.Equal(t, []event{{"TASK_EXPIRED", "2"}}, b.events(t, q)[id])
}

func TestPromoteConcurrentCallersEnqueueOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const q = "race"
	const n = 1200
	specs := make([]spec, n)
	for i := range specs {
		st := dtqtype.StatusPending
		if i%3 == 0 {
			st = dtqtype.StatusRetrying
		}
		specs[i] = spec{status: st, due: t0.Add(-time.Duration(i) * time.Millisecond), priority: i % rdb.NumBands}
	}
	ids := b.addTasks(t, q, specs...)

	var moved atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for g := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				k, _, err := b.promote(q, b.settings, t0)
				if err != nil {
					errs[g] = err
					return
				}
				moved.Add(int64(k))
				if k == 0 {
					return
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	require.EqualValues(t, n, moved.Load())
	count, _ := b.entries(t, q)
	require.Len(t, count, n)
	evs := b.events(t, q)
	for i, id := range ids {
		require.Equal(t, 1, count[id], "task %s has exactly one stream entry", id)
		require.Len(t, evs[id], 1, "task %s has exactly one event", id)
		require.Equal(t, "queued", b.rc.HGet(b.ctx, b.keys.Task(q, id), "status").Val())
		if i%3 == 0 {
			require.Equal(t, "TASK_RETRIED", evs[id][0].typ)
		}
	}
	require.Zero(t, b.rc.ZCard(b.ctx, b.keys.Schedule(q)).Val())
	require.Equal(t, strconv.Itoa(n), b.depth(t, q))
}

func TestRunPromoterLoopsWhileCallsAreFull(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const q = "loop"
	const n = 3*rdb.MaxPerCall + 17
	specs := make([]spec, n)
	for i := range specs {
		specs[i] = spec{status: dtqtype.StatusPending, due: t0.Add(-time.Second)}
	}
	b.addTasks(t, q, specs...)
	future := b.addTasks(t, q, spec{status: dtqtype.StatusPending, due: t0.Add(time.Hour)})[0]

	var calls atomic.Int64
	clock := func() time.Time { calls.Add(1); return t0 }
	ctx, cancel := context.WithCancel(b.ctx)
	done := make(chan struct{})
	go func() { defer close(done); maintenance.RunPromoter(ctx, b.config(clock), q) }()
	defer func() { cancel(); <-done }()

	require.Eventually(t, func() bool {
		count, _ := b.entries(t, q)
		return len(count) == n
	}, 20*time.Second, 10*time.Millisecond, "every due task is promoted")
	require.GreaterOrEqual(t, calls.Load(), int64(4), "at most 500 per call")
	require.Equal(t, []string{future}, b.rc.ZRange(b.ctx, b.keys.Schedule(q), 0, -1).Val())

	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("RunPromoter did not return after its context ended")
	}
}

// submitted is a task submitted with an idempotency key, kept to resubmit it.
type submitted struct {
	sub dtq.Submission
	id  string
}

func TestSweepExpiredFromEveryWaitingState(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const q = "exp"
	submit := func(s dtq.Submission) submitted {
		s.Queue, s.Type = q, "echo"
		res, err := b.client.Submit(b.ctx, s)
		require.NoError(t, err)
		return submitted{s, res.TaskID}
	}
	pending := submit(dtq.Submission{Delay: time.Hour, TTL: 2 * time.Hour, IdempotencyKey: "pending"})
	queued := submit(dtq.Submission{TTL: 10 * time.Second, Priority: new(8), IdempotencyKey: "queued"})
	retrying := submit(dtq.Submission{TTL: 10 * time.Second, IdempotencyKey: "retrying"})
	b.makeRetrying(t, q, retrying.id, t0.Add(4*time.Hour))
	// Tasks that must not expire: no deadline, and a later one.
	keepPending := submit(dtq.Submission{Delay: time.Hour})
	keepQueued := submit(dtq.Submission{TTL: 10 * time.Hour})
	expired := []submitted{pending, queued, retrying}
	require.Equal(t, "5", b.depth(t, q))

	// Nothing is overdue yet.
	n, next, err := b.sweep(q, b.settings, t0.Add(5*time.Second))
	require.NoError(t, err)
	require.Zero(t, n)
	require.Equal(t, t0.Add(10*time.Second).UnixMilli(), next.UnixMilli())

	now := t0.Add(3 * time.Hour)
	n, next, err = b.sweep(q, b.settings, now)
	require.NoError(t, err)
	require.Equal(t, 3, n)
	require.Equal(t, t0.Add(10*time.Hour).UnixMilli(), next.UnixMilli())

	evs := b.events(t, q)
	for _, s := range expired {
		h := b.hash(t, q, s.id)
		require.Equal(t, "expired", h["status"], s.sub.IdempotencyKey)
		require.Equal(t, strconv.FormatInt(now.UnixMilli(), 10), h["finished_at"])
		require.Empty(t, h["stream_id"])
		ttl := b.rc.TTL(b.ctx, b.keys.Task(q, s.id)).Val()
		require.Greater(t, ttl, time.Duration(0), "retention starts")
		// A keyed task is kept as long as its record (a replay finds it).
		keep := max(time.Hour, b.rc.TTL(b.ctx, b.keys.Idempotency(q, s.sub.IdempotencyKey)).Val())
		require.LessOrEqual(t, ttl, keep)
		require.GreaterOrEqual(t, ttl, keep-time.Second)
		require.Equal(t, "TASK_EXPIRED", evs[s.id][len(evs[s.id])-1].typ, s.sub.IdempotencyKey)

		// The record still names the task, whose status (expired) makes a
		// replay answer it as failed.
		require.Equal(t, s.id, b.rc.Get(b.ctx, b.keys.Idempotency(q, s.sub.IdempotencyKey)).Val())
	}
	// Entries gone: only the tasks that did not expire remain anywhere.
	count, _ := b.entries(t, q)
	require.Equal(t, map[string]int{keepQueued.id: 1}, count)
	require.Equal(t, []string{keepPending.id}, b.rc.ZRange(b.ctx, b.keys.Schedule(q), 0, -1).Val())
	require.Equal(t, []string{keepQueued.id}, b.rc.ZRange(b.ctx, b.keys.Expiry(q), 0, -1).Val())
	require.Equal(t, "2", b.depth(t, q))

	// A resubmit with the same key replays the expired task.
	for _, s := range expired {
		res, err := b.client.Submit(b.ctx, s.sub)
		require.NoError(t, err)
		require.True(t, res.Duplicate, s.sub.IdempotencyKey)
		require.Equal(t, s.id, res.TaskID)
		require.Equal(t, dtqtype.StatusExpired, res.Task.Status)
	}
	require.Equal(t, "2", b.depth(t, q), "a replay creates nothing")

	// Sweeping again finds nothing more.
	n, _, err = b.sweep(q, b.settings, now)
	require.NoError(t, err)
	require.Zero(t, n)
}

func TestSweepExpiredSkipsStartedTasks(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const q = "exp-run"
	// A running task past its start deadline started in time: it only
	// leaves the index.
	id := b.addTasks(t, q, spec{status: dtqtype.StatusRunning, due: t0, expires: t0.Add(time.Second)})[0]
	n, next, err := b.sweep(q, b.settings, t0.Add(time.Minute))
	require.NoError(t, err)
	require.Zero(t, n)
	require.True(t, next.IsZero())
	require.Equal(t, "running", b.hash(t, q, id)["status"])
	require.Zero(t, b.rc.ZCard(b.ctx, b.keys.Expiry(q)).Val())
	require.Equal(t, "1", b.depth(t, q))
	require.Empty(t, b.events(t, q)[id])
}

func TestRunSweeperExpiresOverdueTasks(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const q = "sweeper"
	const n = rdb.MaxPerCall + 50
	specs := make([]spec, n)
	for i := range specs {
		specs[i] = spec{status: dtqtype.StatusQueued, due: t0, expires: t0.Add(time.Second), priority: i % rdb.NumBands}
	}
	b.addTasks(t, q, specs...)

	ctx, cancel := context.WithCancel(b.ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		maintenance.RunSweeper(ctx, b.config(func() time.Time { return t0.Add(time.Minute) }), q)
	}()
	defer func() { cancel(); <-done }()
	require.Eventually(t, func() bool { return b.depth(t, q) == "0" }, 20*time.Second, 10*time.Millisecond)
	count, _ := b.entries(t, q)
	require.Empty(t, count)
	require.Zero(t, b.rc.ZCard(b.ctx, b.keys.Expiry(q)).Val())
}

// promote and sweep run one call, answering what it did and the next time.
func (b *bundle) promote(q string, s *rdb.WorkerSettings, now time.Time) (int, time.Time, error) {
	p, err := b.r.Promote(b.ctx, q, s, now)
	return p.Done, p.Next, err
}

func (b *bundle) sweep(q string, s *rdb.WorkerSettings, now time.Time) (int, time.Time, error) {
	p, err := b.r.SweepExpired(b.ctx, q, s, now)
	return p.Done, p.Next, err
}

// TestPromoteFullCallWithStaleEntries: a call that examined MaxPerCall
// entries is full even when they were stale (tasks gone), so the promoter
// calls again at once for what is behind them.
func TestPromoteFullCallWithStaleEntries(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const q = "stale"
	zs := make([]redis.Z, rdb.MaxPerCall)
	for i := range zs {
		zs[i] = redis.Z{Score: float64(t0.Add(-time.Minute).UnixMilli()), Member: "gone-" + strconv.Itoa(i)}
	}
	require.NoError(t, b.rc.ZAdd(b.ctx, b.keys.Schedule(q), zs...).Err())
	due := b.addTasks(t, q, spec{status: dtqtype.StatusPending, due: t0.Add(-time.Second)})[0]
	p, err := b.r.Promote(b.ctx, q, b.settings, t0)
	require.NoError(t, err)
	require.Zero(t, p.Done)
	require.True(t, p.Full)
	p, err = b.r.Promote(b.ctx, q, b.settings, t0)
	require.NoError(t, err)
	require.Equal(t, 1, p.Done)
	require.False(t, p.Full)
	require.Equal(t, "queued", b.hash(t, q, due)["status"])
}
