// Package slots bounds how many handlers a worker runs at once across the
// queues it serves, and decides which waiting queue gets a freed slot.
package slots

import (
	"context"
	"math/rand/v2"
	"strings"
	"sync"
)

// Pool bounds a worker's concurrency across its queues. When queues compete
// for freed slots, they are handed out by weighted lottery (as asynq's queue
// weights do) or, in strict mode, to the first queue in the configured order.
// It is safe for concurrent use.
type Pool struct {
	mu      sync.Mutex
	free    int
	strict  bool
	order   map[string]int // queue -> position (strict mode)
	weights map[string]int
	waiting map[string]*slotWaiter
	seq     uint64 // numbers the waiters
}

type slotWaiter struct {
	want  int
	band  int    // the highest priority band its queue is known to have ready
	seq   uint64 // when it started waiting: the oldest of equal bands goes first
	woke  bool   // its work just arrived: first among equal bands
	grant chan int
}

// NewPool returns a Pool of n slots for queues of the given weights; order
// lists the queues, the first first (strict mode serves it first).
func NewPool(n int, weights map[string]int, order []string, strict bool) *Pool {
	s := &Pool{free: n, strict: strict, weights: weights, order: map[string]int{}, waiting: map[string]*slotWaiter{}}
	for i, q := range order {
		s.order[q] = i
	}
	return s
}

// Acquire waits for at least one slot for queue and takes up to want.
// band is the highest priority band queue is known to have ready (0 when
// unknown), and woke says its work has just arrived (it had none): among
// the waiting partitions of one queue, the highest band goes first, of
// equal bands one that just woke, then the one waiting longest. A
// partition with a backlog thus never holds back one whose work just
// came for more than a turn.
func (s *Pool) Acquire(ctx context.Context, queue string, want, band int, woke bool) (int, error) {
	s.mu.Lock()
	if s.free > 0 && len(s.waiting) == 0 {
		n := min(s.free, want)
		s.free -= n
		s.mu.Unlock()
		return n, nil
	}
	s.seq++
	w := &slotWaiter{want: want, band: band, seq: s.seq, woke: woke, grant: make(chan int, 1)}
	s.waiting[queue] = w
	s.mu.Unlock()
	select {
	case n := <-w.grant:
		return n, nil
	case <-ctx.Done():
		s.mu.Lock()
		if s.waiting[queue] == w {
			delete(s.waiting, queue)
			s.mu.Unlock()
			return 0, ctx.Err()
		}
		s.mu.Unlock()
		s.Release(<-w.grant) // granted while we gave up: give it back
		return 0, ctx.Err()
	}
}

// TryAcquire takes up to want slots without waiting.
func (s *Pool) TryAcquire(want int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := min(s.free, want)
	s.free -= n
	return n
}

// Release returns n slots and hands them to waiting queues.
func (s *Pool) Release(n int) {
	if n <= 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.free += n
	for s.free > 0 && len(s.waiting) > 0 {
		q := s.pick()
		w := s.waiting[q]
		delete(s.waiting, q)
		g := min(s.free, w.want)
		s.free -= g
		w.grant <- g
	}
}

// pick chooses the waiting queue that gets freed slots. Partitions of a
// queue ("<queue>#<k>...", see rdb.PartitionOf) wait as themselves but
// share their queue's weight and place: a queue is drawn (by weight, or by
// order in strict mode), then one of its waiting partitions (partitionOf).
func (s *Pool) pick() string {
	best, total := "", 0
	seen := map[string]bool{}
	for q := range s.waiting {
		base := queueOf(q)
		if s.strict {
			if best == "" || s.order[base] < s.order[queueOf(best)] {
				best = q
			}
			continue
		}
		if !seen[base] {
			seen[base] = true
			total += max(1, s.weights[base])
		}
	}
	if !s.strict {
		r := rand.IntN(total)
		for base := range seen {
			r -= max(1, s.weights[base])
			if r < 0 {
				best = base
				break
			}
		}
	}
	return s.partitionOf(queueOf(best))
}

// partitionOf picks the waiting partition (or the queue itself) of queue
// with the highest band ready; among equals one whose work just arrived,
// then the one waiting longest (see Acquire).
func (s *Pool) partitionOf(queue string) string {
	var out string
	var best *slotWaiter
	for q, w := range s.waiting {
		if queueOf(q) != queue {
			continue
		}
		if best == nil || w.band > best.band ||
			(w.band == best.band && (w.woke && !best.woke || w.woke == best.woke && w.seq < best.seq)) {
			out, best = q, w
		}
	}
	return out
}

// queueOf is the queue a partition's name belongs to.
func queueOf(name string) string {
	base, _, _ := strings.Cut(name, "#")
	return base
}
