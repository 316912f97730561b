package clustersuite_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/internal/rdb"
	"github.com/dtq-io/dtq/internal/redistest"
)

// wfCluster is one test's workflows on the shared cluster: queues A, B and
// C served by three different masters, a client, an inspector and an admin
// under the test's own prefix, and the handler of type "job" (see job).
type wfCluster struct {
	c       *redistest.Cluster
	rc      *redis.ClusterClient
	prefix  string
	keys    rdb.Keys
	a, b, q string // the queues' names: a, b and q stand for A, B and C
	qs      []string
	client  *dtq.Client
	insp    *dtq.Inspector
	admin   *dtq.Admin
	deps    sync.Map // "<workflow id>:<ref>" -> map[string]dtq.DepResult
	ran     sync.Map // "<workflow id>:<ref>" -> *atomic.Int32, the runs of the node
}

func setupWorkflowCluster(t *testing.T, name string) *wfCluster {
	t.Helper()
	c := sharedCluster(t)
	w := &wfCluster{c: c, rc: c.Client(t), prefix: runPrefix(name)}
	w.keys = rdb.NewKeys(w.prefix)
	w.qs = queuesOnEveryMaster(t, c, w.prefix)
	w.a, w.b, w.q = w.qs[0], w.qs[1], w.qs[2]
	var err error
	dep := openDeployment(t, w.rc, w.prefix)
	w.client, err = dep.NewClient(nil)
	require.NoError(t, err)
	w.insp = dep.Inspector()
	w.admin, err = dep.NewAdmin(&dtq.AdminConfig{Client: w.client})
	require.NoError(t, err)
	return w
}

// master is the address of the master serving key's slot.
func (w *wfCluster) master(t *testing.T, key string) string {
	t.Helper()
	m, err := w.c.MasterOf(context.Background(), key)
	require.NoError(t, err)
	return m.Addr
}

// keyOn is an idempotency key whose workflow record ({wf:<tag>}) lands on
// the master serving queue's keys: the workflow's own slot, on a chosen
// master.
func (w *wfCluster) keyOn(t *testing.T, queue string) string {
	t.Helper()
	want := w.master(t, w.keys.Depth(queue))
	for i := range 1000 {
		k := fmt.Sprintf("%s-wf-%d", w.prefix, i)
		if w.master(t, w.keys.WorkflowPrefix(rdb.WorkflowKeyTag(k))+"x") == want {
			return k
		}
	}
	t.Fatal("no idempotency key lands on the master of queue " + queue)
	return ""
}

// requireOwnSlot checks that workflow id's record is in a slot of its own,
// none of the queues', and logs where everything lives.
func (w *wfCluster) requireOwnSlot(t *testing.T, id string) {
	t.Helper()
	ctx := context.Background()
	slot := w.rc.ClusterKeySlot(ctx, w.keys.Workflow(id)).Val()
	for _, q := range w.qs {
		require.NotEqual(t, w.rc.ClusterKeySlot(ctx, w.keys.Depth(q)).Val(), slot, "queue %s", q)
	}
	t.Logf("workflow record slot %d on %s; queue A %s on %s, B %s on %s, C %s on %s", slot,
		w.master(t, w.keys.Workflow(id)), w.a, w.master(t, w.keys.Depth(w.a)), w.b, w.master(t, w.keys.Depth(w.b)),
		w.q, w.master(t, w.keys.Depth(w.q)))
}

// job is the handler of type "job": it records the deps it saw and how
// often it ran; its payload says what it does: {"fail": true} fails for
// good, {"result": x} returns x, {"block": true} runs until its context
// ends (recording the cause in blocked).
func (w *wfCluster) job(blocked *sync.Map) dtq.HandlerFunc {
	return func(ctx context.Context, task *dtq.Task) (any, error) {
		key := task.WorkflowID + ":" + task.Ref
		w.deps.Store(key, task.Deps())
		n, _ := w.ran.LoadOrStore(key, new(atomic.Int32))
		n.(*atomic.Int32).Add(1)
		var p struct {
			Fail   bool            `json:"fail"`
			Result json.RawMessage `json:"result"`
			Block  bool            `json:"block"`
		}
		_ = json.Unmarshal(task.Payload, &p)
		switch {
		case p.Block:
			<-ctx.Done()
			if blocked != nil {
				blocked.Store(task.ID, context.Cause(ctx).Error())
			}
			return nil, context.Cause(ctx)
		case p.Fail:
			return nil, dtq.Permanent(errors.New("asked to fail"))
		}
		return p.Result, nil
	}
}

