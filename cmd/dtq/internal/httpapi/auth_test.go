package httpapi

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/dtqtype"
)

var testKeys = []APIKey{
	{Role: RoleReader, Name: "viewer", Secret: "reader-secret"},
	{Role: RoleProducer, Name: "ingest", Secret: "producer-secret"},
	{Role: RoleAdmin, Name: "ops", Secret: "admin-secret"},
	{Role: RoleWorker, Name: "py", Secret: "worker-secret"},
}

// sample is one valid request for a route.
type sample struct {
	method, path, body string
	ok                 int // the status when allowed
	// fresh, when set, makes the path of a request that reaches the
	// handler: actions that use up their target need a new one each time.
	fresh func(t *testing.T) string
}

var queueSuffix atomic.Int64

// newQueueSuffix makes queue names no other request of the test used.
func newQueueSuffix() string { return strconv.FormatInt(queueSuffix.Add(1), 10) }

// missingID is a well-formed task id no task has.
const missingID = "0190a5c4e2c07000800000000000ffff"

// authFixture is what the samples act on: a worker that dead-letters
// "doomed" tasks of queue "dlq", and a queue "idle" no worker serves.
type authFixture struct {
	b        *bundle
	taskID   string // queued in "idle"
	dlqID    string // dead-lettered; no sample touches it
	workerID string
	// workflowID is a running workflow whose nodes are on "idle".
	workflowID string
}

func newAuthFixture(t *testing.T, b *bundle) *authFixture {
	t.Helper()
	w := b.startWorker(t, map[string]int{"dlq": 1}, handlers{
		"doomed": func(ctx context.Context, task *dtq.Task) (any, error) {
			return nil, dtq.Permanent(errors.New("doomed"))
		},
	})
	f := &authFixture{b: b, workerID: w.ID()}
	f.taskID = b.submit(t, dtq.Submission{Type: "echo", Queue: "idle"})
	f.dlqID = f.deadLettered(t)
	f.workflowID = f.workflow(t)
	_, _, err := b.admin.PutSchedule(b.ctx, dtq.Schedule{Name: authSchedule, Spec: "@every 1h", Queue: "idle", TaskType: "echo"})
	require.NoError(t, err)
	return f
}

// authSchedule is the fixture's schedule, on queue "idle".
const authSchedule = "idle-hourly"

// workflow returns the id of a new running workflow on "idle": one node
// queued, one waiting for it.
func (f *authFixture) workflow(t *testing.T) string {
	t.Helper()
	res, err := f.b.client.SubmitWorkflow(f.b.ctx, dtq.Workflow{Name: "auth", Nodes: []dtq.Node{
		{Ref: "first", Submission: dtq.Submission{Queue: "idle", Type: "echo"}},
		{Ref: "second", Deps: []string{"first"}, Submission: dtq.Submission{Queue: "idle", Type: "echo"}},
	}})
	require.NoError(t, err)
	return res.WorkflowID
}

// deadLettered returns the id of a new task in the dead-letter queue.
func (f *authFixture) deadLettered(t *testing.T) string {
	t.Helper()
	id := f.b.submit(t, dtq.Submission{Type: "doomed", Queue: "dlq"})
	f.b.waitStatus(t, id, dtqtype.StatusDeadLettered)
	return id
}

