// Package groupcommit merges concurrent calls into batched calls of one
// function, as a database's group commit merges transactions into one
// write: the Client's submissions into one ingest script call per queue,
// the Worker's successes into one finalize call.
package groupcommit

import (
	"context"
	"slices"
	"sync"
	"time"
)

// Group merges concurrent calls into batched calls of Run: while one run is
// in flight, new calls wait and the next run takes them all (up to Max).
// Without Linger nobody waits on a timer, so a lone call costs one run.
// Flusher goroutines exist only while calls are pending. A Group is safe
// for concurrent use; its fields must not change once Do was called.
type Group[I, R any] struct {
	// Max bounds the items of one batch.
	Max int
	// Flushers bounds the runs in flight at once (default 1). A second run
	// overlaps one batch's round trip with the next batch's.
	Flushers int
	// Linger, when set, lets calls at a steady rate share runs: a call that
	// comes less than Linger after the previous one and finds nobody
	// flushing waits until as many calls are pending as have lately been
	// in flight together (at most Gather), or until Linger passes. So a
	// lone caller calling in a loop never waits, k callers in a loop wait
	// only for each other, and independent callers at a moderate rate,
	// whose calls rarely overlap a run, share one run per few calls.
	Linger time.Duration
	Gather int
	// Run handles one batch; it returns one result per item, or an error
	// that applies to every item.
	Run func(batch []I) ([]R, error)

	mu       sync.Mutex
	pending  []*gcCall[I, R]
	flushing int           // flusher goroutines running
	last     time.Time     // when the previous call came (Linger)
	inside   int           // calls in Do now (Linger)
	peak     int           // the most calls in Do at once lately (Linger)
	peakAt   time.Time     // when peak was last reached
	company  chan struct{} // closed once want calls are pending (Linger)
	want     int           // the pending calls a lingering flusher waits for
	expired  int           // lingers that waited their full time (tests read it)
	idle     sync.Pool     // *gcCall[I, R] no longer in use, channel and all
}

// peakLingers is how many lingers a peak of calls in flight together
// counts for: when callers go away, the ones left wait for them a few
// times at most.
const peakLingers = 10

type gcCall[I, R any] struct {
	in   I
	done chan gcResult[R]
}

type gcResult[R any] struct {
	r   R
	err error
}

// Do adds in to the next batch and waits for its result. If ctx ends before
// the item is sent it is withdrawn; once sent, its result is awaited, since
// it is the truth about what was written.
func (g *Group[I, R]) Do(ctx context.Context, in I) (R, error) {
	c := g.newCall(in)
	g.mu.Lock()
	g.pending = append(g.pending, c)
	want := 0
	if g.Linger > 0 {
		now := time.Now()
		g.inside++
		defer g.leave()
		if g.inside >= g.peak || now.Sub(g.peakAt) > peakLingers*g.Linger {
			g.peak, g.peakAt = g.inside, now
		}
		if now.Sub(g.last) < g.Linger {
			want = min(g.Gather, g.peak)
		}
		g.last = now
		if g.company != nil && len(g.pending) >= g.want {
			close(g.company)
			g.company = nil
		}
	}
	// While a flusher lingers, a call that comes is the company it waits
	// for, not a flusher of its own.
	if g.flushing < max(1, g.Flushers) && g.company == nil {
		// Nobody is flushing: run the batch on this goroutine (no hand-off
		// for an uncontended call), then leave whatever queued up meanwhile
		// to a flusher goroutine.
		// Linger only with no other flusher about: one could take this
		// call's item while it waits.
		lone := g.flushing == 0
		g.flushing++
		var company chan struct{}
		if lone && want >= 2 && len(g.pending) < want {
			company = make(chan struct{})
			g.company, g.want = company, want
		}
		g.mu.Unlock()
		if company != nil {
			g.wait(company)
		}
		if g.flushBatch() {
			go g.flush()
		}
		res := <-c.done // sent in this batch, or in one the flusher runs
		g.release(c)
		return res.r, res.err
	}
	g.mu.Unlock()
	select {
	case res := <-c.done:
		g.release(c)
		return res.r, res.err
	case <-ctx.Done():
		g.mu.Lock()
		if i := slices.Index(g.pending, c); i >= 0 {
			g.pending = slices.Delete(g.pending, i, i+1)
			g.mu.Unlock()
			g.release(c) // withdrawn before any batch took it: nothing will be sent
			var zero R
			return zero, ctx.Err()
		}
		g.mu.Unlock()
		res := <-c.done
		g.release(c)
		return res.r, res.err
	}
}

// newCall returns a call for in: an idle one when there is one, since every
// Do needs a call and its channel.
func (g *Group[I, R]) newCall(in I) *gcCall[I, R] {
	c, _ := g.idle.Get().(*gcCall[I, R])
	if c == nil {
		c = &gcCall[I, R]{done: make(chan gcResult[R], 1)}
	}
	c.in = in
	return c
}

// release makes c idle. Only the call's own Do releases it, once nothing
// will send on its channel: its result was received, or it was withdrawn
// from pending before a batch took it. A flusher that sent the result
// does not touch c again.
func (g *Group[I, R]) release(c *gcCall[I, R]) {
	var zero I
	c.in = zero
	g.idle.Put(c)
}

// leave counts a call out of Do (Linger).
func (g *Group[I, R]) leave() {
	g.mu.Lock()
	g.inside--
	g.mu.Unlock()
}

// wait lingers until company is closed or Linger passes.
func (g *Group[I, R]) wait(company chan struct{}) {
	t := time.NewTimer(g.Linger)
	expired := false
	select {
	case <-company:
	case <-t.C:
		expired = true
	}
	t.Stop()
	g.mu.Lock()
	if g.company == company {
		g.company = nil
	}
	if expired {
		g.expired++
	}
	g.mu.Unlock()
}

// flush runs batches until nothing is pending.
func (g *Group[I, R]) flush() {
	for g.flushBatch() {
	}
}

// flushBatch runs one batch of what is pending. It reports whether more is
// pending; when it is not, this flusher has stopped.
func (g *Group[I, R]) flushBatch() bool {
	g.mu.Lock()
	n := min(len(g.pending), g.Max)
	batch := slices.Clone(g.pending[:n])
	g.pending = slices.Delete(g.pending, 0, n)
	g.mu.Unlock()

	if len(batch) > 0 {
		items := make([]I, len(batch))
		for i, c := range batch {
			items[i] = c.in
		}
		rs, err := g.Run(items)
		for i, c := range batch {
			if err != nil {
				c.done <- gcResult[R]{err: err}
			} else {
				c.done <- gcResult[R]{r: rs[i]}
			}
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.pending) == 0 {
		g.flushing--
		return false
	}
	return true
}
