package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/internal/rdb"
)

// leasedJSON is the part of a claimed task tests look at.
type leasedJSON struct {
	TaskID         string          `json:"task_id"`
	Queue          string          `json:"queue"`
	TaskType       string          `json:"task_type"`
	Payload        json.RawMessage `json:"payload"`
	Attempt        int             `json:"attempt"`
	MaxAttempts    int             `json:"max_attempts"`
	LeaseToken     string          `json:"lease_token"`
	LeaseExpiresAt time.Time       `json:"lease_expires_at"`
}

func (b *bundle) claimTasks(t *testing.T, body string, hdr ...string) []leasedJSON {
	t.Helper()
	res := b.do(t, http.MethodPost, "/api/v1/claims", body, hdr...)
	require.Equal(t, http.StatusOK, res.status, string(res.body))
	var v struct {
		Tasks []leasedJSON `json:"tasks"`
	}
	require.NoError(t, json.Unmarshal(res.body, &v))
	require.NotNil(t, v.Tasks, "tasks must be a list: %s", res.body)
	return v.Tasks
}

func tokenBody(token string, rest string) string {
	return fmt.Sprintf(`{"lease_token": %q%s}`, token, rest)
}

func TestHTTPWorkerClaimHeartbeatComplete(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	id := b.submit(t, dtq.Submission{Type: "resize", Queue: "img", Payload: json.RawMessage(`{"w":10}`)})
	tasks := b.claimTasks(t, `{"worker_id": "py-1", "queues": ["img"], "max": 10, "wait": "2s", "lease": "30s"}`)
	require.Len(t, tasks, 1)
	lt := tasks[0]
	require.Equal(t, id, lt.TaskID)
	require.Equal(t, "resize", lt.TaskType)
	require.Equal(t, 1, lt.Attempt)
	require.JSONEq(t, `{"w":10}`, string(lt.Payload))
	require.WithinDuration(t, time.Now().Add(30*time.Second), lt.LeaseExpiresAt, 5*time.Second)
	ti := b.waitStatus(t, id, dtqtype.StatusRunning)
	require.Equal(t, "py-1", ti.Execution.WorkerID)

	res := b.do(t, http.MethodPost, "/api/v1/tasks/"+id+"/heartbeat", tokenBody(lt.LeaseToken, `, "lease": "1m"`))
	require.Equal(t, http.StatusOK, res.status, string(res.body))
	var ren struct {
		LeaseExpiresAt  time.Time `json:"lease_expires_at"`
		CancelRequested *bool     `json:"cancel_requested"`
	}
	require.NoError(t, json.Unmarshal(res.body, &ren))
	require.NotNil(t, ren.CancelRequested)
	require.False(t, *ren.CancelRequested)
	require.WithinDuration(t, time.Now().Add(time.Minute), ren.LeaseExpiresAt, 5*time.Second)

	// The worker is listed with its task in flight.
	wi, err := b.insp.GetWorker(b.ctx, "py-1")
	require.NoError(t, err)
	require.Equal(t, "http", wi.Kind)
	require.True(t, wi.Live)
	require.Equal(t, []string{id}, wi.InFlight)
	require.NotNil(t, wi.LastClaim)
	require.Equal(t, []string{"img"}, wi.Queues)

	for range 2 { // the second is a client resending after a lost reply
		res = b.do(t, http.MethodPost, "/api/v1/tasks/"+id+"/complete", tokenBody(lt.LeaseToken, `, "result": {"ok": true}`))
		require.Equal(t, http.StatusOK, res.status, string(res.body))
		got := res.task(t)
		require.Equal(t, "succeeded", got.Status)
	}
	ti, err = b.insp.GetTask(b.ctx, id)
	require.NoError(t, err)
	require.JSONEq(t, `{"ok": true}`, string(ti.Result))
	require.Equal(t, []string{"TASK_QUEUED", "TASK_STARTED", "TASK_SUCCEEDED"}, b.events(t, "img", id))
	wi, err = b.insp.GetWorker(b.ctx, "py-1")
	require.NoError(t, err)
	require.Empty(t, wi.InFlight)

	// After success the token fences everything else.
	res = b.do(t, http.MethodPost, "/api/v1/tasks/"+id+"/fail", tokenBody(lt.LeaseToken, `, "error": {"class": "X", "message": "late"}`))
	res.requireError(t, http.StatusConflict, codeLeaseLost, "")
	res = b.do(t, http.MethodPost, "/api/v1/tasks/"+id+"/heartbeat", tokenBody(lt.LeaseToken, ""))
	res.requireError(t, http.StatusConflict, codeLeaseLost, "")
}

func TestHTTPWorkerStaleTokenWritesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	id := b.submit(t, dtq.Submission{Type: "resize", Queue: "img"})
	tasks := b.claimTasks(t, `{"worker_id": "py-1", "queues": ["img"], "lease": "5s"}`)
	require.Len(t, tasks, 1)
	old := tasks[0].LeaseToken

	// Another worker takes the task over once the lease has run out (the
	// reclaim runs with a clock a minute ahead).
	r := rdb.New(b.rc, b.prefix)
	s := &rdb.WorkerSettings{WorkerID: "thief", Lease: time.Minute, EventsMaxLen: 1000, SucceededRetention: time.Hour, FailedRetention: time.Hour, DLQEnabled: true, DLQMaxLen: 100}
	took, err := r.Reclaim(b.ctx, "img", s, 1, time.Now().Add(time.Minute), "n1", nil)
	require.NoError(t, err)
	require.Len(t, took, 1)
	before, err := b.rc.HGetAll(b.ctx, b.keys.Task("img", id)).Result()
	require.NoError(t, err)
	eventsBefore := b.events(t, "img", id)

	for _, tc := range []struct{ route, body string }{
		{"heartbeat", tokenBody(old, "")},
		{"complete", tokenBody(old, `, "result": 1`)},
		{"fail", tokenBody(old, `, "error": {"class": "Boom", "message": "x"}, "retryable": false`)},
		{"fail", tokenBody(old, `, "error": {"class": "Boom", "message": "x"}, "retryable": true`)},
	} {
		res := b.do(t, http.MethodPost, "/api/v1/tasks/"+id+"/"+tc.route, tc.body)
		e := res.requireError(t, http.StatusConflict, codeLeaseLost, "")
		require.Contains(t, e.Message, "nothing was written", tc.route)
	}
	after, err := b.rc.HGetAll(b.ctx, b.keys.Task("img", id)).Result()
	require.NoError(t, err)
	require.Equal(t, before, after)
	require.Equal(t, eventsBefore, b.events(t, "img", id))
	require.Equal(t, "2", after["attempt"])
	require.Equal(t, "thief", after["worker_id"])
}

func TestHTTPWorkerExpiredLeaseIsRedelivered(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	id := b.submit(t, dtq.Submission{Type: "resize", Queue: "lost"})
	first := b.claimTasks(t, `{"worker_id": "py-1", "queues": ["lost"], "lease": "5s"}`)
	require.Len(t, first, 1)
	// No heartbeat: the API's reclaimer returns the task after 5 s and the
	// long-poll delivers it again.
	var again []leasedJSON
	require.Eventually(t, func() bool {
		again = b.claimTasks(t, `{"worker_id": "py-2", "queues": ["lost"], "wait": "10s", "lease": "30s"}`)
		return len(again) == 1
	}, 30*time.Second, time.Millisecond)
	require.Equal(t, id, again[0].TaskID)
	require.Equal(t, 2, again[0].Attempt)
	res := b.do(t, http.MethodPost, "/api/v1/tasks/"+id+"/complete", tokenBody(first[0].LeaseToken, ""))
	res.requireError(t, http.StatusConflict, codeLeaseLost, "")
	res = b.do(t, http.MethodPost, "/api/v1/tasks/"+id+"/complete", tokenBody(again[0].LeaseToken, ""))
	require.Equal(t, http.StatusOK, res.status, string(res.body))
	require.Contains(t, b.events(t, "lost", id), "TASK_LEASE_LOST")
}

func TestHTTPWorkerCancelSeenOnHeartbeat(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	id := b.submit(t, dtq.Submission{Type: "slow", Queue: "c"})
	tasks := b.claimTasks(t, `{"worker_id": "py-1", "queues": ["c"]}`)
	require.Len(t, tasks, 1)
	_, err := b.admin.CancelTask(b.ctx, id, "test")
	require.NoError(t, err)
	res := b.do(t, http.MethodPost, "/api/v1/tasks/"+id+"/heartbeat", tokenBody(tasks[0].LeaseToken, ""))
	require.Equal(t, http.StatusOK, res.status, string(res.body))
	require.JSONEq(t, "true", string(mustField(t, res.body, "cancel_requested")))
	res = b.do(t, http.MethodPost, "/api/v1/tasks/"+id+"/fail", tokenBody(tasks[0].LeaseToken, `, "error": {"class": "Cancelled", "message": "stopped on request"}`))
	require.Equal(t, http.StatusOK, res.status, string(res.body))
	require.Equal(t, "cancelled", res.task(t).Status)
}