// samples holds one valid request per route, keyed like the route table.
func (f *authFixture) samples() map[string]sample {
	b := f.b
	return map[string]sample{
		"GET /health":              {method: http.MethodGet, path: "/health", ok: 200},
		"GET /ready":               {method: http.MethodGet, path: "/ready", ok: 200},
		"GET /api/v1/openapi.json": {method: http.MethodGet, path: "/api/v1/openapi.json", ok: 200},
		"GET /metrics":             {method: http.MethodGet, path: "/metrics", ok: 200},
		// The test server runs without a feed (internal/events tests it).
		"GET /api/v1/events":       {method: http.MethodGet, path: "/api/v1/events", ok: 503},
		"GET /ws/events":           {method: http.MethodGet, path: "/ws/events", ok: 503},
		"POST /api/v1/tasks":       {method: http.MethodPost, path: "/api/v1/tasks", body: `{"task_type":"echo"}`, ok: 202},
		"POST /api/v1/tasks/batch": {method: http.MethodPost, path: "/api/v1/tasks/batch", body: `{"tasks":[{"task_type":"echo"}]}`, ok: 200},
		"GET /api/v1/tasks":        {method: http.MethodGet, path: "/api/v1/tasks", ok: 200},
		"GET /api/v1/tasks/{id}":   {method: http.MethodGet, path: "/api/v1/tasks/" + f.taskID, ok: 200},
		"POST /api/v1/tasks/{id}/cancel": {method: http.MethodPost, path: "/api/v1/tasks/" + f.taskID + "/cancel",
			body: `{"reason":"auth matrix"}`, ok: 202},
		"POST /api/v1/tasks/{id}/run-now": {method: http.MethodPost, path: "/api/v1/tasks/" + missingID + "/run-now", ok: 200,
			fresh: func(t *testing.T) string {
				return "/api/v1/tasks/" + b.submit(t, dtq.Submission{Type: "later", Queue: "idle", Delay: time.Hour}) + "/run-now"
			}},
		"DELETE /api/v1/tasks/{id}": {method: http.MethodDelete, path: "/api/v1/tasks/" + missingID, ok: 204,
			fresh: func(t *testing.T) string {
				id := b.submit(t, dtq.Submission{Type: "echo", Queue: "idle"})
				_, err := b.admin.CancelTask(b.ctx, id, "")
				require.NoError(t, err)
				return "/api/v1/tasks/" + id
			}},
		"POST /api/v1/claims": {method: http.MethodPost, path: "/api/v1/claims", body: `{"worker_id": "auth", "queues": ["empty"]}`, ok: 200},
		// A token of another attempt: allowed callers get LEASE_LOST.
		"POST /api/v1/tasks/{id}/heartbeat": {method: http.MethodPost, path: "/api/v1/tasks/" + f.taskID + "/heartbeat", body: staleToken(f.taskID), ok: 409},
		"POST /api/v1/tasks/{id}/complete":  {method: http.MethodPost, path: "/api/v1/tasks/" + f.taskID + "/complete", body: staleToken(f.taskID), ok: 409},
		"POST /api/v1/tasks/{id}/fail":      {method: http.MethodPost, path: "/api/v1/tasks/" + f.taskID + "/fail", body: staleToken(f.taskID), ok: 409},
		"POST /api/v1/tasks/{id}/progress": {method: http.MethodPost, path: "/api/v1/tasks/" + f.taskID + "/progress",
			body: strings.TrimSuffix(staleToken(f.taskID), "}") + `, "progress": 5}`, ok: 409},
		"GET /api/v1/tasks/{id}/logs": {method: http.MethodGet, path: "/api/v1/tasks/" + f.taskID + "/logs", ok: 200},
		"GET /api/v1/queues":          {method: http.MethodGet, path: "/api/v1/queues", ok: 200},
		"GET /api/v1/queues/{queue}":  {method: http.MethodGet, path: "/api/v1/queues/idle", ok: 200},
		"PUT /api/v1/queues/{queue}": {method: http.MethodPut, path: "/api/v1/queues/made", ok: 201,
			fresh: func(t *testing.T) string { return "/api/v1/queues/made-" + newQueueSuffix() }},
		"DELETE /api/v1/queues/{queue}": {method: http.MethodDelete, path: "/api/v1/queues/idle", ok: 200,
			fresh: func(t *testing.T) string {
				q := "gone-" + newQueueSuffix()
				_, err := b.admin.CreateQueue(b.ctx, q, nil)
				require.NoError(t, err)
				return "/api/v1/queues/" + q
			}},
		"POST /api/v1/queues/{queue}/pause":   {method: http.MethodPost, path: "/api/v1/queues/idle/pause", ok: 200},
		"POST /api/v1/queues/{queue}/resume":  {method: http.MethodPost, path: "/api/v1/queues/idle/resume", ok: 200},
		"POST /api/v1/queues/{queue}/purge":   {method: http.MethodPost, path: "/api/v1/queues/idle/purge", ok: 200},
		"POST /api/v1/queues/{queue}/recount": {method: http.MethodPost, path: "/api/v1/queues/idle/recount", ok: 200},
		"GET /api/v1/queues/{queue}/limits":   {method: http.MethodGet, path: "/api/v1/queues/idle/limits", ok: 200},
		"GET /api/v1/queues/{queue}/scaling":  {method: http.MethodGet, path: "/api/v1/queues/idle/scaling", ok: 200},
		"GET /api/v1/scaling":                 {method: http.MethodGet, path: "/api/v1/scaling?queue=idle", ok: 200},
		"PUT /api/v1/queues/{queue}/limits": {method: http.MethodPut, path: "/api/v1/queues/idle/limits",
			body: `{"concurrency": 1000}`, ok: 200},
		"DELETE /api/v1/queues/{queue}/limits": {method: http.MethodDelete, path: "/api/v1/queues/idle/limits", ok: 200},
		"GET /api/v1/dlq":                      {method: http.MethodGet, path: "/api/v1/dlq?queue=dlq", ok: 200},
		"GET /api/v1/dlq/{task_id}":            {method: http.MethodGet, path: "/api/v1/dlq/" + f.dlqID, ok: 200},
		"POST /api/v1/dlq/{task_id}/requeue": {method: http.MethodPost, path: "/api/v1/dlq/" + missingID + "/requeue", ok: 200,
			fresh: func(t *testing.T) string { return "/api/v1/dlq/" + f.deadLettered(t) + "/requeue" }},
		"POST /api/v1/dlq/{task_id}/discard": {method: http.MethodPost, path: "/api/v1/dlq/" + missingID + "/discard", ok: 200,
			fresh: func(t *testing.T) string { return "/api/v1/dlq/" + f.deadLettered(t) + "/discard" }},
		// The bulk samples select a queue with nothing in it, so that they
		// leave the fixture's entries alone.
		"POST /api/v1/dlq/requeue":     {method: http.MethodPost, path: "/api/v1/dlq/requeue", body: `{"queue":"empty"}`, ok: 200},
		"POST /api/v1/dlq/purge":       {method: http.MethodPost, path: "/api/v1/dlq/purge?queue=empty", ok: 200},
		"GET /api/v1/schedules":        {method: http.MethodGet, path: "/api/v1/schedules", ok: 200},
		"GET /api/v1/schedules/{name}": {method: http.MethodGet, path: "/api/v1/schedules/" + authSchedule, ok: 200},
		"PUT /api/v1/schedules/{name}": {method: http.MethodPut, path: "/api/v1/schedules/" + authSchedule, ok: 200,
			body: `{"spec":"@every 1h","queue":"idle","task_type":"echo"}`},
		"DELETE /api/v1/schedules/{name}": {method: http.MethodDelete, path: "/api/v1/schedules/" + authSchedule, ok: 200,
			fresh: func(t *testing.T) string {
				n := "gone-" + newQueueSuffix()
				_, _, err := b.admin.PutSchedule(b.ctx, dtq.Schedule{Name: n, Spec: "@every 1h", Queue: "idle", TaskType: "echo"})
				require.NoError(t, err)
				return "/api/v1/schedules/" + n
			}},
		"POST /api/v1/schedules/{name}/pause":   {method: http.MethodPost, path: "/api/v1/schedules/" + authSchedule + "/pause", ok: 200},
		"POST /api/v1/schedules/{name}/resume":  {method: http.MethodPost, path: "/api/v1/schedules/" + authSchedule + "/resume", ok: 200},
		"POST /api/v1/schedules/{name}/trigger": {method: http.MethodPost, path: "/api/v1/schedules/" + authSchedule + "/trigger", ok: 202},
		"POST /api/v1/workflows": {method: http.MethodPost, path: "/api/v1/workflows",
			body: `{"name":"auth","nodes":[{"ref":"a","task_type":"echo","queue":"idle"}]}`, ok: 202},
		"GET /api/v1/workflows":      {method: http.MethodGet, path: "/api/v1/workflows", ok: 200},
		"GET /api/v1/workflows/{id}": {method: http.MethodGet, path: "/api/v1/workflows/" + f.workflowID, ok: 200},
		"POST /api/v1/workflows/{id}/cancel": {method: http.MethodPost, path: "/api/v1/workflows/" + f.workflowID + "/cancel", ok: 202,
			fresh: func(t *testing.T) string { return "/api/v1/workflows/" + f.workflow(t) + "/cancel" }},
		// A token of another attempt: allowed callers get LEASE_LOST.
		"POST /api/v1/tasks/{id}/nodes": {method: http.MethodPost, path: "/api/v1/tasks/" + f.taskID + "/nodes",
			body: strings.TrimSuffix(staleToken(f.taskID), "}") + `, "nodes": [{"ref": "more", "task_type": "echo", "queue": "idle"}]}`, ok: 409},
		"GET /api/v1/workers":      {method: http.MethodGet, path: "/api/v1/workers", ok: 200},
		"GET /api/v1/workers/{id}": {method: http.MethodGet, path: "/api/v1/workers/" + f.workerID, ok: 200},
		"GET /api/v1/stats":        {method: http.MethodGet, path: "/api/v1/stats?window=5m", ok: 200},
		"GET /api/v1/audit":        {method: http.MethodGet, path: "/api/v1/audit?limit=5", ok: 200},
	}
}

