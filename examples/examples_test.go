package examples_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/dtqtest"
	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/examples"
	"github.com/dtq-io/dtq/internal/redistest"
	"github.com/dtq-io/dtq/internal/workertest"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

type bundle struct {
	ctx    context.Context
	rc     *redis.Client
	prefix string
	client *dtq.Client
	insp   *dtq.Inspector
}

// setup returns a client and inspector on a fresh key prefix and a running
// worker with the example handlers, stopped when the test ends.
func setup(t *testing.T) *bundle {
	t.Helper()
	s := redistest.New(t)
	d, err := dtq.Open(s.Client, &dtq.DeploymentConfig{KeyPrefix: s.Prefix})
	require.NoError(t, err)
	c, err := d.NewClient(nil)
	require.NoError(t, err)
	in := d.Inspector()
	w, err := d.NewWorker(&dtq.WorkerConfig{
		Concurrency: 8, VisibilityTimeout: 3 * time.Second, HeartbeatInterval: time.Second,
		RetryBaseDelay: 10 * time.Millisecond, RetryMaxDelay: 50 * time.Millisecond, DrainTimeout: 5 * time.Second,
		Logger: slog.New(slog.DiscardHandler),
	})
	require.NoError(t, err)
	examples.Register(w.ServeMux, d, s.Client)

	workertest.Run(t, w)
	return &bundle{ctx: context.Background(), rc: s.Client, prefix: s.Prefix, client: c, insp: in}
}

func (b *bundle) submit(t *testing.T, s dtq.Submission) string {
	t.Helper()
	res, err := b.client.Submit(b.ctx, s)
	require.NoError(t, err)
	return res.TaskID
}

// wait polls until the task is terminal and requires it ended as want.
func (b *bundle) wait(t *testing.T, id string, want dtqtype.Status) *dtqtype.TaskInfo {
	t.Helper()
	var last *dtqtype.TaskInfo
	require.Eventually(t, func() bool {
		ti, err := b.insp.GetTask(b.ctx, id)
		require.NoError(t, err)
		last = ti
		return ti.Status.Terminal()
	}, 20*time.Second, 10*time.Millisecond, "task %s never finished", id)
	require.Equal(t, want, last.Status, "task %s: %+v", id, last.Execution)
	return last
}

func TestRegisterTypes(t *testing.T) {
	t.Parallel()
	rc := redistest.New(t).Client
	d, err := dtq.Open(rc, nil)
	require.NoError(t, err)
	mux := dtq.NewServeMux()
	examples.Register(mux, d, rc)
	require.ElementsMatch(t, examples.Types, mux.Types())
	require.Panics(t, func() { examples.Register(mux, d, rc) }, "registering twice")
	require.Panics(t, func() { examples.Register(dtq.NewServeMux(), nil, rc) })
	require.Panics(t, func() { examples.Register(dtq.NewServeMux(), d, nil) })
}

func TestExamplesSucceed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cases := []struct {
		name    string
		typ     string
		payload string
		result  string
		attempt int
	}{
		{"echo", "echo", `{"hello":"world","n":[1,2.5]}`, `{"hello":"world","n":[1,2.5]}`, 1},
		{"echo empty", "echo", `{}`, `{}`, 1},
		{"sleep fraction", "sleep", `{"seconds":0.05}`, `{"seconds":0.05}`, 1},
		{"sleep zero", "sleep", `{"seconds":0}`, `{"seconds":0}`, 1},
		{"fibonacci 0", "fibonacci", `{"n":0}`, `{"n":0,"fib":0}`, 1},
		{"fibonacci 10", "fibonacci", `{"n":10}`, `{"n":10,"fib":55}`, 1},
		{"fibonacci 90", "fibonacci", `{"n":90}`, `{"n":90,"fib":2880067194370816120}`, 1},
		{"flaky none", "flaky", `{"fail_times":0}`, `{"attempt":1,"fail_times":0}`, 1},
		{"flaky twice", "flaky", `{"fail_times":2}`, `{"attempt":3,"fail_times":2}`, 3},
	}
	ids := make([]string, len(cases))
	for i, c := range cases {
		ids[i] = b.submit(t, dtq.Submission{Type: c.typ, Payload: json.RawMessage(c.payload), MaxAttempts: 5})
	}
	for i, c := range cases {
		ti := b.wait(t, ids[i], dtqtype.StatusSucceeded)
		require.JSONEq(t, c.result, string(ti.Result), c.name)
		require.Equal(t, c.attempt, ti.Attempt, c.name)
	}
}