// runs is how often node ref of workflow id ran.
func (w *wfCluster) runs(id, ref string) int32 {
	n, ok := w.ran.Load(id + ":" + ref)
	if !ok {
		return 0
	}
	return n.(*atomic.Int32).Load()
}

// depsSeen are the deps node ref of workflow id saw when it ran.
func (w *wfCluster) depsSeen(t *testing.T, id, ref string) map[string]dtq.DepResult {
	t.Helper()
	v, ok := w.deps.Load(id + ":" + ref)
	require.True(t, ok, "node %s never ran", ref)
	return v.(map[string]dtq.DepResult)
}

func (w *wfCluster) wait(t *testing.T, id string) *dtqtype.WorkflowInfo {
	t.Helper()
	info, err := w.insp.WaitWorkflow(context.Background(), id, 60*time.Second)
	require.NoError(t, err)
	require.True(t, info.Status.Terminal(), "workflow %s is still %s: %+v", id, info.Status, info.Nodes)
	return info
}

// sysEvents are the types of the _sys events about workflow id.
func (w *wfCluster) sysEvents(t *testing.T, id string) []string {
	t.Helper()
	msgs, err := w.rc.XRange(context.Background(), w.keys.SysEvents(), "-", "+").Result()
	require.NoError(t, err)
	var out []string
	for _, m := range msgs {
		if m.Values["workflow_id"] == id {
			out = append(out, m.Values["type"].(string))
		}
	}
	return out
}

func wfJob(ref, queue string, payload map[string]any, deps ...string) dtq.Node {
	if payload == nil {
		payload = map[string]any{}
	}
	return dtq.Node{Ref: ref, Deps: deps, Submission: dtq.Submission{Queue: queue, Type: "job", Payload: payload, MaxAttempts: 1}}
}

func statuses(info *dtqtype.WorkflowInfo) map[string]dtqtype.Status {
	out := map[string]dtqtype.Status{}
	for _, n := range info.Nodes {
		out[n.Ref] = n.Status
	}
	return out
}

