package dtq_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/internal/workertest"
)

// dedupSubmit submits a task of type "doc" with payload {"v": v} and dedup d.
func (b *bundle) dedupSubmit(t *testing.T, queue string, v int, d dtq.Dedup) *dtq.SubmitResult {
	t.Helper()
	res, err := b.client.Submit(b.ctx, dtq.Submission{Queue: queue, Type: "doc", Payload: map[string]int{"v": v}, Dedup: &d})
	require.NoError(t, err)
	return res
}

// dedupRecord is the key's record as the scripts keep it (HGETALL).
func (b *bundle) dedupRecord(t *testing.T, queue, key string) map[string]string {
	t.Helper()
	m, err := b.rc.HGetAll(b.ctx, b.keys.Dedup(queue, key)).Result()
	require.NoError(t, err)
	return m
}

// TestDedupSecondSubmission: what the second submission of a key gets, per
// mode, while the first task is queued (docs/deduplication.md's table).
func TestDedupSecondSubmission(t *testing.T) {
	t.Parallel()
	tests := []struct {
		mode      dtq.DedupMode
		d         dtq.Dedup
		collapsed bool           // the second answers the first task
		first     dtqtype.Status // the first task's status after the second
		second    dtqtype.Status // the second's own status when it was created
		payload   string         // the first task's payload after the second
	}{
		{mode: dtq.DedupDrop, d: dtq.Dedup{Key: "k"}, collapsed: true, first: dtqtype.StatusQueued, payload: `{"v":1}`},
		{mode: dtq.DedupThrottle, d: dtq.Dedup{Key: "k", TTL: time.Minute}, collapsed: true, first: dtqtype.StatusQueued, payload: `{"v":1}`},
		{mode: dtq.DedupDebounce, d: dtq.Dedup{Key: "k", Window: time.Minute}, collapsed: true, first: dtqtype.StatusPending, payload: `{"v":2}`},
		{mode: dtq.DedupReplace, d: dtq.Dedup{Key: "k"}, first: dtqtype.StatusCancelled, second: dtqtype.StatusQueued, payload: `{"v":1}`},
		{mode: dtq.DedupKeepLast, d: dtq.Dedup{Key: "k"}, first: dtqtype.StatusCancelled, second: dtqtype.StatusQueued, payload: `{"v":1}`},
	}
	for _, tc := range tests {
		t.Run(string(tc.mode), func(t *testing.T) {
			t.Parallel()
			b := setup(t, nil)
			d := tc.d
			d.Mode = tc.mode
			first := b.dedupSubmit(t, "q", 1, d)
			require.Empty(t, first.Deduplicated)
			require.Equal(t, "k", first.Task.DedupKey)
			second := b.dedupSubmit(t, "q", 2, d)
			ti, err := b.insp.GetTask(b.ctx, first.TaskID)
			require.NoError(t, err)
			require.Equal(t, tc.first, ti.Status)
			require.JSONEq(t, tc.payload, string(ti.Payload))
			require.Equal(t, "k", ti.DedupKey)
			if tc.collapsed {
				require.Equal(t, tc.mode, second.Deduplicated)
				require.Equal(t, first.TaskID, second.TaskID, "the winner's id")
				require.NotNil(t, second.Task)
				require.Equal(t, first.TaskID, second.Task.ID)
				require.Contains(t, b.events(t, "q", first.TaskID), "TASK_DEDUPLICATED")
				return
			}
			require.Empty(t, second.Deduplicated)
			require.NotEqual(t, first.TaskID, second.TaskID)
			require.Equal(t, first.TaskID, second.Replaced)
			require.Equal(t, tc.second, second.Task.Status)
			require.Contains(t, b.events(t, "q", first.TaskID), "TASK_DEDUPLICATED")
			n, err := b.rc.Get(b.ctx, b.keys.Depth("q")).Int()
			require.NoError(t, err)
			require.Equal(t, 1, n, "one task out, one in")
		})
	}
}

