package rdb

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq/dtqtype"
)

// TestListTasksPagesDeepIndex: pages after a cursor come from list_page's
// binary search, in one queue and across queues whose ids interleave.
func TestListTasksPagesDeepIndex(t *testing.T) {
	t.Parallel()
	b := newTestRDB(t)
	b.opt.MaxDepth = 1000
	var want []string // newest first
	for range 3 {
		for _, q := range []string{"a", "b"} {
			batch := make([]NewTask, 50)
			for i := range batch {
				batch[i] = b.task(t, q, "")
			}
			b.ingest(t, q, batch...)
			for _, nt := range batch {
				want = append([]string{nt.ID}, want...)
			}
		}
	}
	page := func(queue string) []string {
		var got []string
		cursor := ""
		for {
			res, err := b.r.ListTasks(b.ctx, &dtqtype.TaskListParams{Queue: queue, Limit: 40, Cursor: cursor})
			require.NoError(t, err)
			for _, it := range res.Items {
				got = append(got, it.ID)
			}
			if res.NextCursor == "" {
				return got
			}
			cursor = res.NextCursor
		}
	}
	require.Equal(t, want, page(""))
	var inA []string
	for _, id := range want {
		if num, _ := ParseTaskID(id); num == mustNumber(t, b, "a") {
			inA = append(inA, id)
		}
	}
	require.Equal(t, inA, page("a"))
}

func mustNumber(t *testing.T, b *testRDB, queue string) uint16 {
	t.Helper()
	num, err := b.r.QueueNumber(b.ctx, queue)
	require.NoError(t, err)
	return num
}
