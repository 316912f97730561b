package faultsuite_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/internal/faultproxy"
	"github.com/dtq-io/dtq/internal/rdb"
	"github.com/dtq-io/dtq/internal/redistest"
)

// The workflow fault scenarios (docs/workflows.md): workflows
// whose nodes run on two queues (so a submission writes nodes in two slots
// and a relay runs per queue) while the proxy loses replies of, or cuts,
// the calls of each workflow script, while Redis is away, while a worker
// is killed and while Redis restarts. Each prints one FAULT line; see
// wfRig.check for what each asserts.

// wfQueues are the queues of the nodes.
var wfQueues = []string{"wfa", "wfb"}

const (
	nodeType = "node"
	// wfChild is childEnv's value for a child that runs a workflow worker.
	wfChild = "workflow"
	// blockFor bounds a blocking node's run: a node whose workflow is never
	// cancelled ends succeeded after it.
	blockFor = 20 * time.Second
)

// wfScenario configures a workflow rig.
type wfScenario struct {
	name        string
	workers     int           // in-process workers (default 2)
	visibility  time.Duration // lease length (default 3s)
	maxAttempts int           // of every node (default 5)
	work        time.Duration // handler time (default 20ms)
	redisArgs   []string
	child       bool // also run a worker in a child process
}

// wfRig is a workflow scenario's world: a private redis-server, one proxy
// in front of it for the submitting side (client and admin) and one for
// the workers, so that a fault can be aimed at either side's calls.
type wfRig struct {
	sc     wfScenario
	srv    *redistest.Server
	sub    *faultproxy.Proxy // the client and admin go through it
	wrk    *faultproxy.Proxy // the workers go through it
	direct *redis.Client
	prefix string
	keys   rdb.Keys
	client *dtq.Client
	admin  *dtq.Admin
	insp   *dtq.Inspector // reads through direct
	logs   *lockedBuffer
	child  *exec.Cmd

	mu     sync.Mutex
	starts map[string]int // "<task id>/<attempt>" -> handler starts (in-process workers)
	early  []string       // nodes that started before every dep succeeded, or while their workflow was submitting
	subs   []*wfSubmit
}

// wfSubmit is one submission and what it was told.
type wfSubmit struct {
	name    string
	nodes   int                    // nodes it has once it ended: submitted and added
	added   int                    // of which added by fan-out (a cancel may come first)
	want    dtqtype.WorkflowStatus // the status the workflow must end with when it exists
	id      string                 // the workflow id the answer named ("" for none)
	outcome string                 // "ok", "unknown" (*OutcomeUnknownError) or "error" (nothing written)
	err     error
	block   string // the ref of the node that blocks until the workflow is cancelled
}

func newWfRig(t *testing.T, sc wfScenario) *wfRig {
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
		sc.work = 20 * time.Millisecond
	}
	srv, err := redistest.Start(sc.redisArgs...)
	require.NoError(t, err)
	t.Cleanup(srv.Stop)
	sub, err := faultproxy.Start(srv.Addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = sub.Close() })
	wrk, err := faultproxy.Start(srv.Addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = wrk.Close() })
	r := &wfRig{sc: sc, srv: srv, sub: sub, wrk: wrk, direct: srv.Client(t), prefix: "f", keys: rdb.NewKeys("f"),
		logs: &lockedBuffer{}, starts: map[string]int{}}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("logs of %s:\n%s", sc.name, r.logs.String())
		}
	})
	r.insp = openDeployment(t, r.direct, r.prefix).Inspector()
	// The submitting side uses go-redis's defaults, as most users do.
	subRedis := redis.NewClient(&redis.Options{Addr: sub.Addr(), PoolSize: 32})
	t.Cleanup(func() { subRedis.Close() })
	d := openDeployment(t, subRedis, r.prefix)
	r.client, err = d.NewClient(nil)
	require.NoError(t, err)
	r.admin, err = d.NewAdmin(&dtq.AdminConfig{Client: r.client})
	require.NoError(t, err)
	for i := range sc.workers {
		r.startWorker(t, fmt.Sprintf("w%d", i+1))
	}
	if sc.child {
		r.startChild(t)
	}
	return r
}

// startWorker runs an in-process worker of both queues through the
// workers' proxy; its client does not resend by itself.
func (r *wfRig) startWorker(t *testing.T, id string) {
	t.Helper()
	rc := redis.NewClient(&redis.Options{Addr: r.wrk.Addr(), MaxRetries: -1, PoolSize: 32})
	w, err := openDeployment(t, rc, r.prefix).NewWorker(&dtq.WorkerConfig{Queues: map[string]int{wfQueues[0]: 1, wfQueues[1]: 1},
		Concurrency: 8, WorkerID: id, VisibilityTimeout: r.sc.visibility, HeartbeatInterval: r.sc.visibility / 3,
		RetryBaseDelay: 50 * time.Millisecond, RetryMaxDelay: 200 * time.Millisecond, DrainTimeout: 5 * time.Second,
		Logger: slog.New(slog.NewTextHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelInfo})).With("worker", id)})
	require.NoError(t, err)
	w.HandleFunc(nodeType, func(ctx context.Context, task *dtq.Task) (any, error) {
		r.mu.Lock()
		r.starts[fmt.Sprintf("%s/%d", task.ID, task.Attempt)]++
		r.mu.Unlock()
		if wrong := checkStart(context.WithoutCancel(ctx), r.direct, r.keys, task); wrong != "" {
			r.mu.Lock()
			r.early = append(r.early, wrong)
			r.mu.Unlock()
		}
		return runNode(ctx, task, r.sc.work)
	})
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

// nodePayload is what a node's payload asks of its handler.
type nodePayload struct {
	Fail  bool `json:"fail"`  // fail for good
	Block bool `json:"block"` // run until cancelled (at most blockFor)
	Add   int  `json:"add"`   // add this many nodes below itself (fan-out), then succeed
}