func mustField(t *testing.T, body []byte, name string) json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(body, &m))
	v, ok := m[name]
	require.True(t, ok, "no %s in %s", name, body)
	return v
}

func TestHTTPWorkerFailRetriesThenDeadLetters(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	id := b.submit(t, dtq.Submission{Type: "flaky", Queue: "f", MaxAttempts: 2})
	tasks := b.claimTasks(t, `{"worker_id": "py-1", "queues": ["f"]}`)
	require.Len(t, tasks, 1)
	res := b.do(t, http.MethodPost, "/api/v1/tasks/"+id+"/fail",
		tokenBody(tasks[0].LeaseToken, `, "error": {"class": "Timeout", "message": "took too long"}, "retryable": true, "retry_after": "0.05"`))
	require.Equal(t, http.StatusOK, res.status, string(res.body))
	require.Equal(t, "retrying", res.task(t).Status)
	// The API's promoter makes the retry due; the next claim gets attempt 2.
	var again []leasedJSON
	require.Eventually(t, func() bool {
		again = b.claimTasks(t, `{"worker_id": "py-1", "queues": ["f"], "wait": "5s"}`)
		return len(again) == 1
	}, 20*time.Second, time.Millisecond)
	require.Equal(t, 2, again[0].Attempt)
	res = b.do(t, http.MethodPost, "/api/v1/tasks/"+id+"/fail",
		tokenBody(again[0].LeaseToken, `, "error": {"class": "Timeout", "message": "again"}`))
	require.Equal(t, http.StatusOK, res.status, string(res.body))
	require.Equal(t, "dead_lettered", res.task(t).Status)
	ti, err := b.insp.GetTask(b.ctx, id)
	require.NoError(t, err)
	require.Equal(t, "Timeout", ti.Execution.ErrorClass)
	_, err = b.insp.GetDLQEntry(b.ctx, id)
	require.NoError(t, err)
}

func TestHTTPWorkerLongPollWakesOnSubmit(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	// An empty claim first, so that the queue's groups exist.
	require.Empty(t, b.claimTasks(t, `{"worker_id": "py-1", "queues": ["lp", "other"], "wait": 0}`))
	got := make(chan []leasedJSON, 1)
	start := time.Now().Truncate(time.Millisecond)
	go func() {
		got <- b.claimTasks(t, `{"worker_id": "py-1", "queues": ["other", "lp"], "wait": "20s", "max": 5}`)
	}()
	require.Eventually(t, func() bool {
		wi, err := b.insp.GetWorker(b.ctx, "py-1")
		require.NoError(t, err)
		return wi.LastClaim != nil && !wi.LastClaim.Before(start)
	}, 10*time.Second, time.Millisecond)
	id := b.submit(t, dtq.Submission{Type: "x", Queue: "lp"})
	tasks := <-got
	require.Len(t, tasks, 1)
	require.Equal(t, id, tasks[0].TaskID)
	require.Less(t, time.Since(start), 15*time.Second)
}

func TestHTTPWorkerBadInput(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	for _, tc := range []struct{ body, field string }{
		{`{"worker_id": "", "queues": ["a"]}`, "worker_id"},
		{`{"worker_id": "has space", "queues": ["a"]}`, "worker_id"},
		{`{"worker_id": "w", "queues": []}`, "queues"},
		{`{"worker_id": "w", "queues": ["Bad!"]}`, "queues"},
		{`{"worker_id": "w", "queues": ["a", "a"]}`, "queues"},
		{`{"worker_id": "w", "queues": ["a"], "max": 1000}`, "max"},
		{`{"worker_id": "w", "queues": ["a"], "wait": "31s"}`, "wait"},
		{`{"worker_id": "w", "queues": ["a"], "lease": "1s"}`, "lease"},
		{`{"worker_id": "w", "queues": ["a"], "lease": "2h"}`, "lease"},
		{`{"worker_id": "w", "queues": ["a"], "max": "ten"}`, "max"},
		{`{"worker_id": "w", "queues": ["a"], "bogus": 1}`, "bogus"},
	} {
		res := b.do(t, http.MethodPost, "/api/v1/claims", tc.body)
		res.requireError(t, http.StatusBadRequest, codeInvalidRequest, tc.field)
	}
	for _, body := range []string{``, `[]`, `{"worker_id": "w", "queues": ["a"], "wait": "soon"}`} {
		res := b.do(t, http.MethodPost, "/api/v1/claims", body)
		res.requireError(t, http.StatusBadRequest, codeInvalidRequest, "")
	}
	id := b.submit(t, dtq.Submission{Type: "x", Queue: "a"})
	for _, route := range []string{"heartbeat", "complete", "fail"} {
		for _, body := range []string{`{}`, `{"lease_token": "not a token"}`, `{"lease_token": "eyJ4IjoxfQ"}`} {
			res := b.do(t, http.MethodPost, "/api/v1/tasks/"+id+"/"+route, body)
			res.requireError(t, http.StatusBadRequest, codeInvalidRequest, "lease_token")
		}
	}
	tasks := b.claimTasks(t, `{"worker_id": "w", "queues": ["a"]}`)
	require.Len(t, tasks, 1)
	res := b.do(t, http.MethodPost, "/api/v1/tasks/"+id+"/heartbeat", tokenBody(tasks[0].LeaseToken, `, "lease": "2s"`))
	res.requireError(t, http.StatusBadRequest, codeInvalidRequest, "lease")
	res = b.do(t, http.MethodPost, "/api/v1/tasks/"+id+"/fail", tokenBody(tasks[0].LeaseToken, `, "error": {"class": "no spaces allowed"}`))
	res.requireError(t, http.StatusBadRequest, codeInvalidRequest, "error.class")
	res = b.do(t, http.MethodPost, "/api/v1/tasks/"+id+"/complete", tokenBody(tasks[0].LeaseToken, `, "result": `))
	res.requireError(t, http.StatusBadRequest, codeInvalidRequest, "")
	// A token of another task is a lost lease, not a valid one.
	other := b.submit(t, dtq.Submission{Type: "x", Queue: "a"})
	res = b.do(t, http.MethodPost, "/api/v1/tasks/"+other+"/complete", tokenBody(tasks[0].LeaseToken, ""))
	res.requireError(t, http.StatusConflict, codeLeaseLost, "")
}

