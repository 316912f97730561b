package httpapi

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/internal/rdb"
	"github.com/dtq-io/dtq/internal/redistest"
)

// Lease tokens cannot be forged or altered (docs/security.md#lease-tokens):
// the tests below make the tokens an attacker with a worker key could make
// (the layout tokens had before they carried a MAC, filled from the
// claim's answer or from GET /tasks/{id}), and check that each call is
// refused with 409 LEASE_LOST and writes nothing.

// plainToken is a lease token in the layout without a MAC: base64url JSON
// {i, q, a, w, p, m}, which anyone can fill in.
func plainToken(id, queue string, attempt int, worker string, priority, maxAttempts int) string {
	raw, _ := json.Marshal(map[string]any{"i": id, "q": queue, "a": attempt, "w": worker, "p": priority, "m": maxAttempts})
	return base64.RawURLEncoding.EncodeToString(raw)
}

// altered is a genuine token whose body got extra fields, its MAC kept.
func altered(t *testing.T, token string, add map[string]any) string {
	t.Helper()
	body, mac, ok := strings.Cut(token, ".")
	require.True(t, ok, "a lease token is body.mac: %s", token)
	raw, err := base64.RawURLEncoding.DecodeString(body)
	require.NoError(t, err)
	var f map[string]any
	require.NoError(t, json.Unmarshal(raw, &f))
	for k, v := range add {
		f[k] = v
	}
	raw, err = json.Marshal(f)
	require.NoError(t, err)
	return base64.RawURLEncoding.EncodeToString(raw) + "." + mac
}

// leaseState is what a refused worker call must leave as it was.
type leaseState struct {
	Hash    map[string]string
	Events  []string
	Pending int64 // entries of the task's band delivered and not acked
	Depth   string
	Results int64 // result keys of the task
	Lease   float64
}

func (b *bundle) leaseState(t *testing.T, queue, id string, band int, withLease bool) leaseState {
	t.Helper()
	p, err := b.rc.XPending(b.ctx, b.keys.Stream(queue, band), rdb.Group).Result()
	require.NoError(t, err)
	s := leaseState{Hash: b.rc.HGetAll(b.ctx, b.keys.Task(queue, id)).Val(), Events: b.events(t, queue, id), Pending: p.Count,
		Depth: b.rc.Get(b.ctx, b.keys.Depth(queue)).Val(), Results: b.rc.Exists(b.ctx, b.keys.Result(queue, id)).Val()}
	if withLease {
		s.Lease = b.rc.ZScore(b.ctx, b.keys.Lease(queue), id).Val()
	}
	return s
}

// refused sends each call and checks it is answered 409 LEASE_LOST with
// nothing written.
func (b *bundle) refused(t *testing.T, queue, id string, band int, withLease bool, calls map[string]string, hdr ...string) {
	t.Helper()
	before := b.leaseState(t, queue, id, band, withLease)
	for name, c := range calls {
		route, body, _ := strings.Cut(c, " ")
		res := b.do(t, http.MethodPost, "/api/v1/tasks/"+id+"/"+route, body, hdr...)
		e := res.requireError(t, http.StatusConflict, codeLeaseLost, "")
		require.Contains(t, e.Message, "nothing was written", name)
		require.Equal(t, before, b.leaseState(t, queue, id, band, withLease), "%s wrote something", name)
	}
}

func TestHTTPWorkerForgedTokenCannotRetryPastMaxAttempts(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	id := b.submit(t, dtq.Submission{Type: "x", Queue: "fa", MaxAttempts: 1})
	tasks := b.claimTasks(t, `{"worker_id": "py-1", "queues": ["fa"]}`)
	require.Len(t, tasks, 1)
	retry := `, "error": {"class": "Boom", "message": "again"}, "retryable": true`
	b.refused(t, "fa", id, 0, true, map[string]string{
		"plain token, more attempts":     "fail " + tokenBody(plainToken(id, "fa", 1, "py-1", 0, 99), retry),
		"genuine token, m added":         "fail " + tokenBody(altered(t, tasks[0].LeaseToken, map[string]any{"m": 99}), retry),
		"genuine token, attempt changed": "fail " + tokenBody(altered(t, tasks[0].LeaseToken, map[string]any{"a": 2}), retry),
	})
	// The genuine token: the task's own max_attempts (1) decides.
	res := b.do(t, http.MethodPost, "/api/v1/tasks/"+id+"/fail", tokenBody(tasks[0].LeaseToken, retry))
	require.Equal(t, http.StatusOK, res.status, string(res.body))
	require.Equal(t, "dead_lettered", res.task(t).Status)
}

