package faultsuite_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/cmd/dtq/internal/httpapi"
	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/internal/faultproxy"
	"github.com/dtq-io/dtq/internal/rdb"
	"github.com/dtq-io/dtq/internal/redistest"
)

// childEnv set makes this test binary run a worker instead of the tests (the
// SIGSTOP scenario pauses that process).
const childEnv = "DTQ_FAULT_CHILD"

type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}

func TestMain(m *testing.M) {
	redis.SetLogger(quietRedis{}) // dial failures are the point here
	switch os.Getenv(childEnv) {
	case "":
	case wfChild:
		os.Exit(runWorkflowChild())
	default:
		os.Exit(runChild())
	}
	os.Exit(redistest.Main(m))
}

const (
	queue    = "faults"
	taskType = "work"
)

// scenario is one fault under load.
type scenario struct {
	name        string
	workers     int           // in-process workers (default 2)
	visibility  time.Duration // lease length (default 3s)
	maxAttempts int           // of every task (default 5)
	work        time.Duration // handler time (default 50ms)
	every       time.Duration // each of the two producers submits this often (default 20ms)
	redisArgs   []string      // extra redis-server arguments
	child       bool          // also run a worker in a child process
	limits      string        // flow-control limits of the queue (a PUT body), "" = none
	keys        int           // spread tasks over this many concurrency keys (0 = none)
	httpWorkers int           // workers using the HTTP worker protocol (with workers: -1 for no Go worker)
	partitions  int           // create the queue with this many partitions (0 = one)
	// fault runs the fault while the load goes on and returns when it has
	// ended.
	fault func(t *testing.T, r *rig)
}