func TestHTTPWorkerRoles(t *testing.T) {
	t.Parallel()
	keys := []APIKey{
		{Role: RoleWorker, Name: "py", Secret: "worker-secret"},
		{Role: RoleProducer, Name: "ingest", Secret: "producer-secret"},
	}
	b := setup(t, options{keys: keys})
	wk, pk := []string{"X-API-Key", "worker-secret"}, []string{"X-API-Key", "producer-secret"}
	res := b.post(t, `{"task_type": "x", "queue": "r"}`, wk...)
	e := res.requireError(t, http.StatusForbidden, codeForbidden, "")
	require.Equal(t, "producer", e.Details["required_role"])
	res = b.post(t, `{"task_type": "x", "queue": "r"}`, pk...)
	require.Equal(t, http.StatusAccepted, res.status, string(res.body))
	id := res.task(t).TaskID
	res = b.do(t, http.MethodPost, "/api/v1/claims", `{"worker_id": "w", "queues": ["r"]}`, pk...)
	e = res.requireError(t, http.StatusForbidden, codeForbidden, "")
	require.Equal(t, "worker", e.Details["required_role"])
	tasks := b.claimTasks(t, `{"worker_id": "w", "queues": ["r"]}`, wk...)
	require.Len(t, tasks, 1)
	require.Equal(t, id, tasks[0].TaskID)
	// A worker key reads too.
	res = b.do(t, http.MethodGet, "/api/v1/tasks/"+id, "", wk...)
	require.Equal(t, http.StatusOK, res.status)
	res = b.do(t, http.MethodPost, "/api/v1/tasks/"+id+"/complete", tokenBody(tasks[0].LeaseToken, ""), pk...)
	res.requireError(t, http.StatusForbidden, codeForbidden, "")
	res = b.do(t, http.MethodPost, "/api/v1/tasks/"+id+"/complete", tokenBody(tasks[0].LeaseToken, ""), wk...)
	require.Equal(t, http.StatusOK, res.status, string(res.body))
}

func TestHTTPWorkerIDOfALiveGoWorkerIsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	w := b.startWorker(t, map[string]int{"gw": 1}, handlers{})
	res := b.do(t, http.MethodPost, "/api/v1/claims", fmt.Sprintf(`{"worker_id": %q, "queues": ["gw"]}`, w.ID()))
	res.requireError(t, http.StatusConflict, codeWorkerIDInUse, "")
}

func TestRoleGrants(t *testing.T) {
	t.Parallel()
	all := []Role{RoleReader, RoleProducer, RoleWorker, RoleAdmin}
	want := map[Role][]Role{
		RoleReader:   {RoleReader},
		RoleProducer: {RoleReader, RoleProducer},
		RoleWorker:   {RoleReader, RoleWorker},
		RoleAdmin:    all,
	}
	for _, have := range all {
		for _, need := range all {
			require.Equal(t, contains(want[have], need), have.Grants(need), "%s needs %s", have, need)
		}
	}
}