func TestHTTPWorkerForgedTokenCannotAckAnotherBand(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	id := b.submit(t, dtq.Submission{Type: "x", Queue: "fb", Priority: new(7)})
	tasks := b.claimTasks(t, `{"worker_id": "py-1", "queues": ["fb"]}`)
	require.Len(t, tasks, 1)
	st := b.leaseState(t, "fb", id, 7, false)
	require.EqualValues(t, 1, st.Pending)
	require.Equal(t, "1", st.Depth)
	for _, retryable := range []string{"true", "false"} {
		body := `, "error": {"class": "Boom", "message": "x"}, "retryable": ` + retryable
		b.refused(t, "fb", id, 7, true, map[string]string{
			"plain token, band 0":    "fail " + tokenBody(plainToken(id, "fb", 1, "py-1", 0, 5), body),
			"genuine token, p added": "fail " + tokenBody(altered(t, tasks[0].LeaseToken, map[string]any{"p": 0}), body),
		})
	}
	// The genuine token acks the band the task is in: nothing stays pending.
	res := b.do(t, http.MethodPost, "/api/v1/tasks/"+id+"/fail", tokenBody(tasks[0].LeaseToken, `, "error": {"class": "Boom", "message": "x"}, "retryable": false`))
	require.Equal(t, http.StatusOK, res.status, string(res.body))
	st = b.leaseState(t, "fb", id, 7, false)
	require.Zero(t, st.Pending)
	require.Equal(t, "0", st.Depth)
}

func TestHTTPWorkerTokenFromPublicFieldsCannotFinishAGoWorkersTask(t *testing.T) {
	t.Parallel()
	keys := []APIKey{{Role: RoleWorker, Name: "py", Secret: "worker-secret", Queues: []string{"gw"}}}
	b := setup(t, options{keys: keys})
	wk := []string{"X-API-Key", "worker-secret"}
	started, release := make(chan struct{}), make(chan struct{})
	b.startWorker(t, map[string]int{"gw": 1}, handlers{"slow": func(ctx context.Context, _ *dtq.Task) (any, error) {
		close(started)
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return map[string]any{"real": true}, nil
	}})
	id := b.submit(t, dtq.Submission{Type: "slow", Queue: "gw", Priority: new(3)})
	<-started

	// What anyone with the key reads about the running task.
	res := b.do(t, http.MethodGet, "/api/v1/tasks/"+id, "", wk...)
	require.Equal(t, http.StatusOK, res.status, string(res.body))
	var pub struct {
		Queue       string `json:"queue"`
		Attempt     int    `json:"attempt"`
		Priority    int    `json:"priority"`
		MaxAttempts int    `json:"max_attempts"`
		Execution   struct {
			WorkerID string `json:"worker_id"`
		} `json:"execution"`
	}
	res.decode(t, &pub)
	require.NotEmpty(t, pub.Execution.WorkerID)
	forged := plainToken(id, pub.Queue, pub.Attempt, pub.Execution.WorkerID, pub.Priority, pub.MaxAttempts)
	b.refused(t, "gw", id, 3, false, map[string]string{
		"complete":  "complete " + tokenBody(forged, `, "result": {"forged": true}`),
		"fail":      "fail " + tokenBody(forged, `, "error": {"class": "Boom", "message": "x"}, "retryable": false`),
		"heartbeat": "heartbeat " + tokenBody(forged, ""),
		"with a MAC": "complete " + tokenBody(forged+"."+base64.RawURLEncoding.EncodeToString(make([]byte, 32)),
			`, "result": {"forged": true}`),
	}, wk...)

	// The Go worker's own outcome lands.
	close(release)
	b.waitStatus(t, id, dtqtype.StatusSucceeded)
	ti, err := b.insp.GetTask(b.ctx, id)
	require.NoError(t, err)
	require.JSONEq(t, `{"real": true}`, string(ti.Result))
}