// rig is one scenario's world: a private redis-server, the proxy in front
// of it, the API and workers talking through the proxy, and producers.
type rig struct {
	sc     scenario
	parts  []string // the queue's partitions' storage names (the queue alone when not partitioned)
	srv    *redistest.Server
	proxy  *faultproxy.Proxy
	direct *redis.Client // to the server itself: faults and checks
	prefix string
	api    *httptest.Server
	insp   *dtq.Inspector // reads through direct
	logs   *lockedBuffer
	child  *exec.Cmd

	mu        sync.Mutex
	acked     map[string]string // idempotency key -> task id
	runs      map[string]int    // task id -> handler runs (in-process workers)
	held      map[string]bool   // task id -> a handler returned success holding its lease
	payloads  map[string]string // task id -> the payload a handler (or HTTP worker) was given
	internals int               // 500 answers
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func newRig(t *testing.T, sc scenario) *rig {
	t.Helper()
	if sc.workers == 0 {
		sc.workers = 2
	}
	if sc.visibility == 0 {
		sc.visibility = 3 * time.Second
	}
	if sc.maxAttempts == 0 {
		sc.maxAttempts = 5
	}
	if sc.work == 0 {
		sc.work = 50 * time.Millisecond
	}
	if sc.every == 0 {
		sc.every = 20 * time.Millisecond
	}
	srv, err := redistest.Start(sc.redisArgs...)
	require.NoError(t, err)
	t.Cleanup(srv.Stop)
	proxy, err := faultproxy.Start(srv.Addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = proxy.Close() })
	r := &rig{sc: sc, srv: srv, proxy: proxy, direct: srv.Client(t), prefix: "f", logs: &lockedBuffer{},
		acked: map[string]string{}, runs: map[string]int{}, held: map[string]bool{}, payloads: map[string]string{}}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("logs of %s:\n%s", sc.name, r.logs.String())
		}
	})
	r.insp = openDeployment(t, r.direct, r.prefix).Inspector()

	// The API uses go-redis's defaults, as most users do (it retries a
	// command on a broken connection by itself).
	apiRedis := redis.NewClient(&redis.Options{Addr: proxy.Addr(), PoolSize: 32})
	t.Cleanup(func() { apiRedis.Close() })
	dep := openDeployment(t, apiRedis, r.prefix)
	c, err := dep.NewClient(nil)
	require.NoError(t, err)
	in := dep.Inspector()
	adm, err := dep.NewAdmin(nil)
	require.NoError(t, err)
	gateway, err := dep.NewWorkerGateway(&dtq.WorkerGatewayConfig{Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	if sc.httpWorkers > 0 {
		// The API process reclaims what its HTTP workers claimed.
		rctx, stop := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = gateway.Run(rctx) }()
		t.Cleanup(func() { stop(); <-done; gateway.Close() })
	}
	api, err := httpapi.New(httpapi.Config{Client: c, Inspector: in, Admin: adm, WorkerGateway: gateway,
		Logger: slog.New(slog.NewTextHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	require.NoError(t, err)
	r.api = httptest.NewServer(api)
	t.Cleanup(r.api.Close)

	r.parts = []string{queue}
	if sc.partitions > 1 {
		_, err := adm.CreateQueue(t.Context(), queue, &dtq.QueueOptions{Partitions: sc.partitions})
		require.NoError(t, err)
		r.parts, err = rdb.New(r.direct, r.prefix).Partitions(t.Context(), queue, false)
		require.NoError(t, err)
		require.Len(t, r.parts, sc.partitions)
	}
	if sc.limits != "" {
		req, err := http.NewRequest(http.MethodPut, r.api.URL+"/api/v1/queues/"+queue+"/limits", strings.NewReader(sc.limits))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
	}
	for i := range sc.workers {
		r.startWorker(t, fmt.Sprintf("w%d", i+1))
	}
	for i := range sc.httpWorkers {
		r.startHTTPWorker(t, fmt.Sprintf("http-%d", i+1))
	}
	if sc.child {
		r.startChild(t)
	}
	return r
}

// startHTTPWorker runs a worker of the HTTP protocol (what a Python or Node
// client does): claim up to 5, "work", complete each, sending every call
// again on a transport error or 503 (complete with the same token is
// idempotent) until the test ends.
func (r *rig) startHTTPWorker(t *testing.T, id string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	hc := &http.Client{Timeout: 15 * time.Second}
	call := func(path, body string) (int, []byte) {
		for ctx.Err() == nil {
			resp, err := hc.Post(r.api.URL+path, "application/json", strings.NewReader(body))
			if err == nil {
				raw, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusServiceUnavailable {
					return resp.StatusCode, raw
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
		return 0, nil
	}
	go func() {
		defer close(done)
		claim := fmt.Sprintf(`{"worker_id":%q,"queues":[%q],"max":5,"wait":"1s","lease":"30s"}`, id, queue)
		for ctx.Err() == nil {
			status, raw := call("/api/v1/claims", claim)
			var got struct {
				Tasks []struct {
					TaskID     string          `json:"task_id"`
					LeaseToken string          `json:"lease_token"`
					Payload    json.RawMessage `json:"payload"`
				} `json:"tasks"`
			}
			if status != http.StatusOK || json.Unmarshal(raw, &got) != nil {
				continue
			}
			for _, tk := range got.Tasks {
				r.mu.Lock()
				r.runs[tk.TaskID]++
				r.held[tk.TaskID] = true // it holds a 30 s lease: longer than any fault here
				r.payloads[tk.TaskID] = string(tk.Payload)
				r.mu.Unlock()
				status, raw := call("/api/v1/tasks/"+tk.TaskID+"/complete", fmt.Sprintf(`{"lease_token":%q,"result":{"ok":true}}`, tk.LeaseToken))
				if status != http.StatusOK && status != 0 {
					t.Errorf("complete of %s answered %d: %s", tk.TaskID, status, raw)
				}
			}
		}
	}()
}

// startWorker runs an in-process worker through the proxy. Its client
// does not retry by itself, so the worker's own retries are what recover.
func (r *rig) startWorker(t *testing.T, id string) {
	t.Helper()
	rc := redis.NewClient(&redis.Options{Addr: r.proxy.Addr(), MaxRetries: -1, PoolSize: 32})
	w, err := openDeployment(t, rc, r.prefix).NewWorker(&dtq.WorkerConfig{Queues: map[string]int{queue: 1},
		Concurrency: 8, WorkerID: id, VisibilityTimeout: r.sc.visibility, HeartbeatInterval: r.sc.visibility / 3,
		RetryBaseDelay: 50 * time.Millisecond, RetryMaxDelay: 200 * time.Millisecond, DrainTimeout: 5 * time.Second,
		Logger: slog.New(slog.NewTextHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelInfo})).With("worker", id)})
	require.NoError(t, err)
	w.HandleFunc(taskType, r.handle)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(30 * time.Second):
			t.Errorf("worker %s did not stop", id)
		}
		rc.Close()
	})
}

// handle is the handler of the in-process workers: it works for sc.work,
// honouring its context, and succeeds.
func (r *rig) handle(ctx context.Context, t *dtq.Task) (any, error) {
	r.mu.Lock()
	r.runs[t.ID]++
	r.payloads[t.ID] = string(t.Payload)
	r.mu.Unlock()
	timer := time.NewTimer(r.sc.work)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
	if !errors.Is(context.Cause(ctx), dtq.ErrLeaseLost) {
		r.mu.Lock()
		r.held[t.ID] = true
		r.mu.Unlock()
	}
	return map[string]bool{"ok": true}, nil
}

// startChild runs a worker in a child process (this binary, see runChild),
// straight to the server.
func (r *rig) startChild(t *testing.T) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=1", "DTQ_FAULT_ADDR="+r.srv.Addr, "DTQ_FAULT_PREFIX="+r.prefix,
		"DTQ_FAULT_VISIBILITY_MS="+strconv.FormatInt(r.sc.visibility.Milliseconds(), 10),
		"DTQ_FAULT_WORK_MS="+strconv.FormatInt(2000, 10)) // long enough to be caught holding a lease
	cmd.Stderr = r.logs
	require.NoError(t, cmd.Start())
	r.child = cmd
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Signal(syscall.SIGTERM)
		waited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(waited) }()
		select {
		case <-waited:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-waited
		}
	})
}

