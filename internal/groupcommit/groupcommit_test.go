package groupcommit

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// recorder is a Group run that records its batches.
type recorder struct {
	mu      sync.Mutex
	batches [][]int
}

func (r *recorder) run(batch []int) ([]int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.batches = append(r.batches, batch)
	return batch, nil
}

func (r *recorder) sizes() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []int
	for _, b := range r.batches {
		out = append(out, len(b))
	}
	return out
}

// TestGroupCommitWithoutLingerRunsALoneCallAtOnce: calls one after the
// other each get a run of their own; nothing waits.
func TestGroupCommitWithoutLingerRunsALoneCallAtOnce(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	g := &Group[int, int]{Max: 10, Run: rec.run}
	for i := range 3 {
		r, err := g.Do(context.Background(), i)
		require.NoError(t, err)
		require.Equal(t, i, r)
	}
	require.Equal(t, []int{1, 1, 1}, rec.sizes())
}

// TestGroupCommitLingerGathersCompany: the first call runs at once; a call
// right after it waits for company, and its run takes the calls that came
// meanwhile once gather of them are pending, long before linger passes.
func TestGroupCommitLingerGathersCompany(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	g := &Group[int, int]{Max: 10, Run: rec.run, Linger: time.Minute, Gather: 3}
	g.peak, g.peakAt = 3, time.Now() // three calls were lately in flight together
	_, err := g.Do(context.Background(), 0)
	require.NoError(t, err)
	require.Equal(t, []int{1}, rec.sizes(), "after a quiet spell a call runs at once")

	var wg sync.WaitGroup
	results := make([]int, 4)
	call := func(i int) {
		wg.Go(func() {
			r, err := g.Do(context.Background(), i)
			require.NoError(t, err)
			results[i] = r
		})
	}
	call(1)
	require.Eventually(t, func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.company != nil
	}, 10*time.Second, time.Millisecond, "the second call lingers")
	call(2)
	call(3)
	wg.Wait() // returns once gather calls were pending, not after a minute
	require.Equal(t, []int{1, 3}, rec.sizes())
	require.Equal(t, []int{0, 1, 2, 3}, results)
}

// TestGroupCommitLoneCallerNeverLingers: calls one after the other from one
// caller never overlap, so none waits for company, however close together
// they come.
func TestGroupCommitLoneCallerNeverLingers(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	g := &Group[int, int]{Max: 10, Run: rec.run, Linger: time.Minute, Gather: 3}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 5 {
			_, err := g.Do(context.Background(), i)
			require.NoError(t, err)
		}
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second): // a linger would take five minutes
		t.Fatal("a lone caller waited for company")
	}
	require.Equal(t, []int{1, 1, 1, 1, 1}, rec.sizes())
}

// TestGroupCommitCallersInALoopWaitOnlyForEachOther: k callers each calling
// in a loop never wait out the linger round after round: a lingering call's
// company is the other callers, and it never waits for more calls than have
// lately been in flight together.
func TestGroupCommitCallersInALoopWaitOnlyForEachOther(t *testing.T) {
	t.Parallel()
	for _, k := range []int{2, 3, 4, 16} {
		rec := &recorder{}
		g := &Group[int, int]{Max: 100, Flushers: 2, Run: rec.run, Linger: 50 * time.Millisecond, Gather: 4}
		// The callers share one count of calls, so they stop within a round
		// of each other: none is left waiting for callers that finished
		// (TestGroupCommitLeftAloneStopsLingering covers that).
		var left atomic.Int64
		left.Store(int64(50 * k))
		var wg sync.WaitGroup
		for range k {
			wg.Go(func() {
				for i := 0; left.Add(-1) >= 0; i++ {
					_, err := g.Do(context.Background(), i)
					require.NoError(t, err)
				}
			})
		}
		wg.Wait()
		total := 0
		for _, n := range rec.sizes() {
			total += n
		}
		require.Equal(t, 50*k, total)
		g.mu.Lock()
		expired := g.expired
		g.mu.Unlock()
		// Lingering round after round would expire about 50 times; the last
		// round and a caller descheduled for longer than the linger expire
		// a few.
		require.LessOrEqual(t, expired, peakLingers, "%d callers: %d lingers waited their full time", k, expired)
		t.Logf("%d callers: %d batches, %d full lingers", k, len(rec.sizes()), expired)
	}
}

// TestGroupCommitLeftAloneStopsLingering: a caller whose company finished
// waits out the linger at most peakLingers times, then calls without
// waiting.
func TestGroupCommitLeftAloneStopsLingering(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	g := &Group[int, int]{Max: 100, Flushers: 2, Run: rec.run, Linger: 50 * time.Millisecond, Gather: 4}
	// Two calls were in flight together just now, and the last call came
	// within the linger (the future: however long this goroutine waits to
	// run, the first call below counts as close behind it).
	g.peak, g.peakAt, g.last = 2, time.Now(), time.Now().Add(time.Hour)
	for i := range 3 * peakLingers {
		_, err := g.Do(context.Background(), i)
		require.NoError(t, err)
	}
	g.mu.Lock()
	expired := g.expired
	g.mu.Unlock()
	require.GreaterOrEqual(t, expired, 1, "the first call alone waited for company")
	require.LessOrEqual(t, expired, peakLingers, "%d calls alone: %d lingers waited their full time", 3*peakLingers, expired)
}

// TestGroupCommitAnswersEachCallItsOwn: calls are reused once answered or
// withdrawn; every Do still gets its own item's result.
func TestGroupCommitAnswersEachCallItsOwn(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var held atomic.Bool
	g := &Group[int, int]{Max: 4, Run: func(batch []int) ([]int, error) {
		if held.CompareAndSwap(false, true) {
			<-release // the first run holds the flusher, so the next call waits in pending
		}
		out := make([]int, len(batch))
		for i, v := range batch {
			out[i] = -v
		}
		return out, nil
	}}
	first := make(chan int, 1)
	go func() {
		r, _ := g.Do(context.Background(), 1)
		first <- r
	}()
	require.Eventually(t, func() bool { return held.Load() }, 10*time.Second, time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	withdrawn := make(chan error, 1)
	go func() {
		_, err := g.Do(ctx, 2)
		withdrawn <- err
	}()
	require.Eventually(t, func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return len(g.pending) == 1
	}, 10*time.Second, time.Millisecond)
	cancel()
	require.ErrorIs(t, <-withdrawn, context.Canceled)
	close(release)
	require.Equal(t, -1, <-first)

	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 200 {
				in := w*1000 + i + 3
				r, err := g.Do(context.Background(), in)
				if err != nil || r != -in {
					t.Errorf("Do(%d) = %d, %v", in, r, err)
					return
				}
			}
		})
	}
	wg.Wait()
}
