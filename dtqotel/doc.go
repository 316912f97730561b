// Package dtqotel traces dtq tasks with OpenTelemetry, from the code that
// submits a task to the handler that runs it, and records the messaging
// metrics of OpenTelemetry's semantic conventions. It is a separate package
// so that programs importing only github.com/dtq-io/dtq do not link
// OpenTelemetry.
//
// The trace context travels in the task's metadata as W3C trace context:
// string members "traceparent" and "tracestate". A producer submits through
// Tracer.Submit, which opens a dtq.submit span and writes that span's
// context into the metadata; a worker wraps its handlers in
// Tracer.Middleware, which reads it back and runs each attempt in a
// dtq.process span, a child of dtq.submit, after a dtq.wait span covering
// the task's time in the queue. The HTTP API (POST /api/v1/tasks) copies a
// request's traceparent and tracestate headers into the metadata, so tasks
// submitted over HTTP by a traced caller join its trace the same way.
//
//	tr := dtqotel.New(&dtqotel.Config{TracerProvider: tp}) // nil: the global provider
//
//	// Producer: the span in ctx becomes dtq.submit's parent.
//	res, err := tr.Submit(ctx, client, dtq.Submission{Type: "send_receipt", Payload: p})
//
//	// Worker: every handler's attempts are traced, and their outcomes
//	// reported (Observer wraps another dtq.Observer, or nil).
//	w, err := d.NewWorker(&dtq.WorkerConfig{Observer: tr.Observer(nil)})
//	w.Use(tr.Middleware)
//
// A task submitted without a trace context gets a dtq.process span of its
// own trace.
//
// Those dtq.* spans are the default. OTEL_SEMCONV_STABILITY_OPT_IN=messaging
// (or Config.StabilityOptIn) switches to the spans of OpenTelemetry's
// messaging semantic conventions: a "send" span per call holding a "create"
// span per task (whose context the task carries), a "process" span per
// attempt linked to the task's create span, and an "ack" or "nack" settle
// span per outcome; "messaging/dup" emits both sets. The four messaging
// metrics (messaging.client.operation.duration,
// messaging.client.sent.messages, messaging.client.consumed.messages,
// messaging.process.duration) are recorded with Config.MeterProvider
// whatever the choice.
//
// dtqotel needs no exporter: spans and metrics go wherever the providers
// send them. The spans' names and attributes and the metrics are listed in
// the repository's docs/observability.md, "Tracing".
package dtqotel