// TestDedupConcurrentOneWinner: 50 parallel submissions of one key make one
// task for the collapsing modes, and leave one live task for the others.
func TestDedupConcurrentOneWinner(t *testing.T) {
	t.Parallel()
	for _, d := range []dtq.Dedup{
		{Key: "k", Mode: dtq.DedupDrop},
		{Key: "k", Mode: dtq.DedupThrottle, TTL: time.Minute},
		{Key: "k", Mode: dtq.DedupDebounce, Window: time.Minute},
		{Key: "k", Mode: dtq.DedupReplace},
		{Key: "k", Mode: dtq.DedupKeepLast},
	} {
		t.Run(string(d.Mode), func(t *testing.T) {
			t.Parallel()
			b := setup(t, nil)
			const n = 50
			results := make([]*dtq.SubmitResult, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					res, err := b.client.Submit(b.ctx, dtq.Submission{Queue: "q", Type: "doc", Payload: map[string]int{"v": i}, Dedup: &d})
					if err == nil {
						results[i] = res
					}
				})
			}
			wg.Wait()
			created := map[string]bool{}
			winners := map[string]bool{}
			for i, r := range results {
				require.NotNil(t, r, "submission %d failed", i)
				if r.Deduplicated == "" {
					created[r.TaskID] = true
				}
				winners[r.TaskID] = true
			}
			live := 0
			for id := range winners {
				ti, err := b.insp.GetTask(b.ctx, id)
				require.NoError(t, err)
				if !ti.Status.Terminal() {
					live++
				}
			}
			require.Equal(t, 1, live, "one live task of the key")
			switch d.Mode {
			case dtq.DedupReplace, dtq.DedupKeepLast:
				require.Len(t, created, n, "each submission made its own task")
			default:
				require.Len(t, created, 1, "exactly one winner")
				require.Len(t, winners, 1, "every answer names the winner")
			}
			depth, err := b.rc.Get(b.ctx, b.keys.Depth("q")).Int()
			require.NoError(t, err)
			require.Equal(t, 1, depth)
		})
	}
}

// TestDedupDropReleasedAtEnd: a drop key is free again the moment its task
// succeeds, is cancelled or expires, or is dead-lettered.
func TestDedupDropReleasedAtEnd(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	admin := b.admin(t)
	d := dtq.Dedup{Key: "k", Mode: dtq.DedupDrop}

	// cancel
	first := b.dedupSubmit(t, "q", 1, d)
	_, err := admin.CancelTask(b.ctx, first.TaskID, "test")
	require.NoError(t, err)
	require.Empty(t, b.dedupRecord(t, "q", "k"), "cancel released the key")
	second := b.dedupSubmit(t, "q", 2, d)
	require.Empty(t, second.Deduplicated)

	// success, failure into the DLQ
	w := b.worker(t, func(c *dtq.WorkerConfig) { c.Queues = map[string]int{"q": 1} })
	w.HandleFunc("doc", func(ctx context.Context, task *dtq.Task) (any, error) {
		if string(task.Payload) == `{"v":3}` {
			return nil, dtq.Permanent(errors.New("no"))
		}
		return "ok", nil
	})
	workertest.Run(t, w)
	b.waitStatus(t, second.TaskID, dtqtype.StatusSucceeded)
	require.Empty(t, b.dedupRecord(t, "q", "k"), "success released the key")
	third := b.dedupSubmit(t, "q", 3, d)
	require.Empty(t, third.Deduplicated)
	b.waitStatus(t, third.TaskID, dtqtype.StatusDeadLettered)
	require.Empty(t, b.dedupRecord(t, "q", "k"), "dead-lettering released the key")
	fourth := b.dedupSubmit(t, "q", 4, d)
	require.Empty(t, fourth.Deduplicated)
	b.waitStatus(t, fourth.TaskID, dtqtype.StatusSucceeded)
}

