package httpapi

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
)

func TestSubmitCreatesTask(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	res := b.post(t, `{"task_type":"send_receipt","queue":"emails","payload":{"order_id":42},"priority":7}`)
	require.Equal(t, http.StatusAccepted, res.status, string(res.body))
	require.Equal(t, "application/json", res.header.Get("Content-Type"))
	require.Empty(t, res.header.Get("Idempotent-Replayed"))

	var full map[string]any
	require.NoError(t, json.Unmarshal(res.body, &full))
	for _, f := range []string{"task_id", "queue", "task_type", "payload", "priority", "max_attempts", "attempt",
		"timeout_ms", "idempotency_key", "status", "created_at", "available_at", "expires_at", "metadata",
		"cancel_requested", "execution", "attempts", "result", "result_truncated", "result_expired",
		"previous_attempts", "duplicate"} {
		require.Contains(t, full, f)
	}
	require.Equal(t, false, full["duplicate"])
	require.Equal(t, "queued", full["status"])
	require.Equal(t, float64(7), full["priority"])
	require.Regexp(t, `^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`, full["created_at"])
	tk := res.task(t)
	require.Equal(t, "/api/v1/tasks/"+tk.TaskID, res.header.Get("Location"))
	require.JSONEq(t, `{"order_id":42}`, string(tk.Payload))

	got := b.do(t, http.MethodGet, "/api/v1/tasks/"+tk.TaskID, "")
	require.Equal(t, http.StatusOK, got.status)
	require.Equal(t, "emails", got.task(t).Queue)
}

func TestIdempotencyHeaderWinsOverBody(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	res := b.post(t, `{"task_type":"echo","idempotency_key":"from-body"}`, "Idempotency-Key", "from-header")
	require.Equal(t, http.StatusAccepted, res.status, string(res.body))
	tk := res.task(t)
	require.Equal(t, "from-header", *tk.IdempotencyKey)
	require.Equal(t, tk.TaskID, b.record(t, "default", "from-header")["task_id"])
	require.Zero(t, b.rc.Exists(b.ctx, b.keys.Idempotency("default", "from-body")).Val())
}

func TestIdempotencyQuotedKeyIsUnquoted(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	res := b.post(t, `{"task_type":"echo"}`, "Idempotency-Key", `"abc"`)
	require.Equal(t, http.StatusAccepted, res.status, string(res.body))
	tk := res.task(t)
	require.Equal(t, "abc", *tk.IdempotencyKey)
	require.Equal(t, tk.TaskID, b.record(t, "default", "abc")["task_id"])

	// The bare key is the same key.
	again := b.post(t, `{"task_type":"echo"}`, "Idempotency-Key", "abc")
	again.requireError(t, http.StatusConflict, codeIdemInProgress, "")
}

func TestIdempotencyScopeIsPerQueue(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	a := b.post(t, `{"task_type":"echo","queue":"a"}`, "Idempotency-Key", "same")
	c := b.post(t, `{"task_type":"echo","queue":"c"}`, "Idempotency-Key", "same")
	require.Equal(t, http.StatusAccepted, a.status, string(a.body))
	require.Equal(t, http.StatusAccepted, c.status, string(c.body))
	require.NotEqual(t, a.task(t).TaskID, c.task(t).TaskID)
}

func TestIdempotencyInProgressIs409(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	first := b.post(t, `{"task_type":"echo"}`, "Idempotency-Key", "k")
	require.Equal(t, http.StatusAccepted, first.status)
	second := b.post(t, `{"task_type":"echo"}`, "Idempotency-Key", "k")
	e := second.requireError(t, http.StatusConflict, codeIdemInProgress, "")
	require.Equal(t, first.task(t).TaskID, e.Details["task_id"])
}

func TestIdempotencyReplayAfterFinish(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ state, status string }{
		{"completed", "succeeded"},
		{"failed", "dead_lettered"},
	} {
		t.Run(tc.state, func(t *testing.T) {
			t.Parallel()
			b := setup(t, options{})
			first := b.post(t, `{"task_type":"echo","payload":{"n":1}}`, "Idempotency-Key", "k")
			require.Equal(t, http.StatusAccepted, first.status)
			id := first.task(t).TaskID
			b.finish(t, "default", "k", id, tc.state, tc.status)

			again := b.post(t, `{"task_type":"echo","payload":{"n":1}}`, "Idempotency-Key", "k")
			require.Equal(t, http.StatusOK, again.status, string(again.body))
			require.Equal(t, "true", again.header.Get("Idempotent-Replayed"))
			tk := again.task(t)
			require.Equal(t, id, tk.TaskID)
			require.Equal(t, tc.status, tk.Status)
			require.True(t, *tk.Duplicate)
		})
	}
}

