package dtqotel_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/dtqotel"
	"github.com/dtq-io/dtq/dtqtest"
)

// The switch reads OTEL_SEMCONV_STABILITY_OPT_IN's list: "messaging"
// replaces the dtq.* spans, "messaging/dup" (which wins) emits both, and
// anything else keeps the dtq.* spans.
func TestStabilityOptIn(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		optIn string
		want  []string // names of the spans of one handler attempt
	}{
		{optIn: "", want: []string{"dtq.process"}},
		{optIn: "http", want: []string{"dtq.process"}},
		{optIn: "messaging-x,Messaging", want: []string{"dtq.process"}},
		{optIn: "messaging", want: []string{"process q"}},
		{optIn: "http, messaging ", want: []string{"process q"}},
		{optIn: "messaging/dup", want: []string{"dtq.process", "process q"}},
		{optIn: "messaging,messaging/dup", want: []string{"dtq.process", "process q"}},
		{optIn: "messaging/dup,messaging", want: []string{"dtq.process", "process q"}},
	} {
		t.Run(tc.optIn, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, attemptSpans(t, newTracingConventions(t, tc.optIn)))
		})
	}
}

// Without Config.StabilityOptIn the environment variable decides.
func TestStabilityOptInEnvironment(t *testing.T) {
	t.Setenv(dtqotel.StabilityOptInEnv, "messaging")
	require.Equal(t, []string{"process q"}, attemptSpans(t, newTracingConventions(t, "")))
	// The Config's value wins over the variable.
	require.Equal(t, []string{"dtq.process", "process q"}, attemptSpans(t, newTracingConventions(t, "messaging/dup")))
	require.Equal(t, []string{"dtq.process"}, attemptSpans(t, newTracingConventions(t, "default")))
}

// attemptSpans runs one attempt through b's middleware and returns the
// names of the spans it ended, sorted.
func attemptSpans(t *testing.T, b *bundle) []string {
	t.Helper()
	h := b.tracer.Middleware(dtq.HandlerFunc(func(context.Context, *dtq.Task) (any, error) { return nil, nil }))
	_, err := dtqtest.Run(b.ctx, h, dtqtest.NewTask("echo", nil, dtqtest.Queue("q")))
	require.NoError(t, err)
	var names []string
	for _, s := range b.spans.Ended() {
		names = append(names, s.Name())
	}
	sort.Strings(names)
	return names
}

