package dtqotel_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/dtqotel"
	"github.com/dtq-io/dtq/internal/redistest"
	"github.com/dtq-io/dtq/internal/workertest"
)

// bundle is what a tracing test needs: a client and an inspector on a
// fresh key prefix, and a Tracer whose spans land in an in-memory recorder.
type bundle struct {
	ctx    context.Context
	d      *dtq.Deployment
	client *dtq.Client
	insp   *dtq.Inspector
	spans  *tracetest.SpanRecorder
	tp     *sdktrace.TracerProvider
	tracer *dtqotel.Tracer
	// metrics reads what the Tracer's MeterProvider recorded.
	metrics *sdkmetric.ManualReader
}

func setup(t *testing.T) *bundle {
	t.Helper()
	return setupConventions(t, "")
}

// setupConventions is setup with Config.StabilityOptIn set to optIn.
func setupConventions(t *testing.T, optIn string) *bundle {
	t.Helper()
	b := newTracingConventions(t, optIn)
	s := redistest.New(t)
	var err error
	b.d, err = dtq.Open(s.Client, &dtq.DeploymentConfig{KeyPrefix: s.Prefix})
	require.NoError(t, err)
	b.client, err = b.d.NewClient(nil)
	require.NoError(t, err)
	b.insp = b.d.Inspector()
	return b
}

// newTracing is a bundle without Redis, for tests of the middleware alone.
func newTracing(t *testing.T) *bundle {
	t.Helper()
	return newTracingConventions(t, "")
}

// newTracingConventions is newTracing with Config.StabilityOptIn set to
// optIn.
func newTracingConventions(t *testing.T, optIn string) *bundle {
	t.Helper()
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() {
		require.NoError(t, tp.Shutdown(context.Background()))
		require.NoError(t, mp.Shutdown(context.Background()))
	})
	return &bundle{ctx: context.Background(), spans: spans, tp: tp, metrics: reader,
		tracer: dtqotel.New(&dtqotel.Config{TracerProvider: tp, MeterProvider: mp, StabilityOptIn: optIn})}
}

// startSpan starts a span of the test's own, as the code around a
// submission would.
func (b *bundle) startSpan(name string) (context.Context, trace.Span) {
	return b.tp.Tracer("test").Start(b.ctx, name)
}

// runWorker runs a worker serving queue with h for taskType, wrapped in the
// tracing middleware; it is stopped when the test ends.
func (b *bundle) runWorker(t *testing.T, queue, taskType string, h dtq.HandlerFunc) {
	t.Helper()
	b.runWorkerMux(t, queue, map[string]dtq.HandlerFunc{taskType: h})
}

// runWorkerMux is runWorker with a handler per task type; the worker's
// Observer is the Tracer's, for the settle spans.
func (b *bundle) runWorkerMux(t *testing.T, queue string, handlers map[string]dtq.HandlerFunc) {
	t.Helper()
	w, err := b.d.NewWorker(&dtq.WorkerConfig{
		Queues: map[string]int{queue: 1}, Concurrency: 4,
		VisibilityTimeout: 3 * time.Second, HeartbeatInterval: time.Second,
		RetryBaseDelay: 10 * time.Millisecond, RetryMaxDelay: 50 * time.Millisecond, DrainTimeout: 5 * time.Second,
		DisableScheduler: true, Logger: slog.New(slog.DiscardHandler), Observer: b.tracer.Observer(nil),
	})
	require.NoError(t, err)
	w.Use(b.tracer.Middleware)
	for typ, h := range handlers {
		w.Handle(typ, h)
	}
	workertest.Run(t, w)
}

// waitSpans polls the recorder until n spans named name have ended, and
// returns them in the order they ended.
func (b *bundle) waitSpans(t *testing.T, name string, n int) []sdktrace.ReadOnlySpan {
	t.Helper()
	var got []sdktrace.ReadOnlySpan
	require.Eventually(t, func() bool {
		got = b.ended(name)
		return len(got) >= n
	}, 20*time.Second, 5*time.Millisecond, "waiting for %d %s spans", n, name)
	require.Len(t, got, n)
	return got
}

// ended returns the ended spans named name.
func (b *bundle) ended(name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range b.spans.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// one returns the one ended span named name.
func (b *bundle) one(t *testing.T, name string) sdktrace.ReadOnlySpan {
	t.Helper()
	spans := b.ended(name)
	require.Len(t, spans, 1, name)
	return spans[0]
}

// attrs returns a span's attributes as a map.
func attrs(s sdktrace.ReadOnlySpan) map[string]any {
	m := map[string]any{}
	for _, kv := range s.Attributes() {
		m[string(kv.Key)] = kv.Value.AsInterface()
	}
	return m
}
