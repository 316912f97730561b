package dtqotel

import (
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/semconv/v1.43.0/messagingconv"
)

// StabilityOptInEnv is the environment variable that selects the span
// conventions when Config.StabilityOptIn is empty (see there).
const StabilityOptInEnv = "OTEL_SEMCONV_STABILITY_OPT_IN"

// System is the messaging.system value of dtq's spans and metrics. The
// conventions name no value for dtq, so it is dtq's own, as they allow.
const System = "dtq"

// Operation names (messaging.operation.name) of the messaging conventions'
// spans and metrics. A span is named after its operation and the queue:
// "send emails", "create emails", "process emails", "ack emails".
const (
	// OperationSend is one Submit or SubmitBatch call (operation type
	// "send").
	OperationSend = "send"
	// OperationCreate is one task of a submission (operation type
	// "create"); its span's context is the one the task carries.
	OperationCreate = "create"
	// OperationProcess is one handler attempt (operation type "process").
	OperationProcess = "process"
	// OperationAck settles an attempt that succeeded (operation type
	// "settle").
	OperationAck = "ack"
	// OperationNack settles an attempt that did not succeed: it failed, is
	// retried, was dead-lettered, was cancelled or was handed back
	// (operation type "settle").
	OperationNack = "nack"
)

// Attribute keys of the messaging conventions' spans that belong to dtq
// (the conventions put a system's own attributes under messaging.{system}).
const (
	// AttrMessagingTaskType is the task's type.
	AttrMessagingTaskType = attribute.Key("messaging.dtq.task.type")
	// AttrMessagingAttempt is the attempt number (1 for the first run), on
	// process and settle spans.
	AttrMessagingAttempt = attribute.Key("messaging.dtq.task.attempt")
	// AttrMessagingOutcome is what the attempt led to, on settle spans:
	// "succeeded", "retrying", "dead_lettered", "failed", "cancelled",
	// "handback", "lease_lost" or "error" (dtq.TaskEnd.Outcome).
	AttrMessagingOutcome = attribute.Key("messaging.dtq.task.outcome")
	// AttrMessagingDuplicate is true on a create span whose idempotency key
	// replayed an earlier task.
	AttrMessagingDuplicate = attribute.Key("messaging.dtq.duplicate")
)

// error.type values of settle spans whose outcome was not written.
const (
	// ErrorTypeLeaseLost: another worker owns the task.
	ErrorTypeLeaseLost = "lease_lost"
	// ErrorTypeFinalize: the outcome could not be written to Redis.
	ErrorTypeFinalize = "finalize_failed"
	// ErrorTypePanic is a process span's error.type when the handler
	// panicked.
	ErrorTypePanic = "panic"
)

// conventions is what a Tracer emits.
type conventions struct {
	legacy    bool // dtq.submit, dtq.wait, dtq.process
	messaging bool // the messaging semantic conventions' spans
}

// parseOptIn reads an OTEL_SEMCONV_STABILITY_OPT_IN value: "messaging"
// switches to the conventions' spans, "messaging/dup" emits both, and
// anything else (other categories, nothing) keeps the dtq.* spans.
func parseOptIn(v string) conventions {
	var messaging, dup bool
	for f := range strings.SplitSeq(v, ",") {
		switch strings.TrimSpace(f) {
		case "messaging":
			messaging = true
		case "messaging/dup":
			dup = true
		}
	}
	switch {
	case dup:
		return conventions{legacy: true, messaging: true}
	case messaging:
		return conventions{messaging: true}
	}
	return conventions{legacy: true}
}

// durationBuckets are the histogram boundaries, in seconds, the
// conventions advise for the messaging duration metrics.
var durationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}

// instruments are the four metrics of the messaging conventions.
type instruments struct {
	opDuration messagingconv.ClientOperationDuration // send and settle calls, seconds
	sent       messagingconv.ClientSentMessages      // tasks submitted
	consumed   messagingconv.ClientConsumedMessages  // attempts handed to a handler
	process    messagingconv.ProcessDuration         // handler run time, seconds
}

// newInstruments creates the metrics with m. An instrument m refuses is
// one that records nothing (messagingconv's answer), and the error goes to
// OpenTelemetry's error handler.
func newInstruments(m metric.Meter) instruments {
	var in instruments
	var err error
	report := func() {
		if err != nil {
			otel.Handle(err)
		}
	}
	in.opDuration, err = messagingconv.NewClientOperationDuration(m, metric.WithExplicitBucketBoundaries(durationBuckets...))
	report()
	in.sent, err = messagingconv.NewClientSentMessages(m)
	report()
	in.consumed, err = messagingconv.NewClientConsumedMessages(m)
	report()
	in.process, err = messagingconv.NewProcessDuration(m, metric.WithExplicitBucketBoundaries(durationBuckets...))
	report()
	return in
}

// system is messaging.system as the metrics take it.
const system = messagingconv.SystemAttr(System)

// spanName is the conventions' span name: the operation and the queue, or
// the operation alone when a batch spans several queues.
func spanName(op, queue string) string {
	if queue == "" {
		return op
	}
	return op + " " + queue
}

// opAttrs are the attributes every conventions span has: system,
// operation name and type, and the queue when there is one.
func opAttrs(op string, opType attribute.KeyValue, queue string) []attribute.KeyValue {
	kv := []attribute.KeyValue{semconv.MessagingSystemKey.String(System), semconv.MessagingOperationName(op), opType}
	if queue != "" {
		kv = append(kv, semconv.MessagingDestinationName(queue))
	}
	return append(kv, partitionAttrs(queue)...)
}

// partitionAttrs is messaging.destination.partition.id for a queue's
// partition. dtq's queues are not partitioned, so there is none to set: a
// partitioned queue will name its partition here, in spans and metrics.
func partitionAttrs(string) []attribute.KeyValue { return nil }

// errorType is error.type for err: its Go type, or the error's own
// ErrorType() string when it has one (semconv.ErrorType).
func errorType(err error) string { return semconv.ErrorType(err).Value.AsString() }
