package dtqotel

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/dtq-io/dtq"
)

// Submit submits s with c inside a dtq.submit span (producer kind), a child
// of ctx's span, and carries that span's context to the task's handler in
// the metadata (see Inject). The span has the queue and task type, and the
// task id once c answers; an error is recorded on it. Submit returns what
// c.Submit returns; s's own Metadata value is not modified.
func (t *Tracer) Submit(ctx context.Context, c *dtq.Client, s dtq.Submission) (*dtq.SubmitResult, error) {
	ctx, span := t.tracer.Start(ctx, SubmitSpan, submitSpanOptions(&s)...)
	defer span.End()
	// Metadata that is not a JSON object is left as it is: Submit refuses
	// it with its usual *dtq.ValidationError.
	_ = t.Inject(ctx, &s)
	res, err := c.Submit(ctx, s)
	endSubmit(span, res, err)
	return res, err
}

// SubmitBatch submits subs with c.SubmitBatch, each in its own dtq.submit
// span as Submit does; the spans share ctx's span as parent and last as long
// as the batch. subs are not modified.
func (t *Tracer) SubmitBatch(ctx context.Context, c *dtq.Client, subs []dtq.Submission) ([]dtq.BatchItem, error) {
	traced := make([]dtq.Submission, len(subs))
	spans := make([]trace.Span, len(subs))
	for i := range subs {
		traced[i] = subs[i]
		sctx, span := t.tracer.Start(ctx, SubmitSpan, submitSpanOptions(&traced[i])...) // ended below, after the batch
		spans[i] = span
		_ = t.Inject(sctx, &traced[i])
	}
	items, err := c.SubmitBatch(ctx, traced)
	for i, span := range spans {
		switch {
		case err != nil:
			endSubmit(span, nil, err)
		case i < len(items):
			endSubmit(span, items[i].Result, items[i].Err)
		}
		span.End()
	}
	return items, err
}

// submitSpanOptions are the options of s's dtq.submit span.
func submitSpanOptions(s *dtq.Submission) []trace.SpanStartOption {
	queue := s.Queue
	if queue == "" {
		queue = dtq.DefaultQueue
	}
	return []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(messagingSystem, AttrQueue.String(queue), AttrTaskType.String(s.Type))}
}

func endSubmit(span trace.Span, res *dtq.SubmitResult, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
		return
	}
	if res != nil {
		span.SetAttributes(AttrTaskID.String(res.TaskID), AttrDuplicate.Bool(res.Duplicate))
	}
}

// errNotObject is Inject's answer for metadata that is not a JSON object.
var errNotObject = errors.New("dtqotel: metadata must be a JSON object")

// Inject writes the trace context of ctx's span into s.Metadata, as string
// members named by the propagator ("traceparent", "tracestate" by default),
// replacing members of those names; the other members are kept. Metadata of
// any form Submission accepts is turned into a json.RawMessage. When ctx has
// no span to carry, s is left as it is. Inject fails, leaving s as it was,
// when the metadata is not a JSON object. The members count towards the
// metadata's 4 KiB limit.
//
// Submit calls Inject; call it yourself to trace submissions made some
// other way.
func (t *Tracer) Inject(ctx context.Context, s *dtq.Submission) error {
	carrier := propagation.MapCarrier{}
	t.prop.Inject(ctx, carrier)
	if len(carrier) == 0 {
		return nil
	}
	meta, err := metadataObject(s.Metadata)
	if err != nil {
		return err
	}
	for k, v := range carrier {
		if meta[k], err = json.Marshal(v); err != nil {
			return err
		}
	}
	b, err := json.Marshal(meta)
	if err != nil {
		return err
	}
	s.Metadata = json.RawMessage(b)
	return nil
}

// metadataObject decodes metadata, in any form Submission.Metadata takes,
// into its members.
func metadataObject(v any) (map[string]json.RawMessage, error) {
	var raw []byte
	switch m := v.(type) {
	case nil:
	case json.RawMessage:
		raw = m
	case []byte:
		raw = m
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		raw = b
	}
	raw = bytes.TrimSpace(raw)
	meta := map[string]json.RawMessage{}
	if len(raw) == 0 || string(raw) == "null" {
		return meta, nil
	}
	if raw[0] != '{' || json.Unmarshal(raw, &meta) != nil {
		return nil, errNotObject
	}
	return meta, nil
}
