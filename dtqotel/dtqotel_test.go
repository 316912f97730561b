package dtqotel_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/dtqotel"
)

// traceparent is the W3C header value for sc.
func traceparent(sc trace.SpanContext) string {
	return fmt.Sprintf("00-%s-%s-%s", sc.TraceID(), sc.SpanID(), sc.TraceFlags())
}

// One trace runs from the producer's span through dtq.submit to dtq.wait
// and dtq.process in a running worker, and on into the handler's context.
func TestTraceFromSubmitToHandler(t *testing.T) {
	t.Parallel()
	b := setup(t)
	type seen struct {
		span     trace.SpanContext
		metadata map[string]any
	}
	handled := make(chan seen, 1)
	b.runWorker(t, "q", "echo", func(ctx context.Context, task *dtq.Task) (any, error) {
		var m map[string]any
		if err := json.Unmarshal(task.Metadata, &m); err != nil {
			return nil, err
		}
		handled <- seen{trace.SpanContextFromContext(ctx), m}
		return nil, nil
	})

	ctx, producer := b.startSpan("producer")
	meta := map[string]any{"tenant": "a"}
	res, err := b.tracer.Submit(ctx, b.client, dtq.Submission{Queue: "q", Type: "echo", Metadata: meta})
	producer.End()
	require.NoError(t, err)
	require.Equal(t, map[string]any{"tenant": "a"}, meta, "the caller's metadata is not modified")

	process := b.waitSpans(t, dtqotel.ProcessSpan, 1)[0]
	var h seen
	select {
	case h = <-handled:
	case <-time.After(10 * time.Second):
		t.Fatal("the handler did not run")
	}
	submit, wait := b.one(t, dtqotel.SubmitSpan), b.one(t, dtqotel.WaitSpan)
	traceID := producer.SpanContext().TraceID()

	require.Equal(t, traceID, submit.SpanContext().TraceID())
	require.Equal(t, producer.SpanContext().SpanID(), submit.Parent().SpanID())
	require.Equal(t, trace.SpanKindProducer, submit.SpanKind())
	require.Equal(t, map[string]any{"messaging.system": "dtq", "dtq.queue": "q", "dtq.task.type": "echo",
		"dtq.task.id": res.TaskID, "dtq.duplicate": false}, attrs(submit))

	// The task carries dtq.submit's context; the handler sees dtq.process's.
	require.Equal(t, map[string]any{"tenant": "a", "traceparent": traceparent(submit.SpanContext())}, h.metadata)
	require.Equal(t, process.SpanContext(), h.span)

	require.Equal(t, traceID, process.SpanContext().TraceID())
	require.Equal(t, submit.SpanContext().SpanID(), process.Parent().SpanID())
	require.True(t, process.Parent().IsRemote())
	require.Equal(t, trace.SpanKindConsumer, process.SpanKind())
	require.Equal(t, codes.Unset, process.Status().Code)
	require.Equal(t, map[string]any{"messaging.system": "dtq", "dtq.queue": "q", "dtq.task.type": "echo",
		"dtq.task.id": res.TaskID, "dtq.task.attempt": int64(1)}, attrs(process))

	// dtq.wait runs from the task's creation to the handler's start.
	task, err := b.insp.GetTask(b.ctx, res.TaskID)
	require.NoError(t, err)
	require.Equal(t, traceID, wait.SpanContext().TraceID())
	require.Equal(t, submit.SpanContext().SpanID(), wait.Parent().SpanID())
	require.True(t, wait.StartTime().Equal(task.CreatedAt.Time), "%v != %v", wait.StartTime(), task.CreatedAt.Time)
	require.True(t, wait.EndTime().Equal(process.StartTime()))
	require.Equal(t, res.TaskID, attrs(wait)["dtq.task.id"])
}

