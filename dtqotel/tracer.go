package dtqotel

import (
	"os"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/dtq-io/dtq"
)

// Span names.
const (
	// SubmitSpan is the producer span around one submission.
	SubmitSpan = "dtq.submit"
	// WaitSpan covers a task's time in the queue, from its creation to the
	// start of its first attempt.
	WaitSpan = "dtq.wait"
	// ProcessSpan is the consumer span around one handler attempt.
	ProcessSpan = "dtq.process"
)

// Attribute keys set on the spans.
const (
	// AttrTaskID is the task's id: on dtq.submit once Submit has answered,
	// and on dtq.wait and dtq.process.
	AttrTaskID = attribute.Key("dtq.task.id")
	// AttrQueue is the task's queue.
	AttrQueue = attribute.Key("dtq.queue")
	// AttrTaskType is the task's type.
	AttrTaskType = attribute.Key("dtq.task.type")
	// AttrAttempt is the attempt number (1 for the first run), on
	// dtq.process.
	AttrAttempt = attribute.Key("dtq.task.attempt")
	// AttrDuplicate is true on a dtq.submit whose idempotency key replayed
	// an earlier task: that task's metadata, and so its trace, is the
	// earlier submission's.
	AttrDuplicate = attribute.Key("dtq.duplicate")
)

// scope names the instrumentation in the spans it creates.
const scope = "github.com/dtq-io/dtq/dtqotel"

// messagingSystem is OpenTelemetry's messaging.system attribute, which lets
// tracing back ends group producer and consumer spans.
var messagingSystem = attribute.String("messaging.system", "dtq")

// Config configures a Tracer. The zero value of every field selects the
// default given in its comment.
type Config struct {
	// TracerProvider creates the spans. Default otel.GetTracerProvider(),
	// the global provider (which does nothing until one is set).
	TracerProvider trace.TracerProvider
	// Propagator writes the trace context into a submission's metadata and
	// reads it back from the task's. Default propagation.TraceContext{}:
	// W3C metadata keys "traceparent" and "tracestate", the ones the HTTP
	// API fills from request headers. Producers and workers must agree.
	Propagator propagation.TextMapPropagator
	// MeterProvider creates the messaging metrics (see Metric names).
	// Default otel.GetMeterProvider(), the global provider.
	MeterProvider metric.MeterProvider
	// StabilityOptIn selects the span conventions, as the
	// OTEL_SEMCONV_STABILITY_OPT_IN environment variable does: a
	// comma-separated list in which "messaging" selects the messaging
	// semantic conventions' spans instead of dtq.submit, dtq.wait and
	// dtq.process, and "messaging/dup" selects both (it wins over
	// "messaging"). Default "": the environment variable's value, and
	// without one the dtq.* spans alone. A value naming neither (such as
	// "default") keeps the dtq.* spans whatever the variable says.
	StabilityOptIn string
}

// Tracer creates dtq's spans and carries the trace context through task
// metadata. It is safe for concurrent use.
type Tracer struct {
	tracer trace.Tracer
	prop   propagation.TextMapPropagator
	fields []string // the metadata keys prop reads
	conv   conventions
	inst   instruments
	// settles holds the attempts whose handler has returned until a worker
	// reports their outcome to an Observer of this Tracer.
	settles settleBook
}

// New returns a Tracer; cfg may be nil for every default. Nothing in it can
// fail, so it returns no error: an instrument the MeterProvider refuses is
// replaced by one that records nothing, and the provider's error handler
// (otel.Handle) is told.
func New(cfg *Config) *Tracer {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if c.TracerProvider == nil {
		c.TracerProvider = otel.GetTracerProvider()
	}
	if c.Propagator == nil {
		c.Propagator = propagation.TraceContext{}
	}
	if c.MeterProvider == nil {
		c.MeterProvider = otel.GetMeterProvider()
	}
	optIn := c.StabilityOptIn
	if optIn == "" {
		optIn = os.Getenv(StabilityOptInEnv)
	}
	return &Tracer{
		tracer: c.TracerProvider.Tracer(scope, trace.WithInstrumentationVersion(dtq.Version)),
		prop:   c.Propagator,
		fields: c.Propagator.Fields(),
		conv:   parseOptIn(optIn),
		inst:   newInstruments(c.MeterProvider.Meter(scope, metric.WithInstrumentationVersion(dtq.Version))),
	}
}
