package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/cmd/dtq/internal/events"
	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/internal/rdb"
	"github.com/dtq-io/dtq/internal/redistest"
	"github.com/dtq-io/dtq/internal/workertest"
)

// testPayloadLimit keeps bodies in tests small: the single-body cap is
// 2 × this + 64 KiB.
const testPayloadLimit = 4096

// options tune setup.
type options struct {
	client     func(*dtq.ClientConfig)     // adjusts the client config
	deployment func(*dtq.DeploymentConfig) // adjusts the deployment's settings
	keys       []APIKey
	// allowedHosts is Config.AllowedHosts.
	allowedHosts []string
	// metricsMaxQueues is Config.MetricsMaxQueues.
	metricsMaxQueues int
	// maxBodyInFlight is Config.MaxBodyBytesInFlight.
	maxBodyInFlight int64
	// maxWaits and maxWaitsPerKey are Config.MaxWaits and MaxWaitsPerKey.
	maxWaits, maxWaitsPerKey int
	// redis is the Redis to use; nil means a fresh prefix on the shared server.
	redis *redistest.Setup
	// leaseSecret is the WorkerGateway's LeaseSecret; "" = the one stored in Redis.
	leaseSecret string
	// maxWorkersPerKey is the WorkerGateway's worker record bound per
	// key; 0 = the default.
	maxWorkersPerKey int64
	// feed, when set, serves the event feed from a running events.Hub;
	// nil leaves the API without one (its routes answer 503).
	feed *feedOptions
}

// feedOptions tune the event feed of setup.
type feedOptions struct {
	maxSubscribers int // events.Config.MaxSubscribers
}

// bundle is what an API test needs: the server behind a real listener, a
// Redis client to look at (and arrange) state, the library objects the
// server uses, and the captured log.
type bundle struct {
	ctx     context.Context
	rc      *redis.Client
	prefix  string
	keys    rdb.Keys
	d       *dtq.Deployment
	client  *dtq.Client
	gateway *dtq.WorkerGateway
	insp    *dtq.Inspector
	admin   *dtq.Admin
	api     *Server
	srv     *httptest.Server
	logs    *syncBuffer
}