// send makes sm's request; allowed says whether it reaches the handler.
func (sm sample) send(t *testing.T, b *bundle, allowed bool, hdr ...string) *response {
	t.Helper()
	path := sm.path
	if allowed && sm.fresh != nil {
		path = sm.fresh(t)
	}
	return b.do(t, sm.method, path, sm.body, hdr...)
}

func TestAuthMatrix(t *testing.T) {
	t.Parallel()
	b := setup(t, options{keys: testKeys})
	reqs := newAuthFixture(t, b).samples()

	type cred struct {
		name   string
		secret string
		role   Role // 0 = no valid key
	}
	creds := []cred{{"missing", "", 0}, {"wrong", "not-a-key", 0}}
	for _, k := range testKeys {
		creds = append(creds, cred{k.Role.String(), k.Secret, k.Role})
	}
	send := map[string]func(string) []string{
		"bearer":    func(s string) []string { return []string{"Authorization", "Bearer " + s} },
		"x-api-key": func(s string) []string { return []string{"X-API-Key", s} },
	}

	for _, rt := range b.api.routes {
		sm, ok := reqs[rt.method+" "+rt.pattern]
		require.True(t, ok, "no auth sample for route %s %s: add one", rt.method, rt.pattern)
		for _, c := range creds {
			for how, hdr := range send {
				var h []string
				if c.secret != "" {
					h = hdr(c.secret)
				}
				allowed := rt.role == 0 || (c.role != 0 && c.role.Grants(rt.role))
				res := sm.send(t, b, allowed, h...)
				where := rt.method + " " + rt.pattern + " with " + c.name + " via " + how
				switch {
				case allowed:
					require.Equal(t, sm.ok, res.status, "%s: %s", where, res.body)
				case c.role == 0:
					res.requireError(t, http.StatusUnauthorized, codeUnauthorized, "")
					require.Contains(t, res.header.Get("WWW-Authenticate"), "Bearer", where)
				default:
					e := res.requireError(t, http.StatusForbidden, codeForbidden, "")
					require.Equal(t, rt.role.String(), e.Details["required_role"], where)
				}
			}
		}
	}
	require.Len(t, reqs, len(b.api.routes), "a sample names a route that does not exist")
}

