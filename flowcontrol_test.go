package dtq_test

import (
	"context"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/internal/rdb"
	"github.com/dtq-io/dtq/internal/redistest"
	"github.com/dtq-io/dtq/internal/workertest"
)

// peak tracks how many handlers run at once, overall and per key.
type peak struct {
	mu      sync.Mutex
	now     map[string]int
	max     map[string]int
	starts  []time.Time
	running int
	top     int
}

func newPeak() *peak { return &peak{now: map[string]int{}, max: map[string]int{}} }

func (p *peak) enter(key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.now[key]++
	p.max[key] = max(p.max[key], p.now[key])
	p.running++
	p.top = max(p.top, p.running)
	p.starts = append(p.starts, time.Now())
}

func (p *peak) leave(key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.now[key]--
	p.running--
}

// submitN submits n tasks of type typ to queue, with keys from key(i).
func (b *bundle) submitN(t *testing.T, queue, typ string, n int, key func(int) string) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range ids {
		res, err := b.client.Submit(b.ctx, dtq.Submission{Queue: queue, Type: typ, ConcurrencyKey: key(i),
			Payload: map[string]string{"key": key(i)}})
		require.NoError(t, err)
		ids[i] = res.TaskID
	}
	return ids
}

func (b *bundle) waitAll(t *testing.T, ids []string, want dtqtype.Status) {
	t.Helper()
	for _, id := range ids {
		b.waitStatus(t, id, want)
	}
}

// flowWorkers starts two workers on queue whose handler records p and
// works for d.
func (b *bundle) flowWorkers(t *testing.T, queue string, p *peak, d time.Duration) {
	t.Helper()
	for i := range 2 {
		w := b.worker(t, func(c *dtq.WorkerConfig) {
			c.Queues = map[string]int{queue: 1}
			c.WorkerID = queue + "-w" + strconv.Itoa(i)
		})
		w.HandleFunc("job", func(ctx context.Context, task *dtq.Task) (any, error) {
			key := strings.TrimSuffix(strings.TrimPrefix(string(task.Payload), `{"key":"`), `"}`)
			p.enter(key)
			defer p.leave(key)
			select {
			case <-time.After(d):
			case <-ctx.Done():
			}
			return nil, nil
		})
		workertest.Run(t, w)
	}
}

// TestRateLimitAcrossWorkers: 5 starts per second hold across two workers:
// 20 tasks take at least 3 s, and no 1-second window holds more than 5
// starts.
func TestRateLimitAcrossWorkers(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	require.NoError(t, b.admin(t).SetLimits(b.ctx, "rated", dtqtype.QueueLimits{
		Rate: &dtqtype.RateLimit{Limit: 5, Period: dtqtype.Duration(time.Second)}}))
	p := newPeak()
	b.flowWorkers(t, "rated", p, time.Millisecond)
	began := time.Now()
	ids := b.submitN(t, "rated", "job", 20, func(int) string { return "" })
	b.waitAll(t, ids, dtqtype.StatusSucceeded)
	require.GreaterOrEqual(t, time.Since(began), 3*time.Second, "20 starts at 5/s cannot take less than 3.8 s")
	// The scripts record each start: check every 1 s window of them.
	var starts []int64
	for _, id := range ids {
		ti, err := b.insp.GetTask(b.ctx, id)
		require.NoError(t, err)
		starts = append(starts, ti.Execution.StartedAt.UnixMilli())
	}
	sort.Slice(starts, func(i, j int) bool { return starts[i] < starts[j] })
	for i := range starts {
		n := 0
		for j := i; j < len(starts) && starts[j] < starts[i]+1000; j++ {
			n++
		}
		require.LessOrEqual(t, n, 5, "a 1 s window from start %d holds %d starts", i, n)
	}
}

// TestConcurrencyLimitAcrossWorkers: concurrency 2 never has more than two
// running across two workers of 8 slots each.
func TestConcurrencyLimitAcrossWorkers(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	require.NoError(t, b.admin(t).SetLimits(b.ctx, "narrow", dtqtype.QueueLimits{Concurrency: 2}))
	p := newPeak()
	b.flowWorkers(t, "narrow", p, 50*time.Millisecond)
	ids := b.submitN(t, "narrow", "job", 30, func(int) string { return "" })
	b.waitAll(t, ids, dtqtype.StatusSucceeded)
	p.mu.Lock()
	defer p.mu.Unlock()
	require.Equal(t, 2, p.top, "at most two at once, and the limit was reached")
}