// A single task and a batch run through a worker with the messaging
// conventions: send and create spans on submission, a process span per
// attempt linked to the task's create span, an ack or nack span per
// outcome (success, retry, dead letter), and the four metrics.
func TestMessagingConventions(t *testing.T) {
	t.Parallel()
	b := setupConventions(t, "messaging")
	errRetry := dtq.RetryAfter(time.Millisecond, errors.New("not yet"))
	errBad := dtq.Permanent(errors.New("bad payload"))
	b.runWorkerMux(t, "q", map[string]dtq.HandlerFunc{
		"ok": func(context.Context, *dtq.Task) (any, error) { return nil, nil },
		"flaky": func(_ context.Context, task *dtq.Task) (any, error) {
			if task.Attempt == 1 {
				return nil, errRetry
			}
			return nil, nil
		},
		"bad": func(context.Context, *dtq.Task) (any, error) { return nil, errBad },
	})

	ctx, producer := b.startSpan("producer")
	one, err := b.tracer.Submit(ctx, b.client, dtq.Submission{Queue: "q", Type: "ok"})
	require.NoError(t, err)
	items, err := b.tracer.SubmitBatch(ctx, b.client, []dtq.Submission{{Queue: "q", Type: "flaky"},
		{Queue: "q", Type: "bad", MaxAttempts: 3}})
	producer.End()
	require.NoError(t, err)
	require.NoError(t, items[0].Err)
	require.NoError(t, items[1].Err)
	okID, flakyID, badID := one.TaskID, items[0].Result.TaskID, items[1].Result.TaskID

	acks, nacks := b.waitSpans(t, "ack q", 2), b.waitSpans(t, "nack q", 2)
	for _, legacy := range []string{dtqotel.SubmitSpan, dtqotel.WaitSpan, dtqotel.ProcessSpan} {
		require.Empty(t, b.ended(legacy), "the messaging conventions replace %s", legacy)
	}

	// Producer side: a send span per call, a create span per task inside it;
	// the task carries its create span's context.
	sends := b.ended("send q")
	require.Len(t, sends, 2)
	creates := byMessageID(b.ended("create q"))
	require.Len(t, creates, 3)
	for _, s := range sends {
		require.Equal(t, trace.SpanKindClient, s.SpanKind())
		require.Equal(t, producer.SpanContext().SpanID(), s.Parent().SpanID())
	}
	single, batch := sends[0], sends[1]
	if _, ok := attrs(single)["messaging.batch.message_count"]; ok {
		single, batch = batch, single
	}
	require.Equal(t, map[string]any{"messaging.system": "dtq", "messaging.operation.name": "send",
		"messaging.operation.type": "send", "messaging.destination.name": "q", "messaging.message.id": okID}, attrs(single))
	require.Equal(t, map[string]any{"messaging.system": "dtq", "messaging.operation.name": "send",
		"messaging.operation.type": "send", "messaging.destination.name": "q", "messaging.batch.message_count": int64(2)},
		attrs(batch))
	for send, ids := range map[sdktrace.ReadOnlySpan][]string{single: {okID}, batch: {flakyID, badID}} {
		var linked []trace.SpanContext
		for _, l := range send.Links() {
			linked = append(linked, l.SpanContext)
		}
		var want []trace.SpanContext
		for _, id := range ids {
			c := creates[id]
			require.Equal(t, send.SpanContext().SpanID(), c.Parent().SpanID(), "create inside its send")
			want = append(want, c.SpanContext())
		}
		require.ElementsMatch(t, want, linked, "a send links to the creation contexts it sent")
	}
	for id, typ := range map[string]string{okID: "ok", flakyID: "flaky", badID: "bad"} {
		c := creates[id]
		require.Equal(t, trace.SpanKindProducer, c.SpanKind())
		require.Equal(t, map[string]any{"messaging.system": "dtq", "messaging.operation.name": "create",
			"messaging.operation.type": "create", "messaging.destination.name": "q", "messaging.message.id": id,
			"messaging.dtq.task.type": typ, "messaging.dtq.duplicate": false}, attrs(c))
		require.Equal(t, traceparent(c.SpanContext()), b.metadata(t, id)["traceparent"])
	}

	// Consumer side: a process span per attempt, the child of its task's
	// create span and linked to it; an ack or nack span after each.
	processes := b.ended("process q")
	require.Len(t, processes, 4)
	settles := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	for _, s := range append(acks, nacks...) {
		settles[s.Parent().SpanID()] = s
	}
	type attempt struct {
		id       string
		n        int
		errType  string // on the process span
		op       string
		outcome  string
		typeName string
	}
	want := map[string]attempt{
		okID + "/1":    {id: okID, n: 1, op: "ack", outcome: "succeeded", typeName: "ok"},
		flakyID + "/1": {id: flakyID, n: 1, errType: errorTypeOf(errRetry), op: "nack", outcome: "retrying", typeName: "flaky"},
		flakyID + "/2": {id: flakyID, n: 2, op: "ack", outcome: "succeeded", typeName: "flaky"},
		badID + "/1":   {id: badID, n: 1, errType: errorTypeOf(errBad), op: "nack", outcome: "dead_lettered", typeName: "bad"},
	}
	for _, p := range processes {
		a := attrs(p)
		id := a["messaging.message.id"].(string)
		key := fmt.Sprintf("%s/%d", id, a["messaging.dtq.task.attempt"])
		w, ok := want[key]
		require.True(t, ok, "unexpected attempt %v", a)
		c := creates[id]
		require.Equal(t, trace.SpanKindConsumer, p.SpanKind())
		require.Equal(t, c.SpanContext().SpanID(), p.Parent().SpanID())
		require.True(t, p.Parent().IsRemote())
		require.Len(t, p.Links(), 1)
		require.Equal(t, c.SpanContext().SpanID(), p.Links()[0].SpanContext.SpanID())
		wantAttrs := map[string]any{"messaging.system": "dtq", "messaging.operation.name": "process",
			"messaging.operation.type": "process", "messaging.destination.name": "q", "messaging.message.id": id,
			"messaging.dtq.task.type": w.typeName, "messaging.dtq.task.attempt": int64(w.n), "messaging.client.id": a["messaging.client.id"]}
		require.NotEmpty(t, a["messaging.client.id"], "the worker's id")
		if w.errType != "" {
			wantAttrs["error.type"] = w.errType
			require.Equal(t, codes.Error, p.Status().Code)
		}
		require.Equal(t, wantAttrs, a)

		s, ok := settles[p.SpanContext().SpanID()]
		require.True(t, ok, "a settle span under each process span")
		require.Equal(t, w.op+" q", s.Name())
		require.Equal(t, trace.SpanKindClient, s.SpanKind())
		require.Equal(t, p.SpanContext().TraceID(), s.SpanContext().TraceID())
		require.Len(t, s.Links(), 1)
		require.Equal(t, c.SpanContext().SpanID(), s.Links()[0].SpanContext.SpanID())
		require.False(t, s.StartTime().Before(p.EndTime()), "the settle follows the handler")
		require.Equal(t, codes.Unset, s.Status().Code)
		sa := attrs(s)
		require.Equal(t, map[string]any{"messaging.system": "dtq", "messaging.operation.name": w.op,
			"messaging.operation.type": "settle", "messaging.destination.name": "q", "messaging.message.id": id,
			"messaging.dtq.task.type": w.typeName, "messaging.dtq.task.attempt": int64(w.n),
			"messaging.client.id": a["messaging.client.id"], "messaging.dtq.task.outcome": w.outcome}, sa)
		delete(want, key)
	}
	require.Empty(t, want, "attempts without a process span")

	// The four metrics, with their units and attributes.
	m := b.collect(t)
	base := func(op string, more ...attribute.KeyValue) attribute.Set {
		return attribute.NewSet(append(more, semconv.MessagingSystemKey.String("dtq"),
			semconv.MessagingOperationName(op), semconv.MessagingDestinationName("q"))...)
	}
	require.Equal(t, "{message}", m.unit["messaging.client.sent.messages"])
	require.Equal(t, map[attribute.Set]int64{base("send"): 3}, m.sums["messaging.client.sent.messages"])
	require.Equal(t, "{message}", m.unit["messaging.client.consumed.messages"])
	require.Equal(t, map[attribute.Set]int64{base("process"): 4}, m.sums["messaging.client.consumed.messages"])
	require.Equal(t, "s", m.unit["messaging.client.operation.duration"])
	require.Equal(t, map[attribute.Set]uint64{
		base("send", semconv.MessagingOperationTypeSend):   2,
		base("ack", semconv.MessagingOperationTypeSettle):  2,
		base("nack", semconv.MessagingOperationTypeSettle): 2,
	}, m.counts["messaging.client.operation.duration"])
	require.Equal(t, "s", m.unit["messaging.process.duration"])
	wantProcess := map[attribute.Set]uint64{base("process"): 2}
	wantProcess[base("process", semconv.ErrorTypeKey.String(errorTypeOf(errRetry)))]++
	wantProcess[base("process", semconv.ErrorTypeKey.String(errorTypeOf(errBad)))]++
	require.Equal(t, wantProcess, m.counts["messaging.process.duration"])
}

