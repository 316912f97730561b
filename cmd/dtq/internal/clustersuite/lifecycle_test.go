package clustersuite_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
	"github.com/dtq-io/dtq/cmd/dtq/internal/cli"
	"github.com/dtq-io/dtq/cmd/dtq/internal/events"
	"github.com/dtq-io/dtq/cmd/dtq/internal/httpapi"
	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/internal/workertest"
)

// api is dtq's HTTP API (with its event feed) on a Redis client.
type api struct {
	url  string
	insp *dtq.Inspector
	adm  *dtq.Admin
}

// mods set the deployment's settings.
func startAPI(t *testing.T, rc redis.UniversalClient, prefix string, mods ...func(*dtq.DeploymentConfig)) *api {
	t.Helper()
	d := openDeployment(t, rc, prefix, mods...)
	c, err := d.NewClient(nil)
	require.NoError(t, err)
	in := d.Inspector()
	adm, err := d.NewAdmin(&dtq.AdminConfig{Client: c})
	require.NoError(t, err)
	hub, err := events.NewHub(rc, prefix, nil)
	require.NoError(t, err)
	hctx, stopHub := context.WithCancel(context.Background())
	hubDone := make(chan struct{})
	go func() { defer close(hubDone); _ = hub.Run(hctx) }()
	t.Cleanup(func() { stopHub(); <-hubDone })
	gateway, err := d.NewWorkerGateway(&dtq.WorkerGatewayConfig{Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	h, err := httpapi.New(httpapi.Config{Client: c, Inspector: in, Admin: adm, WorkerGateway: gateway, Events: hub,
		Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &api{url: srv.URL, insp: in, adm: adm}
}

// call sends one request and returns the status and body.
func (a *api) call(t *testing.T, method, path, body string, hdr ...string) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, a.url+path, rd)
	require.NoError(t, err)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, raw
}

func (a *api) submit(t *testing.T, body string, hdr ...string) (int, string) {
	t.Helper()
	status, raw := a.call(t, http.MethodPost, "/api/v1/tasks", body, hdr...)
	var out struct {
		TaskID string `json:"task_id"`
	}
	_ = json.Unmarshal(raw, &out)
	return status, out.TaskID
}

func (a *api) waitStatus(t *testing.T, id string, want dtqtype.Status) *dtqtype.TaskInfo {
	t.Helper()
	var last *dtqtype.TaskInfo
	require.Eventually(t, func() bool {
		ti, err := a.insp.GetTask(context.Background(), id)
		if err != nil {
			return false
		}
		last = ti
		return ti.Status == want
	}, 30*time.Second, 10*time.Millisecond, "task %s never reached %s (last: %+v)", id, want, last)
	return last
}

// startWorker runs a worker on rc serving queues until the test ends.
func startWorker(t *testing.T, rc redis.UniversalClient, prefix string, queues []string, mod func(*dtq.WorkerConfig), hs map[string]dtq.HandlerFunc) {
	t.Helper()
	startWorkerOf(t, openDeployment(t, rc, prefix), queues, mod, hs)
}

// startWorkerOf is startWorker on the deployment d.
func startWorkerOf(t *testing.T, d *dtq.Deployment, queues []string, mod func(*dtq.WorkerConfig), hs map[string]dtq.HandlerFunc) {
	t.Helper()
	qs := map[string]int{}
	for _, q := range queues {
		qs[q] = 1
	}
	cfg := &dtq.WorkerConfig{Queues: qs, Concurrency: 8,
		VisibilityTimeout: 6 * time.Second, HeartbeatInterval: 2 * time.Second,
		RetryBaseDelay: 20 * time.Millisecond, RetryMaxDelay: 100 * time.Millisecond,
		DrainTimeout: 5 * time.Second, Logger: slog.New(slog.DiscardHandler)}
	if mod != nil {
		mod(cfg)
	}
	w, err := d.NewWorker(cfg)
	require.NoError(t, err)
	for typ, h := range hs {
		w.Handle(typ, h)
	}
	workertest.Run(t, w)
}

// TestLifecycleOnEveryMaster runs the task lifecycle on three queues, each
// served by a different master: submission and idempotent replay, claim and
// success, a retry, the dead-letter queue and a requeue, cancel of a running
// task, the event feed, stats, the dashboard's reads and the CLI.
func TestLifecycleOnEveryMaster(t *testing.T) {
	t.Parallel()
	c := sharedCluster(t)
	cc := c.Client(t)
	prefix := runPrefix("life")
	queues := queuesOnEveryMaster(t, c, prefix)
	a := startAPI(t, cc, prefix)

	var broken sync.Map // task type "fragile" fails for good while its queue is marked
	started := sync.Map{}
	// Renewals are far apart: a cancel that arrives within a few seconds came
	// through the shard's pub/sub channel, not a lease renewal.
	startWorker(t, cc, prefix, queues, func(cfg *dtq.WorkerConfig) {
		cfg.VisibilityTimeout, cfg.HeartbeatInterval = 90*time.Second, 30*time.Second
	}, map[string]dtq.HandlerFunc{
		"echo": func(ctx context.Context, task *dtq.Task) (any, error) { return task.Payload, nil },
		"flaky": func(ctx context.Context, task *dtq.Task) (any, error) {
			if task.Attempt < 2 {
				return nil, errors.New("first attempt fails")
			}
			return map[string]int{"attempt": task.Attempt}, nil
		},
		"fragile": func(ctx context.Context, task *dtq.Task) (any, error) {
			if _, ok := broken.Load(task.Queue); ok {
				return nil, dtq.Permanent(errors.New("downstream rejected it"))
			}
			return "fixed", nil
		},
		"block": func(ctx context.Context, task *dtq.Task) (any, error) {
			ch, _ := started.Load(task.ID)
			close(ch.(chan struct{}))
			<-ctx.Done()
			return nil, context.Cause(ctx)
		},
	})

	var cancelTimes sync.Map
	for _, q := range queues {
		t.Run(q, func(t *testing.T) {
			t.Parallel()
			// Submission, replay, mismatch.
			body := fmt.Sprintf(`{"task_type":"echo","queue":%q,"payload":{"n":1}}`, q)
			status, id := a.submit(t, body, "Idempotency-Key", "k-"+q)
			require.Equal(t, http.StatusAccepted, status)
			a.waitStatus(t, id, dtqtype.StatusSucceeded)
			status, again := a.submit(t, body, "Idempotency-Key", "k-"+q)
			require.Equal(t, http.StatusOK, status)
			require.Equal(t, id, again)
			status, _ = a.submit(t, fmt.Sprintf(`{"task_type":"echo","queue":%q,"payload":{"n":2}}`, q), "Idempotency-Key", "k-"+q)
			require.Equal(t, http.StatusUnprocessableEntity, status)

			// A retry.
			_, id = a.submit(t, fmt.Sprintf(`{"task_type":"flaky","queue":%q}`, q))
			ti := a.waitStatus(t, id, dtqtype.StatusSucceeded)
			require.Equal(t, 2, ti.Attempt)

			// Dead-letter, then requeue once fixed.
			broken.Store(q, true)
			_, id = a.submit(t, fmt.Sprintf(`{"task_type":"fragile","queue":%q}`, q))
			a.waitStatus(t, id, dtqtype.StatusDeadLettered)
			status, _ = a.call(t, http.MethodGet, "/api/v1/dlq/"+id, "")
			require.Equal(t, http.StatusOK, status)
			broken.Delete(q)
			status, raw := a.call(t, http.MethodPost, "/api/v1/dlq/"+id+"/requeue", "")
			require.Equal(t, http.StatusOK, status, string(raw))
			a.waitStatus(t, id, dtqtype.StatusSucceeded)

			// Cancel of a running task reaches its handler through the shard.
			ch := make(chan struct{})
			sid := submitBlocking(t, a, q, &started, ch)
			<-ch
			began := time.Now()
			status, raw = a.call(t, http.MethodPost, "/api/v1/tasks/"+sid+"/cancel", "")
			require.Equal(t, http.StatusAccepted, status, string(raw))
			a.waitStatus(t, sid, dtqtype.StatusCancelled)
			took := time.Since(began)
			cancelTimes.Store(q, took)
			require.Less(t, took, 10*time.Second, "the cancel came by lease renewal, not pub/sub")

			// The event feed, stats and the dashboard's reads.
			requireEvent(t, a, q, sid, "TASK_CANCELLED")
			for _, path := range []string{"/api/v1/queues/" + q, "/api/v1/tasks?queue=" + q, "/api/v1/stats?queue=" + q,
				"/api/v1/dlq?queue=" + q, "/api/v1/workers", "/api/v1/queues"} {
				status, raw = a.call(t, http.MethodGet, path, "")
				require.Equal(t, http.StatusOK, status, "%s: %s", path, raw)
			}
			var qs struct {
				Depth int64 `json:"depth"`
			}
			_, raw = a.call(t, http.MethodGet, "/api/v1/queues/"+q, "")
			require.NoError(t, json.Unmarshal(raw, &qs))
			require.Zero(t, qs.Depth)

			// The CLI, through the API.
			var out, errOut bytes.Buffer
			code := cli.Execute(context.Background(), []string{"tasks", "get", id, "--api-url", a.url}, &out, &errOut)
			require.Equal(t, 0, code, errOut.String())
			require.Contains(t, out.String(), "succeeded")
		})
	}
	t.Cleanup(func() {
		cancelTimes.Range(func(k, v any) bool {
			t.Logf("cancel of a running task on queue %s (its own master) took %v", k, v.(time.Duration).Round(time.Millisecond))
			return true
		})
	})
}

func submitBlocking(t *testing.T, a *api, q string, started *sync.Map, ch chan struct{}) string {
	t.Helper()
	// The id is known only after the submission: register the channel
	// under a placeholder the handler cannot see yet, by pausing the queue.
	status, raw := a.call(t, http.MethodPost, "/api/v1/queues/"+q+"/pause", "")
	require.Equal(t, http.StatusOK, status, string(raw))
	status, id := a.submit(t, fmt.Sprintf(`{"task_type":"block","queue":%q,"timeout_ms":120000}`, q))
	require.Equal(t, http.StatusAccepted, status)
	started.Store(id, ch)
	status, raw = a.call(t, http.MethodPost, "/api/v1/queues/"+q+"/resume", "")
	require.Equal(t, http.StatusOK, status, string(raw))
	return id
}

// requireEvent reads the SSE feed of queue from its start until an event
// of type typ for task id arrives.
func requireEvent(t *testing.T, a *api, queue, id, typ string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.url+"/api/v1/events?queue="+queue+"&since=0", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "data:") && strings.Contains(line, id) && strings.Contains(line, `"`+typ+`"`) {
			return
		}
	}
	t.Fatalf("no %s event for %s on queue %s's feed", typ, id, queue)
}
