package httpapi

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/dtqotel"
	"github.com/dtq-io/dtq/internal/workertest"
)

// A traced caller of the HTTP API sends traceparent; the API copies it
// into the task's metadata and the worker's dtq.process (dtqotel's
// middleware) joins the caller's trace, with no dtq.submit in between (the
// API makes no spans). The test lives here, not in dtqotel, because only
// code under cmd/dtq may import this package.
func TestHTTPSubmitJoinsCallersTrace(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	t.Cleanup(func() { require.NoError(t, tp.Shutdown(context.Background())) })
	ended := func(name string) []sdktrace.ReadOnlySpan {
		var out []sdktrace.ReadOnlySpan
		for _, s := range spans.Ended() {
			if s.Name() == name {
				out = append(out, s)
			}
		}
		return out
	}

	w, err := b.d.NewWorker(&dtq.WorkerConfig{
		Queues: map[string]int{"q": 1}, Concurrency: 4,
		VisibilityTimeout: 3 * time.Second, HeartbeatInterval: time.Second,
		RetryBaseDelay: 10 * time.Millisecond, RetryMaxDelay: 50 * time.Millisecond, DrainTimeout: 5 * time.Second,
		DisableScheduler: true, Logger: slog.New(slog.DiscardHandler),
	})
	require.NoError(t, err)
	w.Use(dtqotel.New(&dtqotel.Config{TracerProvider: tp}).Middleware)
	w.Handle("echo", dtq.HandlerFunc(func(context.Context, *dtq.Task) (any, error) { return nil, nil }))
	workertest.Run(t, w)

	ctx, caller := tp.Tracer("test").Start(b.ctx, "caller")
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.srv.URL+"/api/v1/tasks",
		strings.NewReader(`{"task_type":"echo","queue":"q"}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(req.Header))
	resp, err := b.srv.Client().Do(req)
	require.NoError(t, err)
	var body struct {
		TaskID string `json:"task_id"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusAccepted, resp.StatusCode)
	caller.End()

	var process []sdktrace.ReadOnlySpan
	require.Eventually(t, func() bool {
		process = ended(dtqotel.ProcessSpan)
		return len(process) >= 1
	}, 20*time.Second, 5*time.Millisecond, "waiting for the %s span", dtqotel.ProcessSpan)
	require.Len(t, process, 1)
	require.Equal(t, caller.SpanContext().TraceID(), process[0].SpanContext().TraceID())
	require.Equal(t, caller.SpanContext().SpanID(), process[0].Parent().SpanID())
	var taskID any
	for _, kv := range process[0].Attributes() {
		if kv.Key == "dtq.task.id" {
			taskID = kv.Value.AsInterface()
		}
	}
	require.Equal(t, body.TaskID, taskID)
	wait := ended(dtqotel.WaitSpan)
	require.Len(t, wait, 1)
	require.Equal(t, caller.SpanContext().SpanID(), wait[0].Parent().SpanID())
	require.Empty(t, ended(dtqotel.SubmitSpan))
}