func TestAuthRoles(t *testing.T) {
	t.Parallel()
	s := &Server{}
	want := map[string]Role{
		"GET /health": 0, "GET /ready": 0, "GET /api/v1/openapi.json": 0, "GET /metrics": RoleReader,
		"GET /api/v1/events": RoleReader, "GET /ws/events": RoleReader,
		"POST /api/v1/tasks": RoleProducer, "POST /api/v1/tasks/batch": RoleProducer,
		"GET /api/v1/tasks": RoleReader, "GET /api/v1/tasks/{id}": RoleReader,
		"POST /api/v1/tasks/{id}/cancel": RoleAdmin, "POST /api/v1/tasks/{id}/run-now": RoleAdmin,
		"DELETE /api/v1/tasks/{id}": RoleAdmin,
		"POST /api/v1/claims":       RoleWorker, "POST /api/v1/tasks/{id}/heartbeat": RoleWorker,
		"POST /api/v1/tasks/{id}/complete": RoleWorker, "POST /api/v1/tasks/{id}/fail": RoleWorker,
		"POST /api/v1/tasks/{id}/progress": RoleWorker, "GET /api/v1/tasks/{id}/logs": RoleReader,
		"GET /api/v1/queues": RoleReader, "GET /api/v1/queues/{queue}": RoleReader,
		"PUT /api/v1/queues/{queue}": RoleAdmin, "DELETE /api/v1/queues/{queue}": RoleAdmin,
		"GET /api/v1/queues/{queue}/limits": RoleReader, "PUT /api/v1/queues/{queue}/limits": RoleAdmin,
		"DELETE /api/v1/queues/{queue}/limits": RoleAdmin,
		"GET /api/v1/queues/{queue}/scaling":   RoleReader, "GET /api/v1/scaling": RoleReader,
		"POST /api/v1/queues/{queue}/pause": RoleAdmin, "POST /api/v1/queues/{queue}/resume": RoleAdmin,
		"POST /api/v1/queues/{queue}/purge": RoleAdmin, "POST /api/v1/queues/{queue}/recount": RoleAdmin,
		"GET /api/v1/dlq": RoleReader, "GET /api/v1/dlq/{task_id}": RoleReader,
		"POST /api/v1/dlq/{task_id}/requeue": RoleAdmin, "POST /api/v1/dlq/{task_id}/discard": RoleAdmin,
		"POST /api/v1/dlq/requeue": RoleAdmin, "POST /api/v1/dlq/purge": RoleAdmin,
		"GET /api/v1/workers": RoleReader, "GET /api/v1/workers/{id}": RoleReader,
		"GET /api/v1/stats": RoleReader, "GET /api/v1/audit": RoleAdmin,
		"GET /api/v1/schedules": RoleReader, "GET /api/v1/schedules/{name}": RoleReader,
		"PUT /api/v1/schedules/{name}": RoleAdmin, "DELETE /api/v1/schedules/{name}": RoleAdmin,
		"POST /api/v1/schedules/{name}/pause": RoleAdmin, "POST /api/v1/schedules/{name}/resume": RoleAdmin,
		"POST /api/v1/schedules/{name}/trigger": RoleAdmin,
		"POST /api/v1/workflows":                RoleProducer, "GET /api/v1/workflows": RoleReader,
		"GET /api/v1/workflows/{id}": RoleReader, "POST /api/v1/workflows/{id}/cancel": RoleProducer,
		"POST /api/v1/tasks/{id}/nodes": RoleWorker,
	}
	got := map[string]Role{}
	for _, rt := range s.routeTable() {
		got[rt.method+" "+rt.pattern] = rt.role
	}
	require.Equal(t, want, got)
}

