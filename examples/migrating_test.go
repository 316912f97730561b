package examples_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/internal/redistest"
	"github.com/dtq-io/dtq/internal/workertest"
)

// emailPayload is the payload of the side-by-side handler in
// docs/migrating-from-asynq.md.
type emailPayload struct {
	To string `json:"to"`
}

// newMux builds handlers apart from any worker, as an asynq service builds
// its ServeMux; the worker then runs it (w.ServeMux = mux).
func newMux(sent chan<- string) *dtq.ServeMux {
	mux := dtq.NewServeMux()
	mux.Handle("email:send", dtq.Typed(func(ctx context.Context, t *dtq.Task, p emailPayload) (any, error) {
		if p.To == "" {
			return nil, dtq.Permanent(errors.New("no recipient")) // asynq.SkipRetry
		}
		sent <- p.To
		return map[string]string{"sent_to": p.To}, nil // asynq's ResultWriter
	}))
	mux.HandleFunc("report", func(context.Context, *dtq.Task) (any, error) { return nil, nil })
	return mux
}

// TestAsynqMappings runs each mapping of docs/migrating-from-asynq.md's
// tables against a real Redis, so the page cannot drift from the code.
func TestAsynqMappings(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	ctx := context.Background()
	d, err := dtq.Open(s.Client, &dtq.DeploymentConfig{KeyPrefix: s.Prefix}) // asynq's RedisClientOpt
	require.NoError(t, err)
	c, err := d.NewClient(nil)
	require.NoError(t, err)
	insp := d.Inspector()
	admin, err := d.NewAdmin(&dtq.AdminConfig{Client: c})
	require.NoError(t, err)

	get := func(id string) *dtqtype.TaskInfo {
		t.Helper()
		ti, err := insp.GetTask(ctx, id)
		require.NoError(t, err)
		return ti
	}
	submit := func(sub dtq.Submission) *dtqtype.TaskInfo {
		t.Helper()
		res, err := c.Submit(ctx, sub)
		require.NoError(t, err)
		return get(res.TaskID)
	}

	// Defaults differ: asynq's timeout is 30 min and MaxRetry 25 (26
	// attempts); dtq's are 30 s (at most 1 h) and 5 attempts (at most 10
	// unless DTQ_MAX_ATTEMPTS / ClientConfig.MaxAttempts raises the cap).
	plain := submit(dtq.Submission{Type: "email:send", Payload: emailPayload{To: "a@example.com"}})
	require.Equal(t, "default", plain.Queue)
	require.EqualValues(t, 30000, plain.TimeoutMS)
	require.Equal(t, 5, plain.MaxAttempts)
	_, err = c.Submit(ctx, dtq.Submission{Type: "email:send", MaxAttempts: 26})
	var ve *dtq.ValidationError
	require.ErrorAs(t, err, &ve, "asynq's MaxRetry(25) is 26 attempts: over the default cap")
	require.Equal(t, "max_attempts", ve.Field)
	_, err = c.Submit(ctx, dtq.Submission{Type: "email:send", Timeout: 2 * time.Hour})
	require.ErrorAs(t, err, &ve)
	require.Equal(t, "timeout_ms", ve.Field)
	wide, err := d.NewClient(&dtq.ClientConfig{MaxAttempts: 26})
	require.NoError(t, err)
	res, err := wide.Submit(ctx, dtq.Submission{Type: "email:send", MaxAttempts: 25 + 1})
	require.NoError(t, err)
	require.Equal(t, 26, get(res.TaskID).MaxAttempts)

	// Queue, MaxRetry, Timeout, Deadline, ProcessIn, ProcessAt, TaskID /
	// Unique, Retention.
	runAt := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	deadline := time.Now().Add(2 * time.Hour).Truncate(time.Millisecond)
	ti := submit(dtq.Submission{Queue: "critical", Type: "email:send", MaxAttempts: 3 + 1, Timeout: 10 * time.Minute,
		ExpiresAt: deadline, RunAt: runAt, IdempotencyKey: "welcome:42", Retention: 24 * time.Hour})
	require.Equal(t, "critical", ti.Queue)
	require.Equal(t, 4, ti.MaxAttempts)
	require.EqualValues(t, 600000, ti.TimeoutMS)
	require.Equal(t, deadline.UnixMilli(), ti.ExpiresAt.UnixMilli())
	require.Equal(t, runAt.UnixMilli(), ti.AvailableAt.UnixMilli())
	require.Equal(t, dtqtype.StatusPending, ti.Status)
	require.Equal(t, "welcome:42", *ti.IdempotencyKey)
	require.EqualValues(t, 86400, *ti.RetentionSeconds)
	dup, err := c.Submit(ctx, dtq.Submission{Queue: "critical", Type: "email:send", MaxAttempts: 4, Timeout: 10 * time.Minute,
		ExpiresAt: deadline, RunAt: runAt, IdempotencyKey: "welcome:42", Retention: 24 * time.Hour})
	require.ErrorIs(t, err, dtq.ErrIdempotencyInProgress, "a repeat while the first is live: %v", dup)
	delayed := submit(dtq.Submission{Type: "email:send", Delay: time.Minute})
	require.Equal(t, dtqtype.StatusPending, delayed.Status)
	require.Less(t, time.Until(delayed.AvailableAt.Time), time.Minute+time.Second)
	require.Equal(t, time.Duration(-1), dtq.NoRetention, "NoRetention keeps nothing; 0 means the workers' setting")
	none := submit(dtq.Submission{Type: "email:send", Retention: dtq.NoRetention})
	require.Zero(t, *none.RetentionSeconds)

	// Inspector and admin calls.
	_, err = admin.RunNow(ctx, delayed.ID) // inspector.RunTask
	require.NoError(t, err)
	cr, err := admin.CancelTask(ctx, ti.ID, "migrating") // inspector.CancelProcessing, for a task not started too
	require.NoError(t, err)
	require.Equal(t, dtqtype.StatusCancelled, cr.Task.Status)
	require.NoError(t, admin.DeleteTask(ctx, ti.ID))              // inspector.DeleteTask
	paused, err := admin.PauseQueue(ctx, "critical", "migrating") // inspector.PauseQueue
	require.NoError(t, err)
	require.True(t, paused)

	// Periodic tasks: asynq's Scheduler.Register("@every 30s", task) is a
	// schedule that the workers fire.
	sch, created, err := admin.PutSchedule(ctx, dtq.Schedule{Name: "nightly-report", Spec: "0 3 * * *", TaskType: "report"})
	require.NoError(t, err)
	require.True(t, created)
	require.Equal(t, "report", sch.TaskType)

	// A ServeMux built apart runs on a worker (asynq's srv.Run(mux)), with
	// asynq's Concurrency and ShutdownTimeout as Concurrency and DrainTimeout.
	sent := make(chan string, 8)
	w, err := d.NewWorker(&dtq.WorkerConfig{Concurrency: 4, DrainTimeout: 5 * time.Second,
		Queues: map[string]int{"default": 1}, RetryBaseDelay: 10 * time.Millisecond, RetryMaxDelay: 50 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	w.ServeMux = newMux(sent)
	workertest.Run(t, w)

	done, err := insp.WaitTask(ctx, plain.ID, 20*time.Second) // GetTaskInfo, waiting for the outcome
	require.NoError(t, err)
	require.Equal(t, dtqtype.StatusSucceeded, done.Status)
	require.JSONEq(t, `{"sent_to":"a@example.com"}`, string(done.Result))
	noTo := submit(dtq.Submission{Type: "email:send", Payload: emailPayload{}})
	failed, err := insp.WaitTask(ctx, noTo.ID, 20*time.Second)
	require.NoError(t, err)
	require.Equal(t, 1, failed.Attempt, "Permanent is never retried")
	require.Contains(t, []dtqtype.Status{dtqtype.StatusDeadLettered, dtqtype.StatusFailed}, failed.Status)
}