// TestWorkflowAcrossMasters runs a DAG whose nodes sit on queues of three
// masters, its record in a slot of its own on yet another slot: a chain,
// a fan-out and a fan-in, every hop crossing masters, each node's end
// carried by its queue's outbox on its master to the workflow's slot. The
// deps' results reach the handlers.
func TestWorkflowAcrossMasters(t *testing.T) {
	t.Parallel()
	w := setupWorkflowCluster(t, "wfdag")
	startWorker(t, w.rc, w.prefix, w.qs, nil, map[string]dtq.HandlerFunc{"job": w.job(nil)})
	res := func(v any) map[string]any { return map[string]any{"result": v} }
	nodes := []dtq.Node{
		wfJob("fetch", w.a, res(map[string]int{"n": 1})),
		// fan-out from A onto A, B and C
		wfJob("p0", w.a, res(0), "fetch"), wfJob("p1", w.b, res(1), "fetch"), wfJob("p2", w.q, res(2), "fetch"),
		// a chain B -> C -> A
		wfJob("c1", w.b, res("c1"), "p1"), wfJob("c2", w.q, res("c2"), "c1"), wfJob("c3", w.a, res("c3"), "c2"),
		// a fan-in on B of nodes on A, C and A
		wfJob("join", w.b, res("joined"), "p0", "p2", "c3"),
	}
	key := w.keyOn(t, w.q) // the record on C's master, fetch and join elsewhere
	r, err := w.client.SubmitWorkflow(context.Background(), dtq.Workflow{Name: "dag", Nodes: nodes, IdempotencyKey: key})
	require.NoError(t, err)
	require.Equal(t, dtqtype.WorkflowRunning, r.Status)
	w.requireOwnSlot(t, r.WorkflowID)
	info := w.wait(t, r.WorkflowID)
	require.Equal(t, dtqtype.WorkflowSucceeded, info.Status)
	require.Len(t, info.Nodes, len(nodes))
	require.Equal(t, len(nodes), info.Counts[dtqtype.StatusSucceeded])
	for _, n := range info.Nodes {
		ti, err := w.insp.GetTask(context.Background(), n.TaskID)
		require.NoError(t, err)
		require.Equal(t, dtqtype.StatusSucceeded, ti.Status, n.Ref)
		require.Equal(t, r.WorkflowID, ti.WorkflowID)
		require.Equal(t, n.Ref, ti.Ref)
		require.Equal(t, int32(1), w.runs(r.WorkflowID, n.Ref), "node %s ran once", n.Ref)
	}

	require.Empty(t, w.depsSeen(t, r.WorkflowID, "fetch"))
	p1 := w.depsSeen(t, r.WorkflowID, "p1")
	require.Equal(t, dtqtype.StatusSucceeded, p1["fetch"].Status)
	require.JSONEq(t, `{"n":1}`, string(p1["fetch"].Result), "A's result reached B")
	require.JSONEq(t, `"c1"`, string(w.depsSeen(t, r.WorkflowID, "c2")["c1"].Result), "B's result reached C")
	require.JSONEq(t, `"c2"`, string(w.depsSeen(t, r.WorkflowID, "c3")["c2"].Result), "C's result reached A")
	join := w.depsSeen(t, r.WorkflowID, "join")
	require.Len(t, join, 3)
	require.JSONEq(t, `0`, string(join["p0"].Result))
	require.JSONEq(t, `2`, string(join["p2"].Result))
	require.JSONEq(t, `"c3"`, string(join["c3"].Result))
	require.Equal(t, []string{"WORKFLOW_STARTED", "WORKFLOW_SUCCEEDED"}, w.sysEvents(t, r.WorkflowID))

	// Every outbox was relayed and acknowledged; no node is left waiting.
	for _, q := range w.qs {
		require.Eventually(t, func() bool { return w.rc.XLen(context.Background(), w.keys.WorkflowOutbox(q)).Val() == 0 },
			20*time.Second, 10*time.Millisecond, "queue %s's outbox drained", q)
		require.Zero(t, w.rc.ZCard(context.Background(), w.keys.Waiting(q)).Val())
	}
	// The key answers the ended workflow.
	again, err := w.client.SubmitWorkflow(context.Background(), dtq.Workflow{Name: "dag", Nodes: nodes, IdempotencyKey: key})
	require.NoError(t, err)
	require.True(t, again.Duplicate)
	require.Equal(t, r.WorkflowID, again.WorkflowID)
}