func TestIdempotencyStaleRecordCreatesNewTask(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	first := b.post(t, `{"task_type":"echo"}`, "Idempotency-Key", "k")
	require.Equal(t, http.StatusAccepted, first.status)
	old := first.task(t).TaskID
	b.finish(t, "default", "k", old, "completed", "succeeded")
	require.NoError(t, b.rc.Del(b.ctx, b.keys.Task("default", old)).Err()) // retention passed

	again := b.post(t, `{"task_type":"echo"}`, "Idempotency-Key", "k")
	require.Equal(t, http.StatusAccepted, again.status, string(again.body))
	tk := again.task(t)
	require.NotEqual(t, old, tk.TaskID)
	require.False(t, *tk.Duplicate)
	rec := b.record(t, "default", "k")
	require.Equal(t, tk.TaskID, rec["task_id"])
	require.Equal(t, "processing", rec["state"])
}

func TestIdempotencyReplayWhileQueueFull(t *testing.T) {
	t.Parallel()
	b := setup(t, options{client: func(c *dtq.ClientConfig) { c.MaxQueueDepth = 2 }})
	first := b.post(t, `{"task_type":"echo"}`, "Idempotency-Key", "k")
	require.Equal(t, http.StatusAccepted, first.status)
	id := first.task(t).TaskID
	b.finish(t, "default", "k", id, "completed", "succeeded") // the hash still counts toward depth

	// A delayed task counts toward depth too: the queue is now full.
	delayed := b.post(t, `{"task_type":"echo","delay_ms":60000}`)
	require.Equal(t, http.StatusAccepted, delayed.status, string(delayed.body))
	require.Equal(t, "pending", delayed.task(t).Status)

	full := b.post(t, `{"task_type":"echo"}`)
	e := full.requireError(t, http.StatusTooManyRequests, codeQueueFull, "")
	require.Equal(t, map[string]any{"queue": "default", "depth": float64(2), "limit": float64(2)}, e.Details)
	ra := full.header.Get("Retry-After")
	require.Regexp(t, `^[1-9][0-9]?$`, ra)

	replay := b.post(t, `{"task_type":"echo"}`, "Idempotency-Key", "k")
	require.Equal(t, http.StatusOK, replay.status, string(replay.body))
	require.Equal(t, id, replay.task(t).TaskID)
}

func TestIdempotencyMismatchIs422(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	first := b.post(t, `{"task_type":"echo","payload":{"a":1,"b":2}}`, "Idempotency-Key", "k")
	require.Equal(t, http.StatusAccepted, first.status)
	other := b.post(t, `{"task_type":"echo","payload":{"a":1,"b":3}}`, "Idempotency-Key", "k")
	e := other.requireError(t, http.StatusUnprocessableEntity, codeIdemKeyMismatch, "")
	require.Equal(t, first.task(t).TaskID, e.Details["task_id"])

	// Metadata is not part of the fingerprint, key order in the payload is
	// not either.
	same := b.post(t, `{"task_type":"echo","payload":{"b":2,"a":1},"metadata":{"who":"me"}}`, "Idempotency-Key", "k")
	same.requireError(t, http.StatusConflict, codeIdemInProgress, "")
}

func TestIdempotencyRecordShapeAndTTL(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	res := b.post(t, `{"task_type":"echo","delay_ms":60000}`, "Idempotency-Key", "k")
	require.Equal(t, http.StatusAccepted, res.status, string(res.body))
	require.Equal(t, res.task(t).TaskID, b.rc.Get(b.ctx, b.keys.Idempotency("default", "k")).Val(), "the record is the task id")
	rec := b.record(t, "default", "k")
	require.Equal(t, "processing", rec["state"])
	require.Len(t, rec["fingerprint"], 32, "a SHA-256, stored as its 32 bytes")

	// TTL = IdempotencyTTL (24h default) + the delay.
	ttl := b.rc.TTL(b.ctx, b.keys.Idempotency("default", "k")).Val()
	require.LessOrEqual(t, ttl, 24*time.Hour+time.Minute)
	require.Greater(t, ttl, 24*time.Hour+time.Minute-10*time.Second)
}

func TestIdempotencyReplayIsReadOnly(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	first := b.post(t, `{"task_type":"echo"}`, "Idempotency-Key", "k")
	require.Equal(t, http.StatusAccepted, first.status)
	id := first.task(t).TaskID
	b.finish(t, "default", "k", id, "completed", "succeeded")

	recKey := b.keys.Idempotency("default", "k")
	events := b.rc.XLen(b.ctx, b.keys.Events("default")).Val()
	depth := b.rc.Get(b.ctx, b.keys.Depth("default")).Val()
	recent := b.rc.LLen(b.ctx, b.keys.Recent("default")).Val()
	recRaw := b.rc.Get(b.ctx, recKey).Val()
	ttlBefore := b.rc.PTTL(b.ctx, recKey).Val()
	keys := b.keyCount(t)

	for range 3 {
		r := b.post(t, `{"task_type":"echo"}`, "Idempotency-Key", "k")
		require.Equal(t, http.StatusOK, r.status, string(r.body))
	}
	require.Equal(t, events, b.rc.XLen(b.ctx, b.keys.Events("default")).Val())
	require.Equal(t, depth, b.rc.Get(b.ctx, b.keys.Depth("default")).Val())
	require.Equal(t, recent, b.rc.LLen(b.ctx, b.keys.Recent("default")).Val())
	require.Equal(t, recRaw, b.rc.Get(b.ctx, recKey).Val())
	require.LessOrEqual(t, b.rc.PTTL(b.ctx, recKey).Val(), ttlBefore) // never extended
	require.Equal(t, keys, b.keyCount(t))
}