func setup(t testing.TB, o options) *bundle {
	t.Helper()
	s := o.redis
	if s == nil {
		s = redistest.New(t)
	}
	dcfg := &dtq.DeploymentConfig{KeyPrefix: s.Prefix}
	if o.deployment != nil {
		o.deployment(dcfg)
	}
	d, err := dtq.Open(s.Client, dcfg)
	require.NoError(t, err)
	cfg := &dtq.ClientConfig{MaxPayloadBytes: testPayloadLimit}
	if o.client != nil {
		o.client(cfg)
	}
	c, err := d.NewClient(cfg)
	require.NoError(t, err)
	in := d.Inspector()
	adm, err := d.NewAdmin(nil)
	require.NoError(t, err)
	gateway, err := d.NewWorkerGateway(&dtq.WorkerGatewayConfig{VisibilityTimeout: 3 * time.Second,
		HeartbeatInterval: time.Second, RetryBaseDelay: 10 * time.Millisecond, RetryMaxDelay: 50 * time.Millisecond,
		LeaseSecret: o.leaseSecret, MaxWorkersPerKey: o.maxWorkersPerKey})
	require.NoError(t, err)
	runCtx, stopRemote := context.WithCancel(context.Background())
	gatewayDone := make(chan error, 1)
	go func() { gatewayDone <- gateway.Run(runCtx) }()
	t.Cleanup(func() { stopRemote(); require.NoError(t, <-gatewayDone) })
	logs := &syncBuffer{}
	var hub *events.Hub
	var feed EventFeed
	if o.feed != nil {
		hub, err = events.NewHub(s.Client, s.Prefix, &events.Config{PollInterval: 20 * time.Millisecond,
			Block: 200 * time.Millisecond, MaxSubscribers: o.feed.maxSubscribers})
		require.NoError(t, err)
		feed = hub
	}
	api, err := New(Config{Client: c, Inspector: in, Admin: adm, WorkerGateway: gateway, Keys: o.keys, MaxPayloadBytes: cfg.MaxPayloadBytes,
		AllowedHosts: o.allowedHosts, MetricsMaxQueues: o.metricsMaxQueues, Events: feed, MaxBodyBytesInFlight: o.maxBodyInFlight,
		MaxWaits: o.maxWaits, MaxWaitsPerKey: o.maxWaitsPerKey,
		Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	require.NoError(t, err)
	srv := newTestServer(t, api)
	if hub != nil {
		// Stopped before the server closes: stopping ends the streams.
		hubCtx, stopHub := context.WithCancel(context.Background())
		hubDone := make(chan error, 1)
		go func() { hubDone <- hub.Run(hubCtx) }()
		t.Cleanup(func() { stopHub(); require.NoError(t, <-hubDone) })
	}
	return &bundle{ctx: context.Background(), rc: s.Client, prefix: s.Prefix, keys: rdb.NewKeys(s.Prefix), d: d,
		client: c, gateway: gateway, insp: in, admin: adm, api: api, srv: srv, logs: logs}
}

// response is a finished HTTP exchange.
type response struct {
	status int
	header http.Header
	body   []byte
}

// do sends a request; hdr is name, value pairs. A body is sent as JSON
// unless hdr sets Content-Type.
func (b *bundle) do(t testing.TB, method, path, body string, hdr ...string) *response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(b.ctx, method, b.srv.URL+path, rd)
	require.NoError(t, err)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := b.srv.Client().Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return &response{status: res.StatusCode, header: res.Header, body: data}
}

func (b *bundle) post(t testing.TB, body string, hdr ...string) *response {
	t.Helper()
	return b.do(t, http.MethodPost, "/api/v1/tasks", body, hdr...)
}

// task decodes a task answer.
func (r *response) task(t testing.TB) taskJSON {
	t.Helper()
	var v taskJSON
	require.NoError(t, json.Unmarshal(r.body, &v), string(r.body))
	return v
}

// taskJSON is the part of a task answer tests look at.
type taskJSON struct {
	TaskID         string          `json:"task_id"`
	Queue          string          `json:"queue"`
	TaskType       string          `json:"task_type"`
	Status         string          `json:"status"`
	IdempotencyKey *string         `json:"idempotency_key"`
	Payload        json.RawMessage `json:"payload"`
	Duplicate      *bool           `json:"duplicate"`
}

// errBody decodes an error envelope and checks its invariants: details is
// an object and request_id matches the X-Request-ID header.
func (r *response) errBody(t testing.TB) errorBody {
	t.Helper()
	var raw map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(r.body, &raw), string(r.body))
	require.ElementsMatch(t, []string{"code", "message", "details", "request_id"}, keysOf(raw), string(r.body))
	require.True(t, bytes.HasPrefix(bytes.TrimSpace(raw["details"]), []byte("{")), "details must be an object: %s", r.body)
	var e errorBody
	require.NoError(t, json.Unmarshal(r.body, &e))
	require.NotEmpty(t, e.RequestID)
	require.Equal(t, r.header.Get("X-Request-ID"), e.RequestID)
	require.Equal(t, "application/json", r.header.Get("Content-Type"))
	return e
}

// requireError checks status, code and (when field is not "") details.field.
func (r *response) requireError(t testing.TB, status int, code, field string) errorBody {
	t.Helper()
	require.Equal(t, status, r.status, string(r.body))
	e := r.errBody(t)
	require.Equal(t, code, e.Code, string(r.body))
	if field != "" {
		require.Equal(t, field, e.Details["field"], string(r.body))
	}
	return e
}