// TestWorkflowDependencyFailureAcrossMasters: a node on A fails; its
// dependant on B (policy fail) ends cancelled with DependencyFailed, and
// so does that one's dependant on C; a dependant on C with policy
// continue runs and sees the failure; the workflow fails and its
// on_failure task (on C) is submitted once.
func TestWorkflowDependencyFailureAcrossMasters(t *testing.T) {
	t.Parallel()
	w := setupWorkflowCluster(t, "wffail")
	var alerts atomic.Int32
	var alert atomic.Value
	startWorker(t, w.rc, w.prefix, w.qs, nil, map[string]dtq.HandlerFunc{"job": w.job(nil),
		"alert": func(ctx context.Context, task *dtq.Task) (any, error) {
			alerts.Add(1)
			alert.Store(string(task.Payload))
			return nil, nil
		}})
	nodes := []dtq.Node{
		wfJob("bad", w.a, map[string]any{"fail": true}),
		wfJob("strict", w.b, nil, "bad"),
		wfJob("below", w.q, nil, "strict"),
		{Ref: "cont", Deps: []string{"bad"}, OnDepFailure: dtq.DepContinue,
			Submission: dtq.Submission{Queue: w.q, Type: "job", Payload: map[string]any{"result": "went on"}}},
		wfJob("ok", w.b, nil),
	}
	ctx := context.Background()
	r, err := w.client.SubmitWorkflow(ctx, dtq.Workflow{Name: "failing", Nodes: nodes, IdempotencyKey: w.keyOn(t, w.b),
		OnFailure: &dtq.Submission{Queue: w.q, Type: "alert", Payload: map[string]any{"to": "ops"}}})
	require.NoError(t, err)
	w.requireOwnSlot(t, r.WorkflowID)
	info := w.wait(t, r.WorkflowID)
	require.Equal(t, dtqtype.WorkflowFailed, info.Status)
	require.Equal(t, map[string]dtqtype.Status{"bad": "dead_lettered", "strict": "cancelled", "below": "cancelled",
		"cont": "succeeded", "ok": "succeeded"}, statuses(info))
	for _, n := range info.Nodes {
		ti, err := w.insp.GetTask(ctx, n.TaskID)
		require.NoError(t, err)
		require.Equal(t, n.Status, ti.Status, n.Ref)
		if n.Status == dtqtype.StatusCancelled {
			require.Equal(t, "DependencyFailed", ti.Execution.ErrorClass, n.Ref)
			require.Equal(t, "DependencyFailed", n.ErrorClass, n.Ref)
			require.Zero(t, w.runs(r.WorkflowID, n.Ref), "node %s never ran", n.Ref)
		}
	}
	cont := w.depsSeen(t, r.WorkflowID, "cont")
	require.Equal(t, dtqtype.StatusDeadLettered, cont["bad"].Status, "C's continue node saw A's failure")

	// on_failure: submitted once, with the failed refs, even after the
	// sweep has looked at the workflow (its attention mark is gone).
	require.Eventually(t, func() bool {
		i, err := w.insp.GetWorkflow(ctx, r.WorkflowID)
		return err == nil && i.OnFailureTaskID != ""
	}, 30*time.Second, 10*time.Millisecond)
	info, err = w.insp.GetWorkflow(ctx, r.WorkflowID)
	require.NoError(t, err)
	a := &api{insp: w.insp}
	a.waitStatus(t, info.OnFailureTaskID, dtqtype.StatusSucceeded)
	require.Eventually(t, func() bool { return w.rc.ZCard(ctx, w.keys.WorkflowAttention()).Val() == 0 },
		30*time.Second, 20*time.Millisecond, "the sweep leaves no mark behind")
	require.Equal(t, int32(1), alerts.Load())
	require.JSONEq(t, fmt.Sprintf(`{"to":"ops","workflow":{"id":%q,"name":"failing","failed":["bad","strict","below"]}}`, r.WorkflowID),
		alert.Load().(string))
	ti, err := w.insp.GetTask(ctx, info.OnFailureTaskID)
	require.NoError(t, err)
	require.Equal(t, w.q, ti.Queue)
	require.Equal(t, "workflow:"+r.WorkflowID+":on_failure", *ti.IdempotencyKey)
	require.Equal(t, []string{"WORKFLOW_STARTED", "WORKFLOW_FAILED"}, w.sysEvents(t, r.WorkflowID))
}

