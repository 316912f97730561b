package groupcommit

import (
	"context"
	"errors"
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

	results := lingerRound(t, g, 1, 2, 3) // returns once gather calls were pending, not after a minute
	require.Equal(t, []int{1, 3}, rec.sizes())
	require.Equal(t, map[int]int{1: 1, 2: 2, 3: 3}, results)
}

// lingerRound calls Do with first, waits until that call lingers for
// company, then calls Do with each item of company. It returns once every
// call is answered: each item's result.
func lingerRound(t *testing.T, g *Group[int, int], first int, company ...int) map[int]int {
	t.Helper()
	var wg sync.WaitGroup
	var mu sync.Mutex
	results := map[int]int{}
	call := func(i int) {
		wg.Go(func() {
			r, err := g.Do(context.Background(), i)
			require.NoError(t, err)
			mu.Lock()
			results[i] = r
			mu.Unlock()
		})
	}
	call(first)
	require.Eventually(t, func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.company != nil
	}, 10*time.Second, time.Millisecond, "the call lingers for company")
	for _, i := range company {
		call(i)
	}
	wg.Wait()
	return results
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

// steady makes g's next call look independent and part of a steady stream
// of calls, each a quarter of the linger after the previous one (ByRate).
func steady(g *Group[int, int]) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.gap, g.last, g.lastDone = g.Linger/4, time.Now(), time.Time{}
}

// TestGroupCommitByRateGathersIndependentCalls: calls at a steady rate that
// never overlap a run wait for each other: the first waits until the calls
// one linger can expect (Gather here) are pending, long before the linger
// passes.
func TestGroupCommitByRateGathersIndependentCalls(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	g := &Group[int, int]{Max: 10, Run: rec.run, Linger: time.Minute, Gather: 3, ByRate: true}
	steady(g)
	results := lingerRound(t, g, 0, 1, 2) // returns once gather calls were pending, not after a minute
	require.Equal(t, []int{3}, rec.sizes())
	require.Equal(t, map[int]int{0: 0, 1: 1, 2: 2}, results)
}

// TestGroupCommitByRateJoinsTheRunInFlight: an independent call that comes
// while a run is in flight waits for the next run instead of starting one
// of its own beside it, though a second flusher is allowed; the next run
// takes every call that came meanwhile.
func TestGroupCommitByRateJoinsTheRunInFlight(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	release := make(chan struct{})
	var held atomic.Bool
	g := &Group[int, int]{Max: 10, Flushers: 2, Linger: time.Minute, Gather: 4, ByRate: true,
		Run: func(batch []int) ([]int, error) {
			if held.CompareAndSwap(false, true) {
				<-release
			}
			return rec.run(batch)
		}}
	var wg sync.WaitGroup
	wg.Go(func() {
		_, err := g.Do(context.Background(), 0) // a quiet group: runs at once
		require.NoError(t, err)
	})
	require.Eventually(t, held.Load, 10*time.Second, time.Millisecond)
	for i := 1; i <= 2; i++ {
		steady(g)
		wg.Go(func() {
			_, err := g.Do(context.Background(), i)
			require.NoError(t, err)
		})
		require.Eventually(t, func() bool {
			g.mu.Lock()
			defer g.mu.Unlock()
			return len(g.pending) == i
		}, 10*time.Second, time.Millisecond)
	}
	g.mu.Lock()
	flushing := g.flushing
	g.mu.Unlock()
	require.Equal(t, 1, flushing, "no second run beside the one in flight")
	close(release)
	wg.Wait()
	require.Equal(t, []int{1, 2}, rec.sizes())
}

// TestGroupCommitByRateBacksOffWhenNobodyComes: a linger by rate that
// nobody joined makes the next calls skip waiting by rate, twice as many
// each time, so a caller taken for a stream of independent ones loses a
// linger now and then, not every call.
func TestGroupCommitByRateBacksOffWhenNobodyComes(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	g := &Group[int, int]{Max: 10, Run: rec.run, Linger: 5 * time.Millisecond, Gather: 4, ByRate: true}
	for round, backoff := range []int{1, 3, 7} {
		steady(g)
		_, err := g.Do(context.Background(), round)
		require.NoError(t, err)
		g.mu.Lock()
		require.Equal(t, backoff, g.backoff, "round %d", round)
		require.Equal(t, backoff, g.skip, "round %d", round)
		g.mu.Unlock()
		for range backoff {
			steady(g)
			_, err := g.Do(context.Background(), round)
			require.NoError(t, err)
		}
		g.mu.Lock()
		require.Equal(t, 0, g.skip, "the skipped calls did not wait by rate")
		require.Equal(t, round+1, g.expired, "only the first call of a round lingered")
		g.mu.Unlock()
	}
}

// TestGroupCommitByRateAnswersEveryCall: callers at an uneven pace, some
// giving up, with calls lingering, joining runs in flight and backing off:
// every call gets its own item's result or its context's error, and every
// item sent is in exactly one run.
func TestGroupCommitByRateAnswersEveryCall(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	ran := map[int]int{}
	g := &Group[int, int]{Max: 8, Flushers: 2, Linger: time.Millisecond, Gather: 4, ByRate: true,
		Run: func(batch []int) ([]int, error) {
			mu.Lock()
			for _, v := range batch {
				ran[v]++
			}
			mu.Unlock()
			out := make([]int, len(batch))
			for i, v := range batch {
				out[i] = -v
			}
			return out, nil
		}}
	var answered, withdrawn atomic.Int64
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 100 {
				in := w*1000 + i + 1
				ctx, cancel := context.WithCancel(context.Background())
				if i%7 == 0 {
					cancel() // gives up at once: withdrawn unless a batch took it first
				}
				r, err := g.Do(ctx, in)
				cancel()
				switch {
				case err == nil && r == -in:
					answered.Add(1)
				case errors.Is(err, context.Canceled):
					withdrawn.Add(1)
				default:
					t.Errorf("Do(%d) = %d, %v", in, r, err)
					return
				}
				if i%3 == 0 {
					time.Sleep(time.Duration(i%5) * 100 * time.Microsecond) // independent-looking gaps
				}
			}
		})
	}
	wg.Wait()
	require.EqualValues(t, 800, answered.Load()+withdrawn.Load())
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, ran, int(answered.Load()), "every answered item ran, no withdrawn one did")
	for v, n := range ran {
		require.Equal(t, 1, n, "item %d ran %d times", v, n)
	}
}

// TestPerKeyMakesOneGroupPerKey: concurrent first uses of a key get one
// Group; another key gets its own.
func TestPerKeyMakesOneGroupPerKey(t *testing.T) {
	t.Parallel()
	var p PerKey[int, int]
	newGroup := func() *Group[int, int] { return &Group[int, int]{} }
	got := make([]*Group[int, int], 8)
	var wg sync.WaitGroup
	for i := range got {
		wg.Go(func() { got[i] = p.Get("q", newGroup) })
	}
	wg.Wait()
	for _, g := range got {
		require.Same(t, got[0], g)
	}
	require.NotSame(t, got[0], p.Get("other", newGroup))
	require.Same(t, got[0], p.Get("q", newGroup))
}
