package dtqotel

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/dtq-io/dtq"
)

// Extract returns ctx with the trace context that task's metadata carries
// (see Inject) as its remote parent span context. Metadata without one, or
// with a malformed one, gives ctx back unchanged.
func (t *Tracer) Extract(ctx context.Context, task *dtq.Task) context.Context {
	carrier := t.carrierOf(task.Metadata)
	if carrier == nil {
		return ctx
	}
	return t.prop.Extract(ctx, carrier)
}

// Middleware traces every attempt of the tasks next handles; pass it to
// Worker.Use or ServeMux.Use. By default each attempt runs in a dtq.process
// span (consumer kind), a child of the submitter's span when the task's
// metadata carries a trace context, with the task id, queue, type and
// attempt; the handler's error, or a panic, marks the span failed. The
// first attempt of a task that carries a trace context also gets a
// dtq.wait span, a sibling, from the task's creation to the handler's start
// (later attempts waited for their retry, which the task does not record).
// With the messaging conventions (Config.StabilityOptIn) the attempt runs
// in a "process {queue}" span (consumer kind) instead, or inside dtq.process
// with "messaging/dup", which links to the task's creation context and is
// its child. The handler's context carries the innermost span, so the
// handler's own spans are its children.
//
// The spans end when the handler returns, before the worker records the
// outcome in Redis: that write is the settle span, which a worker reports
// through an Observer of the same Tracer (see Tracer.Observer). Middleware
// records the metrics messaging.client.consumed.messages and
// messaging.process.duration whatever the conventions.
func (t *Tracer) Middleware(next dtq.Handler) dtq.Handler {
	return dtq.HandlerFunc(func(ctx context.Context, task *dtq.Task) (any, error) {
		parent := t.Extract(ctx, task)
		creation := t.creation(ctx, task)
		began := time.Now()
		hctx := parent
		var legacy, proc trace.Span
		if t.conv.legacy {
			t.wait(parent, task, began)
			lctx, span := t.tracer.Start(parent, ProcessSpan, trace.WithSpanKind(trace.SpanKindConsumer),
				trace.WithTimestamp(began), trace.WithAttributes(append(taskAttrs(task), AttrAttempt.Int(task.Attempt))...)) // ended below
			hctx, legacy = lctx, span
		}
		if t.conv.messaging {
			opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer), trace.WithTimestamp(began),
				trace.WithAttributes(messageAttrs(OperationProcess, semconv.MessagingOperationTypeProcess, task)...)}
			if creation.IsValid() {
				opts = append(opts, trace.WithLinks(trace.Link{SpanContext: creation}))
			}
			hctx, proc = t.tracer.Start(hctx, spanName(OperationProcess, task.Queue), opts...)
		}
		dest := append([]attribute.KeyValue{semconv.MessagingDestinationName(task.Queue)}, partitionAttrs(task.Queue)...)
		t.inst.consumed.Add(hctx, 1, OperationProcess, system, dest...)
		returned := false
		var herr error
		defer func() {
			ended := time.Now()
			errType := ""
			switch {
			case !returned: // a panic on its way to the worker, which fails the task
				errType = ErrorTypePanic
			case herr != nil:
				errType = errorType(herr)
			}
			for _, span := range []trace.Span{legacy, proc} {
				if span == nil {
					continue
				}
				switch {
				case !returned:
					span.SetStatus(codes.Error, "handler panicked")
				case herr != nil:
					span.RecordError(herr)
					span.SetStatus(codes.Error, herr.Error())
				}
			}
			if proc != nil && errType != "" {
				proc.SetAttributes(semconv.ErrorTypeKey.String(errType))
			}
			if proc != nil {
				proc.End(trace.WithTimestamp(ended))
			}
			if legacy != nil {
				legacy.End(trace.WithTimestamp(ended))
			}
			kv := dest
			if errType != "" {
				kv = append(slices.Clip(kv), semconv.ErrorTypeKey.String(errType))
			}
			t.inst.process.Record(hctx, ended.Sub(began).Seconds(), OperationProcess, system, kv...)
			p := pendingSettle{returned: ended, handled: returned && herr == nil, creation: creation, task: task}
			if proc != nil {
				p.process = proc.SpanContext()
			}
			t.settles.put(settleKey{task.ID, task.Attempt}, &p)
		}()
		res, err := next.ProcessTask(hctx, task)
		returned, herr = true, err
		return res, err
	})
}

// wait records the dtq.wait span of a first attempt that carries a trace
// context.
func (t *Tracer) wait(parent context.Context, task *dtq.Task, began time.Time) {
	attrs := taskAttrs(task)
	// Without a parent, dtq.wait would be a trace of its own: left out.
	if task.Attempt <= 1 && !task.CreatedAt.IsZero() && trace.SpanContextFromContext(parent).IsValid() {
		created := task.CreatedAt
		if created.After(began) {
			created = began // clocks differ between hosts: a wait never ends before it began
		}
		_, wait := t.tracer.Start(parent, WaitSpan, trace.WithSpanKind(trace.SpanKindInternal),
			trace.WithTimestamp(created), trace.WithAttributes(attrs...))
		wait.End(trace.WithTimestamp(began))
	}
}

// creation is the creation context task carries, or an invalid one: never
// a span of ctx's own.
func (t *Tracer) creation(ctx context.Context, task *dtq.Task) trace.SpanContext {
	carrier := t.carrierOf(task.Metadata)
	if carrier == nil {
		return trace.SpanContext{}
	}
	return trace.SpanContextFromContext(t.prop.Extract(trace.ContextWithSpanContext(ctx, trace.SpanContext{}), carrier))
}

// messageAttrs are the conventions attributes of a span about one attempt
// of task: its operation, queue, id, type, attempt, the workflow it belongs
// to (as the conversation) and the worker (as the client).
func messageAttrs(op string, opType attribute.KeyValue, task *dtq.Task) []attribute.KeyValue {
	kv := append(opAttrs(op, opType, task.Queue), semconv.MessagingMessageID(task.ID),
		AttrMessagingTaskType.String(task.Type), AttrMessagingAttempt.Int(task.Attempt))
	if task.WorkflowID != "" {
		kv = append(kv, semconv.MessagingMessageConversationID(task.WorkflowID))
	}
	if task.WorkerID != "" {
		kv = append(kv, semconv.MessagingClientID(task.WorkerID))
	}
	return kv
}

// carrierOf is what t's propagator reads from task metadata: the string
// members it names. Metadata that mentions none of them is not decoded.
func (t *Tracer) carrierOf(metadata []byte) propagation.MapCarrier {
	named := false
	for _, f := range t.fields {
		named = named || bytes.Contains(metadata, []byte(f))
	}
	if !named {
		return nil
	}
	var meta map[string]json.RawMessage
	if json.Unmarshal(metadata, &meta) != nil {
		return nil
	}
	carrier := propagation.MapCarrier{}
	for _, f := range t.fields {
		var v string
		if raw, ok := meta[f]; ok && json.Unmarshal(raw, &v) == nil {
			carrier[f] = v
		}
	}
	return carrier
}

// taskAttrs are the attributes of a task's worker-side spans.
func taskAttrs(task *dtq.Task) []attribute.KeyValue {
	return []attribute.KeyValue{messagingSystem, AttrTaskID.String(task.ID), AttrQueue.String(task.Queue),
		AttrTaskType.String(task.Type)}
}