func TestAuthCredentialForms(t *testing.T) {
	t.Parallel()
	b := setup(t, options{keys: testKeys})
	for _, tc := range []struct {
		name string
		hdr  []string
		ok   bool
	}{
		{"lowercase scheme", []string{"Authorization", "bearer reader-secret"}, true},
		{"both headers agree", []string{"Authorization", "Bearer reader-secret", "X-API-Key", "reader-secret"}, true},
		{"both headers disagree", []string{"Authorization", "Bearer reader-secret", "X-API-Key", "admin-secret"}, false},
		{"basic scheme", []string{"Authorization", "Basic cmVhZGVyLXNlY3JldA=="}, false},
		{"bearer without token", []string{"Authorization", "Bearer"}, false},
		{"bearer blank token", []string{"Authorization", "Bearer   "}, false},
		{"prefix of a secret", []string{"X-API-Key", "reader-secre"}, false},
		{"secret with suffix", []string{"X-API-Key", "reader-secret2"}, false},
	} {
		res := b.do(t, http.MethodGet, "/api/v1/tasks", "", tc.hdr...)
		if tc.ok {
			require.Equal(t, http.StatusOK, res.status, tc.name)
			continue
		}
		res.requireError(t, http.StatusUnauthorized, codeUnauthorized, "")
	}

	// Repeated credential headers are refused.
	req, err := http.NewRequest(http.MethodGet, b.srv.URL+"/api/v1/tasks", nil)
	require.NoError(t, err)
	req.Header.Add("X-API-Key", "reader-secret")
	req.Header.Add("X-API-Key", "admin-secret")
	res, err := b.srv.Client().Do(req)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusUnauthorized, res.StatusCode)
}

