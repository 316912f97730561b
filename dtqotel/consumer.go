package dtqotel

import (
	"bytes"
	"context"
	"encoding/json"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
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
// Worker.Use or ServeMux.Use. Each attempt runs in a dtq.process span
// (consumer kind), a child of the submitter's span when the task's metadata
// carries a trace context, with the task id, queue, type and attempt; the
// handler's error, or a panic, marks the span failed. The first attempt of
// a task that carries a trace context also gets a dtq.wait span, a sibling,
// from the task's creation to the handler's start (later attempts waited
// for their retry, which the task does not record). The handler's context
// carries the dtq.process span, so the handler's own spans are its
// children.
//
// The spans end when the handler returns, before the worker records the
// outcome in Redis; that write has no span.
func (t *Tracer) Middleware(next dtq.Handler) dtq.Handler {
	return dtq.HandlerFunc(func(ctx context.Context, task *dtq.Task) (any, error) {
		parent := t.Extract(ctx, task)
		began := time.Now()
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
		ctx, span := t.tracer.Start(parent, ProcessSpan, trace.WithSpanKind(trace.SpanKindConsumer),
			trace.WithTimestamp(began), trace.WithAttributes(append(attrs, AttrAttempt.Int(task.Attempt))...))
		returned := false
		defer func() {
			if !returned { // a panic on its way to the worker, which fails the task
				span.SetStatus(codes.Error, "handler panicked")
			}
			span.End()
		}()
		res, err := next.ProcessTask(ctx, task)
		returned = true
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		return res, err
	})
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
