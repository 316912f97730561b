package dtqotel

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/dtq-io/dtq"
)

// Submit submits s with c and traces it, as the conventions chosen in
// Config.StabilityOptIn say. By default: a dtq.submit span (producer kind),
// a child of ctx's span, whose context the task carries to its handler in
// the metadata (see Inject); the span has the queue and task type, and the
// task id once c answers; an error is recorded on it. With the messaging
// conventions: a "send {queue}" span (client kind) around the call and,
// inside it, a "create {queue}" span (producer kind) whose context the task
// carries. Submit records the messaging metrics of a send either way, and
// returns what c.Submit returns; s's own Metadata value is not modified.
func (t *Tracer) Submit(ctx context.Context, c *dtq.Client, s dtq.Submission) (*dtq.SubmitResult, error) {
	ctx, p := t.startSend(ctx, []dtq.Submission{s}, false)
	res, err := c.Submit(ctx, p.subs[0])
	p.end(ctx, []dtq.BatchItem{{Result: res, Err: err}}, err)
	return res, err
}

// SubmitBatch submits subs with c.SubmitBatch and traces each task as
// Submit does: by default each in its own dtq.submit span, children of
// ctx's span; with the messaging conventions one "send" span for the batch
// (with messaging.batch.message_count, and the queue when all tasks share
// one) holding a "create" span per task. The spans last as long as the
// batch. subs are not modified.
func (t *Tracer) SubmitBatch(ctx context.Context, c *dtq.Client, subs []dtq.Submission) ([]dtq.BatchItem, error) {
	ctx, p := t.startSend(ctx, subs, true)
	items, err := c.SubmitBatch(ctx, p.subs)
	p.end(ctx, items, err)
	return items, err
}

// sending is one Submit or SubmitBatch call being traced.
type sending struct {
	t      *Tracer
	subs   []dtq.Submission
	queue  string     // the queue all subs share; "" when they differ
	send   trace.Span // nil without the messaging conventions
	legacy []trace.Span
	create []trace.Span
	batch  bool
	began  time.Time
}

// startSend starts the spans of submitting subs: it returns the context
// of the call (the send span's, or ctx) and the traced copies, each
// carrying the context of its innermost span.
func (t *Tracer) startSend(ctx context.Context, subs []dtq.Submission, batch bool) (context.Context, *sending) {
	p := &sending{t: t, subs: make([]dtq.Submission, len(subs)), batch: batch,
		legacy: make([]trace.Span, len(subs)), create: make([]trace.Span, len(subs))}
	for i := range subs {
		q := queueOf(&subs[i])
		if i == 0 {
			p.queue = q
		} else if q != p.queue {
			p.queue = ""
		}
	}
	if t.conv.messaging {
		kv := opAttrs(OperationSend, semconv.MessagingOperationTypeSend, p.queue)
		if batch {
			kv = append(kv, semconv.MessagingBatchMessageCount(len(subs)))
		}
		// Client kind: the task's creation context is its create span's.
		sctx, send := t.tracer.Start(ctx, spanName(OperationSend, p.queue), trace.WithSpanKind(trace.SpanKindClient),
			trace.WithAttributes(kv...)) // ended in end
		ctx, p.send = sctx, send
	}
	for i := range subs {
		p.subs[i] = subs[i]
		tctx := ctx
		if t.conv.legacy {
			lctx, span := t.tracer.Start(tctx, SubmitSpan, submitSpanOptions(&p.subs[i])...) // ended in end
			tctx, p.legacy[i] = lctx, span
		}
		if t.conv.messaging {
			q := queueOf(&subs[i])
			kv := append(opAttrs(OperationCreate, semconv.MessagingOperationTypeCreate, q), AttrMessagingTaskType.String(subs[i].Type))
			cctx, span := t.tracer.Start(tctx, spanName(OperationCreate, q), trace.WithSpanKind(trace.SpanKindProducer),
				trace.WithAttributes(kv...)) // ended in end
			tctx, p.create[i] = cctx, span
			p.send.AddLink(trace.LinkFromContext(tctx))
		}
		// Metadata that is not a JSON object is left as it is: the client
		// refuses it with its usual *dtq.ValidationError.
		_ = t.Inject(tctx, &p.subs[i])
	}
	p.began = time.Now()
	return ctx, p
}

// end ends the spans of a call that answered items and err, and records
// the call's metrics.
func (p *sending) end(ctx context.Context, items []dtq.BatchItem, err error) {
	took := time.Since(p.began).Seconds()
	for i := range p.subs {
		var res *dtq.SubmitResult
		ierr := err
		if err == nil && i < len(items) {
			res, ierr = items[i].Result, items[i].Err
		}
		if s := p.legacy[i]; s != nil {
			endSubmit(s, res, ierr)
			s.End()
		}
		if s := p.create[i]; s != nil {
			endMessaging(s, ierr)
			if ierr == nil && res != nil {
				s.SetAttributes(semconv.MessagingMessageID(res.TaskID), AttrMessagingDuplicate.Bool(res.Duplicate))
			}
			s.End()
		}
		kv := append([]attribute.KeyValue{semconv.MessagingDestinationName(queueOf(&p.subs[i]))}, partitionAttrs(queueOf(&p.subs[i]))...)
		if ierr != nil {
			kv = append(kv, semconv.ErrorTypeKey.String(errorType(ierr)))
		}
		p.t.inst.sent.Add(ctx, 1, OperationSend, system, kv...)
	}
	kv := []attribute.KeyValue{semconv.MessagingOperationTypeSend}
	if p.queue != "" {
		kv = append(kv, semconv.MessagingDestinationName(p.queue))
		kv = append(kv, partitionAttrs(p.queue)...)
	}
	if err != nil {
		kv = append(kv, semconv.ErrorTypeKey.String(errorType(err)))
	}
	p.t.inst.opDuration.Record(ctx, took, OperationSend, system, kv...)
	if p.send != nil {
		endMessaging(p.send, err)
		if !p.batch && err == nil && len(items) == 1 && items[0].Result != nil {
			p.send.SetAttributes(semconv.MessagingMessageID(items[0].Result.TaskID))
		}
		p.send.End()
	}
}

// endMessaging marks a conventions span failed with err: error.type, the
// error event and status.
func endMessaging(span trace.Span, err error) {
	if err == nil {
		return
	}
	span.SetAttributes(semconv.ErrorTypeKey.String(errorType(err)))
	span.RecordError(err)
	span.SetStatus(codes.Error, err.Error())
}

// queueOf is the queue s is submitted to.
func queueOf(s *dtq.Submission) string {
	if s.Queue == "" {
		return dtq.DefaultQueue
	}
	return s.Queue
}

// submitSpanOptions are the options of s's dtq.submit span.
func submitSpanOptions(s *dtq.Submission) []trace.SpanStartOption {
	return []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(messagingSystem, AttrQueue.String(queueOf(s)), AttrTaskType.String(s.Type))}
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
