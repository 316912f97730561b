// Package dtqotel traces dtq tasks with OpenTelemetry, from the code that
// submits a task to the handler that runs it. It is a separate package so
// that programs importing only github.com/dtq-io/dtq do not link
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
//	// Worker: every handler's attempts are traced.
//	w.Use(tr.Middleware)
//
// A task submitted without a trace context gets a dtq.process span of its
// own trace. dtqotel needs no exporter: spans go wherever the
// TracerProvider sends them. The
// spans' names and attributes are listed in the repository's
// docs/observability.md, "Tracing".
package dtqotel
