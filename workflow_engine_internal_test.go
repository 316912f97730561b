package dtq

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq/internal/rdb"
	"github.com/dtq-io/dtq/internal/workflow/engine"
)

// TestOnFailureRefusedSaysWhy: an on_failure task the ingest refused is
// reported in words, a full queue as a full queue (ErrQueueFull), never
// as an outcome number.
func TestOnFailureRefusedSaysWhy(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		r    rdb.IngestResult
		want string
		is   error
	}{
		{"queue full", rdb.IngestResult{Outcome: rdb.QueueFull, Depth: 5},
			`dtq: workflow wf1: on_failure not submitted: queue "alerts" is full (5 live tasks, its depth limit): dtq: queue full`, ErrQueueFull},
		{"key mismatch", rdb.IngestResult{Outcome: rdb.Mismatch, TaskID: "t1"},
			"dtq: workflow wf1: on_failure not submitted: its idempotency key is held by task t1 of another request: " + ErrIdempotencyKeyMismatch.Error(),
			ErrIdempotencyKeyMismatch},
		{"reply lost", rdb.IngestResult{Outcome: rdb.Absent, Err: errors.New("timeout")},
			"dtq: workflow wf1: on_failure not submitted: its submission's reply was lost and it was not created: timeout", nil},
		{"deduplicated", rdb.IngestResult{Outcome: rdb.Deduplicated, TaskID: "t2"},
			"dtq: workflow wf1: on_failure not submitted: it was collapsed into task t2 by a dedup key", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := onFailureRefused("wf1", "alerts", tc.r)
			require.EqualError(t, err, tc.want)
			if tc.is != nil {
				require.ErrorIs(t, err, tc.is)
			}
		})
	}
}

// TestWorkflowEventTypesAreTheEnginesOwn: the event types the package
// documents are the ones its workflow engine emits.
func TestWorkflowEventTypesAreTheEnginesOwn(t *testing.T) {
	t.Parallel()
	require.Equal(t,
		[]string{engine.EventStarted, engine.EventSucceeded, engine.EventFailed, engine.EventCancelled},
		[]string{EventWorkflowStarted, EventWorkflowSucceeded, EventWorkflowFailed, EventWorkflowCancelled})
}