// runNode is a node's handler after its start was recorded: it works for
// work, fails, blocks or adds nodes as its payload says.
func runNode(ctx context.Context, task *dtq.Task, work time.Duration) (any, error) {
	var p nodePayload
	_ = json.Unmarshal(task.Payload, &p)
	if p.Add > 0 {
		kids := make([]dtq.Node, p.Add)
		for i := range kids {
			kids[i] = dtq.Node{Ref: fmt.Sprintf("%s-k%d", task.Ref, i), Deps: []string{task.Ref},
				Submission: dtq.Submission{Queue: wfQueues[i%2], Type: nodeType, Payload: nodePayload{}, MaxAttempts: task.MaxAttempts}}
		}
		// Sent again by the task's retry when it fails: the same nodes
		// come back.
		if _, err := dtq.AddNodes(ctx, kids...); err != nil {
			return nil, err
		}
	}
	if p.Block {
		work = blockFor
	}
	timer := time.NewTimer(work)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
	if p.Fail {
		return nil, dtq.Permanent(errors.New("asked to fail"))
	}
	return map[string]string{"ref": task.Ref}, nil
}

// checkStart reads Redis itself when a node starts: its workflow must be
// past submitting (no node runs before every node is written) and every
// dep the node has must have ended succeeded (every node's policy is
// fail, so a node below a failed dep never runs). It returns what is
// wrong, "" when nothing is (or when Redis could not be read).
func checkStart(ctx context.Context, rc *redis.Client, keys rdb.Keys, task *dtq.Task) string {
	if task.WorkflowID == "" {
		return fmt.Sprintf("%s: a node task without its workflow", task.ID)
	}
	st, err := rc.HGet(ctx, keys.Workflow(task.WorkflowID), "status").Result()
	if err != nil {
		return ""
	}
	if st == string(dtqtype.WorkflowSubmitting) {
		return fmt.Sprintf("%s (%s): ran while its workflow %s was submitting", task.Ref, task.ID, task.WorkflowID)
	}
	raw, err := rc.HGet(ctx, keys.WorkflowNodes(task.WorkflowID), "d:"+task.Ref).Result()
	if err != nil {
		return "" // no deps (redis.Nil), or Redis away
	}
	var deps []string
	_ = json.Unmarshal([]byte(raw), &deps)
	outcomes := task.Deps()
	if len(outcomes) != len(deps) {
		return fmt.Sprintf("%s: started with %d deps' outcomes of %d", task.Ref, len(outcomes), len(deps))
	}
	for _, d := range deps {
		v, err := rc.HMGet(ctx, keys.WorkflowNodes(task.WorkflowID), "t:"+d, "q:"+d).Result()
		if err != nil {
			return ""
		}
		tid, _ := v[0].(string)
		q, _ := v[1].(string)
		ds, err := rc.HGet(ctx, keys.Task(q, tid), "status").Result()
		if err != nil {
			return ""
		}
		if ds != string(dtqtype.StatusSucceeded) || outcomes[d].Status != dtqtype.StatusSucceeded {
			return fmt.Sprintf("%s: started while dep %s was %s (told %s)", task.Ref, d, ds, outcomes[d].Status)
		}
	}
	return ""
}

// startChild runs a workflow worker in a child process (this binary, see
// runWorkflowChild), straight to the server; its handlers take 1.5 s, so
// that it is caught holding leases.
func (r *wfRig) startChild(t *testing.T) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+wfChild, "DTQ_FAULT_ADDR="+r.srv.Addr, "DTQ_FAULT_PREFIX="+r.prefix,
		"DTQ_FAULT_VISIBILITY_MS="+strconv.FormatInt(r.sc.visibility.Milliseconds(), 10), "DTQ_FAULT_WORK_MS=1500")
	cmd.Stderr = r.logs
	require.NoError(t, cmd.Start())
	r.child = cmd
	waited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(waited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-waited:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-waited
		}
	})
}