// TestDedupExpiryReleases: a drop key whose task expires before it starts
// is free again.
func TestDedupExpiryReleases(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	res, err := b.client.Submit(b.ctx, dtq.Submission{Queue: "q", Type: "doc", Delay: 50 * time.Millisecond,
		ExpiresAt: time.Now().Add(100 * time.Millisecond), Dedup: &dtq.Dedup{Key: "k", Mode: dtq.DedupDrop}})
	require.NoError(t, err)
	w := b.worker(t, func(c *dtq.WorkerConfig) { c.Queues = map[string]int{"q": 1}; c.Concurrency = 1 })
	// no handler starts it in time: the worker's promoter expires it once overdue
	block := make(chan struct{})
	t.Cleanup(func() { close(block) })
	w.HandleFunc("block", func(ctx context.Context, _ *dtq.Task) (any, error) { <-block; return nil, nil })
	_, err = b.client.Submit(b.ctx, dtq.Submission{Queue: "q", Type: "block"})
	require.NoError(t, err)
	workertest.Run(t, w)
	b.waitStatus(t, res.TaskID, dtqtype.StatusExpired)
	require.Empty(t, b.dedupRecord(t, "q", "k"))
}

// fakeClock is a clock a test moves by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// TestDedupDebounceNeverPastMaxWait: each submission within the window
// pushes the start to now + window, but never past the first submission +
// max_wait, and never earlier than it was.
func TestDedupDebounceNeverPastMaxWait(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{t: time.Now().Add(time.Hour).Truncate(time.Second)}
	b := setupDeployment(t, func(c *dtq.DeploymentConfig) { c.Clock = clock.now }, nil)
	t0 := clock.now()
	d := dtq.Dedup{Key: "k", Mode: dtq.DedupDebounce, Window: 10 * time.Second, MaxWait: 25 * time.Second}
	first := b.dedupSubmit(t, "q", 0, d)
	require.Equal(t, dtqtype.StatusPending, first.Task.Status)
	require.Equal(t, t0.Add(10*time.Second).UnixMilli(), first.Task.AvailableAt.UnixMilli())
	steps := []struct {
		at, due time.Duration // since t0
	}{
		{5 * time.Second, 15 * time.Second},
		{12 * time.Second, 22 * time.Second},
		{20 * time.Second, 25 * time.Second}, // max_wait caps it
		{24 * time.Second, 25 * time.Second},
	}
	for i, s := range steps {
		clock.add(t0.Add(s.at).Sub(clock.now()))
		res := b.dedupSubmit(t, "q", i+1, d)
		require.Equal(t, dtq.DedupDebounce, res.Deduplicated)
		require.Equal(t, first.TaskID, res.TaskID)
		ti, err := b.insp.GetTask(b.ctx, first.TaskID)
		require.NoError(t, err)
		require.Equal(t, t0.Add(s.due).UnixMilli(), ti.AvailableAt.UnixMilli(), "step %d", i)
		require.JSONEq(t, `{"v":`+string(rune('1'+i))+`}`, string(ti.Payload), "the last payload wins")
		score, err := b.rc.ZScore(b.ctx, b.keys.Schedule("q"), first.TaskID).Result()
		require.NoError(t, err)
		require.Equal(t, float64(t0.Add(s.due).UnixMilli()), score, "the schedule moved with it")
	}
}

// TestDedupDebounceDefaultMaxWait: without max_wait a debounce waits at
// most ten windows after its first submission.
func TestDedupDebounceDefaultMaxWait(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{t: time.Now().Add(time.Hour).Truncate(time.Second)}
	b := setupDeployment(t, func(c *dtq.DeploymentConfig) { c.Clock = clock.now }, nil)
	t0 := clock.now()
	d := dtq.Dedup{Key: "k", Mode: dtq.DedupDebounce, Window: time.Second}
	first := b.dedupSubmit(t, "q", 0, d)
	for range 30 {
		clock.add(900 * time.Millisecond)
		b.dedupSubmit(t, "q", 1, d)
	}
	ti, err := b.insp.GetTask(b.ctx, first.TaskID)
	require.NoError(t, err)
	require.Equal(t, t0.Add(10*time.Second).UnixMilli(), ti.AvailableAt.UnixMilli())
}

