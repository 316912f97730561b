package dtq_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/internal/workertest"
)

func (b *bundle) logLines(t *testing.T, id string, attempt int) []string {
	t.Helper()
	page, err := b.insp.TaskLogs(b.ctx, id, dtq.TaskLogsParams{Attempt: attempt, Limit: 1000})
	require.NoError(t, err)
	out := make([]string, 0, len(page.Items))
	for _, it := range page.Items {
		out = append(out, it.Line)
	}
	return out
}

// TestProgressAndLogsLandBeforeTheFinalize: what a handler reported and
// logged right before it returned is in Redis once the task succeeded
// (the last write is made before the finalize, not by the next tick).
func TestProgressAndLogsLandBeforeTheFinalize(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	w := b.worker(t, nil)
	w.HandleFunc("report", func(ctx context.Context, task *dtq.Task) (any, error) {
		if err := dtq.Progress(ctx, 40); err != nil {
			return nil, err
		}
		dtq.Logger(ctx).Info("step one", "n", 1)
		if err := dtq.Progress(ctx, map[string]any{"done": 3, "of": 4}); err != nil {
			return nil, err
		}
		dtq.Logger(ctx).With("part", "b").Warn("step two")
		return nil, nil
	})
	workertest.Run(t, w)
	res, err := b.client.Submit(b.ctx, dtq.Submission{Type: "report"})
	require.NoError(t, err)
	ti := b.waitStatus(t, res.TaskID, dtqtype.StatusSucceeded)
	require.JSONEq(t, `{"done":3,"of":4}`, string(ti.Progress), "the last value wins")
	require.NotNil(t, ti.ProgressAt)
	require.Equal(t, 1, ti.LogAttempts)
	require.Equal(t, []string{`level=INFO msg="step one" n=1`, `level=WARN msg="step two" part=b`}, b.logLines(t, res.TaskID, 0))
	page, err := b.insp.TaskLogs(b.ctx, res.TaskID, dtq.TaskLogsParams{})
	require.NoError(t, err)
	require.Equal(t, 1, page.Items[0].Attempt)
	require.False(t, page.Items[0].TS.IsZero())
}

// TestProgressWritesAreCoalesced: a handler reporting in a tight loop
// causes at most one write per second (each write of a progress emits
// one TASK_PROGRESS event), the last value wins and no line is lost.
func TestProgressWritesAreCoalesced(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	w := b.worker(t, nil)
	var tookNS atomic.Int64
	w.HandleFunc("busy", func(ctx context.Context, task *dtq.Task) (any, error) {
		began := time.Now()
		for i := 0; i <= 100; i++ {
			if err := dtq.Progress(ctx, i); err != nil {
				return nil, err
			}
			dtq.Logger(ctx).Info("tick", "i", i)
		}
		tookNS.Store(int64(time.Since(began)))
		return nil, nil
	})
	workertest.Run(t, w)
	res, err := b.client.Submit(b.ctx, dtq.Submission{Type: "busy"})
	require.NoError(t, err)
	ti := b.waitStatus(t, res.TaskID, dtqtype.StatusSucceeded)
	require.JSONEq(t, "100", string(ti.Progress))
	lines := b.logLines(t, res.TaskID, 1)
	require.Len(t, lines, 101)
	require.Equal(t, "level=INFO msg=tick i=100", lines[100])
	n := 0
	for _, e := range b.events(t, "default", res.TaskID) {
		if e == "TASK_PROGRESS" {
			n++
		}
	}
	// One write per whole second the handler ran, plus the tick that may
	// fall in a partial one, plus the last write before the finalize.
	took := time.Duration(tookNS.Load())
	bound := int(took/time.Second) + 2
	t.Logf("101 reports in %v: %d progress writes", took, n)
	require.GreaterOrEqual(t, n, 1)
	require.LessOrEqual(t, n, bound)
}

// TestLogCapKeepsTheNewestLines: past the worker's cap the oldest lines
// go, and the page starts with the marker.
func TestLogCapKeepsTheNewestLines(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	w := b.worker(t, func(c *dtq.WorkerConfig) { c.TaskLogLines = 3 })
	w.HandleFunc("chatty", func(ctx context.Context, task *dtq.Task) (any, error) {
		for i := range 10 {
			dtq.Logger(ctx).Info("line", "i", i)
		}
		dtq.Logger(ctx).Info(strings.Repeat("é", 2000)) // cut at 1 KiB, on a rune boundary
		return nil, nil
	})
	workertest.Run(t, w)
	res, err := b.client.Submit(b.ctx, dtq.Submission{Type: "chatty"})
	require.NoError(t, err)
	b.waitStatus(t, res.TaskID, dtqtype.StatusSucceeded)
	lines := b.logLines(t, res.TaskID, 1)
	require.Len(t, lines, 4)
	require.Equal(t, "[dtq: 8 earlier lines truncated]", lines[0])
	require.Equal(t, []string{"level=INFO msg=line i=8", "level=INFO msg=line i=9"}, lines[1:3])
	require.LessOrEqual(t, len(lines[3]), dtq.MaxLogLineBytes)
	require.True(t, strings.HasPrefix(lines[3], "level=INFO msg=é"))
	require.True(t, json.Valid([]byte(`"`+lines[3]+`"`)), "the cut line is valid UTF-8")
}

func TestProgressValues(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		v    any
		want string // "" = invalid
	}{
		{"int", 42, "42"},
		{"zero", 0, "0"},
		{"hundred", 100.0, "100"},
		{"fraction", 12.5, "12.5"},
		{"json number", json.Number("7"), "7"},
		{"object", map[string]int{"rows": 10}, `{"rows":10}`},
		{"raw object", json.RawMessage(` {"a": 1} `), `{"a":1}`},
		{"negative", -1, ""},
		{"over 100", 100.5, ""},
		{"string", "half", ""},
		{"array", []int{1}, ""},
		{"null", nil, ""},
		{"big object", map[string]string{"x": strings.Repeat("y", dtq.MaxProgressBytes)}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := dtq.ProgressJSON(tc.v)
			if tc.want == "" {
				require.ErrorIs(t, err, dtq.ErrInvalidProgress)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, string(got))
		})
	}
	require.ErrorIs(t, dtq.Progress(context.Background(), 5), dtq.ErrNotInHandler)
	require.NotNil(t, dtq.Logger(context.Background()))
}
