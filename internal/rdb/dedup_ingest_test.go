package rdb

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A debounce key's max wait counts from its first submission's own time
// (created_at, which its available_at counts from), not from the time of
// the ingest call that wrote it: a merged call runs after the one before
// it, a resend later still, and a push must never take the task past
// created_at + max wait.
func TestDebounceMaxWaitFromSubmission(t *testing.T) {
	t.Parallel()
	b := newTestRDB(t)
	spec := &DedupSpec{Key: "k", Mode: "debounce", Window: 200, MaxWait: 300}
	first := b.task(t, "q", "")
	first.AvailableAt = first.CreatedAt + spec.Window
	first.Dedup = spec
	late := b.now.Add(150 * time.Millisecond) // the call runs 150 ms after the submission, within its window
	res, err := b.r.Ingest(b.ctx, "q", late, b.opt, []NewTask{first})
	require.NoError(t, err)
	require.Equal(t, Created, res[0].Outcome)

	// A push 40 ms after that call, while the task still waits (it is due
	// 200 ms after the first submission): now + window is 390 ms after the
	// first submission, past its max wait (300 ms), though not past the
	// call's time + max wait.
	num, err := b.r.QueueNumber(b.ctx, "q")
	require.NoError(t, err)
	at := late.Add(40 * time.Millisecond)
	second := testTask(num, at, "")
	second.AvailableAt = second.CreatedAt + spec.Window
	second.Dedup = spec
	res, err = b.r.Ingest(b.ctx, "q", at, b.opt, []NewTask{second})
	require.NoError(t, err)
	require.Equal(t, Deduplicated, res[0].Outcome)
	require.Equal(t, first.ID, res[0].TaskID)
	due, err := b.c.HGet(b.ctx, b.keys.Task("q", first.ID), "available_at").Int64()
	require.NoError(t, err)
	require.Equal(t, first.CreatedAt+spec.MaxWait, due, "never past the first submission + max wait")
}

// TestDebounceNeverPastMaxWait: submissions of one debounce key (window
// 1s, max wait 3s) every 300 ms for 5 s. No task of the key is ever due
// after its own first submission + max wait, and a submission that finds
// the key's task waiting no more (due, or its max wait reached, though the
// promoter has not queued it yet; or queued already) makes a new task
// rather than pushing or taking over one about to start.
func TestDebounceNeverPastMaxWait(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		promote bool // run the promoter before each submission
	}{
		{name: "promoter on time", promote: true},
		{name: "promoter late", promote: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := newTestRDB(t)
			spec := &DedupSpec{Key: "d", Mode: "debounce", Window: 1000, MaxWait: 3000}
			num, err := b.r.QueueNumber(b.ctx, "q")
			require.NoError(t, err)
			t0 := b.now.Truncate(time.Millisecond)
			firstOf := map[string]int64{} // task id -> its first submission (ms)
			var order []string
			for i := range 17 { // t = 0, 0.3, ... 4.8 s
				at := t0.Add(time.Duration(i) * 300 * time.Millisecond)
				if tc.promote {
					_, err := b.r.Promote(b.ctx, "q", testSettings, at)
					require.NoError(t, err)
				}
				nt := testTask(num, at, "")
				nt.AvailableAt = nt.CreatedAt + spec.Window
				nt.Dedup = spec
				res, err := b.r.Ingest(b.ctx, "q", at, b.opt, []NewTask{nt})
				require.NoError(t, err)
				switch res[0].Outcome {
				case Created:
					firstOf[nt.ID] = nt.CreatedAt
					order = append(order, nt.ID)
				case Deduplicated:
					require.Equal(t, order[len(order)-1], res[0].TaskID, "t=%v: collapsed into the key's newest task", at.Sub(t0))
				default:
					t.Fatalf("t=%v: outcome %v", at.Sub(t0), res[0].Outcome)
				}
				for id, first := range firstOf {
					due, err := b.c.HGet(b.ctx, b.keys.Task("q", id), "available_at").Int64()
					require.NoError(t, err)
					require.LessOrEqual(t, due, first+spec.MaxWait, "t=%v: task %s due %d ms after its first submission",
						at.Sub(t0), id, due-first)
				}
			}
			// The first task is due at t0 + 3 s: the submission at exactly
			// that moment finds it waiting no more and starts a new task, which
			// the rest (up to t0 + 4.8 s) push to t0 + 5.8 s.
			require.Len(t, order, 2)
			require.Equal(t, t0.Add(3*time.Second).UnixMilli(), firstOf[order[1]])
			due, err := b.c.HGet(b.ctx, b.keys.Task("q", order[1]), "available_at").Int64()
			require.NoError(t, err)
			require.Equal(t, t0.Add(5800*time.Millisecond).UnixMilli(), due)
			first, err := b.c.HGet(b.ctx, b.keys.Task("q", order[0]), "available_at").Int64()
			require.NoError(t, err)
			require.Equal(t, t0.Add(3*time.Second).UnixMilli(), first)
		})
	}
}