// TestDedupThrottleHeldForTTL: a throttle key stays held after its task
// ended, until its ttl ends; a cancel releases it at once.
func TestDedupThrottleHeldForTTL(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	d := dtq.Dedup{Key: "k", Mode: dtq.DedupThrottle, TTL: time.Hour}
	first := b.dedupSubmit(t, "q", 1, d)
	w := b.worker(t, func(c *dtq.WorkerConfig) { c.Queues = map[string]int{"q": 1} })
	w.HandleFunc("doc", func(ctx context.Context, task *dtq.Task) (any, error) { return "done", nil })
	workertest.Run(t, w)
	b.waitStatus(t, first.TaskID, dtqtype.StatusSucceeded)
	again := b.dedupSubmit(t, "q", 2, d)
	require.Equal(t, dtq.DedupThrottle, again.Deduplicated)
	require.Equal(t, first.TaskID, again.TaskID)
	require.Equal(t, dtqtype.StatusSucceeded, again.Task.Status)
	require.JSONEq(t, `"done"`, string(again.Task.Result))

	// a short ttl lapses by itself
	short := dtq.Dedup{Key: "s", Mode: dtq.DedupThrottle, TTL: 100 * time.Millisecond}
	one := b.dedupSubmit(t, "q", 1, short)
	require.Eventually(t, func() bool { return len(b.dedupRecord(t, "q", "s")) == 0 }, 10*time.Second, 10*time.Millisecond)
	two := b.dedupSubmit(t, "q", 2, short)
	require.Empty(t, two.Deduplicated)
	require.NotEqual(t, one.TaskID, two.TaskID)

	// a cancelled throttled task never ran: the key is free
	c := dtq.Dedup{Key: "c", Mode: dtq.DedupThrottle, TTL: time.Hour}
	delayed, err := b.client.Submit(b.ctx, dtq.Submission{Queue: "q", Type: "doc", Delay: time.Hour, Dedup: &c})
	require.NoError(t, err)
	_, err = b.admin(t).CancelTask(b.ctx, delayed.TaskID, "test")
	require.NoError(t, err)
	require.Empty(t, b.dedupRecord(t, "q", "c"))
}

// TestDedupReplaceNeverTouchesRunning: replace cancels the key's queued
// task only; a running one runs on, and the new task is queued beside it.
// keep_last makes the new task wait until the running one ends, so that at
// most one runs at once.
func TestDedupReplaceNeverTouchesRunning(t *testing.T) {
	t.Parallel()
	for _, mode := range []dtq.DedupMode{dtq.DedupReplace, dtq.DedupKeepLast} {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			b := setup(t, nil)
			d := dtq.Dedup{Key: "k", Mode: mode}
			release := make(chan struct{})
			started := make(chan string, 10)
			var mu sync.Mutex
			running, peak := 0, 0
			w := b.worker(t, func(c *dtq.WorkerConfig) { c.Queues = map[string]int{"q": 1}; c.Concurrency = 4 })
			w.HandleFunc("doc", func(ctx context.Context, task *dtq.Task) (any, error) {
				mu.Lock()
				running++
				peak = max(peak, running)
				mu.Unlock()
				started <- task.ID
				<-release
				mu.Lock()
				running--
				mu.Unlock()
				return nil, nil
			})
			first := b.dedupSubmit(t, "q", 1, d)
			workertest.Run(t, w)
			require.Equal(t, first.TaskID, <-started)
			second := b.dedupSubmit(t, "q", 2, d)
			require.Empty(t, second.Replaced, "the running task is not replaced")
			ti, err := b.insp.GetTask(b.ctx, first.TaskID)
			require.NoError(t, err)
			require.Equal(t, dtqtype.StatusRunning, ti.Status)
			if mode == dtq.DedupKeepLast {
				require.Equal(t, dtqtype.StatusWaiting, second.Task.Status)
				third := b.dedupSubmit(t, "q", 3, d)
				require.Equal(t, second.TaskID, third.Replaced, "the waiting one gives way")
				require.Equal(t, dtqtype.StatusWaiting, third.Task.Status)
				b.waitStatus(t, second.TaskID, dtqtype.StatusCancelled)
				close(release)
				b.waitStatus(t, first.TaskID, dtqtype.StatusSucceeded)
				require.Equal(t, third.TaskID, <-started)
				b.waitStatus(t, third.TaskID, dtqtype.StatusSucceeded)
				mu.Lock()
				require.Equal(t, 1, peak, "keep_last: at most one running")
				mu.Unlock()
				return
			}
			require.Equal(t, second.TaskID, <-started, "replace: the new task runs beside the running one")
			close(release)
			b.waitStatus(t, first.TaskID, dtqtype.StatusSucceeded)
			b.waitStatus(t, second.TaskID, dtqtype.StatusSucceeded)
		})
	}
}