func TestNoRecordWithoutKey(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	res := b.post(t, `{"task_type":"echo"}`)
	require.Equal(t, http.StatusAccepted, res.status)
	require.Nil(t, res.task(t).IdempotencyKey)
	ks, err := b.rc.Keys(b.ctx, b.keys.IdempotencyPrefix("default")+"*").Result()
	require.NoError(t, err)
	require.Empty(t, ks)
}

func TestIdempotencyTTLExpiryStartsNewWindow(t *testing.T) {
	t.Parallel()
	b := setup(t, options{deployment: func(c *dtq.DeploymentConfig) { c.IdempotencyTTL = time.Second }})
	first := b.post(t, `{"task_type":"echo"}`, "Idempotency-Key", "k")
	require.Equal(t, http.StatusAccepted, first.status)
	recKey := b.keys.Idempotency("default", "k")
	require.Eventually(t, func() bool { return b.rc.Exists(b.ctx, recKey).Val() == 0 }, 10*time.Second, 20*time.Millisecond)

	again := b.post(t, `{"task_type":"echo"}`, "Idempotency-Key", "k")
	require.Equal(t, http.StatusAccepted, again.status, string(again.body))
	require.NotEqual(t, first.task(t).TaskID, again.task(t).TaskID)
}

func TestIdempotencyConcurrentDuplicates(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	const n = 200
	type answer struct {
		status int
		id     string
		body   string
	}
	answers := make([]answer, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range answers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			req, err := http.NewRequest(http.MethodPost, b.srv.URL+"/api/v1/tasks", strings.NewReader(`{"task_type":"echo","payload":{"x":1}}`))
			if err != nil {
				answers[i] = answer{body: err.Error()}
				return
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Idempotency-Key", "together")
			res, err := b.srv.Client().Do(req)
			if err != nil {
				answers[i] = answer{body: err.Error()}
				return
			}
			defer res.Body.Close()
			var v struct {
				TaskID  string `json:"task_id"`
				Details struct {
					TaskID string `json:"task_id"`
				} `json:"details"`
			}
			_ = json.NewDecoder(res.Body).Decode(&v)
			answers[i] = answer{status: res.StatusCode, id: v.TaskID + v.Details.TaskID}
		}()
	}
	close(start)
	wg.Wait()

	created, ids := 0, map[string]bool{}
	for _, a := range answers {
		switch a.status {
		case http.StatusAccepted:
			created++
		case http.StatusConflict, http.StatusOK:
		default:
			t.Fatalf("unexpected answer %d %s", a.status, a.body)
		}
		ids[a.id] = true
	}
	require.Equal(t, 1, created)
	require.Len(t, ids, 1)
	var id string
	for k := range ids {
		id = k
	}
	require.Len(t, id, 32)

	taskKeys, err := b.rc.Keys(b.ctx, b.keys.TaskPrefix("default")+"*").Result()
	require.NoError(t, err)
	require.Equal(t, []string{b.keys.Task("default", id)}, taskKeys)
	var entries int64
	for _, s := range b.keys.Streams("default") {
		entries += b.rc.XLen(b.ctx, s).Val()
	}
	require.EqualValues(t, 1, entries)
	evs, err := b.rc.XRange(b.ctx, b.keys.Events("default"), "-", "+").Result()
	require.NoError(t, err)
	require.Len(t, evs, 1)
	require.Equal(t, "TASK_QUEUED", evs[0].Values["type"])
	require.Equal(t, id, evs[0].Values["task_id"])
}

// TestLoneSurrogatePayloadRefused: {"s":"\ud800"} and {"s":"\udbff"}
// decode alike (U+FFFD), so under one idempotency key the second would
// replay the first instead of answering 422; both are refused with 400
// INVALID_TASK naming the payload, and nothing is stored.
func TestLoneSurrogatePayloadRefused(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	for _, p := range []string{`{"s":"\ud800"}`, `{"s":"\udbff"}`} {
		res := b.post(t, `{"task_type": "echo", "payload": `+p+`}`, "Idempotency-Key", "surrogates")
		res.requireError(t, http.StatusBadRequest, codeInvalidTask, "payload")
	}
	res := b.post(t, `{"task_type": "echo", "payload": {"s":"\ud83d\ude00"}}`, "Idempotency-Key", "surrogates")
	require.Equal(t, http.StatusAccepted, res.status, string(res.body))
	// The Go client refuses the same payload before any Redis call.
	_, err := b.client.Submit(b.ctx, dtq.Submission{Type: "echo", Payload: json.RawMessage(`{"s":"\udbff"}`)})
	require.ErrorIs(t, err, dtq.ErrInvalidTask)
}
