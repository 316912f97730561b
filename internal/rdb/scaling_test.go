package rdb_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/internal/rdb"
	"github.com/dtq-io/dtq/internal/rdbtest"
)

// TestScalingSamples: ingest counts the tasks it creates due now by
// five-second slot, and a sample reads them back with the queue's sizes,
// its service time and when it last did anything.
func TestScalingSamples(t *testing.T) {
	t.Parallel()
	b := setup(t) // b.now is 30s into a minute: slot 6
	before := time.Now().Add(-time.Second)
	mk := func(q string, st dtqtype.Status, at time.Time, delay time.Duration) {
		b.f.Make(t, st, rdbtest.Task{Queue: q, Now: at, Delay: delay})
	}
	for range 3 {
		mk("s", dtqtype.StatusQueued, b.now.Add(-12*time.Second), 0) // slot 3
	}
	mk("s", dtqtype.StatusQueued, b.now, 0)
	mk("s", dtqtype.StatusQueued, b.now, 0)
	mk("s", dtqtype.StatusQueued, b.now.Add(-40*time.Second), 0) // the minute before, slot 10
	mk("s", dtqtype.StatusPending, b.now, 30*time.Second)        // due within a minute; not an arrival
	mk("s", dtqtype.StatusPending, b.now, 2*time.Minute)
	mk("r", dtqtype.StatusRunning, b.now, 0)
	mk("r", dtqtype.StatusSucceeded, b.now, 0)
	mk("old", dtqtype.StatusSucceeded, b.now.Add(-10*time.Minute), 0)
	mk("paused", dtqtype.StatusQueued, b.now, 0)
	_, err := b.r.SetPaused(b.ctx, "paused", true, b.f.Admin, b.now, "test")
	require.NoError(t, err)
	after := time.Now().Add(time.Second)

	got, err := b.r.ScalingSamples(b.ctx, []string{"s", "r", "old", "paused"}, b.now, 15)
	require.NoError(t, err)
	require.Len(t, got, 4)
	cur := b.now.Unix() / 60

	s := got[0]
	require.Equal(t, "s", s.Queue)
	require.EqualValues(t, 6, s.Ready)
	require.EqualValues(t, 1, s.DueSoon)
	require.Zero(t, s.Running)
	require.Equal(t, [rdb.ArrivalSlots]int64{0: 2, 3: 3, 8: 1}, s.Arrivals)
	require.Equal(t, cur, s.LastActive)
	require.True(t, !s.OldestReady.Before(before.Truncate(time.Millisecond)) && s.OldestReady.Before(after),
		"the oldest entry's id is when Redis took it: %v not in [%v, %v]", s.OldestReady, before, after)

	r := got[1]
	require.EqualValues(t, 1, r.Running)
	require.Zero(t, r.Ready)
	require.EqualValues(t, 1, r.Runs)
	require.Equal(t, [rdb.ArrivalSlots]int64{0: 2}, r.Arrivals)
	require.True(t, r.OldestReady.IsZero())

	old := got[2]
	require.Equal(t, cur-10, old.LastActive)
	require.EqualValues(t, 0, old.Runs, "the run ended before the service minutes")

	p := got[3]
	require.True(t, p.Paused)
	require.EqualValues(t, 1, p.Ready)

	short, err := b.r.ScalingSamples(b.ctx, []string{"old"}, b.now, 5)
	require.NoError(t, err)
	require.EqualValues(t, -1, short[0].LastActive, "activity past the lookback is not seen")
}