// TestDedupWithIdempotencyKey: the idempotency check runs first; a keyed
// submission collapsed into its dedup key's task answers that again when
// sent again, and 422 when its key comes back with other work.
func TestDedupWithIdempotencyKey(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	d := &dtq.Dedup{Key: "k", Mode: dtq.DedupDrop}
	first, err := b.client.Submit(b.ctx, dtq.Submission{Queue: "q", Type: "doc", Payload: map[string]int{"v": 1}, IdempotencyKey: "a", Dedup: d})
	require.NoError(t, err)
	second, err := b.client.Submit(b.ctx, dtq.Submission{Queue: "q", Type: "doc", Payload: map[string]int{"v": 2}, IdempotencyKey: "b", Dedup: d})
	require.NoError(t, err)
	require.Equal(t, dtq.DedupDrop, second.Deduplicated)
	require.Equal(t, first.TaskID, second.TaskID)
	again, err := b.client.Submit(b.ctx, dtq.Submission{Queue: "q", Type: "doc", Payload: map[string]int{"v": 2}, IdempotencyKey: "b", Dedup: d})
	require.NoError(t, err)
	require.Equal(t, dtq.DedupDrop, again.Deduplicated)
	require.Equal(t, first.TaskID, again.TaskID)
	_, err = b.client.Submit(b.ctx, dtq.Submission{Queue: "q", Type: "doc", Payload: map[string]int{"v": 3}, IdempotencyKey: "b", Dedup: d})
	require.ErrorIs(t, err, dtq.ErrIdempotencyKeyMismatch)
	// The first key is in progress: its own task, 409, not a dedup answer.
	_, err = b.client.Submit(b.ctx, dtq.Submission{Queue: "q", Type: "doc", Payload: map[string]int{"v": 1}, IdempotencyKey: "a", Dedup: d})
	require.ErrorIs(t, err, dtq.ErrIdempotencyInProgress)
}

// TestDedupBy: by makes the key from payload paths and the task type.
func TestDedupBy(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	by := &dtq.Dedup{By: []string{"payload.user.id", "task_type"}, Mode: dtq.DedupDrop}
	submit := func(typ, payload string) *dtq.SubmitResult {
		res, err := b.client.Submit(b.ctx, dtq.Submission{Queue: "q", Type: typ, Payload: []byte(payload), Dedup: by})
		require.NoError(t, err)
		return res
	}
	a := submit("email", `{"user":{"id":42},"n":1}`)
	require.Equal(t, `by:payload.user.id=42&task_type="email"`, a.Task.DedupKey)
	require.Equal(t, dtq.DedupDrop, submit("email", `{"n":2,"user":{"id":42}}`).Deduplicated)
	require.Empty(t, submit("email", `{"user":{"id":43}}`).Deduplicated, "another user")
	require.Empty(t, submit("sms", `{"user":{"id":42}}`).Deduplicated, "another type")
	require.Empty(t, submit("email", `{"user":{"id":"42"}}`).Deduplicated, "a string is not the number")
	for _, same := range []string{`{"user":{"id":42.0}}`, `{"user":{"id":4.2e1}}`, `{"user":{"id":420E-1}}`} {
		res := submit("email", same)
		require.Equal(t, dtq.DedupDrop, res.Deduplicated, "%s is the number 42", same)
		require.Equal(t, a.TaskID, res.TaskID)
	}
	big := submit("email", `{"user":{"id":9007199254740993}}`)
	require.Equal(t, `by:payload.user.id=9007199254740993&task_type="email"`, big.Task.DedupKey)
	require.Empty(t, submit("email", `{"user":{"id":9007199254740992}}`).Deduplicated, "big integers stay exact")
	missing := submit("email", `{}`)
	require.Equal(t, `by:payload.user.id=null&task_type="email"`, missing.Task.DedupKey)
	long := submit("email", `{"user":{"id":"`+strings300()+`"}}`)
	require.Regexp(t, `^by:[0-9a-f]{64}$`, long.Task.DedupKey, "a long key is hashed")
}

