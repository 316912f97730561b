package events

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/internal/workertest"
)

// TestFeedOfAnOutcomesQueueResumes: a queue with events "outcomes" run by
// a worker puts only its outcome events on the feed; a client that leaves
// after the first one resumes from its cursor with the next and only the
// next, and a replay from the start cursor delivers the same events in the
// same order: the stream's gaps in what it records change nothing of the
// cursors.
func TestFeedOfAnOutcomesQueueResumes(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	dep := openDeployment(t, b.rc, b.keys.Prefix())
	admin, err := dep.NewAdmin(nil)
	require.NoError(t, err)
	require.NoError(t, admin.SetLimits(b.ctx, "quiet", dtqtype.QueueLimits{Events: dtqtype.EventsOutcomes}))
	b.register(t, "quiet")
	b.waitReaders(t, "quiet")
	c := b.openSSE(t, "?queue=quiet", "")
	start := c.start(t)

	cl, err := dep.NewClient(nil)
	require.NoError(t, err)
	want := map[string]string{} // task id -> its one event
	for _, do := range []string{"ok", "fail", "ok"} {
		info, err := cl.Submit(b.ctx, dtq.Submission{Queue: "quiet", Type: "job", Payload: map[string]string{"do": do}})
		require.NoError(t, err)
		want[info.TaskID] = map[string]string{"ok": TypeTaskSucceeded, "fail": TypeTaskDeadLettered}[do]
	}
	w, err := dep.NewWorker(&dtq.WorkerConfig{Queues: map[string]int{"quiet": 1},
		Concurrency: 1, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	w.HandleFunc("job", func(_ context.Context, task *dtq.Task) (any, error) {
		if string(task.Payload) == `{"do":"fail"}` {
			return nil, dtq.Permanent(errors.New("no"))
		}
		return nil, nil
	})
	workertest.Run(t, w)

	type seen struct{ id, typ, task string }
	// read returns the next task event (the feed of a queue also carries
	// the workers serving it).
	read := func(c *sseConn) (seen, string) {
		for {
			f := c.nextEvent(t)
			env := envelopeOf(t, f.data)
			if task, ok := env["task_id"].(string); ok {
				return seen{env["event_id"].(string), f.event, task}, f.id
			}
		}
	}
	first, cursor := read(c)
	c.close()
	c = b.openSSE(t, "", cursor)
	require.Equal(t, cursor, c.start(t))
	got := []seen{first}
	for len(got) < len(want) {
		s, _ := read(c)
		got = append(got, s)
	}
	c.close()
	for _, s := range got {
		require.Equal(t, want[s.task], s.typ, "task %s", s.task)
		delete(want, s.task)
	}
	require.Empty(t, want, "each task's outcome came once")

	// From the start again: the same events, in the same order.
	c = b.openSSE(t, "?queue=quiet&cursor="+start, "")
	c.start(t)
	for _, s := range got {
		again, _ := read(c)
		require.Equal(t, s, again)
	}
	// The stream holds those and nothing else.
	n, err := b.rc.XLen(b.ctx, b.keys.Events("quiet")).Result()
	require.NoError(t, err)
	require.EqualValues(t, len(got), n)
}