func keysOf[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// keyCount is the number of Redis keys under the test's prefix.
func (b *bundle) keyCount(t testing.TB) int {
	t.Helper()
	ks, err := redistest.Keys(b.ctx, b.rc, b.prefix)
	require.NoError(t, err)
	return len(ks)
}

// record is what an idempotency key answers with: the record (the task
// id) as task_id and, from the task hash, state (processing, completed or
// failed, from its status) and fingerprint.
func (b *bundle) record(t testing.TB, queue, key string) map[string]any {
	t.Helper()
	raw, err := b.rc.Get(b.ctx, b.keys.Idempotency(queue, key)).Result()
	require.NoError(t, err)
	v := b.rc.HMGet(b.ctx, b.keys.Task(queue, raw), "status", "fingerprint").Val()
	state := "processing"
	switch v[0] {
	case "succeeded":
		state = "completed"
	case "failed", "dead_lettered", "cancelled", "expired":
		state = "failed"
	}
	return map[string]any{"task_id": raw, "state": state, "fingerprint": v[1]}
}

// finish marks a task finished the way a worker would (its hash status;
// the record's state follows it), for tests that need no real worker.
func (b *bundle) finish(t testing.TB, queue, key, taskID, state, status string) {
	t.Helper()
	rec := b.record(t, queue, key)
	require.Equal(t, taskID, rec["task_id"])
	require.NoError(t, b.rc.HSet(b.ctx, b.keys.Task(queue, taskID), "status", status).Err())
	require.Equal(t, state, b.record(t, queue, key)["state"])
}

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// handlers maps task types to the handlers a test worker runs.
type handlers map[string]dtq.HandlerFunc

// startWorker runs a real worker on queues with small timings until the
// test ends, and waits until it is listed among the workers.
func (b *bundle) startWorker(t *testing.T, queues map[string]int, hs handlers) *dtq.Worker {
	t.Helper()
	w, err := b.d.NewWorker(&dtq.WorkerConfig{Queues: queues, Concurrency: 4,
		VisibilityTimeout: 3 * time.Second, HeartbeatInterval: time.Second,
		RetryBaseDelay: 10 * time.Millisecond, RetryMaxDelay: 50 * time.Millisecond,
		DrainTimeout: 5 * time.Second, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	for typ, h := range hs {
		w.Handle(typ, h)
	}
	workertest.Run(t, w)
	require.Eventually(t, func() bool {
		ws, err := allWorkers(b.ctx, b.insp)
		require.NoError(t, err)
		for _, wi := range ws {
			if wi.ID == w.ID() {
				return true
			}
		}
		return false
	}, 10*time.Second, 5*time.Millisecond, "the worker never heartbeated")
	return w
}

// waitStatus polls until the task reaches want.
func (b *bundle) waitStatus(t *testing.T, id string, want dtqtype.Status) *dtqtype.TaskInfo {
	t.Helper()
	var last *dtqtype.TaskInfo
	require.Eventually(t, func() bool {
		ti, err := b.insp.GetTask(b.ctx, id)
		require.NoError(t, err)
		last = ti
		return ti.Status == want
	}, 20*time.Second, 5*time.Millisecond, "task %s never reached %s", id, want)
	return last
}

// submit creates a task through the library and returns its id.
func (b *bundle) submit(t *testing.T, sub dtq.Submission) string {
	t.Helper()
	res, err := b.client.Submit(b.ctx, sub)
	require.NoError(t, err)
	return res.TaskID
}

// events lists the types of the task's lifecycle events, in order.
func (b *bundle) events(t *testing.T, queue, id string) []string {
	t.Helper()
	msgs, err := b.rc.XRange(b.ctx, b.keys.Events(queue), "-", "+").Result()
	require.NoError(t, err)
	var out []string
	for _, m := range msgs {
		if m.Values["task_id"] == id {
			out = append(out, m.Values["type"].(string))
		}
	}
	return out
}

// decode unmarshals a success answer into v.
func (r *response) decode(t testing.TB, v any) {
	t.Helper()
	require.NoError(t, json.Unmarshal(r.body, v), string(r.body))
}

// newTestServer serves h on a loopback listener until the test ends; each
// answer is checked against openapi.json (checkAnswers).
func newTestServer(t testing.TB, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(checkAnswers(t, h))
	t.Cleanup(srv.Close)
	return srv
}

// newWorkerGateway is a WorkerGateway on rc that is not run (tests that do not claim).
func newWorkerGateway(t testing.TB, rc redis.UniversalClient, prefix string) *dtq.WorkerGateway {
	t.Helper()
	r, err := openDeployment(t, rc, prefix).NewWorkerGateway(nil)
	require.NoError(t, err)
	return r
}