func contains(rs []Role, r Role) bool {
	for _, x := range rs {
		if x == r {
			return true
		}
	}
	return false
}

func TestHTTPWorkerClaimsByPriorityUnderLimits(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	low := b.submit(t, dtq.Submission{Type: "x", Queue: "lim", Priority: new(1)})
	high := b.submit(t, dtq.Submission{Type: "x", Queue: "lim", Priority: new(8)})
	require.NoError(t, b.admin.SetLimits(b.ctx, "lim", dtqtype.QueueLimits{Concurrency: 1}))

	// One start allowed at a time: the higher priority first, then nothing
	// (an empty answer after the wait) until it finishes.
	first := b.claimTasks(t, `{"worker_id": "py-1", "queues": ["lim"], "max": 10}`)
	require.Len(t, first, 1)
	require.Equal(t, high, first[0].TaskID)
	began := time.Now()
	require.Empty(t, b.claimTasks(t, `{"worker_id": "py-1", "queues": ["lim"], "max": 10, "wait": "300ms"}`))
	require.GreaterOrEqual(t, time.Since(began), 250*time.Millisecond, "a limited claim waits")
	res := b.do(t, http.MethodPost, "/api/v1/tasks/"+high+"/complete", tokenBody(first[0].LeaseToken, ""))
	require.Equal(t, http.StatusOK, res.status, string(res.body))
	second := b.claimTasks(t, `{"worker_id": "py-1", "queues": ["lim"], "max": 10, "wait": "5s"}`)
	require.Len(t, second, 1)
	require.Equal(t, low, second[0].TaskID)
}

func TestHTTPWorkerWritesTheIdempotencyRecordAndStats(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	res := b.post(t, `{"task_type": "x", "queue": "idem", "idempotency_key": "order-1"}`)
	require.Equal(t, http.StatusAccepted, res.status, string(res.body))
	id := res.task(t).TaskID
	tasks := b.claimTasks(t, `{"worker_id": "py-1", "queues": ["idem"]}`)
	require.Len(t, tasks, 1)
	res = b.do(t, http.MethodPost, "/api/v1/tasks/"+id+"/complete", tokenBody(tasks[0].LeaseToken, `, "result": [1, 2]`))
	require.Equal(t, http.StatusOK, res.status, string(res.body))

	// The same submission again replays the finished task.
	res = b.post(t, `{"task_type": "x", "queue": "idem", "idempotency_key": "order-1"}`)
	require.Equal(t, http.StatusOK, res.status, string(res.body))
	replay := res.task(t)
	require.Equal(t, id, replay.TaskID)
	require.Equal(t, "succeeded", replay.Status)
	require.True(t, *replay.Duplicate)

	stats, err := b.insp.Stats(b.ctx, "idem", 5*time.Minute)
	require.NoError(t, err)
	var succeeded int64
	for _, m := range stats {
		succeeded += m.Succeeded
	}
	require.Equal(t, int64(1), succeeded)
}

// TestHTTPResultNestingBound: a result nesting deeper than a payload may
// (64 levels) is 400 INVALID_REQUEST naming the field, and the task keeps
// running; one at the bound completes it. Dependants and readers decode
// results as stored, and a deep one broke recursive decoders.
func TestHTTPResultNestingBound(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	id := b.submit(t, dtq.Submission{Type: "x", Queue: "a"})
	tasks := b.claimTasks(t, `{"worker_id": "w", "queues": ["a"]}`)
	require.Len(t, tasks, 1)
	nest := func(depth int) string {
		return `{"a": ` + strings.Repeat("[", depth-1) + strings.Repeat("]", depth-1) + `}`
	}
	for _, depth := range []int{dtq.MaxJSONDepth + 1, 4000} {
		res := b.do(t, http.MethodPost, "/api/v1/tasks/"+id+"/complete", tokenBody(tasks[0].LeaseToken, `, "result": `+nest(depth)))
		e := res.requireError(t, http.StatusBadRequest, codeInvalidRequest, "result")
		require.Contains(t, e.Message, "levels deep")
	}
	require.Equal(t, dtqtype.StatusRunning, b.waitStatus(t, id, dtqtype.StatusRunning).Status)
	res := b.do(t, http.MethodPost, "/api/v1/tasks/"+id+"/complete", tokenBody(tasks[0].LeaseToken, `, "result": `+nest(dtq.MaxJSONDepth)))
	require.Equal(t, http.StatusOK, res.status, string(res.body))
	ti := b.waitStatus(t, id, dtqtype.StatusSucceeded)
	require.JSONEq(t, nest(dtq.MaxJSONDepth), string(ti.Result))
}
