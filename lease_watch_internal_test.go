package dtq

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestLeaseCancelAt(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		name       string
		visibility time.Duration
		want       time.Duration // after at
	}{
		{"a second before the lease ends", 30 * time.Second, 29 * time.Second},
		{"three seconds", 3 * time.Second, 2 * time.Second},
		{"two seconds: half", 2 * time.Second, time.Second},
		{"short: half", time.Second, 500 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, at.Add(tc.want), leaseCancelAt(at, tc.visibility))
		})
	}
}

// TestLeaseWatchCancelsWithoutRenewal: a lease whose cancel time has passed
// with no renewal cancels the handler, with no Redis answer needed.
func TestLeaseWatchCancelsWithoutRenewal(t *testing.T) {
	t.Parallel()
	fired := make(chan struct{})
	w := newLeaseWatch(time.Now().Add(-3*time.Second), 3*time.Second, func() { close(fired) })
	t.Cleanup(w.stop)
	select {
	case <-fired:
	case <-time.After(time.Minute):
		t.Fatal("the handler was not cancelled after its lease ran out")
	}
}

// TestLeaseWatchRenewedMovesTheCancel: a renewal moves the cancel to its
// send time + visibility − the margin; an older renewal's late answer and a
// renewal after stop move nothing.
func TestLeaseWatchRenewedMovesTheCancel(t *testing.T) {
	t.Parallel()
	start := time.Now()
	fired := make(chan struct{}, 1)
	w := newLeaseWatch(start, time.Hour, func() { fired <- struct{}{} })
	w.renewed(start.Add(time.Minute))
	require.Equal(t, start.Add(time.Minute), w.last)
	w.renewed(start.Add(time.Second)) // answered after the newer one
	require.Equal(t, start.Add(time.Minute), w.last)
	w.stop()
	w.renewed(start.Add(2 * time.Minute))
	require.Equal(t, start.Add(time.Minute), w.last)
	require.False(t, w.timer.Stop(), "a stopped watch's timer is still armed")
	require.Empty(t, fired)
}
