package dtqotel_test

import (
	"context"
	"log"

	"github.com/redis/go-redis/v9"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/dtqotel"
)

// A producer and a worker share one Tracer setup; the trace runs from the
// producer's span to the handler's.
func ExampleTracer() {
	log.Fatal(submitAndWork(context.Background()))
}

// submitAndWork returns rather than exiting so that its deferred Shutdown
// runs: log.Fatal inside it would drop the spans still buffered.
func submitAndWork(ctx context.Context) error {
	tp := sdktrace.NewTracerProvider() // add your exporter: sdktrace.WithBatcher(exp)
	defer func() { _ = tp.Shutdown(ctx) }()
	tr := dtqotel.New(&dtqotel.Config{TracerProvider: tp})

	d, err := dtq.Open(redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"}), nil)
	if err != nil {
		return err
	}
	client, err := d.NewClient(nil)
	if err != nil {
		return err
	}
	ctx, span := tp.Tracer("checkout").Start(ctx, "place order")
	res, err := tr.Submit(ctx, client, dtq.Submission{Queue: "emails", Type: "send_receipt",
		Payload: map[string]any{"order_id": 42}})
	span.End()
	if err != nil {
		return err
	}
	log.Println("submitted", res.TaskID)

	// The Observer reports each attempt's outcome: the settle span and metric.
	w, err := d.NewWorker(&dtq.WorkerConfig{Queues: map[string]int{"emails": 1}, Observer: tr.Observer(nil)})
	if err != nil {
		return err
	}
	w.Use(tr.Middleware)
	w.HandleFunc("send_receipt", func(ctx context.Context, t *dtq.Task) (any, error) {
		// ctx carries the dtq.process span: spans started here are its children.
		return nil, nil
	})
	return w.Run(ctx)
}
