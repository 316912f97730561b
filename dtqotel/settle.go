package dtqotel

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/dtq-io/dtq"
)

// Observer returns a dtq.Observer that tells t how the attempts its
// Middleware traced ended, and passes every call on to next (nil: none),
// so that it can wrap dtqprom's:
//
//	w, err := d.NewWorker(&dtq.WorkerConfig{Observer: tr.Observer(dtqprom.NewWorker(reg))})
//	w.Use(tr.Middleware)
//
// For each attempt it records the settle operation, the write of the
// attempt's outcome to Redis: the messaging.client.operation.duration
// metric, and with the messaging conventions an "ack {queue}" or
// "nack {queue}" span (client kind), a child of the attempt's process
// span, from the handler's return to the outcome's write.
func (t *Tracer) Observer(next dtq.Observer) dtq.Observer {
	if next == nil {
		next = nopObserver{}
	}
	return &observer{t: t, next: next}
}

// observer is Tracer.Observer's answer.
type observer struct {
	t    *Tracer
	next dtq.Observer
}

func (o *observer) Serving(queues, taskTypes []string) {
	o.t.settles.observed.Store(true)
	o.next.Serving(queues, taskTypes)
}

func (o *observer) TaskStarted(s dtq.TaskStart) { o.next.TaskStarted(s) }

func (o *observer) TaskFinished(e dtq.TaskEnd) {
	o.t.settle(&e)
	o.next.TaskFinished(e)
}

func (o *observer) Throttled(queue, reason string, n int) { o.next.Throttled(queue, reason, n) }

func (o *observer) FinalizeRetried(queue string) { o.next.FinalizeRetried(queue) }

// nopObserver is the next of an Observer given none.
type nopObserver struct{}

func (nopObserver) Serving([]string, []string)    {}
func (nopObserver) TaskStarted(dtq.TaskStart)     {}
func (nopObserver) TaskFinished(dtq.TaskEnd)      {}
func (nopObserver) Throttled(string, string, int) {}
func (nopObserver) FinalizeRetried(string)        {}

// settleKey names one attempt.
type settleKey struct {
	id      string
	attempt int
}

// pendingSettle is an attempt whose handler returned and whose outcome the
// worker has yet to report.
type pendingSettle struct {
	task     *dtq.Task
	returned time.Time         // when the handler returned: the settle's start
	handled  bool              // the handler succeeded
	process  trace.SpanContext // the process span: the settle span's parent
	creation trace.SpanContext // the task's creation context: linked
}

// maxPendingSettles bounds the attempts kept for their outcome: one whose
// outcome never comes (its worker stopped at the wrong moment) must not
// keep memory forever. Beyond it an attempt gets no settle.
const maxPendingSettles = 1 << 16

// settleBook holds the pending settles of a Tracer's attempts.
type settleBook struct {
	// observed is set once an Observer of the Tracer serves a worker: only
	// then does an outcome come to take what put keeps.
	observed atomic.Bool
	mu       sync.Mutex
	pending  map[settleKey]*pendingSettle
}

func (b *settleBook) put(k settleKey, p *pendingSettle) {
	if !b.observed.Load() {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.pending == nil {
		b.pending = map[settleKey]*pendingSettle{}
	}
	if len(b.pending) < maxPendingSettles {
		b.pending[k] = p
	}
}

func (b *settleBook) take(k settleKey) *pendingSettle {
	b.mu.Lock()
	defer b.mu.Unlock()
	p := b.pending[k]
	delete(b.pending, k)
	return p
}

// settle records the settle of the attempt e reports.
func (t *Tracer) settle(e *dtq.TaskEnd) {
	p := t.settles.take(settleKey{e.ID, e.Attempt})
	if p == nil {
		return // not traced by t's Middleware
	}
	now := time.Now()
	op, errType := OperationNack, ""
	switch e.Outcome {
	case "succeeded":
		op = OperationAck
	case "lease_lost", "error":
		if p.handled {
			op = OperationAck
		}
		errType = ErrorTypeFinalize
		if e.Outcome == "lease_lost" {
			errType = ErrorTypeLeaseLost
		}
	}
	kv := []attribute.KeyValue{semconv.MessagingOperationTypeSettle, semconv.MessagingDestinationName(e.Queue)}
	kv = append(kv, partitionAttrs(e.Queue)...)
	if errType != "" {
		kv = append(kv, semconv.ErrorTypeKey.String(errType))
	}
	ctx := context.Background()
	if p.process.IsValid() {
		ctx = trace.ContextWithSpanContext(ctx, p.process)
	}
	t.inst.opDuration.Record(ctx, now.Sub(p.returned).Seconds(), op, system, kv...)
	if !t.conv.messaging || !p.process.IsValid() {
		return
	}
	attrs := append(messageAttrs(op, semconv.MessagingOperationTypeSettle, p.task), AttrMessagingOutcome.String(e.Outcome))
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient), trace.WithTimestamp(p.returned),
		trace.WithAttributes(attrs...)}
	if p.creation.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: p.creation}))
	}
	_, span := t.tracer.Start(ctx, spanName(op, e.Queue), opts...)
	if errType != "" {
		span.SetAttributes(semconv.ErrorTypeKey.String(errType))
		span.SetStatus(codes.Error, "outcome not written: "+e.Outcome)
	}
	span.End(trace.WithTimestamp(now))
}