// A batch across queues has a send span without a queue; a task the
// client refuses fails its create span and counts as a sent message with
// error.type.
func TestMessagingBatchAcrossQueues(t *testing.T) {
	t.Parallel()
	b := setupConventions(t, "messaging")
	items, err := b.tracer.SubmitBatch(b.ctx, b.client, []dtq.Submission{
		{Queue: "a", Type: "echo"},
		{Queue: "b", Type: "echo", Metadata: json.RawMessage(`[1]`)}, // refused: not an object
	})
	require.NoError(t, err)
	require.NoError(t, items[0].Err)
	var ve *dtq.ValidationError
	require.ErrorAs(t, items[1].Err, &ve)

	send := b.one(t, "send")
	require.Equal(t, map[string]any{"messaging.system": "dtq", "messaging.operation.name": "send",
		"messaging.operation.type": "send", "messaging.batch.message_count": int64(2)}, attrs(send))
	require.Equal(t, codes.Unset, send.Status().Code, "the call succeeded")
	refused := b.one(t, "create b")
	require.Equal(t, codes.Error, refused.Status().Code)
	require.Equal(t, errorTypeOf(items[1].Err), attrs(refused)["error.type"])
	require.NotContains(t, attrs(refused), "messaging.message.id")
	require.Equal(t, items[0].Result.TaskID, attrs(b.one(t, "create a"))["messaging.message.id"])

	m := b.collect(t)
	sent := func(q string, more ...attribute.KeyValue) attribute.Set {
		return attribute.NewSet(append(more, semconv.MessagingSystemKey.String("dtq"),
			semconv.MessagingOperationName("send"), semconv.MessagingDestinationName(q))...)
	}
	require.Equal(t, map[attribute.Set]int64{
		sent("a"): 1,
		sent("b", semconv.ErrorTypeKey.String(errorTypeOf(items[1].Err))): 1,
	}, m.sums["messaging.client.sent.messages"])
	require.Equal(t, map[attribute.Set]uint64{
		attribute.NewSet(semconv.MessagingSystemKey.String("dtq"), semconv.MessagingOperationName("send"),
			semconv.MessagingOperationTypeSend): 1,
	}, m.counts["messaging.client.operation.duration"])
}