func strings300() string {
	b := make([]byte, 300)
	for i := range b {
		b[i] = 'x'
	}
	return string(b)
}

// TestDedupRefused: bad dedup fields are 400 naming dedup, and a workflow
// node may not carry one.
func TestDedupRefused(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	tests := []struct {
		d     dtq.Dedup
		field string
	}{
		{dtq.Dedup{Key: "k", Mode: "later"}, "dedup.mode"},
		{dtq.Dedup{Key: "k"}, "dedup.mode"},
		{dtq.Dedup{Mode: dtq.DedupDrop}, "dedup"},
		{dtq.Dedup{Key: "k", By: []string{"task_type"}, Mode: dtq.DedupDrop}, "dedup"},
		{dtq.Dedup{Key: strings300(), Mode: dtq.DedupDrop}, "dedup.key"},
		{dtq.Dedup{Key: "tab\there", Mode: dtq.DedupDrop}, "dedup.key"},
		{dtq.Dedup{Key: `by:task_type="doc"`, Mode: dtq.DedupDrop}, "dedup.key"}, // by's keys only
		{dtq.Dedup{Key: "by:", Mode: dtq.DedupDrop}, "dedup.key"},
		{dtq.Dedup{By: []string{"user_id"}, Mode: dtq.DedupDrop}, "dedup.by"},
		{dtq.Dedup{By: []string{"payload."}, Mode: dtq.DedupDrop}, "dedup.by"},
		{dtq.Dedup{By: []string{"payload.a..b"}, Mode: dtq.DedupDrop}, "dedup.by"},
		{dtq.Dedup{By: make([]string, 9), Mode: dtq.DedupDrop}, "dedup.by"},
		{dtq.Dedup{Key: "k", Mode: dtq.DedupThrottle}, "dedup.ttl"},
		{dtq.Dedup{Key: "k", Mode: dtq.DedupDebounce}, "dedup.window"},
		{dtq.Dedup{Key: "k", Mode: dtq.DedupDrop, Window: time.Second}, "dedup.window"},
		{dtq.Dedup{Key: "k", Mode: dtq.DedupReplace, MaxWait: time.Second}, "dedup.max_wait"},
		{dtq.Dedup{Key: "k", Mode: dtq.DedupDebounce, Window: time.Second, MaxWait: time.Millisecond}, "dedup.max_wait"},
		{dtq.Dedup{Key: "k", Mode: dtq.DedupDrop, TTL: -time.Second}, "dedup.ttl"},
		{dtq.Dedup{Key: "k", Mode: dtq.DedupDrop, TTL: 400 * 24 * time.Hour}, "dedup.ttl"},
		{dtq.Dedup{Key: "k", Mode: dtq.DedupDrop, TTL: time.Microsecond}, "dedup.ttl"},
	}
	for _, tc := range tests {
		d := tc.d
		_, err := b.client.Submit(b.ctx, dtq.Submission{Queue: "q", Type: "doc", Dedup: &d})
		var ve *dtq.ValidationError
		require.ErrorAs(t, err, &ve, "%+v", tc.d)
		require.Equal(t, tc.field, ve.Field, "%+v: %v", tc.d, err)
	}
	require.Zero(t, b.keyCount(t), "nothing written")

	_, err := b.client.SubmitWorkflow(b.ctx, dtq.Workflow{Nodes: []dtq.Node{
		{Ref: "a", Submission: dtq.Submission{Queue: "q", Type: "doc", Dedup: &dtq.Dedup{Key: "k", Mode: dtq.DedupDrop}}}}})
	var we *dtq.WorkflowError
	require.ErrorAs(t, err, &we)
	require.Contains(t, we.Reason, "dedup")
}