// TestWorkflowCancelAcrossMasters cancels a workflow whose running node is
// on A and whose waiting nodes are on B and C: the waiting ones end
// cancelled at once in their masters' slots, the running one gets a
// cancel request through A's channel, and the workflow ends cancelled.
func TestWorkflowCancelAcrossMasters(t *testing.T) {
	t.Parallel()
	w := setupWorkflowCluster(t, "wfcancel")
	var blocked sync.Map
	// Renewals far apart: the cancel reaches the handler through A's
	// pub/sub channel.
	startWorker(t, w.rc, w.prefix, w.qs, func(cfg *dtq.WorkerConfig) {
		cfg.VisibilityTimeout, cfg.HeartbeatInterval = 90*time.Second, 30*time.Second
	}, map[string]dtq.HandlerFunc{"job": w.job(&blocked)})
	ctx := context.Background()
	r, err := w.client.SubmitWorkflow(ctx, dtq.Workflow{IdempotencyKey: w.keyOn(t, w.b), Nodes: []dtq.Node{
		wfJob("run", w.a, map[string]any{"block": true}),
		wfJob("on-b", w.b, nil, "run"),
		{Ref: "on-c", Deps: []string{"run"}, OnDepFailure: dtq.DepContinue, Submission: dtq.Submission{Queue: w.q, Type: "job"}},
		wfJob("after", w.q, nil, "on-b", "on-c"),
	}})
	require.NoError(t, err)
	w.requireOwnSlot(t, r.WorkflowID)
	a := &api{insp: w.insp}
	runID := r.Nodes[0].TaskID
	a.waitStatus(t, runID, dtqtype.StatusRunning)
	for _, n := range r.Nodes[1:] {
		ti, err := w.insp.GetTask(ctx, n.TaskID)
		require.NoError(t, err)
		require.Equal(t, dtqtype.StatusWaiting, ti.Status, n.Ref)
	}
	got, ended, err := w.admin.CancelWorkflow(ctx, r.WorkflowID)
	require.NoError(t, err)
	require.False(t, ended)
	require.True(t, got.CancelRequested)
	info := w.wait(t, r.WorkflowID)
	require.Equal(t, dtqtype.WorkflowCancelled, info.Status)
	require.Equal(t, map[string]dtqtype.Status{"run": "cancelled", "on-b": "cancelled", "on-c": "cancelled", "after": "cancelled"},
		statuses(info))
	cause, ok := blocked.Load(runID)
	require.True(t, ok, "the running node's handler saw its context end")
	require.Contains(t, cause, "cancel requested")
	for _, ref := range []string{"on-b", "on-c", "after"} {
		require.Zero(t, w.runs(r.WorkflowID, ref), "node %s never ran", ref)
	}
	for _, q := range w.qs {
		require.Eventually(t, func() bool { return w.rc.Get(ctx, w.keys.Depth(q)).Val() == "0" },
			20*time.Second, 10*time.Millisecond, "queue %s's depth back to 0", q)
		require.Zero(t, w.rc.ZCard(ctx, w.keys.Waiting(q)).Val(), "no node left waiting on %s", q)
	}
	_, ended, err = w.admin.CancelWorkflow(ctx, r.WorkflowID)
	require.NoError(t, err)
	require.True(t, ended)
	require.Equal(t, []string{"WORKFLOW_STARTED", "WORKFLOW_CANCELLED"}, w.sysEvents(t, r.WorkflowID))
}

