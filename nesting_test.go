package dtq_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/internal/workertest"
)

// nested is a JSON object nesting depth levels: {"a":[[…]]}.
func nested(depth int) json.RawMessage {
	return json.RawMessage(`{"a":` + strings.Repeat("[", depth-1) + strings.Repeat("]", depth-1) + `}`)
}

// TestResultNestingBound: a Go handler's result nesting deeper than a
// payload may is dropped and flagged truncated, as an oversized one is,
// so that no dependant or reader decodes it; one at the bound is kept.
func TestResultNestingBound(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	w := b.worker(t, nil)
	w.HandleFunc("deep", func(_ context.Context, task *dtq.Task) (any, error) {
		var p struct{ Depth int }
		if err := json.Unmarshal(task.Payload, &p); err != nil {
			return nil, err
		}
		return nested(p.Depth), nil
	})
	workertest.Run(t, w)
	for _, tc := range []struct {
		depth int
		kept  bool
	}{{dtq.MaxJSONDepth, true}, {dtq.MaxJSONDepth + 1, false}, {4000, false}} {
		res, err := b.client.Submit(b.ctx, dtq.Submission{Type: "deep", Payload: map[string]any{"depth": tc.depth}})
		require.NoError(t, err)
		ti := b.waitStatus(t, res.TaskID, dtqtype.StatusSucceeded)
		if tc.kept {
			require.JSONEq(t, string(nested(tc.depth)), string(ti.Result), "depth %d", tc.depth)
			require.False(t, ti.ResultTruncated)
			continue
		}
		require.Nil(t, ti.Result, "depth %d", tc.depth)
		require.True(t, ti.ResultTruncated, "depth %d", tc.depth)
	}
}

// TestProgressNestingBound: a progress object nesting deeper than a
// payload may is refused, by Progress and by the HTTP workers' check.
func TestProgressNestingBound(t *testing.T) {
	t.Parallel()
	got, err := dtq.ProgressJSON(nested(dtq.MaxJSONDepth))
	require.NoError(t, err)
	require.Equal(t, string(nested(dtq.MaxJSONDepth)), string(got))
	for _, depth := range []int{dtq.MaxJSONDepth + 1, 2000} {
		_, err := dtq.ProgressJSON(nested(depth))
		require.ErrorIs(t, err, dtq.ErrInvalidProgress, "depth %d", depth)
		require.ErrorContains(t, err, "levels deep")
		r := dtq.ProgressReport{Progress: nested(depth)}
		var ve *dtq.ValidationError
		require.ErrorAs(t, r.Validate(), &ve)
		require.Equal(t, "progress", ve.Field)
	}
}