func TestAuthOpenMode(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	require.True(t, b.api.OpenMode())
	reqs := newAuthFixture(t, b).samples()
	for _, rt := range b.api.routes {
		sm := reqs[rt.method+" "+rt.pattern]
		for _, h := range [][]string{nil, {"Authorization", "Bearer whatever"}, {"Authorization", "Basic x"}} {
			res := sm.send(t, b, true, h...)
			require.Equal(t, sm.ok, res.status, "%s %s: %s", rt.method, rt.pattern, res.body)
		}
	}
}

func TestKeyFromContext(t *testing.T) {
	t.Parallel()
	b := setup(t, options{keys: testKeys})
	require.False(t, b.api.OpenMode())
	var got APIKey
	var found bool
	h := b.api.authorize(RoleReader, scopeOpen, func(w http.ResponseWriter, r *http.Request) {
		got, found = KeyFromContext(r.Context())
	})
	req := httptest.NewRequest(http.MethodGet, "/x", nil)
	req.Header.Set("X-API-Key", "producer-secret")
	h(httptest.NewRecorder(), req)
	require.True(t, found)
	require.Equal(t, APIKey{Role: RoleProducer, Name: "ingest"}, got) // no secret

	// The request log names the key, never its secret.
	res := b.do(t, http.MethodGet, "/api/v1/tasks", "", "Authorization", "Bearer producer-secret")
	require.Equal(t, http.StatusOK, res.status)
	require.Contains(t, b.logs.String(), `"key":"ingest"`)
	require.NotContains(t, b.logs.String(), "producer-secret")

	open := setup(t, options{})
	h = open.api.authorize(RoleReader, scopeOpen, func(w http.ResponseWriter, r *http.Request) {
		_, found = KeyFromContext(r.Context())
	})
	h(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/x", nil))
	require.False(t, found)
}

func TestParseAPIKeys(t *testing.T) {
	t.Parallel()
	keys, err := ParseAPIKeys("")
	require.NoError(t, err)
	require.Empty(t, keys)

	keys, err = ParseAPIKeys("reader:alice:s1, producer:bob:s:with:colons ,admin:root:s3")
	require.NoError(t, err)
	require.Equal(t, []APIKey{
		{Role: RoleReader, Name: "alice", Secret: "s1"},
		{Role: RoleProducer, Name: "bob", Secret: "s:with:colons"},
		{Role: RoleAdmin, Name: "root", Secret: "s3"},
	}, keys)

	// Rotation: one name, two secrets.
	keys, err = ParseAPIKeys("admin:ops:old-TOPSECRET,admin:ops:new-TOPSECRET")
	require.NoError(t, err)
	require.Len(t, keys, 2)

	for _, tc := range []struct {
		in, want string
	}{
		{"TOPSECRET", "not of the form role:name:secret"},
		{"reader:TOPSECRET", "not of the form role:name:secret"},
		{"TOPSECRET:alice:bob", "entry 1 has an unknown role"},
		{"Admin:alice:TOPSECRET", "entry 1 has an unknown role"},
		{"writer:alice:TOPSECRET", "unknown role"},
		{"reader::TOPSECRET", "entry 1 has an empty name"},
		{"reader:alice:", "entry 1 has an empty secret"},
		{"reader:a b:TOPSECRET", "entry 1: the name must be"},
		{"reader:alice:TOP SECRET", "entry 1: the secret must be"},
		{"reader:a:TOPSECRET,admin:b:TOPSECRET", "entries 1 and 2 have the same secret"},
		{"reader:a:TOPSECRET,,admin:b:other", "entry 2 is empty"},
		{"reader:a:TOPSECRET,", "entry 2 is empty"},
	} {
		_, err := ParseAPIKeys(tc.in)
		require.Error(t, err, tc.in)
		require.Contains(t, err.Error(), tc.want, tc.in)
		require.NotContains(t, err.Error(), "TOPSECRET", "the error must not echo the secret")
		require.NotContains(t, err.Error(), "TOP SECRET")
		if !strings.Contains(tc.want, "same secret") && !strings.Contains(tc.want, "must be") {
			require.Contains(t, err.Error(), "role:name:secret", tc.in)
		}
	}
}

func TestAdminKey(t *testing.T) {
	t.Parallel()
	require.Equal(t, APIKey{Role: RoleAdmin, Name: "admin", Secret: "x"}, AdminKey("x"))
	require.Equal(t, "reader", RoleReader.String())
	require.Equal(t, "producer", RoleProducer.String())
	require.Equal(t, "admin", RoleAdmin.String())
}

func TestNewRejectsBadConfig(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	_, err := New(Config{})
	require.Error(t, err)

	c, in, adm, rem := b.client, b.insp, b.admin, b.gateway
	for _, cfg := range []Config{
		{Client: c, Inspector: in, Admin: adm},
		{Client: c},
		{Inspector: in},
		{Admin: adm},
		{Client: c, Inspector: in},
		{Client: c, Admin: adm},
		{Inspector: in, Admin: adm},
		{Client: c, Inspector: in, Admin: adm, WorkerGateway: rem, MaxPayloadBytes: -1},
		{Client: c, Inspector: in, Admin: adm, WorkerGateway: rem, Keys: []APIKey{{Role: RoleAdmin, Name: "a", Secret: "dup-TOPSECRET"}, {Role: RoleReader, Name: "b", Secret: "dup-TOPSECRET"}}},
		{Client: c, Inspector: in, Admin: adm, WorkerGateway: rem, Keys: []APIKey{{Role: 9, Name: "a", Secret: "s"}}},
		{Client: c, Inspector: in, Admin: adm, WorkerGateway: rem, Keys: []APIKey{AdminKey("")}},
	} {
		_, err := New(cfg)
		require.Error(t, err)
		require.NotContains(t, err.Error(), "TOPSECRET")
	}
	_, err = New(Config{Client: c, Inspector: in, Admin: adm, WorkerGateway: rem, Keys: []APIKey{AdminKey("k")}})
	require.NoError(t, err)
}

// staleToken is a well-formed lease token body for task id that no
// attempt holds.
func staleToken(id string) string {
	raw, _ := json.Marshal(map[string]any{"i": id, "q": "idle", "a": 7, "w": "nobody", "p": 5, "m": 9})
	return `{"lease_token": "` + base64.RawURLEncoding.EncodeToString(raw) + `"}`
}