func TestExamplesFail(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cases := []struct {
		name      string
		typ       string
		payload   string
		class     string
		retryable bool
		attempts  int
	}{
		{"always_fail", "always_fail", `{}`, "AlwaysFail", true, 2},
		{"flaky beyond attempts", "flaky", `{"fail_times":5}`, "FlakyFailure", true, 2},
		{"fibonacci too large", "fibonacci", `{"n":91}`, "InvalidPayload", false, 1},
		{"fibonacci negative", "fibonacci", `{"n":-1}`, "InvalidPayload", false, 1},
		{"fibonacci missing n", "fibonacci", `{}`, "InvalidPayload", false, 1},
		{"fibonacci not a number", "fibonacci", `{"n":"ten"}`, "PayloadDecode", false, 1},
		{"fibonacci fraction", "fibonacci", `{"n":1.5}`, "PayloadDecode", false, 1},
		{"sleep string", "sleep", `{"seconds":"1"}`, "PayloadDecode", false, 1},
		{"sleep negative", "sleep", `{"seconds":-1}`, "InvalidPayload", false, 1},
		{"flaky negative", "flaky", `{"fail_times":-1}`, "InvalidPayload", false, 1},
		{"counter empty", "counter_task", `{"counter":""}`, "InvalidPayload", false, 1},
		{"receipt missing order", "send_receipt", `{}`, "InvalidPayload", false, 1},
		{"receipt fractional order", "send_receipt", `{"order_id":4.2}`, "InvalidPayload", false, 1},
	}
	ids := make([]string, len(cases))
	for i, c := range cases {
		ids[i] = b.submit(t, dtq.Submission{Type: c.typ, Payload: json.RawMessage(c.payload), MaxAttempts: 2})
	}
	for i, c := range cases {
		ti := b.wait(t, ids[i], dtqtype.StatusDeadLettered)
		require.Equal(t, c.class, ti.Execution.ErrorClass, c.name)
		require.NotNil(t, ti.Execution.Retryable, c.name)
		require.Equal(t, c.retryable, *ti.Execution.Retryable, c.name)
		require.Equal(t, c.attempts, ti.Attempt, c.name)
		require.Len(t, ti.Attempts, c.attempts, c.name)
		require.Nil(t, ti.Result, c.name)
	}
}

// TestSleepLongerThanItsTimeout: a sleep that cannot end within the
// attempt's timeout (the default 30 s here) fails at once, permanently,
// naming the timeout_ms to set; with that timeout it runs.
func TestSleepLongerThanItsTimeout(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.submit(t, dtq.Submission{Type: "sleep", Payload: map[string]any{"seconds": 120}, MaxAttempts: 2})
	ti := b.wait(t, id, dtqtype.StatusDeadLettered)
	require.Equal(t, "InvalidPayload", ti.Execution.ErrorClass)
	require.Contains(t, ti.Execution.ErrorMessage, "submit with timeout_ms of at least 121000")
	require.False(t, *ti.Execution.Retryable)
	require.Equal(t, 1, ti.Attempt)

	id = b.submit(t, dtq.Submission{Type: "sleep", Payload: map[string]any{"seconds": 0.2}, Timeout: 121 * time.Second})
	b.wait(t, id, dtqtype.StatusSucceeded)
}

func TestSleepReturnsContextErrorWithCause(t *testing.T) {
	t.Parallel()
	h := dtq.Typed(examples.Sleep)
	errStop := errors.New("operator asked to stop")
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errStop)
	_, err := dtqtest.Run(ctx, h, dtqtest.NewTask("sleep", map[string]any{"seconds": 20}))
	require.ErrorIs(t, err, context.Canceled)
	require.ErrorIs(t, err, errStop)
	require.False(t, dtqtest.IsPermanent(err))

	// Without a cause it is just the context's error: here a deadline the
	// caller's context has, not the task's.
	ctx, stop := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer stop()
	_, err = dtqtest.Run(ctx, h, dtqtest.NewTask("sleep", map[string]any{"seconds": 60},
		dtqtest.Deadline(time.Now().Add(time.Hour))))
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Equal(t, "sleep interrupted: context deadline exceeded", err.Error())
}