// With "messaging/dup" both conventions' spans are emitted, nested so one
// context travels in the task: send → dtq.submit → create on submission,
// dtq.process → process → ack on the worker.
func TestMessagingDup(t *testing.T) {
	t.Parallel()
	b := setupConventions(t, "messaging/dup")
	b.runWorker(t, "q", "echo", func(context.Context, *dtq.Task) (any, error) { return nil, nil })
	res, err := b.tracer.Submit(b.ctx, b.client, dtq.Submission{Queue: "q", Type: "echo"})
	require.NoError(t, err)
	ack := b.waitSpans(t, "ack q", 1)[0]

	send, submit, create := b.one(t, "send q"), b.one(t, dtqotel.SubmitSpan), b.one(t, "create q")
	wait, legacy, process := b.one(t, dtqotel.WaitSpan), b.one(t, dtqotel.ProcessSpan), b.one(t, "process q")
	require.False(t, send.Parent().IsValid())
	for _, c := range []struct{ child, parent sdktrace.ReadOnlySpan }{
		{submit, send}, {create, submit}, {wait, create}, {legacy, create}, {process, legacy}, {ack, process},
	} {
		require.Equal(t, c.parent.SpanContext().SpanID(), c.child.Parent().SpanID(), "%s under %s", c.child.Name(), c.parent.Name())
		require.Equal(t, send.SpanContext().TraceID(), c.child.SpanContext().TraceID())
	}
	require.Equal(t, create.SpanContext().SpanID(), process.Links()[0].SpanContext.SpanID())
	// The dtq.* spans keep their attributes.
	require.Equal(t, map[string]any{"messaging.system": "dtq", "dtq.queue": "q", "dtq.task.type": "echo",
		"dtq.task.id": res.TaskID, "dtq.duplicate": false}, attrs(submit))
	require.Equal(t, map[string]any{"messaging.system": "dtq", "dtq.queue": "q", "dtq.task.type": "echo",
		"dtq.task.id": res.TaskID, "dtq.task.attempt": int64(1)}, attrs(legacy))
}

// byMessageID indexes spans by messaging.message.id.
func byMessageID(spans []sdktrace.ReadOnlySpan) map[string]sdktrace.ReadOnlySpan {
	m := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		if id, ok := attrs(s)["messaging.message.id"].(string); ok {
			m[id] = s
		}
	}
	return m
}

