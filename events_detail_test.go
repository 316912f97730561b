package dtq_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/internal/workertest"
)

// TestEventDetailOutcomesWithAWorker: a worker runs tasks of a queue with
// events "outcomes" (a success, a retry then a success, a delayed task, a
// permanent failure): each writes only its outcome events, in order,
// WaitTask still answers each at its end, and a queue with "full" next to
// it keeps every event.
func TestEventDetailOutcomesWithAWorker(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	require.NoError(t, b.admin(t).SetLimits(b.ctx, "quiet", dtqtype.QueueLimits{Events: dtqtype.EventsOutcomes}))
	require.NoError(t, b.admin(t).SetLimits(b.ctx, "loud", dtqtype.QueueLimits{Events: dtqtype.EventsFull}))
	var mu sync.Mutex
	tries := map[string]int{}
	w := b.worker(t, func(c *dtq.WorkerConfig) { c.Queues = map[string]int{"quiet": 1, "loud": 1} })
	w.HandleFunc("job", func(_ context.Context, task *dtq.Task) (any, error) {
		mu.Lock()
		tries[task.ID]++
		n := tries[task.ID]
		mu.Unlock()
		switch string(task.Payload) {
		case `{"do":"flaky"}`:
			if n == 1 {
				return nil, dtq.RetryAfter(10*time.Millisecond, errors.New("not yet"))
			}
		case `{"do":"fail"}`:
			return nil, dtq.Permanent(errors.New("no"))
		}
		return map[string]int{"tries": n}, nil
	})
	workertest.Run(t, w)

	cases := []struct {
		name     string
		sub      dtq.Submission
		status   dtqtype.Status
		outcomes []string
		full     []string
	}{
		{"success", dtq.Submission{Payload: map[string]string{"do": "ok"}}, dtqtype.StatusSucceeded,
			[]string{"TASK_SUCCEEDED"}, []string{"TASK_QUEUED", "TASK_STARTED", "TASK_SUCCEEDED"}},
		{"retry then success", dtq.Submission{Payload: map[string]string{"do": "flaky"}}, dtqtype.StatusSucceeded,
			[]string{"TASK_RETRY_SCHEDULED", "TASK_SUCCEEDED"},
			[]string{"TASK_QUEUED", "TASK_STARTED", "TASK_RETRY_SCHEDULED", "TASK_RETRIED", "TASK_STARTED", "TASK_SUCCEEDED"}},
		{"delayed", dtq.Submission{Payload: map[string]string{"do": "ok"}, Delay: 20 * time.Millisecond}, dtqtype.StatusSucceeded,
			[]string{"TASK_SUCCEEDED"}, []string{"TASK_PENDING", "TASK_QUEUED", "TASK_STARTED", "TASK_SUCCEEDED"}},
		{"permanent failure", dtq.Submission{Payload: map[string]string{"do": "fail"}}, dtqtype.StatusDeadLettered,
			[]string{"TASK_DEAD_LETTERED"}, []string{"TASK_QUEUED", "TASK_STARTED", "TASK_DEAD_LETTERED"}},
	}
	for _, tc := range cases {
		for _, q := range []string{"quiet", "loud"} {
			sub := tc.sub
			sub.Queue, sub.Type = q, "job"
			res, err := b.client.Submit(b.ctx, sub)
			require.NoError(t, err)
			ti, err := b.insp.WaitTask(b.ctx, res.TaskID, 20*time.Second)
			require.NoError(t, err)
			require.Equal(t, tc.status, ti.Status, "%s on %s", tc.name, q)
			want := tc.full
			if q == "quiet" {
				want = tc.outcomes
			}
			require.Equal(t, want, b.events(t, q, res.TaskID), "%s on %s", tc.name, q)
		}
	}
	info, err := b.insp.GetQueue(b.ctx, "quiet")
	require.NoError(t, err)
	require.NotNil(t, info.Limits)
	require.Equal(t, dtqtype.EventsOutcomes, info.Limits.Events, "the setting shows on the queue")
}

// TestEventDetailValidation: events takes "full" or "outcomes"; anything
// else is a *ValidationError naming the field, and events alone is a
// valid setting.
func TestEventDetailValidation(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	cases := []struct {
		events string
		field  string // "" = accepted
	}{
		{dtqtype.EventsOutcomes, ""},
		{dtqtype.EventsFull, ""},
		{"none", "events"},
		{"Outcomes", "events"},
		{"", "rate"}, // nothing set at all
	}
	for _, tc := range cases {
		err := b.admin(t).SetLimits(b.ctx, "v", dtqtype.QueueLimits{Events: tc.events})
		if tc.field == "" {
			require.NoError(t, err, tc.events)
			continue
		}
		var ve *dtq.ValidationError
		require.ErrorAs(t, err, &ve, tc.events)
		require.Equal(t, tc.field, ve.Field, tc.events)
	}
}