// TestWorkflowAddNodesAcrossMasters: a node on A adds nodes on B and C
// (and a gather on C depending on all of them) with dtq.AddNodes; a retry
// adds them again without change; the gather sees every result.
func TestWorkflowAddNodesAcrossMasters(t *testing.T) {
	t.Parallel()
	w := setupWorkflowCluster(t, "wfadd")
	var attempts atomic.Int32
	var mismatch atomic.Value
	startWorker(t, w.rc, w.prefix, w.qs, nil, map[string]dtq.HandlerFunc{"job": w.job(nil),
		"fanout": func(ctx context.Context, task *dtq.Task) (any, error) {
			var kids []dtq.Node
			var refs []string
			for i := range 10 {
				ref := fmt.Sprintf("kid%d", i)
				q := []string{w.b, w.q}[i%2]
				kids = append(kids, wfJob(ref, q, map[string]any{"result": i}, task.Ref))
				refs = append(refs, ref)
			}
			kids = append(kids, wfJob("gather", w.q, nil, refs...))
			added, err := dtq.AddNodes(ctx, kids...)
			if err != nil {
				return nil, err
			}
			again, err := dtq.AddNodes(ctx, kids...)
			if err != nil {
				return nil, err
			}
			for i := range added {
				if added[i].TaskID != again[i].TaskID {
					return nil, dtq.Permanent(errors.New("a second AddNodes gave other tasks"))
				}
			}
			_, err = dtq.AddNodes(ctx, wfJob("gather", w.q, map[string]any{"other": 1}, refs...))
			mismatch.Store(err)
			if attempts.Add(1) == 1 {
				return nil, errors.New("fail once: the retry adds the nodes again")
			}
			return "fanned", nil
		}})
	ctx := context.Background()
	r, err := w.client.SubmitWorkflow(ctx, dtq.Workflow{IdempotencyKey: w.keyOn(t, w.b), Nodes: []dtq.Node{
		{Ref: "root", Submission: dtq.Submission{Queue: w.a, Type: "fanout", MaxAttempts: 3}}}})
	require.NoError(t, err)
	w.requireOwnSlot(t, r.WorkflowID)
	info := w.wait(t, r.WorkflowID)
	require.Equal(t, dtqtype.WorkflowSucceeded, info.Status)
	require.Len(t, info.Nodes, 12)
	require.Equal(t, 12, info.Counts[dtqtype.StatusSucceeded])
	require.Equal(t, int32(2), attempts.Load())
	require.ErrorIs(t, mismatch.Load().(error), dtq.ErrNodeMismatch)
	onB, onC := 0, 0
	for _, n := range info.Nodes {
		switch n.Queue {
		case w.b:
			onB++
		case w.q:
			onC++
		}
		if n.Ref != "root" {
			require.Equal(t, int32(1), w.runs(r.WorkflowID, n.Ref), "added node %s ran once", n.Ref)
		}
	}
	require.Equal(t, 5, onB)
	require.Equal(t, 6, onC)
	gather := w.depsSeen(t, r.WorkflowID, "gather")
	require.Len(t, gather, 10)
	for i := range 10 {
		d := gather[fmt.Sprintf("kid%d", i)]
		require.Equal(t, dtqtype.StatusSucceeded, d.Status)
		require.JSONEq(t, fmt.Sprint(i), string(d.Result))
	}
	require.JSONEq(t, `"fanned"`, string(w.depsSeen(t, r.WorkflowID, "kid0")["root"].Result))
}

