package dtq_test

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/internal/faultproxy"
	"github.com/dtq-io/dtq/internal/workertest"
)

// handlerRun is one handler run: which attempt, and when it ran (this process's
// monotonic clock).
type handlerRun struct {
	task       string
	attempt    int
	start, end time.Time
}

// freezable is a worker whose whole process can be frozen, as SIGSTOP or a
// starved CPU would: its connection to Redis goes down (no renewal, no
// finalize) and its handlers stop where they are, until thawed.
type freezable struct {
	proxy  *faultproxy.Proxy
	gate   atomic.Pointer[chan struct{}] // non-nil while frozen
	inside atomic.Int32                  // handlers running now
	starts atomic.Int32                  // handlers started
}

func (f *freezable) freeze() {
	ch := make(chan struct{})
	f.gate.Store(&ch)
	f.proxy.SetDown(true)
}

func (f *freezable) thaw() {
	f.proxy.SetDown(false)
	ch := f.gate.Swap(nil)
	close(*ch)
}

// wait blocks while the worker is frozen.
func (f *freezable) wait() {
	if ch := f.gate.Load(); ch != nil {
		<-*ch
	}
}

// TestKeyConcurrencyHoldsForEveryAttemptThatKeptItsLease runs the issue's
// load (three keys, key_order fifo, key_concurrency 1, two workers of
// concurrency 1, 90 tasks of 30 ms) while one worker is frozen mid-handler
// past its lease, twice: the other worker reclaims the frozen one's task
// and goes on with the key. The check, per key: the handler runs of the
// attempts that kept their lease to the end (their finalize landed: their
// recorded outcome is not lease_lost) never overlap, by this process's
// clock, and neither do their recorded started_at/finished_at. A frozen
// attempt's run may overlap the key's next tasks: key_concurrency, like
// every lease, holds while the lease does (docs/flow-control.md); the test
// requires that such an attempt was there, so that it did check something.
func TestKeyConcurrencyHoldsForEveryAttemptThatKeptItsLease(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	const queue = "starved"
	require.NoError(t, b.admin(t).SetLimits(b.ctx, queue, dtqtype.QueueLimits{KeyConcurrency: 1, KeyOrder: "fifo"}))
	var (
		mu   sync.Mutex
		runs []handlerRun
	)
	workers := make([]*freezable, 2)
	for i := range workers {
		proxy, err := faultproxy.Start(b.rc.Options().Addr)
		require.NoError(t, err)
		t.Cleanup(func() { _ = proxy.Close() })
		rc := redis.NewClient(&redis.Options{Addr: proxy.Addr(), MaxRetries: -1})
		t.Cleanup(func() { _ = rc.Close() })
		f := &freezable{proxy: proxy}
		workers[i] = f
		w, err := openPrefix(t, rc, b.prefix).NewWorker(&dtq.WorkerConfig{Queues: map[string]int{queue: 1},
			Concurrency: 1, WorkerID: fmt.Sprintf("w%d", i), VisibilityTimeout: time.Second,
			HeartbeatInterval: 250 * time.Millisecond, DrainTimeout: 5 * time.Second,
			RetryBaseDelay: 10 * time.Millisecond, RetryMaxDelay: 50 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
		require.NoError(t, err)
		w.HandleFunc("job", func(ctx context.Context, task *dtq.Task) (any, error) {
			r := handlerRun{task: task.ID, attempt: task.Attempt, start: time.Now()}
			f.inside.Add(1)
			f.starts.Add(1)
			time.Sleep(30 * time.Millisecond) // busy: a starved handler does not watch its context
			f.wait()
			f.inside.Add(-1)
			r.end = time.Now()
			mu.Lock()
			runs = append(runs, r)
			mu.Unlock()
			return nil, nil
		})
		workertest.Run(t, w)
	}

	keys := []string{"k0", "k1", "k2"}
	ids := make([]string, 90)
	keyOf := map[string]string{}
	for i := range ids {
		res, err := b.client.Submit(b.ctx, dtq.Submission{Queue: queue, Type: "job", ConcurrencyKey: keys[i%3],
			MaxAttempts: 10})
		require.NoError(t, err)
		ids[i] = res.TaskID
		keyOf[res.TaskID] = keys[i%3]
	}
	var seen int32
	for range 2 {
		// Freeze w0 while a handler of it runs (one started since the last
		// thaw), past its lease (1 s) and the other worker's next reclaim,
		// then let it go on.
		f := workers[0]
		require.Eventually(t, func() bool { return f.starts.Load() > seen && f.inside.Load() > 0 }, 20*time.Second,
			time.Millisecond, "w0 ran no handler")
		f.freeze()
		time.Sleep(2500 * time.Millisecond) // the freeze itself, not a wait for a result
		seen = f.starts.Load()
		f.thaw()
	}
	b.waitAll(t, ids, dtqtype.StatusSucceeded)

	// Which attempts kept their lease: their outcome is not lease_lost.
	type span struct {
		what       string
		start, end time.Time
	}
	held := map[string]bool{}       // task/attempt
	recorded := map[string][]span{} // key -> recorded runs of held attempts
	lost := 0
	for i, id := range ids {
		ti, err := b.insp.GetTask(b.ctx, id)
		require.NoError(t, err)
		for _, a := range ti.Attempts {
			what := fmt.Sprintf("%s/%d", id, a.Attempt)
			if a.Outcome == "lease_lost" {
				lost++
				continue
			}
			held[what] = true
			recorded[keys[i%3]] = append(recorded[keys[i%3]], span{what, a.StartedAt.Time, a.FinishedAt.Time})
		}
	}
	require.Positive(t, lost, "no attempt lost its lease: the freeze tested nothing")

	mu.Lock()
	handled := map[string][]span{}
	overlapsOfLost := 0
	for _, r := range runs {
		what := fmt.Sprintf("%s/%d", r.task, r.attempt)
		if held[what] {
			handled[keyOf[r.task]] = append(handled[keyOf[r.task]], span{what, r.start, r.end})
		}
	}
	for _, r := range runs {
		if held[fmt.Sprintf("%s/%d", r.task, r.attempt)] {
			continue
		}
		for _, s := range handled[keyOf[r.task]] {
			if s.start.Before(r.end) && r.start.Before(s.end) {
				overlapsOfLost++
			}
		}
	}
	mu.Unlock()
	noOverlap := func(what string, spans map[string][]span) {
		t.Helper()
		for key, ss := range spans {
			sort.Slice(ss, func(i, j int) bool { return ss[i].start.Before(ss[j].start) })
			for i := 1; i < len(ss); i++ {
				require.False(t, ss[i].start.Before(ss[i-1].end), "%s of key %s: %s [%s, %s] overlaps %s [%s, %s]", what, key,
					ss[i].what, ss[i].start.Format("15:04:05.000"), ss[i].end.Format("15:04:05.000"),
					ss[i-1].what, ss[i-1].start.Format("15:04:05.000"), ss[i-1].end.Format("15:04:05.000"))
			}
		}
	}
	noOverlap("handler runs", handled)
	noOverlap("recorded runs", recorded)
	t.Logf("attempts that lost their lease: %d; their runs overlapped %d held runs of their key", lost, overlapsOfLost)
}
