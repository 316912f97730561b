// Package dtq is a distributed task queue on Redis: producers submit tasks
// with a Client, workers run them with handlers registered on a Worker, and
// an Inspector and an Admin read and steer what is queued. Delivery is
// at-least-once. Redis 7.0 or newer is required, run with
// maxmemory-policy noeviction; durability is Redis's (use AOF).
//
// Open takes any redis.UniversalClient from github.com/redis/go-redis/v9
// (a plain client, a Sentinel failover client or a Cluster client) and the
// deployment's settings, and returns the Deployment every role is made
// from. Processes coordinate only through Redis: run as many producers and
// workers as you need.
//
// # Submitting tasks
//
// Deployment.NewClient takes a *ClientConfig (nil selects every default).
// Submit validates a Submission and writes its task in one atomic script
// call:
//
//	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
//	d, err := dtq.Open(rdb, nil) // nil: every deployment setting's default
//	if err != nil {
//		return err
//	}
//	c, err := d.NewClient(nil)
//	if err != nil {
//		return err
//	}
//	res, err := c.Submit(ctx, dtq.Submission{
//		Queue:          "emails",
//		Type:           "send_receipt",
//		Payload:        map[string]any{"order_id": 42},
//		IdempotencyKey: "order-42",
//	})
//
// res.TaskID names the task; res.Duplicate is true when the idempotency key
// replayed an earlier, finished task. Submissions can also carry a priority
// (0..9), a delay or run-at time, an expiry deadline, a timeout and a cap on
// attempts; SubmitBatch sends many in few round trips.
//
// # Running tasks
//
// Deployment.NewWorker takes the queues it serves with their weights. Register a
// handler per task type, then run it until SIGTERM or SIGINT with
// RunUntilSignal (or until a context ends with Run), which drains
// gracefully: running tasks get WorkerConfig.DrainTimeout to finish, the
// rest are handed back to the queue:
//
//	w, err := d.NewWorker(&dtq.WorkerConfig{Queues: map[string]int{"emails": 1}, Concurrency: 16})
//	if err != nil {
//		return err
//	}
//	w.HandleFunc("send_receipt", sendReceipt)
//	return w.RunUntilSignal(ctx)
//
// Only workers that serve a queue run or promote its tasks: a task on a
// queue no worker serves waits until one does.
//
// # Handlers
//
// Handlers are shaped like net/http's: a Handler interface with one method,
// ProcessTask, the HandlerFunc adapter, a ServeMux keyed by task type (a
// Worker embeds one) and Middleware wrapped around handlers with Use. Typed
// decodes the JSON payload into a struct first, and fails the task
// permanently when it does not decode:
//
//	type receipt struct {
//		OrderID int `json:"order_id"`
//	}
//	w.Handle("send_receipt", dtq.Typed(func(ctx context.Context, t *dtq.Task, p receipt) (any, error) {
//		return map[string]any{"sent": true}, send(ctx, p.OrderID)
//	}))
//
// A handler's context ends at the task's timeout, on a cancel request, when
// the worker loses the task's lease and at shutdown; a handler should return
// promptly then. The result is stored as JSON.
//
// # Errors and retries
//
// A handler's error is retried with exponential backoff and jitter until the
// task's attempts run out; then the task is dead-lettered. Permanent(err)
// stops retrying at once, RetryAfter(d, err) sets the next delay, and an
// error with an ErrorClass() string method names the error_class shown to
// operators. A panic is a permanent failure.
//
// On the producer side, errors are matched with errors.Is and errors.As:
// ErrIdempotencyInProgress (the key's task has not finished: retry later),
// ErrIdempotencyKeyMismatch (the key was used for a different request),
// ErrQueueFull and *QueueFullError (back off; it carries the retry delay),
// *ValidationError (which field is wrong), ErrTaskNotFound, and so on.
//
// # Idempotency
//
// An IdempotencyKey makes a submission safe to retry: while the key's task
// is queued or running, a repeat is ErrIdempotencyInProgress; once it has
// finished, a repeat returns that task (Duplicate is true); nothing new is
// created either way. Keys are scoped to a queue.
//
// A handler, though, can run more than once for one task (a worker dies
// mid-task and the lease runs out). Side effects are the handler's to make
// idempotent; IdempotentOperation runs a function successfully at most once
// per key, and a repeat gets the stored result. Nothing in dtq makes side
// effects exactly-once.
//
// # Watching and steering
//
// Deployment.Inspector reads tasks (GetTask, ListTasks, WaitTask, which
// waits until a task finishes), queues, workers, the dead-letter queue and
// per-minute stats. Every list has one shape: it takes its params
// (ListTasks a *TaskListParams: filters, Cursor and Limit; nil means the
// defaults) and returns a *dtqtype.ListResult, one page of Items and the
// NextCursor to pass back as Cursor, "" on the last page.
// Deployment.NewAdmin cancels, re-runs and deletes tasks, pauses, resumes
// and purges queues, and requeues or discards dead letters. The dtq
// command serves the same over HTTP, with a dashboard and a CLI.
//
// # Deployment settings
//
// Some settings must be the same in every process of a deployment, Go or
// dtq api, producer, worker or operator: the key prefix, the streams' caps,
// the retentions, the idempotency TTL, the DLQ switch, the worker bound,
// replica acknowledgements and the clock. They are a DeploymentConfig,
// given once to Open, which applies the defaults and checks the ranges;
// every role made from the Deployment uses them, and each role's config
// (ClientConfig, WorkerConfig, WorkerGatewayConfig, AdminConfig,
// SchedulerConfig) holds only that role's own settings.
//
// # Testing handlers
//
// Package github.com/dtq-io/dtq/dtqtest runs a handler on a task built in
// memory, without Redis or a worker, and tells how its error would steer
// the task:
//
//	t := dtqtest.NewTask("send_receipt", map[string]any{"order_id": 42})
//	result, err := dtqtest.Run(ctx, handler, t)
//	// dtq.IsPermanent(err) says whether it would be retried.
//
// Shared result and state types live in github.com/dtq-io/dtq/dtqtype. The
// repository's docs/ directory explains the design, the Redis layout, the
// HTTP API and operations.
package dtq