func TestCounterTaskIncrements(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var values []int64
	for range 3 {
		id := b.submit(t, dtq.Submission{Type: "counter_task", Payload: map[string]any{"counter": "visits"}})
		ti := b.wait(t, id, dtqtype.StatusSucceeded)
		var res struct {
			Counter string `json:"counter"`
			Value   int64  `json:"value"`
		}
		require.NoError(t, json.Unmarshal(ti.Result, &res))
		require.Equal(t, "visits", res.Counter)
		values = append(values, res.Value)
	}
	require.Equal(t, []int64{1, 2, 3}, values)
	key := b.prefix + ":examples:counter:visits"
	require.Equal(t, "3", b.rc.Get(b.ctx, key).Val())
	require.Greater(t, b.rc.TTL(b.ctx, key).Val(), time.Duration(0))
}

func TestSendReceiptDedupes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	first := b.submit(t, dtq.Submission{Type: "send_receipt", Payload: map[string]any{"order_id": 42}})
	ti := b.wait(t, first, dtqtype.StatusSucceeded)
	var res struct {
		OrderID json.RawMessage `json:"order_id"`
		SentAt  string          `json:"sent_at"`
		Deduped bool            `json:"deduped"`
	}
	require.NoError(t, json.Unmarshal(ti.Result, &res))
	require.JSONEq(t, `42`, string(res.OrderID))
	require.False(t, res.Deduped)
	sent, err := time.Parse(dtqtype.TimeLayout, res.SentAt)
	require.NoError(t, err)
	require.WithinDuration(t, time.Now(), sent, time.Minute)

	// A second task for the same order (no submission idempotency key, so
	// it is a new task) runs but does not send again. A string id names
	// the same order.
	second := b.submit(t, dtq.Submission{Type: "send_receipt", Payload: map[string]any{"order_id": "42"}})
	ti = b.wait(t, second, dtqtype.StatusSucceeded)
	require.JSONEq(t, `{"order_id":"42","deduped":true}`, string(ti.Result))

	other := b.submit(t, dtq.Submission{Type: "send_receipt", Payload: map[string]any{"order_id": "A-7"}})
	ti = b.wait(t, other, dtqtype.StatusSucceeded)
	require.NotContains(t, string(ti.Result), "deduped")

	require.Equal(t, "1", b.rc.Get(b.ctx, b.prefix+":examples:receipts:42").Val(), "sent once")
	require.Equal(t, "1", b.rc.Get(b.ctx, b.prefix+":examples:receipts:A-7").Val())
	// The operation record lives under the worker's prefix for 24 hours.
	ttl := b.rc.TTL(b.ctx, b.prefix+":op:receipt:42").Val()
	require.Greater(t, ttl, 23*time.Hour)
	require.LessOrEqual(t, ttl, 24*time.Hour)
}

func TestSendReceiptConcurrentTasksSendOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ids := make([]string, 20)
	for i := range ids {
		ids[i] = b.submit(t, dtq.Submission{Type: "send_receipt", Payload: map[string]any{"order_id": 7}, MaxAttempts: 10})
	}
	sent := 0
	for _, id := range ids {
		ti := b.wait(t, id, dtqtype.StatusSucceeded)
		if !json.Valid(ti.Result) {
			t.Fatalf("bad result %q", ti.Result)
		}
		var res struct {
			Deduped bool `json:"deduped"`
		}
		require.NoError(t, json.Unmarshal(ti.Result, &res))
		if !res.Deduped {
			sent++
		}
	}
	require.Equal(t, 1, sent)
	require.Equal(t, "1", b.rc.Get(b.ctx, b.prefix+":examples:receipts:7").Val())
}

// TestSleepReportsProgress: sleep logs as it starts and ends and reports
// 100 once done (make dev shows both on the task page).
func TestSleepReportsProgress(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.submit(t, dtq.Submission{Type: "sleep", Payload: map[string]any{"seconds": 0.05}})
	ti := b.wait(t, id, dtqtype.StatusSucceeded)
	require.JSONEq(t, "100", string(ti.Progress))
	page, err := b.insp.TaskLogs(b.ctx, id, dtq.TaskLogsParams{})
	require.NoError(t, err)
	var lines []string
	for _, it := range page.Items {
		lines = append(lines, it.Line)
	}
	require.Equal(t, []string{"level=INFO msg=sleeping seconds=0.05", "level=INFO msg=slept seconds=0.05"}, lines)
}