// TestWorkflowSubmitInterruptedAcrossMasters stops a submission after each
// of its steps (run by hand, as a client that died there would have left
// them) with nodes on A, B and C: the workers' sweep completes the
// workflow, or drops the marks of one that was never created.
func TestWorkflowSubmitInterruptedAcrossMasters(t *testing.T) {
	t.Parallel()
	steps := []string{"marked", "created", "one queue written", "all written", "started", "released"}
	for i, stop := range steps {
		t.Run(stop, func(t *testing.T) {
			t.Parallel()
			w := setupWorkflowCluster(t, "wfcut")
			ctx, now := context.Background(), time.Now()
			r := rdb.New(w.rc, w.prefix)
			raw := func(ref, queue string, deps ...string) rdb.WorkflowNode {
				num, err := r.QueueNumber(ctx, queue)
				require.NoError(t, err)
				return rdb.WorkflowNode{Ref: ref, Queue: queue, Deps: deps, Digest: "d-" + ref,
					Task: rdb.NodeTask{ID: rdb.NewTaskID(num, now), Type: "job", Payload: []byte(`{"result":"` + ref + `"}`),
						Priority: 5, MaxAttempts: 1, TimeoutMS: 30000, CreatedAt: now.UnixMilli()}}
			}
			nodes := []rdb.WorkflowNode{raw("x", w.a), raw("y", w.b, "x"), raw("z", w.q, "x", "y")}
			id := rdb.NewWorkflowID(now, rdb.RandomWorkflowTag())
			require.NoError(t, r.WorkflowMark(ctx, rdb.NewAttention(id, now.UnixMilli()), true))
			if i >= 1 {
				_, err := r.WorkflowCreate(ctx, now, &rdb.NewWorkflow{ID: id, Nodes: nodes})
				require.NoError(t, err)
			}
			if i >= 2 {
				require.NoError(t, r.WorkflowWriteNodes(ctx, id, w.a, now, 100, nodes[:1]))
			}
			if i >= 3 {
				require.NoError(t, r.WorkflowWriteNodes(ctx, id, w.b, now, 100, nodes[1:2]))
				require.NoError(t, r.WorkflowWriteNodes(ctx, id, w.q, now, 100, nodes[2:]))
			}
			var st rdb.StartResult
			if i >= 4 {
				var err error
				st, err = r.WorkflowStart(ctx, id, now, time.Hour, []string{"x", "y", "z"})
				require.NoError(t, err)
			}
			if i >= 5 {
				require.Len(t, st.Releases, 1, "x has nothing to wait for")
				for j := range st.Releases {
					_, err := r.WorkflowRelease(ctx, &st.Releases[j], now, &rdb.ReleaseSettings{EventsMaxLen: 100})
					require.NoError(t, err)
				}
			}
			if i >= 1 {
				// Nothing ran or is visible as running yet.
				v, err := w.rc.HGet(ctx, w.keys.Workflow(id), "status").Result()
				require.NoError(t, err)
				require.Equal(t, map[bool]string{true: "running", false: "submitting"}[i >= 4], v)
			}
			startWorker(t, w.rc, w.prefix, w.qs, nil, map[string]dtq.HandlerFunc{"job": w.job(nil)})
			if i == 0 {
				require.Eventually(t, func() bool {
					return w.rc.ZCard(ctx, w.keys.WorkflowAttention()).Val() == 0 && w.rc.ZCard(ctx, w.keys.WorkflowIndex()).Val() == 0
				}, 30*time.Second, 20*time.Millisecond, "the sweep drops the marks of a workflow never created")
				_, err := w.insp.GetWorkflow(ctx, id)
				require.ErrorIs(t, err, dtq.ErrWorkflowNotFound)
				return
			}
			info := w.wait(t, id)
			require.Equal(t, dtqtype.WorkflowSucceeded, info.Status)
			require.Equal(t, map[string]dtqtype.Status{"x": "succeeded", "y": "succeeded", "z": "succeeded"}, statuses(info))
			for _, ref := range []string{"x", "y", "z"} {
				require.Equal(t, int32(1), w.runs(id, ref), "node %s ran once", ref)
			}
			z := w.depsSeen(t, id, "z")
			require.JSONEq(t, `"x"`, string(z["x"].Result))
			require.JSONEq(t, `"y"`, string(z["y"].Result))
			evs := w.sysEvents(t, id) // at least once: the sweep and a relay may both emit
			require.Contains(t, evs, "WORKFLOW_STARTED")
			require.Contains(t, evs, "WORKFLOW_SUCCEEDED")
			list, err := w.insp.ListWorkflows(ctx, nil)
			require.NoError(t, err)
			require.Len(t, list.Items, 1)
			require.Equal(t, id, list.Items[0].ID)
			require.Eventually(t, func() bool { return w.rc.ZCard(ctx, w.keys.WorkflowAttention()).Val() == 0 },
				30*time.Second, 20*time.Millisecond, "the sweep leaves no mark behind")
		})
	}
}

