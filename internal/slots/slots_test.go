package slots

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// waiters is how many queues wait for a slot.
func (s *Pool) waiters() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.waiting)
}

func TestPoolTakesWhatIsFree(t *testing.T) {
	t.Parallel()
	p := NewPool(3, map[string]int{"a": 1}, []string{"a"}, false)
	n, err := p.Acquire(context.Background(), "a", 2)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	require.Equal(t, 1, p.TryAcquire(5), "only one is left")
	require.Equal(t, 0, p.TryAcquire(1))
	p.Release(3)
	require.Equal(t, 3, p.TryAcquire(3))
}

// TestPoolStrictOrderServesTheFirstQueue: in strict mode a freed slot goes
// to the waiting queue listed first, whichever waited longer.
func TestPoolStrictOrderServesTheFirstQueue(t *testing.T) {
	t.Parallel()
	p := NewPool(1, map[string]int{"high": 1, "low": 1}, []string{"high", "low"}, true)
	require.Equal(t, 1, p.TryAcquire(1))
	got := make(chan string, 2)
	for i, q := range []string{"low", "high"} {
		go func() {
			n, err := p.Acquire(context.Background(), q, 1)
			if err == nil && n == 1 {
				got <- q
			}
		}()
		require.Eventually(t, func() bool { return p.waiters() == i+1 }, 10*time.Second, time.Millisecond)
	}
	p.Release(1)
	require.Equal(t, "high", <-got)
	p.Release(1)
	require.Equal(t, "low", <-got)
}

// TestPoolGivesUpWithoutLosingSlots: a wait that ends with its context
// takes nothing, and a later release finds its slot free.
func TestPoolGivesUpWithoutLosingSlots(t *testing.T) {
	t.Parallel()
	p := NewPool(1, map[string]int{"a": 1}, []string{"a"}, false)
	require.Equal(t, 1, p.TryAcquire(1))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := p.Acquire(ctx, "a", 1)
		done <- err
	}()
	require.Eventually(t, func() bool { return p.waiters() == 1 }, 10*time.Second, time.Millisecond)
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	p.Release(1)
	require.Equal(t, 1, p.TryAcquire(1))
}