// TestKeyConcurrencySerialisesEachKey: key_concurrency 1 runs each key's
// tasks one at a time while different keys run side by side.
func TestKeyConcurrencySerialisesEachKey(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	require.NoError(t, b.admin(t).SetLimits(b.ctx, "keyed", dtqtype.QueueLimits{KeyConcurrency: 1}))
	p := newPeak()
	b.flowWorkers(t, "keyed", p, 40*time.Millisecond)
	keys := []string{"acct-a", "acct-b", "acct-c", "acct-d"}
	ids := b.submitN(t, "keyed", "job", 24, func(i int) string { return keys[i%len(keys)] })
	b.waitAll(t, ids, dtqtype.StatusSucceeded)
	p.mu.Lock()
	for _, k := range keys {
		require.Equal(t, 1, p.max[k], "key %s ran more than one task at once", k)
	}
	require.Greater(t, p.top, 1, "different keys ran side by side")
	p.mu.Unlock()
}

// TestConcurrencySlotOfADeadWorkerComesBack: a worker that died holding the
// only slot (its lease left behind, as after SIGKILL) blocks the queue until
// its lease expires and is reclaimed; then the work goes on.
func TestConcurrencySlotOfADeadWorkerComesBack(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	require.NoError(t, b.admin(t).SetLimits(b.ctx, "solo", dtqtype.QueueLimits{Concurrency: 1}))
	ids := b.submitN(t, "solo", "job", 3, func(int) string { return "" })
	// The dead worker: it claimed the first task and will never renew it.
	r := rdb.New(b.rc, b.prefix)
	require.NoError(t, r.EnsureGroups(b.ctx, "solo"))
	dead := &rdb.WorkerSettings{WorkerID: "dead", Lease: 3 * time.Second, EventsMaxLen: 1000,
		SucceededRetention: time.Hour, FailedRetention: time.Hour, ResultRetention: time.Hour, DLQEnabled: true, DLQMaxLen: 100}
	cr, err := r.Claim(b.ctx, "solo", dead, 1, time.Now(), "")
	require.NoError(t, err)
	require.Len(t, cr.Tasks, 1)

	var ran atomic.Int64
	w := b.worker(t, func(c *dtq.WorkerConfig) { c.Queues = map[string]int{"solo": 1} })
	w.HandleFunc("job", func(ctx context.Context, task *dtq.Task) (any, error) { ran.Add(1); return nil, nil })
	workertest.Run(t, w)
	b.waitAll(t, ids, dtqtype.StatusSucceeded)
	ti, err := b.insp.GetTask(b.ctx, cr.Tasks[0].ID)
	require.NoError(t, err)
	require.Equal(t, 2, ti.Attempt, "the dead worker's task was reclaimed, then run")
}

// TestWaitingOnARateLimitIsQuiet measures the Redis commands per second a
// worker sends while 1,000 tasks wait on a limit of 1 per second, on a
// private server: the worker sleeps until the next token instead of polling.
func TestWaitingOnARateLimitIsQuiet(t *testing.T) {
	t.Parallel()
	srv, err := redistest.Start()
	require.NoError(t, err)
	t.Cleanup(srv.Stop)
	rc := srv.Client(t)
	b := &bundle{ctx: context.Background(), rc: rc, prefix: "quiet", keys: rdb.NewKeys("quiet")}
	b.d = openPrefix(t, rc, b.prefix)
	b.client, err = b.d.NewClient(nil)
	require.NoError(t, err)
	require.NoError(t, b.admin(t).SetLimits(b.ctx, "trickle", dtqtype.QueueLimits{
		Rate: &dtqtype.RateLimit{Limit: 1, Period: dtqtype.Duration(time.Second)}}))
	subs := make([]dtq.Submission, 1000)
	for i := range subs {
		subs[i] = dtq.Submission{Queue: "trickle", Type: "job"}
	}
	_, err = b.client.SubmitBatch(b.ctx, subs)
	require.NoError(t, err)
	w := b.worker(t, func(c *dtq.WorkerConfig) { c.Queues = map[string]int{"trickle": 1} })
	var ran atomic.Int64
	w.HandleFunc("job", func(ctx context.Context, task *dtq.Task) (any, error) { ran.Add(1); return nil, nil })
	workertest.Run(t, w)
	require.Eventually(t, func() bool { return ran.Load() >= 1 }, 10*time.Second, 10*time.Millisecond)

	before, n0 := commandCalls(t, b), ran.Load()
	time.Sleep(5 * time.Second) // the measurement window, not a wait for a condition
	after, n1 := commandCalls(t, b), ran.Load()
	perSecond := float64(after-before-2) / 5 // less the two INFO calls
	t.Logf("while 1,000 tasks wait on 1/s: %d started in 5 s; Redis ran %.1f commands/s", n1-n0, perSecond)
	require.LessOrEqual(t, n1-n0, int64(6), "the rate held")
	require.Less(t, perSecond, 200.0, "a worker held back by a limit must not poll")
}

// commandCalls is the server's total command count (INFO stats).
func commandCalls(t *testing.T, b *bundle) int64 {
	t.Helper()
	info, err := b.rc.Info(b.ctx, "stats").Result()
	require.NoError(t, err)
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "total_commands_processed:"); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}