// A failed attempt marks its dtq.process span failed; the retry gets a
// span of its own under the same dtq.submit, and no second dtq.wait.
func TestRetriedTaskTracesEachAttempt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.runWorker(t, "q", "flaky", func(ctx context.Context, task *dtq.Task) (any, error) {
		if task.Attempt == 1 {
			return nil, dtq.RetryAfter(time.Millisecond, errors.New("not yet"))
		}
		return nil, nil
	})
	res, err := b.tracer.Submit(b.ctx, b.client, dtq.Submission{Queue: "q", Type: "flaky"})
	require.NoError(t, err)

	attempts := b.waitSpans(t, dtqotel.ProcessSpan, 2)
	submit := b.one(t, dtqotel.SubmitSpan)
	require.False(t, submit.Parent().IsValid(), "no span in ctx: dtq.submit starts the trace")
	for i, p := range attempts {
		require.Equal(t, submit.SpanContext().TraceID(), p.SpanContext().TraceID())
		require.Equal(t, submit.SpanContext().SpanID(), p.Parent().SpanID())
		require.Equal(t, int64(i+1), attrs(p)["dtq.task.attempt"])
		require.Equal(t, res.TaskID, attrs(p)["dtq.task.id"])
	}
	require.Equal(t, codes.Error, attempts[0].Status().Code)
	require.Equal(t, "not yet", attempts[0].Status().Description)
	require.Len(t, attempts[0].Events(), 1)
	require.Equal(t, "exception", attempts[0].Events()[0].Name)
	require.Equal(t, codes.Unset, attempts[1].Status().Code)
	require.Len(t, b.ended(dtqotel.WaitSpan), 1)
}

// Each task of a batch gets its own dtq.submit span, and carries it.
func TestSubmitBatchSpanPerTask(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx, producer := b.startSpan("producer")
	subs := []dtq.Submission{
		{Queue: "a", Type: "echo"},
		{Queue: "b", Type: "echo", Metadata: json.RawMessage(`{"n":1}`)},
		{Queue: "a", Type: ""}, // invalid: no type
	}
	items, err := b.tracer.SubmitBatch(ctx, b.client, subs)
	producer.End()
	require.NoError(t, err)
	require.Len(t, items, 3)
	require.Nil(t, subs[0].Metadata, "the caller's submissions are not modified")

	spans := b.ended(dtqotel.SubmitSpan)
	require.Len(t, spans, 3)
	byID := map[string]int{}
	for i, s := range spans {
		require.Equal(t, producer.SpanContext().SpanID(), s.Parent().SpanID())
		if id, ok := attrs(s)["dtq.task.id"].(string); ok {
			byID[id] = i
		}
	}
	for i, it := range items[:2] {
		require.NoError(t, it.Err)
		s := spans[byID[it.Result.TaskID]]
		require.Equal(t, subs[i].Queue, attrs(s)["dtq.queue"])
		require.Equal(t, traceparent(s.SpanContext()), b.metadata(t, it.Result.TaskID)["traceparent"])
	}
	require.Equal(t, 1.0, b.metadata(t, items[1].Result.TaskID)["n"])
	require.Error(t, items[2].Err)
	var failed int
	for _, s := range spans {
		if s.Status().Code == codes.Error {
			failed++
		}
	}
	require.Equal(t, 1, failed)
}

// metadata returns the stored task's metadata.
func (b *bundle) metadata(t *testing.T, id string) map[string]any {
	t.Helper()
	task, err := b.insp.GetTask(b.ctx, id)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(task.Metadata, &m))
	return m
}

// A submission the client refuses records the error on dtq.submit and
// returns the client's own error.
func TestSubmitRecordsError(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, err := b.tracer.Submit(b.ctx, b.client, dtq.Submission{Type: "echo", Metadata: json.RawMessage(`[1]`)})
	var ve *dtq.ValidationError
	require.ErrorAs(t, err, &ve)
	require.Equal(t, "metadata", ve.Field)
	s := b.one(t, dtqotel.SubmitSpan)
	require.Equal(t, codes.Error, s.Status().Code)
	require.NotContains(t, attrs(s), "dtq.task.id")
	require.Equal(t, "default", attrs(s)["dtq.queue"])
}