// runChild is the child's main: a worker whose handler counts its runs in
// Redis (the parent cannot see its memory), until SIGTERM.
func runChild() int {
	rc := redis.NewClient(&redis.Options{Addr: os.Getenv("DTQ_FAULT_ADDR")})
	defer rc.Close()
	prefix := os.Getenv("DTQ_FAULT_PREFIX")
	vis, _ := strconv.Atoi(os.Getenv("DTQ_FAULT_VISIBILITY_MS"))
	work, _ := strconv.Atoi(os.Getenv("DTQ_FAULT_WORK_MS"))
	d, err := dtq.Open(rc, &dtq.DeploymentConfig{KeyPrefix: prefix})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	w, err := d.NewWorker(&dtq.WorkerConfig{Queues: map[string]int{queue: 1}, Concurrency: 4,
		WorkerID: "child", VisibilityTimeout: time.Duration(vis) * time.Millisecond,
		HeartbeatInterval: time.Duration(vis) * time.Millisecond / 3, DrainTimeout: 5 * time.Second,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	w.HandleFunc(taskType, func(ctx context.Context, t *dtq.Task) (any, error) {
		rc.HIncrBy(context.WithoutCancel(ctx), prefix+":test:child_runs", t.ID, 1)
		rc.HSet(context.WithoutCancel(ctx), prefix+":test:child_payloads", t.ID, string(t.Payload))
		timer := time.NewTimer(time.Duration(work) * time.Millisecond)
		defer timer.Stop()
		select {
		case <-timer.C:
			return map[string]bool{"ok": true}, nil
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	})
	ctx, stop := signalContext()
	defer stop()
	if err := w.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// submit posts one task with idempotency key key through the API, sending
// it again (same key) until it is acknowledged: 202 or 200, or 409 (a send
// whose answer was lost created it). It returns the task id.
func (r *rig) submit(ctx context.Context, key string) (string, error) {
	// The payload names the key: every handler run checks it got this task's.
	sub := map[string]any{"task_type": taskType, "queue": queue, "max_attempts": r.sc.maxAttempts, "idempotency_key": key,
		"payload": map[string]string{"key": key}}
	if r.sc.keys > 0 {
		sub["concurrency_key"] = fmt.Sprintf("key-%d", int(key[len(key)-1])%r.sc.keys) // by the last digit
	}
	body, _ := json.Marshal(sub)
	delay := 50 * time.Millisecond
	hc := &http.Client{Timeout: 15 * time.Second}
	for {
		id, retry, err := r.post(hc, body)
		if err != nil {
			return "", err
		}
		if !retry {
			r.mu.Lock()
			r.acked[key] = id
			r.mu.Unlock()
			return id, nil
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("submit %s: not acknowledged before the deadline", key)
		case <-time.After(delay):
		}
		delay = min(delay*2, time.Second)
	}
}

// post sends one submission; retry means "not acknowledged, send again".
func (r *rig) post(hc *http.Client, body []byte) (id string, retry bool, err error) {
	resp, err := hc.Post(r.api.URL+"/api/v1/tasks", "application/json", bytes.NewReader(body))
	if err != nil {
		return "", true, nil // the API is up; a timeout or reset here is the fault
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out struct {
		TaskID  string         `json:"task_id"`
		Details map[string]any `json:"details"`
	}
	_ = json.Unmarshal(raw, &out)
	switch resp.StatusCode {
	case http.StatusAccepted, http.StatusOK:
		return out.TaskID, false, nil
	case http.StatusConflict:
		tid, _ := out.Details["task_id"].(string)
		return tid, false, nil
	case http.StatusServiceUnavailable:
		return "", true, nil
	case http.StatusInternalServerError:
		r.mu.Lock()
		r.internals++
		r.mu.Unlock()
		return "", true, nil
	}
	return "", false, fmt.Errorf("submit answered %d: %s", resp.StatusCode, raw)
}

// produce submits a task every sc.every (each sent until acknowledged)
// until ctx ends.
func (r *rig) produce(ctx context.Context, t *testing.T, name string, wg *sync.WaitGroup) {
	defer wg.Done()
	for i := 0; ctx.Err() == nil; i++ {
		sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		_, err := r.submit(sctx, fmt.Sprintf("%s-%d", name, i))
		cancel()
		if err != nil {
			t.Error(err)
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(r.sc.every):
		}
	}
}

func (r *rig) succeededCount(t *testing.T) int {
	t.Helper()
	r.mu.Lock()
	ids := make([]string, 0, len(r.acked))
	for _, id := range r.acked {
		ids = append(ids, id)
	}
	r.mu.Unlock()
	n := 0
	for _, id := range ids {
		if ti, err := r.insp.GetTask(context.Background(), id); err == nil && ti.Status == dtqtype.StatusSucceeded {
			n++
		}
	}
	return n
}

// terminal reports whether s ends a task.
func terminal(s dtqtype.Status) bool {
	switch s {
	case dtqtype.StatusSucceeded, dtqtype.StatusFailed, dtqtype.StatusDeadLettered, dtqtype.StatusCancelled, dtqtype.StatusExpired:
		return true
	}
	return false
}

var terminalEvents = map[string]bool{"TASK_SUCCEEDED": true, "TASK_FAILED": true, "TASK_DEAD_LETTERED": true,
	"TASK_CANCELLED": true, "TASK_EXPIRED": true}

// run drives a scenario: load, the fault, recovery, then the checks and
// the FAULT line.
func run(t *testing.T, sc scenario) {
	t.Parallel()
	r := newRig(t, sc)
	ctx := context.Background()

	loadCtx, stopLoad := context.WithCancel(ctx)
	var producers sync.WaitGroup
	for i := range 2 {
		producers.Add(1)
		go r.produce(loadCtx, t, fmt.Sprintf("p%d", i), &producers)
	}
	defer func() { stopLoad(); producers.Wait() }()
	require.Eventually(t, func() bool { return r.succeededCount(t) >= 20 }, 60*time.Second, 20*time.Millisecond,
		"the load never got going")

	sc.fault(t, r)
	faultEnd := time.Now()

	// Recovery: a fresh task, submitted after the fault, succeeds.
	pctx, cancel := context.WithTimeout(ctx, time.Minute)
	probe, err := r.submit(pctx, "probe")
	cancel()
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		ti, err := r.insp.GetTask(ctx, probe)
		return err == nil && ti.Status == dtqtype.StatusSucceeded
	}, 60*time.Second, 10*time.Millisecond, "a task submitted after the fault never succeeded")
	recovered := time.Since(faultEnd)

	// Load a little longer on the recovered system, then stop producing.
	time.Sleep(time.Second)
	stopLoad()
	producers.Wait()

	r.mu.Lock()
	acked := make(map[string]string, len(r.acked))
	for k, v := range r.acked {
		acked[k] = v
	}
	r.mu.Unlock()

	// Every acknowledged task ends; give the system time to drain.
	var stuck []string
	deadline := time.Now().Add(90 * time.Second)
	for {
		stuck = stuck[:0]
		for _, id := range acked {
			ti, err := r.insp.GetTask(ctx, id)
			if err != nil || !terminal(ti.Status) {
				stuck = append(stuck, id)
			}
		}
		if len(stuck) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}

	// The checks: one terminal event per task, no succeeded-while-held task
	// ending otherwise, nothing left in the live structures.
	keys := rdb.NewKeys(r.prefix)
	ends := map[string]int{}
	for _, part := range r.parts {
		evs, err := r.direct.XRange(ctx, keys.Events(part), "-", "+").Result()
		require.NoError(t, err)
		for _, e := range evs {
			if typ, _ := e.Values["type"].(string); terminalEvents[typ] {
				id, _ := e.Values["task_id"].(string)
				ends[id]++
			}
		}
	}
	childRuns, _ := r.direct.HGetAll(ctx, r.prefix+":test:child_runs").Result()
	childPayloads, _ := r.direct.HGetAll(ctx, r.prefix+":test:child_payloads").Result()
	r.mu.Lock()
	// A queued task's payload waits in its stream entry until the claim
	// moves it into the task: whoever ran a task must have been given its
	// own payload, whatever the fault did to the claim.
	var badPayloads []string
	for key, id := range acked {
		want := `{"key":"` + key + `"}`
		for _, got := range []string{r.payloads[id], childPayloads[id]} {
			if got != "" && got != want {
				badPayloads = append(badPayloads, fmt.Sprintf("%s: ran with %s, submitted %s", id, got, want))
			}
		}
	}
	lost, succeeded, duplicates, twice := 0, 0, 0, 0
	var lostIDs []string
	for _, id := range acked {
		ti, err := r.insp.GetTask(ctx, id)
		switch {
		case err != nil:
			lost++
			lostIDs = append(lostIDs, id+" (missing)")
			continue
		case ti.Status == dtqtype.StatusSucceeded:
			succeeded++
		case r.held[id] && terminal(ti.Status):
			lost++
			lostIDs = append(lostIDs, fmt.Sprintf("%s (%s %s after a held success)", id, ti.Status, ti.Execution.ErrorClass))
		}
		if terminal(ti.Status) && ends[id] != 1 {
			twice++
		}
		runs := r.runs[id]
		if n, err := strconv.Atoi(childRuns[id]); err == nil {
			runs += n
		}
		duplicates += max(0, runs-1)
	}
	internals := r.internals
	r.mu.Unlock()

	line := fmt.Sprintf("FAULT %s: acknowledged=%d succeeded=%d lost=%d stuck=%d duplicates=%d recovered_in=%s",
		sc.name, len(acked), succeeded, lost, len(stuck), duplicates, recovered.Round(10*time.Millisecond))
	fmt.Println(line)
	t.Log(line)
	require.Empty(t, lostIDs, "acknowledged tasks lost")
	require.Empty(t, badPayloads, "tasks run with another payload")
	require.Empty(t, stuck, "acknowledged tasks not terminal")
	require.Zero(t, twice, "tasks with more than one terminal event")
	require.Zero(t, internals, "500 answers during the fault")
	require.Greater(t, len(acked), 20, "too little load to mean anything")
	finished := map[string]int64{}
	for _, part := range r.parts {
		require.Zero(t, r.direct.ZCard(ctx, keys.Lease(part)).Val(), "leases left")
		if depth := r.direct.Get(ctx, keys.Depth(part)).Val(); depth != "0" {
			// A partition no task reached has no counter yet.
			require.True(t, len(r.parts) > 1 && depth == "" && r.direct.Exists(ctx, keys.QueueNum(part)).Val() == 1,
				"depth drifted: %q in %s", depth, part)
		}
		// Flow control gave back every slot it took, once.
		require.Zero(t, r.direct.HLen(ctx, keys.KeyRunning(part)).Val(), "key slots left taken")
		require.Contains(t, []string{"", "0"}, r.direct.Get(ctx, keys.Held(part)).Val(), "held tasks left")
		// Fair sharing: every key's queue drained, no key left active or
		// parked, the per-band task counts back to zero.
		left, err := r.direct.Keys(ctx, keys.KeyQueuePrefix(part)+"*").Result()
		require.NoError(t, err)
		require.Empty(t, left, "key queues left with tasks")
		for b := range 10 {
			require.Zero(t, r.direct.ZCard(ctx, keys.FairActive(part, b)).Val(), "band %d has active keys left", b)
			require.Contains(t, []string{"", "0"}, r.direct.HGet(ctx, keys.FairState(part), fmt.Sprintf("n%d", b)).Val(), "band %d counts tasks left", b)
		}
		require.Zero(t, r.direct.ZCard(ctx, keys.FairKeys(part)).Val(), "keys with tasks left")
		require.Zero(t, r.direct.ZCard(ctx, keys.FairDelay(part)).Val(), "parked keys left")
		if strings.Contains(sc.limits, "fairness") {
			// and the tasks did go through the key queues.
			seq, _ := r.direct.HGet(ctx, keys.FairState(part), "seq").Int64()
			require.Positive(t, seq, "no task went through a key queue")
			require.Equal(t, int64(1), r.direct.Exists(ctx, keys.FairOn(part)).Val(), "key queues not on")
		}
		// Retention started once per finished task: a finalize sent again
		// never counts a task twice.
		iter := r.direct.Scan(ctx, 0, keys.TaskPrefix(part)+"*", 1000).Iterator()
		for iter.Next(ctx) {
			if st := r.direct.HGet(ctx, iter.Val(), "status").Val(); terminal(dtqtype.Status(st)) && st != "dead_lettered" {
				finished[st]++
			}
		}
		require.NoError(t, iter.Err())
	}
	qi, err := r.insp.GetQueue(ctx, queue)
	require.NoError(t, err)
	delete(qi.Retained, "dead_lettered") // counted once out of the DLQ; the DLQ holds them here
	require.Equal(t, finished, qi.Retained, "retained counts")
}

func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
}

func redisZ(score float64, member string) redis.Z { return redis.Z{Score: score, Member: member} }