// errorTypeOf is the error.type dtqotel reports for err.
func errorTypeOf(err error) string { return semconv.ErrorType(err).Value.AsString() }

// collected is what a metrics collection read: per metric, its unit, the
// counters' sums and the histograms' counts by attribute set.
type collected struct {
	unit   map[string]string
	sums   map[string]map[attribute.Set]int64
	counts map[string]map[attribute.Set]uint64
}

func (b *bundle) collect(t *testing.T) collected {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, b.metrics.Collect(b.ctx, &rm))
	c := collected{unit: map[string]string{}, sums: map[string]map[attribute.Set]int64{},
		counts: map[string]map[attribute.Set]uint64{}}
	for _, sm := range rm.ScopeMetrics {
		require.Equal(t, "github.com/dtq-io/dtq/dtqotel", sm.Scope.Name)
		for _, m := range sm.Metrics {
			c.unit[m.Name] = m.Unit
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				require.True(t, d.IsMonotonic, m.Name)
				c.sums[m.Name] = map[attribute.Set]int64{}
				for _, p := range d.DataPoints {
					c.sums[m.Name][p.Attributes] = p.Value
				}
			case metricdata.Histogram[float64]:
				c.counts[m.Name] = map[attribute.Set]uint64{}
				for _, p := range d.DataPoints {
					require.Equal(t, []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10},
						p.Bounds, m.Name)
					c.counts[m.Name][p.Attributes] = p.Count
				}
			default:
				t.Fatalf("%s: unexpected data %T", m.Name, m.Data)
			}
		}
	}
	return c
}

// A handler's panic gives its process span error.type "panic".
func TestMessagingPanic(t *testing.T) {
	t.Parallel()
	b := newTracingConventions(t, "messaging")
	h := b.tracer.Middleware(dtq.HandlerFunc(func(context.Context, *dtq.Task) (any, error) { panic("boom") }))
	task := dtqtest.NewTask("echo", nil, dtqtest.Queue("q"))
	task.Metadata = carrying(t, remoteParent, nil)
	require.PanicsWithValue(t, "boom", func() { _, _ = h.ProcessTask(b.ctx, task) })
	p := b.one(t, "process q")
	require.Equal(t, codes.Error, p.Status().Code)
	require.Equal(t, dtqotel.ErrorTypePanic, attrs(p)["error.type"])
	require.Equal(t, remoteParent, p.Links()[0].SpanContext)
}

// recordingObserver remembers the calls it was given.
type recordingObserver struct{ calls []string }

func (r *recordingObserver) Serving(q, _ []string) { r.calls = append(r.calls, "serving "+q[0]) }
func (r *recordingObserver) TaskStarted(s dtq.TaskStart) {
	r.calls = append(r.calls, "started "+s.Queue)
}
func (r *recordingObserver) TaskFinished(e dtq.TaskEnd) {
	r.calls = append(r.calls, "finished "+e.ID+" "+e.Outcome)
}
func (r *recordingObserver) Throttled(q, reason string, n int) {
	r.calls = append(r.calls, fmt.Sprintf("throttled %s %s %d", q, reason, n))
}
func (r *recordingObserver) FinalizeRetried(q string) {
	r.calls = append(r.calls, "finalize retried "+q)
}

// Tracer.Observer passes every call on to the Observer it wraps.
func TestObserverPassesOn(t *testing.T) {
	t.Parallel()
	rec := &recordingObserver{}
	o := dtqotel.New(nil).Observer(rec)
	o.Serving([]string{"q"}, []string{"echo"})
	o.TaskStarted(dtq.TaskStart{Queue: "q"})
	o.TaskFinished(dtq.TaskEnd{ID: "t1", Queue: "q", Outcome: "succeeded"})
	o.Throttled("q", "rate", 2)
	o.FinalizeRetried("q")
	require.Equal(t, []string{"serving q", "started q", "finished t1 succeeded", "throttled q rate 2",
		"finalize retried q"}, rec.calls)
}
