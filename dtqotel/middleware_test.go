package dtqotel_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/dtqotel"
	"github.com/dtq-io/dtq/dtqtest"
)

// remoteParent is a span context as a producer elsewhere would send it.
var remoteParent = trace.NewSpanContext(trace.SpanContextConfig{
	TraceID:    trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
	SpanID:     trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
	TraceFlags: trace.FlagsSampled,
	Remote:     true,
})

// carrying returns metadata carrying sc, as Inject writes it.
func carrying(t *testing.T, sc trace.SpanContext, extra any) json.RawMessage {
	t.Helper()
	s := dtq.Submission{Metadata: extra}
	require.NoError(t, dtqotel.New(nil).Inject(trace.ContextWithSpanContext(context.Background(), sc), &s))
	return s.Metadata.(json.RawMessage)
}

func TestInject(t *testing.T) {
	t.Parallel()
	ts, err := trace.ParseTraceState("vendor=opaque")
	require.NoError(t, err)
	sc := remoteParent.WithTraceState(ts)
	tp := traceparent(sc)
	ctx := trace.ContextWithSpanContext(context.Background(), sc)
	type meta struct {
		Tenant string `json:"tenant"`
	}
	for _, tc := range []struct {
		name     string
		metadata any
		want     string // "" wants an error, metadata unchanged
	}{
		{name: "nil", want: `{"traceparent":"` + tp + `","tracestate":"vendor=opaque"}`},
		{name: "null", metadata: []byte(" null "), want: `{"traceparent":"` + tp + `","tracestate":"vendor=opaque"}`},
		{name: "raw object", metadata: json.RawMessage(`{"z":[1,2],"a":{"b":true}}`),
			want: `{"a":{"b":true},"traceparent":"` + tp + `","tracestate":"vendor=opaque","z":[1,2]}`},
		{name: "struct", metadata: meta{Tenant: "x"},
			want: `{"tenant":"x","traceparent":"` + tp + `","tracestate":"vendor=opaque"}`},
		{name: "stale context replaced", metadata: map[string]string{"traceparent": "old", "tracestate": "old=1"},
			want: `{"traceparent":"` + tp + `","tracestate":"vendor=opaque"}`},
		{name: "array", metadata: json.RawMessage(`[1]`)},
		{name: "string", metadata: "x"},
		{name: "broken JSON", metadata: []byte(`{"a":`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := dtq.Submission{Metadata: tc.metadata}
			err := dtqotel.New(nil).Inject(ctx, &s)
			if tc.want == "" {
				require.Error(t, err)
				require.Equal(t, tc.metadata, s.Metadata)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, string(s.Metadata.(json.RawMessage)))
		})
	}

	// Without a span to carry, nothing is written.
	s := dtq.Submission{Metadata: map[string]any{"a": 1}}
	require.NoError(t, dtqotel.New(nil).Inject(context.Background(), &s))
	require.Equal(t, map[string]any{"a": 1}, s.Metadata)
}

func TestExtract(t *testing.T) {
	t.Parallel()
	tr := dtqotel.New(nil)
	for _, tc := range []struct {
		name     string
		metadata string
		want     trace.SpanContext // zero: ctx unchanged
	}{
		{name: "carried", metadata: string(carrying(t, remoteParent, map[string]any{"a": 1})), want: remoteParent},
		{name: "none", metadata: `{"a":1}`},
		{name: "empty", metadata: ``},
		{name: "not a string", metadata: `{"traceparent":5}`},
		{name: "malformed", metadata: `{"traceparent":"00-zz"}`},
		{name: "not JSON", metadata: `{"traceparent":`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			task := dtqtest.NewTask("echo", nil)
			task.Metadata = json.RawMessage(tc.metadata)
			got := trace.SpanContextFromContext(tr.Extract(context.Background(), task))
			require.Equal(t, tc.want, got)
		})
	}
}

// A task submitted without trace context gets a dtq.process span in a
// trace of its own, and no dtq.wait: it would have nothing to join.
func TestMiddlewareWithoutTraceContext(t *testing.T) {
	t.Parallel()
	b := newTracing(t)
	h := b.tracer.Middleware(dtq.HandlerFunc(func(ctx context.Context, task *dtq.Task) (any, error) {
		return "ok", nil
	}))
	res, err := dtqtest.Run(b.ctx, h, dtqtest.NewTask("echo", nil, dtqtest.Queue("q")))
	require.NoError(t, err)
	require.Equal(t, json.RawMessage(`"ok"`), res)
	p := b.one(t, dtqotel.ProcessSpan)
	require.False(t, p.Parent().IsValid())
	require.Empty(t, b.ended(dtqotel.WaitSpan))
}

// A handler's panic still ends its span, marked failed, and goes on to the
// worker, which fails the task.
func TestMiddlewarePanic(t *testing.T) {
	t.Parallel()
	b := newTracing(t)
	h := b.tracer.Middleware(dtq.HandlerFunc(func(context.Context, *dtq.Task) (any, error) { panic("boom") }))
	task := dtqtest.NewTask("echo", nil)
	task.Metadata = carrying(t, remoteParent, nil)
	require.PanicsWithValue(t, "boom", func() { _, _ = h.ProcessTask(b.ctx, task) })
	p := b.one(t, dtqotel.ProcessSpan)
	require.Equal(t, codes.Error, p.Status().Code)
	require.Equal(t, remoteParent.SpanID(), p.Parent().SpanID())
}

// A permanent failure is recorded on the span, and the error reaches the
// worker unchanged.
func TestMiddlewareRecordsError(t *testing.T) {
	t.Parallel()
	b := newTracing(t)
	failure := dtq.Permanent(errors.New("bad payload"))
	h := b.tracer.Middleware(dtq.HandlerFunc(func(context.Context, *dtq.Task) (any, error) { return nil, failure }))
	task := dtqtest.NewTask("echo", nil, dtqtest.Attempt(3))
	task.Metadata = carrying(t, remoteParent, nil)
	_, err := h.ProcessTask(b.ctx, task)
	require.Same(t, failure, err)
	p := b.one(t, dtqotel.ProcessSpan)
	require.Equal(t, codes.Error, p.Status().Code)
	require.Equal(t, "bad payload", p.Status().Description)
	require.Equal(t, int64(3), attrs(p)["dtq.task.attempt"])
	require.Empty(t, b.ended(dtqotel.WaitSpan), "only a first attempt has a dtq.wait")
}

// A creation time ahead of the worker's clock (clock skew between hosts)
// gives an empty dtq.wait, never one that ends before it starts.
func TestWaitSpanClockSkew(t *testing.T) {
	t.Parallel()
	b := newTracing(t)
	h := b.tracer.Middleware(dtq.HandlerFunc(func(context.Context, *dtq.Task) (any, error) { return nil, nil }))
	task := dtqtest.NewTask("echo", nil)
	task.Metadata = carrying(t, remoteParent, nil)
	task.CreatedAt = time.Now().Add(time.Hour)
	_, err := h.ProcessTask(b.ctx, task)
	require.NoError(t, err)
	w := b.one(t, dtqotel.WaitSpan)
	require.True(t, w.StartTime().Equal(w.EndTime()))
}
