package dtq_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/internal/redistest"
)

// exampleRedis starts a private redis-server for an example and returns a
// client of it and a function that stops both. A program would instead
// connect to its own Redis: redis.NewClient(&redis.Options{Addr: …}).
func exampleRedis() (*redis.Client, func()) {
	srv, err := redistest.Start()
	if err != nil {
		panic(err)
	}
	rc := redis.NewClient(&redis.Options{Addr: srv.Addr})
	return rc, func() {
		rc.Close()
		srv.Stop()
	}
}

// An idempotency key maps repeated submissions of the same work to one task.
// While the task is live, a repeat is told the key is in progress; once the
// task has finished, a repeat replays it; a key reused for other work is a
// mismatch.
func ExampleClient_Submit_idempotencyKey() {
	rc, stop := exampleRedis()
	defer stop()
	ctx := context.Background()

	d, err := dtq.Open(rc, nil) // the deployment's settings, every default
	if err != nil {
		panic(err)
	}
	client, err := d.NewClient(nil)
	if err != nil {
		panic(err)
	}
	sub := dtq.Submission{
		Queue:          "emails",
		Type:           "send_receipt",
		Payload:        map[string]any{"order_id": 42},
		IdempotencyKey: "receipt-42",
	}
	first, err := client.Submit(ctx, sub)
	if err != nil {
		panic(err)
	}
	fmt.Println("first:", first.Task.Status, "duplicate:", first.Duplicate)

	// No worker has run it yet: the key is in progress.
	_, err = client.Submit(ctx, sub)
	var conflict *dtq.IdempotencyConflictError
	if errors.As(err, &conflict) && errors.Is(err, dtq.ErrIdempotencyInProgress) {
		fmt.Println("again: in progress, same task:", conflict.TaskID == first.TaskID)
	}

	// A worker runs the task.
	worker, err := d.NewWorker(&dtq.WorkerConfig{
		Queues: map[string]int{"emails": 1},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		panic(err)
	}
	worker.HandleFunc("send_receipt", func(ctx context.Context, t *dtq.Task) (any, error) {
		return map[string]string{"receipt": "r-42"}, nil
	})
	runCtx, stopWorker := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- worker.RunUntilSignal(runCtx) }() // or stop it with SIGTERM
	if _, err := d.Inspector().WaitTask(ctx, first.TaskID, 30*time.Second); err != nil {
		panic(err)
	}
	stopWorker()
	if err := <-done; err != nil {
		panic(err)
	}

	// Now the same submission replays the finished task and its result.
	replay, err := client.Submit(ctx, sub)
	if err != nil {
		panic(err)
	}
	fmt.Println("replay:", replay.Task.Status, "duplicate:", replay.Duplicate,
		"same task:", replay.TaskID == first.TaskID, "result:", string(replay.Task.Result))

	// The same key for different work is refused.
	sub.Payload = map[string]any{"order_id": 43}
	_, err = client.Submit(ctx, sub)
	fmt.Println("other work:", errors.Is(err, dtq.ErrIdempotencyKeyMismatch))

	// Output:
	// first: queued duplicate: false
	// again: in progress, same task: true
	// replay: succeeded duplicate: true same task: true result: {"receipt":"r-42"}
	// other work: true
}

// Every list takes its params and returns one page with the cursor of the
// next; "" marks the last page. A cursor is opaque, and one list refuses
// another's.
func ExampleInspector_ListTasks() {
	rc, stop := exampleRedis()
	defer stop()
	d, err := dtq.Open(rc, nil)
	if err != nil {
		panic(err)
	}
	insp := d.Inspector()
	client, err := d.NewClient(nil)
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	for i := range 5 {
		if _, err := client.Submit(ctx, dtq.Submission{Queue: "emails", Type: "send", Payload: map[string]int{"n": i}}); err != nil {
			panic(err)
		}
	}

	params := &dtq.TaskListParams{Queue: "emails", Limit: 2}
	for page := 1; ; page++ {
		res, err := insp.ListTasks(ctx, params)
		if err != nil {
			panic(err)
		}
		fmt.Println("page", page, "tasks", len(res.Items), "more", res.NextCursor != "")
		if res.NextCursor == "" {
			break
		}
		params.Cursor = res.NextCursor
	}

	queues, err := insp.ListQueues(ctx, nil)
	if err != nil {
		panic(err)
	}
	fmt.Println("queues", len(queues.Items), queues.Items[0].Name, queues.Items[0].Depth)
	_, err = insp.ListQueues(ctx, &dtq.QueueListParams{Cursor: params.Cursor})
	fmt.Println("a task list's cursor given to the queue list:", errors.Is(err, dtq.ErrInvalidCursor))
	// Output:
	// page 1 tasks 2 more true
	// page 2 tasks 2 more true
	// page 3 tasks 1 more false
	// queues 1 emails 5
	// a task list's cursor given to the queue list: true
}

func ExampleValidQueueName() {
	for _, q := range []string{"default", "emails-eu_1", "Emails", "-low", "a{b}"} {
		fmt.Println(q, dtq.ValidQueueName(q))
	}
	// Output:
	// default true
	// emails-eu_1 true
	// Emails false
	// -low false
	// a{b} false
}