func TestHTTPWorkerTokenOfAnEarlierClaimIsLost(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	id := b.submit(t, dtq.Submission{Type: "x", Queue: "fn", MaxAttempts: 1})
	first := b.claimTasks(t, `{"worker_id": "py-1", "queues": ["fn"]}`)
	require.Len(t, first, 1)
	res := b.do(t, http.MethodPost, "/api/v1/tasks/"+id+"/fail", tokenBody(first[0].LeaseToken, `, "error": {"class": "Boom", "message": "x"}`))
	require.Equal(t, http.StatusOK, res.status, string(res.body))
	_, err := b.admin.RequeueDLQ(b.ctx, id, dtq.RequeueOptions{})
	require.NoError(t, err)
	// The same worker gets the same attempt again, under another claim:
	// the first claim's token fences nothing.
	again := b.claimTasks(t, `{"worker_id": "py-1", "queues": ["fn"]}`)
	require.Len(t, again, 1)
	require.Equal(t, first[0].Attempt, again[0].Attempt)
	b.refused(t, "fn", id, 0, true, map[string]string{
		"heartbeat": "heartbeat " + tokenBody(first[0].LeaseToken, ""),
		"complete":  "complete " + tokenBody(first[0].LeaseToken, `, "result": 1`),
		"fail":      "fail " + tokenBody(first[0].LeaseToken, `, "error": {"class": "Boom", "message": "x"}`),
	})
	res = b.do(t, http.MethodPost, "/api/v1/tasks/"+id+"/complete", tokenBody(again[0].LeaseToken, `, "result": 2`))
	require.Equal(t, http.StatusOK, res.status, string(res.body))
}

func TestHTTPWorkerTokenOfAnotherSecretIsLost(t *testing.T) {
	t.Parallel()
	// A configured secret changed between the claim and the complete.
	s := redistest.New(t)
	before := setup(t, options{redis: s, leaseSecret: strings.Repeat("a", 32)})
	after := setup(t, options{redis: s, leaseSecret: strings.Repeat("b", 32)})
	id := before.submit(t, dtq.Submission{Type: "x", Queue: "rot"})
	tasks := before.claimTasks(t, `{"worker_id": "py-1", "queues": ["rot"]}`)
	require.Len(t, tasks, 1)
	tok := tasks[0].LeaseToken
	after.refused(t, "rot", id, 0, true, map[string]string{
		"heartbeat": "heartbeat " + tokenBody(tok, ""),
		"complete":  "complete " + tokenBody(tok, `, "result": 1`),
		"fail":      "fail " + tokenBody(tok, `, "error": {"class": "Boom", "message": "x"}`),
	})

	// The stored secret replaced (deleted, and a new process stored its own).
	s = redistest.New(t)
	old := setup(t, options{redis: s})
	id = old.submit(t, dtq.Submission{Type: "x", Queue: "rot"})
	tasks = old.claimTasks(t, `{"worker_id": "py-1", "queues": ["rot"]}`)
	require.Len(t, tasks, 1)
	require.NoError(t, old.rc.Del(old.ctx, old.keys.LeaseSecret()).Err())
	renewed := setup(t, options{redis: s})
	renewed.refused(t, "rot", id, 0, true, map[string]string{
		"complete": "complete " + tokenBody(tasks[0].LeaseToken, `, "result": 1`),
	})
}

func TestHTTPWorkerTokenWorksAcrossAPIProcesses(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	one, two := setup(t, options{redis: s}), setup(t, options{redis: s})
	id := one.submit(t, dtq.Submission{Type: "x", Queue: "two", MaxAttempts: 2})
	tasks := one.claimTasks(t, `{"worker_id": "py-1", "queues": ["two"]}`)
	require.Len(t, tasks, 1)
	tok := tasks[0].LeaseToken
	res := two.do(t, http.MethodPost, "/api/v1/tasks/"+id+"/heartbeat", tokenBody(tok, ""))
	require.Equal(t, http.StatusOK, res.status, string(res.body))
	for _, b := range []*bundle{two, one} { // sent again through the other process
		res = b.do(t, http.MethodPost, "/api/v1/tasks/"+id+"/fail", tokenBody(tok, `, "error": {"class": "Boom", "message": "x"}, "retry_after": "0.01"`))
		require.Equal(t, http.StatusOK, res.status, string(res.body))
		require.Equal(t, "retrying", res.task(t).Status)
	}
	var again []leasedJSON
	require.Eventually(t, func() bool {
		again = two.claimTasks(t, `{"worker_id": "py-1", "queues": ["two"], "wait": "5s"}`)
		return len(again) == 1
	}, 20*time.Second, time.Millisecond)
	require.Equal(t, 2, again[0].Attempt)
	for _, b := range []*bundle{one, two} {
		res = b.do(t, http.MethodPost, "/api/v1/tasks/"+id+"/complete", tokenBody(again[0].LeaseToken, `, "result": "done"`))
		require.Equal(t, http.StatusOK, res.status, string(res.body))
		require.Equal(t, "succeeded", res.task(t).Status)
	}
	// One secret for the deployment, stored once.
	secret, err := one.rc.Get(one.ctx, one.keys.LeaseSecret()).Result()
	require.NoError(t, err)
	require.Len(t, secret, 64, "a hex secret of 32 random bytes")
}