// TestWorkflowFailover kills the master of queue A (SIGKILL) while
// workflows whose nodes sit on A, B and C run, on a cluster with one
// replica per master and DTQ_REPLICA_ACKS=1; more workflows are submitted
// while the replica takes over and the killed node comes back as its
// replica. Every workflow ends succeeded: no node
// end is lost between a queue's outbox and its workflow's slot, and no
// node is left waiting.
func TestWorkflowFailover(t *testing.T) {
	t.Parallel()
	d := clusterDeployment(t)
	const prefix = "fo"
	keys := rdb.NewKeys(prefix)
	qa, qb, qc := d.queues[0], d.queues[1], d.queues[2]
	dep := openDeployment(t, d.rc, prefix, replicaAcks(1))
	client, err := dep.NewClient(nil)
	require.NoError(t, err)
	insp := openDeployment(t, d.rc, prefix).Inspector()
	var ended atomic.Int64
	for i := range 2 {
		startWorkerOf(t, dep, d.queues, func(cfg *dtq.WorkerConfig) {
			cfg.WorkerID = fmt.Sprintf("wf%d", i)
		}, map[string]dtq.HandlerFunc{
			"step": func(ctx context.Context, task *dtq.Task) (any, error) {
				select { // long enough that nodes are in flight when the master dies
				case <-ctx.Done():
					return nil, context.Cause(ctx)
				case <-time.After(20 * time.Millisecond):
				}
				ended.Add(1)
				return task.Ref, nil
			},
		})
	}
	step := func(ref, queue string, deps ...string) dtq.Node {
		return dtq.Node{Ref: ref, Deps: deps, Submission: dtq.Submission{Queue: queue, Type: "step", MaxAttempts: 10}}
	}
	// A diamond over the three masters, then a chain back to A.
	graph := []dtq.Node{step("top", qa), step("l", qb, "top"), step("r", qc, "top"), step("j", qa, "l", "r"),
		step("t1", qb, "j"), step("t2", qc, "t1"), step("t3", qa, "t2")}
	// submit retries a workflow under its key until it is acknowledged.
	submit := func(key string) string {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		for {
			res, err := client.SubmitWorkflow(ctx, dtq.Workflow{Nodes: graph, IdempotencyKey: key})
			if err == nil {
				return res.WorkflowID
			}
			if ce, ok := errors.AsType[*dtq.WorkflowConflictError](err); ok && errors.Is(err, dtq.ErrIdempotencyInProgress) {
				return ce.WorkflowID // a send whose answer was lost created it
			}
			require.NotErrorIs(t, err, dtq.ErrIdempotencyKeyMismatch)
			select {
			case <-ctx.Done():
				t.Fatalf("workflow %s never acknowledged: %v", key, err)
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	var ids []string
	for i := range 20 {
		ids = append(ids, submit(fmt.Sprintf("before-%d", i)))
	}
	total := int64(len(graph) * 20)
	require.Eventually(t, func() bool { return ended.Load() > total/4 }, 60*time.Second, 10*time.Millisecond,
		"the workflows never got going")
	killedAt := ended.Load()
	restart := d.kill()
	// Submissions while the replica takes over: with one replica ack
	// asked, those whose workflow lands on A's shard are acknowledged once
	// the killed node is back as the new master's replica.
	during := make(chan string, 10)
	go func() {
		defer close(during)
		for i := range 10 {
			during <- submit(fmt.Sprintf("during-%d", i))
		}
	}()
	require.NoError(t, d.healthy(), "no replica took over")
	require.NoError(t, restart())
	require.NoError(t, d.healthy())
	for id := range during {
		ids = append(ids, id)
	}
	require.Len(t, ids, 30)
	ctx := context.Background()
	succeeded := 0
	for _, id := range ids {
		var info *dtqtype.WorkflowInfo
		require.Eventually(t, func() bool {
			info, err = insp.WaitWorkflow(ctx, id, 5*time.Second)
			return err == nil && info.Status.Terminal()
		}, 2*time.Minute, 10*time.Millisecond, "workflow %s never ended", id)
		require.Equal(t, dtqtype.WorkflowSucceeded, info.Status, "workflow %s: %v", id, statuses(info))
		require.Equal(t, len(graph), info.Counts[dtqtype.StatusSucceeded])
		succeeded++
	}
	for _, q := range d.queues {
		require.Eventually(t, func() bool { return d.rc.ZCard(ctx, keys.Waiting(q)).Val() == 0 },
			30*time.Second, 10*time.Millisecond, "no node left waiting on %s", q)
	}
	line := fmt.Sprintf("WORKFLOW FAILOVER cluster replica_acks=1: workflows=%d succeeded=%d node_runs=%d (nodes=%d) killed_after=%d node ends",
		len(ids), succeeded, ended.Load(), len(ids)*len(graph), killedAt)
	fmt.Println(line)
	t.Log(line)
}