// runWorkflowChild is the workflow child's main: a worker of both queues
// whose handler records its starts and what checkStart finds in Redis
// (the parent cannot see its memory), until SIGTERM or SIGKILL.
func runWorkflowChild() int {
	rc := redis.NewClient(&redis.Options{Addr: os.Getenv("DTQ_FAULT_ADDR")})
	defer rc.Close()
	prefix := os.Getenv("DTQ_FAULT_PREFIX")
	keys := rdb.NewKeys(prefix)
	vis, _ := strconv.Atoi(os.Getenv("DTQ_FAULT_VISIBILITY_MS"))
	work, _ := strconv.Atoi(os.Getenv("DTQ_FAULT_WORK_MS"))
	d, err := dtq.Open(rc, &dtq.DeploymentConfig{KeyPrefix: prefix})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	w, err := d.NewWorker(&dtq.WorkerConfig{Queues: map[string]int{wfQueues[0]: 1, wfQueues[1]: 1},
		Concurrency: 4, WorkerID: "child", VisibilityTimeout: time.Duration(vis) * time.Millisecond,
		HeartbeatInterval: time.Duration(vis) * time.Millisecond / 3, DrainTimeout: 5 * time.Second,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	w.HandleFunc(nodeType, func(ctx context.Context, task *dtq.Task) (any, error) {
		bg := context.WithoutCancel(ctx)
		rc.HIncrBy(bg, prefix+":test:child_starts", fmt.Sprintf("%s/%d", task.ID, task.Attempt), 1)
		if wrong := checkStart(bg, rc, keys, task); wrong != "" {
			rc.RPush(bg, prefix+":test:child_early", wrong)
		}
		return runNode(ctx, task, time.Duration(work)*time.Millisecond)
	})
	ctx, stop := signalContext()
	defer stop()
	if err := w.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// node is a node of type nodeType on queue q with payload p.
func (r *wfRig) node(ref, q string, p nodePayload, deps ...string) dtq.Node {
	return dtq.Node{Ref: ref, Deps: deps, Submission: dtq.Submission{Queue: q, Type: nodeType, Payload: p,
		MaxAttempts: r.sc.maxAttempts}}
}

// diamond is a small workflow over both queues: a chain into a fan-out
// into a fan-in into a chain (root → f0, f1, f2 → join → tail); f2 adds
// two nodes below itself when it runs. f1 does what p says.
func (r *wfRig) diamond(p nodePayload) []dtq.Node {
	return []dtq.Node{
		r.node("root", wfQueues[0], nodePayload{}),
		r.node("f0", wfQueues[1], nodePayload{}, "root"),
		r.node("f1", wfQueues[0], p, "root"),
		r.node("f2", wfQueues[1], nodePayload{Add: 2}, "root"),
		r.node("join", wfQueues[0], nodePayload{}, "f0", "f1", "f2"),
		r.node("tail", wfQueues[1], nodePayload{}, "join"),
	}
}

// big is a 200-node workflow over both queues: root → a fan-out of 60 → a
// fan-in → a chain of 60 → a fan-out of 77 → a fan-in.
func (r *wfRig) big() []dtq.Node {
	q := func(i int) string { return wfQueues[i%2] }
	nodes := []dtq.Node{r.node("root", q(0), nodePayload{})}
	var fan []string
	for i := range 60 {
		ref := fmt.Sprintf("fan-%d", i)
		fan = append(fan, ref)
		nodes = append(nodes, r.node(ref, q(i), nodePayload{}, "root"))
	}
	nodes = append(nodes, r.node("join", q(1), nodePayload{}, fan...))
	prev := "join"
	for i := range 60 {
		ref := fmt.Sprintf("chain-%d", i)
		nodes = append(nodes, r.node(ref, q(i), nodePayload{}, prev))
		prev = ref
	}
	var fan2 []string
	for i := range 77 {
		ref := fmt.Sprintf("out-%d", i)
		fan2 = append(fan2, ref)
		nodes = append(nodes, r.node(ref, q(i+1), nodePayload{}, prev))
	}
	nodes = append(nodes, r.node("end", q(0), nodePayload{}, fan2...))
	return nodes
}

// submit submits nodes once and records what it was told.
func (r *wfRig) submit(ctx context.Context, name string, nodes []dtq.Node, want dtqtype.WorkflowStatus) *wfSubmit {
	s := &wfSubmit{name: name, nodes: len(nodes), want: want}
	for _, n := range nodes {
		p := n.Payload.(nodePayload)
		if p.Block {
			s.block = n.Ref
		}
		s.nodes += p.Add
		s.added += p.Add
	}
	res, err := r.client.SubmitWorkflow(ctx, dtq.Workflow{Name: name, Nodes: nodes})
	var unknown *dtq.OutcomeUnknownError
	switch {
	case err == nil:
		s.id, s.outcome = res.WorkflowID, "ok"
	case errors.As(err, &unknown):
		s.id, s.outcome, s.err = unknown.TaskID, "unknown", err
	default:
		s.outcome, s.err = "error", err
	}
	r.mu.Lock()
	r.subs = append(r.subs, s)
	r.mu.Unlock()
	return s
}

// nodeTask reads the task id and queue of node ref of workflow id.
func (r *wfRig) nodeTask(ctx context.Context, id, ref string) (taskID, queue string) {
	v, err := r.direct.HMGet(ctx, r.keys.WorkflowNodes(id), "t:"+ref, "q:"+ref).Result()
	if err != nil {
		return "", ""
	}
	taskID, _ = v[0].(string)
	queue, _ = v[1].(string)
	return taskID, queue
}

// cancelWhenRunning waits until s's blocking node runs, then cancels s's
// workflow through the admin (sending it again, as a caller would, while it
// answers an error). It reports whether a cancel was answered.
func (r *wfRig) cancelWhenRunning(t *testing.T, s *wfSubmit) bool {
	t.Helper()
	ctx := context.Background()
	if s.id == "" {
		return false
	}
	require.Eventually(t, func() bool {
		tid, q := r.nodeTask(ctx, s.id, s.block)
		return tid != "" && r.direct.HGet(ctx, r.keys.Task(q, tid), "status").Val() == string(dtqtype.StatusRunning)
	}, 60*time.Second, 10*time.Millisecond, "the blocking node of %s never ran", s.name)
	for i := 0; ; i++ {
		_, ended, err := r.admin.CancelWorkflow(ctx, s.id)
		if err == nil {
			require.False(t, ended, "workflow %s ended before its cancel", s.name)
			return true
		}
		require.Less(t, i, 20, "cancel of %s kept failing: %v", s.name, err)
		time.Sleep(100 * time.Millisecond) // a caller's pause before it sends again
	}
}

// waitEnded waits until every workflow of subs that exists has ended; it
// fails the test naming those that did not within 60 s, with their nodes.
func (r *wfRig) waitEnded(t *testing.T, subs []*wfSubmit) {
	t.Helper()
	ctx := context.Background()
	var left []*wfSubmit
	for deadline := time.Now().Add(60 * time.Second); ; {
		left = left[:0]
		for _, s := range subs {
			if s.id == "" {
				continue
			}
			st, err := r.direct.HGet(ctx, r.keys.Workflow(s.id), "status").Result()
			switch {
			case errors.Is(err, redis.Nil) && s.outcome != "ok":
			case err != nil, !dtqtype.WorkflowStatus(st).Terminal():
				left = append(left, s)
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, s := range left {
		rec, _ := r.direct.HGetAll(ctx, r.keys.Workflow(s.id)).Result()
		graph, _ := r.direct.HGetAll(ctx, r.keys.WorkflowNodes(s.id)).Result()
		rels, _ := r.direct.HGetAll(ctx, r.keys.WorkflowReleases(s.id)).Result()
		defs, _ := r.direct.HKeys(ctx, r.keys.WorkflowDefs(s.id)).Result()
		var nodes []string
		for f, st := range graph {
			if ref, ok := strings.CutPrefix(f, "s:"); ok {
				tid, q := graph["t:"+ref], graph["q:"+ref]
				nodes = append(nodes, fmt.Sprintf("%s=%s(task %s %s, n=%s)", ref, st, tid,
					r.direct.HGet(ctx, r.keys.Task(q, tid), "status").Val(), graph["n:"+ref]))
			}
		}
		slices.Sort(nodes)
		t.Errorf("workflow %s (%s) did not end: record %v nodes %v releases %v definitions %v attention %v",
			s.id, s.name, rec, nodes, rels, defs, r.direct.ZScore(ctx, r.keys.WorkflowAttention(), s.id).Val())
	}
	t.FailNow()
}

// wfFigures are a scenario's results (see check); retried counts nodes
// that ended in an attempt after their first.
type wfFigures struct {
	workflows, ok, unknown, refused, existing, nodes, terminal int
	stuck, doubleRelease, doubleRun, overRun, early, orphans   int
	wrongStatus, retried                                       int
	problems                                                   []string
}

func (f *wfFigures) problemf(format string, args ...any) {
	if len(f.problems) < 40 {
		f.problems = append(f.problems, fmt.Sprintf(format, args...))
	}
}

// settle waits until the system is at rest: every workflow that exists has
// ended, no outbox entry, attention entry, waiting node, lease or depth is
// left (the sweep takes attention entries older than 3 s every 2 s).
func (r *wfRig) settle(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	r.mu.Lock()
	subs := slices.Clone(r.subs)
	r.mu.Unlock()
	r.waitEnded(t, subs)
	deadline := time.Now().Add(60 * time.Second)
	for {
		left := r.direct.ZCard(ctx, r.keys.WorkflowAttention()).Val()
		for _, q := range wfQueues {
			left += r.direct.XLen(ctx, r.keys.WorkflowOutbox(q)).Val() + r.direct.ZCard(ctx, r.keys.Waiting(q)).Val() +
				r.direct.ZCard(ctx, r.keys.Lease(q)).Val()
			if d := r.direct.Get(ctx, r.keys.Depth(q)).Val(); d != "" && d != "0" {
				left++
			}
		}
		if left == 0 || time.Now().After(deadline) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// check settles the system and takes its figures (see wfFigures):
//   - a submission answered ok has its workflow; one answered
//     OutcomeUnknown has its workflow whole (every node written, ended) or
//     nothing at all (no record, no node, no index entry); one answered
//     another error has nothing; Redis holds no workflow nobody was told
//     of and no node whose workflow does not exist (orphans);
//   - every workflow has ended with the status its shape gives; every
//     node's task has ended as its workflow knows it, with one terminal
//     event; no release or definition is left stored;
//   - every node was released at most once (one TASK_QUEUED of attempt 1
//     from wf_release) and exactly once if it ran; no attempt ran twice,
//     no node ran more often than its attempts; no node started before
//     every dep succeeded or while its workflow was submitting (early);
//   - nothing stuck: no waiting node, lease, outbox or attention entry,
//     depth 0.
func (r *wfRig) check(t *testing.T) wfFigures {
	t.Helper()
	r.settle(t)
	ctx := context.Background()
	var f wfFigures
	r.mu.Lock()
	subs := slices.Clone(r.subs)
	starts := make(map[string]int, len(r.starts))
	for k, v := range r.starts {
		starts[k] = v
	}
	f.early = len(r.early)
	for _, e := range r.early {
		f.problemf("early start: %s", e)
	}
	r.mu.Unlock()
	childStarts, _ := r.direct.HGetAll(ctx, r.prefix+":test:child_starts").Result()
	for k, v := range childStarts {
		n, _ := strconv.Atoi(v)
		starts[k] += n
	}
	childEarly, _ := r.direct.LRange(ctx, r.prefix+":test:child_early", 0, -1).Result()
	f.early += len(childEarly)
	for _, e := range childEarly {
		f.problemf("early start (child): %s", e)
	}
	runs := map[string]int{} // task id -> starts
	for k, n := range starts {
		id, att, _ := strings.Cut(k, "/")
		runs[id] += n
		if n > 1 {
			f.doubleRun++
			f.problemf("task %s attempt %s started %d times", id, att, n)
		}
	}

	// Per queue: release and terminal events per task, and every node task.
	releases, ends := map[string]int{}, map[string]int{}
	type taskRow struct{ queue, wf, status string }
	tasks := map[string]taskRow{}
	for _, q := range wfQueues {
		evs, err := r.direct.XRange(ctx, r.keys.Events(q), "-", "+").Result()
		require.NoError(t, err)
		for _, e := range evs {
			typ, _ := e.Values["type"].(string)
			id, _ := e.Values["task_id"].(string)
			switch {
			case (typ == "TASK_QUEUED" || typ == "TASK_PENDING") && e.Values["attempt"] == "1" && e.Values["meta"] == "":
				releases[id]++
			case terminalEvents[typ]:
				ends[id]++
			}
		}
		iter := r.direct.Scan(ctx, 0, r.keys.TaskPrefix(q)+"*", 1000).Iterator()
		for iter.Next(ctx) {
			k := iter.Val()
			id := strings.TrimPrefix(k, r.keys.TaskPrefix(q))
			if strings.Contains(id, ":") {
				continue // an ended marker
			}
			v := r.direct.HMGet(ctx, k, "wf", "status").Val()
			s := func(i int) string { x, _ := v[i].(string); return x }
			tasks[id] = taskRow{queue: q, wf: s(0), status: s(1)}
		}
		require.NoError(t, iter.Err())
		if n := r.direct.ZCard(ctx, r.keys.Waiting(q)).Val(); n > 0 {
			f.stuck += int(n)
			f.problemf("queue %s: %d nodes left waiting", q, n)
		}
		if n := r.direct.ZCard(ctx, r.keys.Lease(q)).Val(); n > 0 {
			f.problemf("queue %s: %d leases left", q, n)
		}
		if n := r.direct.XLen(ctx, r.keys.WorkflowOutbox(q)).Val(); n > 0 {
			f.problemf("queue %s: %d outbox entries left", q, n)
		}
		if d := r.direct.Get(ctx, r.keys.Depth(q)).Val(); d != "" && d != "0" {
			f.problemf("queue %s: depth %s", q, d)
		}
	}
	if n := r.direct.ZCard(ctx, r.keys.WorkflowAttention()).Val(); n > 0 {
		f.problemf("%d attention entries left", n)
	}

	// Every workflow record in Redis was named by an answer.
	told := map[string]*wfSubmit{}
	for _, s := range subs {
		if s.id != "" {
			told[s.id] = s
		}
	}
	iter := r.direct.Scan(ctx, 0, r.prefix+":wf:{wf:*", 1000).Iterator()
	for iter.Next(ctx) {
		k := iter.Val()
		_, id, _ := strings.Cut(k, "}:")
		if rdb.ValidWorkflowID(id) && told[id] == nil {
			f.problemf("workflow %s exists but no answer named it", id)
		}
	}
	require.NoError(t, iter.Err())
	// Every node task belongs to a workflow that exists.
	byWorkflow := map[string]int{}
	for id, tr := range tasks {
		wf, _, _ := strings.Cut(tr.wf, ":")
		byWorkflow[wf]++
		if tr.wf == "" || r.direct.Exists(ctx, r.keys.Workflow(wf)).Val() == 0 {
			f.orphans++
			f.problemf("task %s (%s) belongs to no workflow that exists", id, tr.wf)
		}
	}

	f.workflows = len(subs)
	for _, s := range subs {
		switch s.outcome {
		case "ok":
			f.ok++
		case "unknown":
			f.unknown++
		default:
			f.refused++
		}
		if s.id == "" {
			continue
		}
		rec, err := r.direct.HGetAll(ctx, r.keys.Workflow(s.id)).Result()
		require.NoError(t, err)
		if len(rec) == 0 {
			if s.outcome == "ok" {
				f.problemf("workflow %s (%s) was answered ok but does not exist", s.id, s.name)
			}
			if byWorkflow[s.id] > 0 || r.direct.ZScore(ctx, r.keys.WorkflowIndex(), s.id).Err() == nil {
				f.problemf("workflow %s (%s) does not exist but %d of its nodes (or its listing entry) do", s.id, s.name, byWorkflow[s.id])
			}
			continue
		}
		f.existing++
		if st := dtqtype.WorkflowStatus(rec["status"]); !st.Terminal() {
			f.stuck++
			f.problemf("workflow %s (%s) is still %s", s.id, s.name, st)
		} else if st != s.want {
			f.wrongStatus++
			f.problemf("workflow %s (%s) ended %s, not %s", s.id, s.name, st, s.want)
		}
		if n := r.direct.HLen(ctx, r.keys.WorkflowReleases(s.id)).Val(); n > 0 {
			f.problemf("workflow %s (%s): %d releases left stored", s.id, s.name, n)
		}
		if n := r.direct.HLen(ctx, r.keys.WorkflowDefs(s.id)).Val(); n > 0 {
			f.problemf("workflow %s (%s): %d definitions left", s.id, s.name, n)
		}
		graph, err := r.direct.HGetAll(ctx, r.keys.WorkflowNodes(s.id)).Result()
		require.NoError(t, err)
		count := 0
		for field, known := range graph {
			ref, ok := strings.CutPrefix(field, "s:")
			if !ok {
				continue
			}
			count++
			f.nodes++
			tid := graph["t:"+ref]
			tr, ok := tasks[tid]
			switch {
			case !ok:
				f.stuck++
				f.problemf("workflow %s (%s) node %s: task %s missing", s.id, s.name, ref, tid)
				continue
			case !terminal(dtqtype.Status(tr.status)):
				f.stuck++
				f.problemf("workflow %s (%s) node %s is %s", s.id, s.name, ref, tr.status)
			case tr.status != known:
				f.problemf("workflow %s (%s) node %s: task %s, workflow knows %s", s.id, s.name, ref, tr.status, known)
			default:
				f.terminal++
			}
			if ends[tid] != 1 {
				f.problemf("workflow %s (%s) node %s: %d terminal events", s.id, s.name, ref, ends[tid])
			}
			if releases[tid] > 1 {
				f.doubleRelease++
				f.problemf("workflow %s (%s) node %s released %d times", s.id, s.name, ref, releases[tid])
			}
			if runs[tid] > 0 && releases[tid] != 1 {
				f.problemf("workflow %s (%s) node %s ran with %d releases", s.id, s.name, ref, releases[tid])
			}
			ti, err := r.insp.GetTask(ctx, tid)
			require.NoError(t, err)
			att := ti.Attempt
			if runs[tid] > att {
				f.overRun++
				f.problemf("workflow %s (%s) node %s ran %d times in %d attempts", s.id, s.name, ref, runs[tid], att)
			}
			if att > 1 {
				f.retried++
			}
		}
		if count > s.nodes || count < s.nodes-s.added || (count != s.nodes && s.want != dtqtype.WorkflowCancelled) {
			f.problemf("workflow %s (%s) has %d nodes of %d", s.id, s.name, count, s.nodes)
		}
	}
	return f
}

// report prints the FAULT line and fails the test on any problem.
func (f *wfFigures) report(t *testing.T, name, extra string) {
	t.Helper()
	line := fmt.Sprintf("FAULT %s: workflows=%d ok=%d unknown=%d refused=%d existing=%d nodes=%d terminal=%d stuck=%d "+
		"double_release=%d double_run=%d over_attempts=%d early=%d orphans=%d wrong_status=%d retried=%d%s",
		name, f.workflows, f.ok, f.unknown, f.refused, f.existing, f.nodes, f.terminal, f.stuck,
		f.doubleRelease, f.doubleRun, f.overRun, f.early, f.orphans, f.wrongStatus, f.retried, extra)
	fmt.Println(line)
	t.Log(line)
	require.Empty(t, f.problems)
	require.Equal(t, f.nodes, f.terminal, "nodes not terminal")
}

// cutTarget is a script call the proxy cuts: every pattern must be in the
// request (the script's hash, and for some one of its keys).
type cutTarget struct {
	name     string
	proxy    *faultproxy.Proxy
	patterns [][]byte
}

func sha(script string) []byte { return []byte(rdb.ScriptHash(script)) }

// cutPhases runs, for each target and each way of cutting (the reply lost
// after the call landed, the request cut before it landed), one phase: the
// next two matching calls are cut while a workflow that succeeds, one whose
// f1 fails and one whose f1 blocks until the workflow is cancelled go
// through; the phase ends when the three have ended. It returns the cuts
// per target.
func (r *wfRig) cutPhases(t *testing.T, targets []cutTarget) map[string]int64 {
	t.Helper()
	ctx := context.Background()
	cuts := map[string]int64{}
	for _, tg := range targets {
		for _, after := range []bool{true, false} {
			mode := "before"
			if after {
				mode = "after"
			}
			name := tg.name + "/" + mode
			before := tg.proxy.Cuts()
			if after {
				tg.proxy.CutAfterAll(2, tg.patterns...)
			} else {
				tg.proxy.CutBeforeAll(2, tg.patterns...)
			}
			var wg sync.WaitGroup
			subs := make([]*wfSubmit, 3)
			wg.Go(func() { subs[0] = r.submit(ctx, name+"/ok", r.diamond(nodePayload{}), dtqtype.WorkflowSucceeded) })
			wg.Go(func() {
				subs[1] = r.submit(ctx, name+"/fail", r.diamond(nodePayload{Fail: true}), dtqtype.WorkflowFailed)
			})
			wg.Go(func() {
				subs[2] = r.submit(ctx, name+"/cancel", r.diamond(nodePayload{Block: true}), dtqtype.WorkflowCancelled)
				if !r.cancelWhenRunning(t, subs[2]) {
					subs[2].want = dtqtype.WorkflowSucceeded
				}
			})
			wg.Wait()
			r.waitEnded(t, subs)
			tg.proxy.CutAfterAll(0)
			cuts[name] = tg.proxy.Cuts() - before
		}
	}
	return cuts
}

// cutFigures is the cuts per target as " cuts=<total> <target>=<n>/<n>"
// (after/before), failing the test for a target never cut.
func cutFigures(t *testing.T, targets []cutTarget, cuts map[string]int64) string {
	t.Helper()
	var total int64
	var b strings.Builder
	for _, tg := range targets {
		a, bf := cuts[tg.name+"/after"], cuts[tg.name+"/before"]
		total += a + bf
		fmt.Fprintf(&b, " %s=%d/%d", tg.name, a, bf)
		require.Positive(t, a, "no call of %s had its reply lost", tg.name)
		require.Positive(t, bf, "no call of %s was cut before it landed", tg.name)
	}
	return fmt.Sprintf(" cuts=%d%s", total, b.String())
}

// TestFaultWorkflowSubmitSideCuts loses the reply of, then cuts before it
// lands, each workflow script the submitting side calls: the submission's
// steps (wf_mark, wf_create, wf_nodes for each queue's slot, wf_start,
// wf_release, wf_released, wf_note, wf_unmark) and a cancel's (wf_cancel,
// then the cancel script per node). The client uses go-redis's defaults
// (it sends a command again on a broken connection).
func TestFaultWorkflowSubmitSideCuts(t *testing.T) {
	t.Parallel()
	r := newWfRig(t, wfScenario{name: "workflow_submit_cuts"})
	p := r.sub
	targets := []cutTarget{
		{"wf_mark", p, [][]byte{sha("wf_mark")}},
		{"wf_create", p, [][]byte{sha("wf_create")}},
		{"wf_nodes@wfa", p, [][]byte{sha("wf_nodes"), []byte(r.keys.Waiting("wfa"))}},
		{"wf_nodes@wfb", p, [][]byte{sha("wf_nodes"), []byte(r.keys.Waiting("wfb"))}},
		{"wf_start", p, [][]byte{sha("wf_start")}},
		{"wf_release", p, [][]byte{sha("wf_release")}},
		{"wf_released", p, [][]byte{sha("wf_released")}},
		{"wf_note", p, [][]byte{sha("wf_note")}},
		{"wf_unmark", p, [][]byte{sha("wf_unmark")}},
		{"wf_cancel", p, [][]byte{sha("wf_cancel")}},
		{"cancel", p, [][]byte{sha("cancel")}},
	}
	cuts := r.cutPhases(t, targets)
	f := r.check(t)
	f.report(t, "workflow_submit_cuts", cutFigures(t, targets, cuts))
}

// TestFaultWorkflowWorkerSideCuts loses the reply of, then cuts before it
// lands, each workflow script the workers call: a node's end with its
// outbox entry (finish_succeeded, finish_dead for the failing node,
// finish_retry for the node cancelled while running), and the relay's
// steps (wf_lock, wf_mark, wf_apply, wf_release of each dependant,
// wf_released, wf_note, wf_unmark, wf_ack), and a fan-out from a running
// node (wf_add, then wf_nodes and wf_start writing and activating the
// added nodes). The workers' client never resends by itself: the workers'
// own retries recover (a handler whose AddNodes failed fails its attempt
// and adds the same nodes again on the next).
func TestFaultWorkflowWorkerSideCuts(t *testing.T) {
	t.Parallel()
	r := newWfRig(t, wfScenario{name: "workflow_worker_cuts"})
	p := r.wrk
	targets := []cutTarget{
		{"finish_succeeded", p, [][]byte{sha("finish_succeeded")}},
		{"finish_dead", p, [][]byte{sha("finish_dead")}},
		{"finish_retry", p, [][]byte{sha("finish_retry")}},
		{"wf_lock", p, [][]byte{sha("wf_lock")}},
		{"wf_mark", p, [][]byte{sha("wf_mark")}},
		{"wf_apply", p, [][]byte{sha("wf_apply")}},
		{"wf_release", p, [][]byte{sha("wf_release")}},
		{"wf_released", p, [][]byte{sha("wf_released")}},
		{"wf_note", p, [][]byte{sha("wf_note")}},
		{"wf_unmark", p, [][]byte{sha("wf_unmark")}},
		{"wf_ack", p, [][]byte{sha("wf_ack")}},
		{"wf_add", p, [][]byte{sha("wf_add")}},
		{"wf_nodes", p, [][]byte{sha("wf_nodes")}},
		{"wf_start", p, [][]byte{sha("wf_start")}},
	}
	cuts := r.cutPhases(t, targets)
	f := r.check(t)
	f.report(t, "workflow_worker_cuts", cutFigures(t, targets, cuts))
}

// TestFaultWorkflowSubmitUnknown loses every reply of wf_create (the
// record's write) for a while, then cuts every wf_create before it lands,
// then does both to wf_mark (the first step, before anything exists):
// submissions whose create got no answer are told OutcomeUnknown, those
// whose mark got none an error. After the sweep, a workflow told unknown
// exists whole or not at all, and one told an error does not exist.
func TestFaultWorkflowSubmitUnknown(t *testing.T) {
	t.Parallel()
	r := newWfRig(t, wfScenario{name: "workflow_submit_unknown"})
	ctx := context.Background()
	cases := []struct {
		script  string
		after   bool
		outcome string
		exists  bool
	}{
		{"wf_create", true, "unknown", true},
		{"wf_create", false, "unknown", false},
		{"wf_mark", true, "error", false},
		{"wf_mark", false, "error", false},
	}
	for _, c := range cases {
		if c.after {
			r.sub.CutAfter(sha(c.script), 1000)
		} else {
			r.sub.CutBefore(sha(c.script), 1000)
		}
		var wg sync.WaitGroup
		subs := make([]*wfSubmit, 3)
		for i := range subs {
			wg.Go(func() {
				subs[i] = r.submit(ctx, fmt.Sprintf("%s-%v-%d", c.script, c.after, i), r.diamond(nodePayload{}), dtqtype.WorkflowSucceeded)
			})
		}
		wg.Wait()
		r.sub.CutAfter(nil, 0)
		for _, s := range subs {
			require.Equal(t, c.outcome, s.outcome, "%s: %v", s.name, s.err)
		}
		r.waitEnded(t, subs)
		r.settle(t)
		for _, s := range subs {
			if s.id == "" {
				continue
			}
			n := r.direct.Exists(ctx, r.keys.Workflow(s.id)).Val()
			require.Equal(t, c.exists, n == 1, "workflow %s (%s) exists: %d", s.id, s.name, n)
		}
	}
	require.Equal(t, int64(len(r.subsWithRecord(ctx))), r.direct.ZCard(ctx, r.keys.WorkflowIndex()).Val(),
		"the listing index holds exactly the workflows that exist")
	f := r.check(t)
	f.report(t, "workflow_submit_unknown", fmt.Sprintf(" cuts=%d", r.sub.Cuts()))
}

// subsWithRecord are the submissions whose workflow exists.
func (r *wfRig) subsWithRecord(ctx context.Context) []*wfSubmit {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*wfSubmit
	for _, s := range r.subs {
		if s.id != "" && r.direct.Exists(ctx, r.keys.Workflow(s.id)).Val() == 1 {
			out = append(out, s)
		}
	}
	return out
}

// bigUnderFault submits a 200-node workflow and a few small ones, runs
// fault once at least 30 of the big one's nodes have succeeded, and
// checks the result.
func bigUnderFault(t *testing.T, sc wfScenario, fault func(t *testing.T, r *wfRig)) {
	t.Parallel()
	r := newWfRig(t, sc)
	ctx := context.Background()
	big := r.submit(ctx, "big", r.big(), dtqtype.WorkflowSucceeded)
	require.Equal(t, "ok", big.outcome, "%v", big.err)
	for i := range 4 {
		r.submit(ctx, fmt.Sprintf("small-%d", i), r.diamond(nodePayload{}), dtqtype.WorkflowSucceeded)
	}
	require.Eventually(t, func() bool {
		info, err := r.insp.GetWorkflow(ctx, big.id)
		return err == nil && info.Counts[dtqtype.StatusSucceeded] >= 30
	}, 60*time.Second, 20*time.Millisecond, "the workflow never got going")
	info, err := r.insp.GetWorkflow(ctx, big.id)
	require.NoError(t, err)
	at := info.Counts[dtqtype.StatusSucceeded]
	began := time.Now()
	fault(t, r)
	ended := time.Now()
	r.waitEnded(t, []*wfSubmit{big})
	took := time.Since(ended)
	f := r.check(t)
	if sc.child {
		require.Positive(t, f.retried, "no node of the killed worker was reclaimed")
	}
	f.report(t, sc.name, fmt.Sprintf(" fault_at_node=%d fault=%s ended_after_fault=%s", at,
		ended.Sub(began).Round(100*time.Millisecond), took.Round(10*time.Millisecond)))
}

// TestFaultWorkflowOutage takes Redis away (both proxies down) for 5 s
// while a 200-node workflow (chain, fan-out, fan-in) and four small ones
// run. Leases are longer than the outage.
func TestFaultWorkflowOutage(t *testing.T) {
	bigUnderFault(t, wfScenario{name: "workflow_outage_5s", visibility: 9 * time.Second}, func(t *testing.T, r *wfRig) {
		r.sub.SetDown(true)
		r.wrk.SetDown(true)
		time.Sleep(5 * time.Second) // the fault itself
		r.sub.SetDown(false)
		r.wrk.SetDown(false)
	})
}

// TestFaultWorkflowWorkerKilled kills (SIGKILL) a worker process of both
// queues while it runs nodes of a 200-node workflow (its handlers take
// 1.5 s); its relays may hold the queues' relay locks. The nodes it held
// are reclaimed by the other worker and the workflows end succeeded.
func TestFaultWorkflowWorkerKilled(t *testing.T) {
	bigUnderFault(t, wfScenario{name: "workflow_worker_killed", workers: 1, child: true}, func(t *testing.T, r *wfRig) {
		ctx := context.Background()
		require.Eventually(t, func() bool {
			for _, q := range wfQueues {
				ids, err := r.direct.ZRange(ctx, r.keys.Lease(q), 0, -1).Result()
				require.NoError(t, err)
				for _, id := range ids {
					if r.direct.HGet(ctx, r.keys.Task(q, id), "worker_id").Val() == "child" {
						return true
					}
				}
			}
			return false
		}, 60*time.Second, 5*time.Millisecond, "the child worker never held a lease")
		require.NoError(t, r.child.Process.Signal(syscall.SIGKILL))
	})
}

// TestFaultWorkflowRedisRestart kills Redis (SIGKILL) while a 200-node
// workflow runs and starts it again on the same AOF (appendfsync always)
// a second later.
func TestFaultWorkflowRedisRestart(t *testing.T) {
	bigUnderFault(t, wfScenario{name: "workflow_redis_restart_aof", visibility: 9 * time.Second,
		redisArgs: []string{"--appendonly", "yes", "--appendfsync", "always"}}, func(t *testing.T, r *wfRig) {
		r.srv.Kill()
		time.Sleep(time.Second) // the fault itself
		require.NoError(t, r.srv.Restart())
	})
}

// TestFaultWorkflowLeftToTheSweep cuts a submitting-side step for longer
// than the client resends it, after an earlier step of the same call
// landed, so that the call leaves the rest to the sweep while the
// workflow's nodes go on ending (and its relays mark and unmark it):
//   - every submit-side wf_release about queue wfb is cut: the submission
//     released its root on wfa, not the one on wfb, and answered ok;
//   - every cancel script call about wfb is cut: the cancel marked the
//     workflow and cancelled its nodes on wfa (a running one among them),
//     not its waiting node on wfb, and answered an error, not sent again.
//
// Every workflow must end: succeeded, and cancelled (the cancel's mark
// landed).
func TestFaultWorkflowLeftToTheSweep(t *testing.T) {
	t.Parallel()
	r := newWfRig(t, wfScenario{name: "workflow_left_to_sweep"})
	ctx := context.Background()
	const n = 4
	releases := make([]*wfSubmit, n)
	r.sub.CutBeforeAll(1000, sha("wf_release"), []byte(r.keys.Waiting("wfb")))
	var wg sync.WaitGroup
	for i := range releases {
		wg.Go(func() {
			releases[i] = r.submit(ctx, fmt.Sprintf("release-%d", i), []dtq.Node{
				r.node("ra", "wfa", nodePayload{}), r.node("rb", "wfb", nodePayload{}), r.node("j", "wfa", nodePayload{}, "ra", "rb"),
			}, dtqtype.WorkflowSucceeded)
		})
	}
	wg.Wait()
	r.sub.CutAfterAll(0)
	released := r.sub.Cuts()
	for _, s := range releases {
		require.Equal(t, "ok", s.outcome, "%v", s.err)
	}

	cancels := make([]*wfSubmit, n)
	for i := range cancels {
		cancels[i] = r.submit(ctx, fmt.Sprintf("cancel-%d", i), []dtq.Node{
			r.node("root", "wfa", nodePayload{}), r.node("blk", "wfa", nodePayload{Block: true}, "root"),
			r.node("wb", "wfb", nodePayload{}, "blk"), r.node("tail", "wfa", nodePayload{}, "wb"),
		}, dtqtype.WorkflowCancelled)
		require.Equal(t, "ok", cancels[i].outcome, "%v", cancels[i].err)
		cancels[i].block = "blk"
	}
	for _, s := range cancels {
		require.Eventually(t, func() bool {
			tid, q := r.nodeTask(ctx, s.id, s.block)
			return tid != "" && r.direct.HGet(ctx, r.keys.Task(q, tid), "status").Val() == string(dtqtype.StatusRunning)
		}, 60*time.Second, 10*time.Millisecond, "the blocking node of %s never ran", s.name)
	}
	r.sub.CutBeforeAll(1000, sha("cancel"), []byte(r.keys.TaskPrefix("wfb")))
	for _, s := range cancels {
		_, _, err := r.admin.CancelWorkflow(ctx, s.id)
		require.Error(t, err, "the cancel of %s reached every node", s.name)
	}
	r.sub.CutAfterAll(0)
	f := r.check(t)
	f.report(t, "workflow_left_to_sweep", fmt.Sprintf(" release_cuts=%d cancel_cuts=%d", released, r.sub.Cuts()-released))
}

// TestFaultWorkflowMixedCuts runs workflows from two producers (ones that
// succeed, fail and are cancelled, each with a fan-out) for 8 s while, every
// 100 ms, the next call of a workflow script picked at random, on either
// side, is cut after or before it lands, and every connection of both
// sides is reset each second. The cancels are sent again while they answer
// an error, as a caller would.
func TestFaultWorkflowMixedCuts(t *testing.T) {
	t.Parallel()
	r := newWfRig(t, wfScenario{name: "workflow_mixed_cuts"})
	ctx := context.Background()
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 11))
	sub := []string{"wf_mark", "wf_create", "wf_nodes", "wf_start", "wf_release", "wf_released", "wf_note", "wf_unmark", "wf_cancel", "cancel"}
	wrk := []string{"finish_succeeded", "finish_dead", "finish_retry", "wf_lock", "wf_mark", "wf_apply", "wf_release", "wf_released",
		"wf_note", "wf_unmark", "wf_ack", "wf_add", "wf_nodes", "wf_start", "claim"}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 80; i++ {
			p, names := r.sub, sub
			if rng.IntN(2) == 0 {
				p, names = r.wrk, wrk
			}
			if rng.IntN(2) == 0 {
				p.CutAfter(sha(names[rng.IntN(len(names))]), 1)
			} else {
				p.CutBefore(sha(names[rng.IntN(len(names))]), 1)
			}
			time.Sleep(100 * time.Millisecond) // the fault's pace
			if i%10 == 9 {
				r.sub.ResetAll()
				r.wrk.ResetAll()
			}
		}
		r.sub.CutAfter(nil, 0)
		r.wrk.CutAfter(nil, 0)
	}()
	var producers sync.WaitGroup
	for p := range 2 {
		producers.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				name := fmt.Sprintf("p%d-%d", p, i)
				switch i % 3 {
				case 0:
					r.submit(ctx, name+"/ok", r.diamond(nodePayload{}), dtqtype.WorkflowSucceeded)
				case 1:
					r.submit(ctx, name+"/fail", r.diamond(nodePayload{Fail: true}), dtqtype.WorkflowFailed)
				default:
					s := r.submit(ctx, name+"/cancel", r.diamond(nodePayload{Block: true}), dtqtype.WorkflowCancelled)
					if !r.cancelWhenRunning(t, s) {
						s.want = dtqtype.WorkflowSucceeded
					}
				}
			}
		})
	}
	producers.Wait()
	<-done
	f := r.check(t)
	require.Greater(t, f.workflows, 20, "too little load to mean anything")
	f.report(t, "workflow_mixed_cuts", fmt.Sprintf(" cuts=%d resets=%d", r.sub.Cuts()+r.wrk.Cuts(), r.sub.Resets()+r.wrk.Resets()))
}