// TestDedupKeepLastAfterDeadLetter: a keep_last task waiting behind a
// running one starts when that one is dead-lettered, not when it leaves the
// DLQ.
func TestDedupKeepLastAfterDeadLetter(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	d := dtq.Dedup{Key: "k", Mode: dtq.DedupKeepLast}
	release := make(chan struct{})
	started := make(chan string, 4)
	w := b.worker(t, func(c *dtq.WorkerConfig) { c.Queues = map[string]int{"q": 1} })
	w.HandleFunc("doc", func(ctx context.Context, task *dtq.Task) (any, error) {
		started <- task.ID
		if string(task.Payload) == `{"v":1}` {
			<-release
			return nil, dtq.Permanent(errors.New("bad document"))
		}
		return "ok", nil
	})
	first := b.dedupSubmit(t, "q", 1, d)
	workertest.Run(t, w)
	require.Equal(t, first.TaskID, <-started)
	second := b.dedupSubmit(t, "q", 2, d)
	require.Equal(t, dtqtype.StatusWaiting, second.Task.Status)
	close(release)
	b.waitStatus(t, first.TaskID, dtqtype.StatusDeadLettered)
	require.Equal(t, second.TaskID, <-started)
	b.waitStatus(t, second.TaskID, dtqtype.StatusSucceeded)
	require.Empty(t, b.dedupRecord(t, "q", "k"), "the key is free once its last task ended")
}

// TestDedupInFairQueue: dedup composes with fairness keys: a replace
// cancels a task waiting in its key's queue, and only the new one runs;
// a drop collapses within its key queue's task.
func TestDedupInFairQueue(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	require.NoError(t, b.admin(t).SetLimits(b.ctx, "tenants", dtqtype.QueueLimits{Fairness: &dtqtype.Fairness{}}))
	submit := func(v int, d dtq.Dedup) *dtq.SubmitResult {
		res, err := b.client.Submit(b.ctx, dtq.Submission{Queue: "tenants", Type: "doc", ConcurrencyKey: "acme",
			Payload: map[string]int{"v": v}, Dedup: &d})
		require.NoError(t, err)
		return res
	}
	r1 := submit(1, dtq.Dedup{Key: "r", Mode: dtq.DedupReplace})
	r2 := submit(2, dtq.Dedup{Key: "r", Mode: dtq.DedupReplace})
	require.Equal(t, r1.TaskID, r2.Replaced)
	d1 := submit(3, dtq.Dedup{Key: "d", Mode: dtq.DedupDrop})
	d2 := submit(4, dtq.Dedup{Key: "d", Mode: dtq.DedupDrop})
	require.Equal(t, d1.TaskID, d2.TaskID)

	var mu sync.Mutex
	ran := map[string]int{}
	w := b.worker(t, func(c *dtq.WorkerConfig) { c.Queues = map[string]int{"tenants": 1} })
	w.HandleFunc("doc", func(ctx context.Context, task *dtq.Task) (any, error) {
		mu.Lock()
		ran[task.ID]++
		mu.Unlock()
		return nil, nil
	})
	workertest.Run(t, w)
	b.waitStatus(t, r2.TaskID, dtqtype.StatusSucceeded)
	b.waitStatus(t, d1.TaskID, dtqtype.StatusSucceeded)
	ti, err := b.insp.GetTask(b.ctx, r1.TaskID)
	require.NoError(t, err)
	require.Equal(t, dtqtype.StatusCancelled, ti.Status)
	mu.Lock()
	require.Equal(t, map[string]int{r2.TaskID: 1, d1.TaskID: 1}, ran, "the replaced task never ran")
	mu.Unlock()
	depth, err := b.rc.Get(b.ctx, b.keys.Depth("tenants")).Int()
	require.NoError(t, err)
	require.Zero(t, depth)
}
