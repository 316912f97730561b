// Package groupcommit merges concurrent calls into batched calls of one
// function, as a database's group commit merges transactions into one
// write: the Client's submissions into one ingest script call per queue,
// the Worker's successes into one finalize call.
package groupcommit

import (
	"context"
	"fmt"
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
	// only for each other.
	Linger time.Duration
	Gather int
	// ByRate, with Linger, makes independent calls at a steady rate wait
	// for each other too. A call is independent when it does not come
	// right after another call's answer, as a loop's next call does. While
	// calls come on average less than Linger apart, an independent call
	// waits for the calls one Linger can expect (at most Gather), and while
	// a run is in flight it joins the next one instead of starting a run of
	// its own. So an HTTP server's requests at a steady rate share one run
	// per few calls, where each would otherwise overlap nobody's. A linger
	// by rate that nobody joined makes the next calls skip waiting by rate
	// (1, 3, 7, ... up to 255 calls): a loop taken for independent calls
	// (descheduled between two) loses one Linger now and then, no more.
	ByRate bool
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
	gap      time.Duration // average time between calls lately (ByRate)
	lastDone time.Time     // when a call last got its answer (ByRate)
	skip     int           // calls left that do not wait by rate (ByRate)
	backoff  int           // skip after the next linger nobody joined
}

// loopGap: a call that comes this soon after another call got its answer
// is taken for that caller calling again, not an independent one.
const loopGap = 100 * time.Microsecond

// maxBackoff bounds the calls that skip waiting by rate after a linger
// nobody joined.
const maxBackoff = 255

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
	byRate := false // want counts calls expected by rate, not callers in flight
	joins := false  // an independent call: while a run is in flight, it joins the next
	if g.Linger > 0 {
		now := time.Now()
		g.inside++
		defer g.leave()
		if g.inside >= g.peak || now.Sub(g.peakAt) > peakLingers*g.Linger {
			g.peak, g.peakAt = g.inside, now
		}
		since := now.Sub(g.last)
		if since < g.Linger {
			want = min(g.Gather, g.peak)
		}
		if g.ByRate {
			var expect int
			joins, expect = g.rate(now, since)
			if expect > want {
				want, byRate = expect, true
			}
		}
		g.last = now
		if g.company != nil && len(g.pending) >= g.want {
			close(g.company)
			g.company = nil
		}
	}
	// While a flusher lingers, a call that comes is the company it waits
	// for, not a flusher of its own; so is an independent call while a run
	// is in flight, until enough are pending for a run of their own.
	if g.flushing < max(1, g.Flushers) && g.company == nil &&
		(g.flushing == 0 || !joins || len(g.pending) >= max(2, want)) {
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
			g.wait(company, byRate)
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

// rate counts a call that came since after the previous one (ByRate): it
// reports whether the call is independent, so that it joins a run in
// flight, and the calls one Linger can then expect (at most Gather; 0 when
// the call is not independent).
func (g *Group[I, R]) rate(now time.Time, since time.Duration) (joins bool, expect int) {
	// The average gap between calls, over the last eight or so; a quiet
	// spell counts as 4 Linger, so it is forgotten after a few calls.
	if g.gap == 0 {
		g.gap = 4 * g.Linger
	}
	g.gap += (min(max(since, 0), 4*g.Linger) - g.gap) / 8
	if g.skip > 0 {
		g.skip--
		return false, 0
	}
	if g.gap >= g.Linger || now.Sub(g.lastDone) < loopGap {
		return false, 0
	}
	return true, min(g.Gather, int((g.Linger+g.gap-1)/g.gap))
}

// leave counts a call out of Do (Linger), and notes when it got its answer
// (ByRate: only rate reads it).
func (g *Group[I, R]) leave() {
	g.mu.Lock()
	g.inside--
	if g.ByRate {
		g.lastDone = time.Now()
	}
	g.mu.Unlock()
}

// wait lingers until company is closed or Linger passes. A linger by rate
// (byRate) that nobody joined makes the next calls skip waiting by rate,
// for twice as many calls each time it happens again.
func (g *Group[I, R]) wait(company chan struct{}, byRate bool) {
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
	if byRate {
		if expired && len(g.pending) <= 1 {
			g.backoff = min(2*g.backoff+1, maxBackoff)
			g.skip = g.backoff
		} else {
			g.backoff = 0
		}
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

// PerKey holds one Group per key (a queue), made by New on a key's first
// use. The zero value is ready; it is safe for concurrent use.
type PerKey[T, R any] struct {
	m sync.Map // key -> *Group[T, R]
}

// Get returns key's Group, made with newGroup if key has none yet. Two
// callers racing on a new key get the same Group; the loser's is dropped
// unused.
func (p *PerKey[T, R]) Get(key string, newGroup func() *Group[T, R]) *Group[T, R] {
	if g, ok := p.m.Load(key); ok {
		return mustGroup[T, R](g)
	}
	g, _ := p.m.LoadOrStore(key, newGroup())
	return mustGroup[T, R](g)
}

// mustGroup is v as the only type PerKey stores.
func mustGroup[T, R any](v any) *Group[T, R] {
	g, ok := v.(*Group[T, R])
	if !ok {
		panic(fmt.Sprintf("groupcommit: PerKey holds a %T", v))
	}
	return g
}
