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

	// A push 100 ms after that call: now + window is 450 ms after the first
	// submission, past its max wait (300 ms).
	num, err := b.r.QueueNumber(b.ctx, "q")
	require.NoError(t, err)
	at := late.Add(100 * time.Millisecond)
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
