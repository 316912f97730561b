// Package slots bounds how many handlers a worker runs at once across the
// queues it serves, and decides which waiting queue gets a freed slot.
package slots

import (
	"context"
	"math/rand/v2"
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
}

type slotWaiter struct {
	want  int
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
func (s *Pool) Acquire(ctx context.Context, queue string, want int) (int, error) {
	s.mu.Lock()
	if s.free > 0 && len(s.waiting) == 0 {
		n := min(s.free, want)
		s.free -= n
		s.mu.Unlock()
		return n, nil
	}
	w := &slotWaiter{want: want, grant: make(chan int, 1)}
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

// pick chooses the waiting queue that gets freed slots.
func (s *Pool) pick() string {
	best, total := "", 0
	for q := range s.waiting {
		if s.strict {
			if best == "" || s.order[q] < s.order[best] {
				best = q
			}
			continue
		}
		total += max(1, s.weights[q])
	}
	if s.strict {
		return best
	}
	r := rand.IntN(total)
	for q := range s.waiting {
		r -= max(1, s.weights[q])
		if r < 0 {
			return q
		}
	}
	return best
}
