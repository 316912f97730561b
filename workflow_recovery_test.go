package dtq_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/internal/faultproxy"
	"github.com/dtq-io/dtq/internal/rdb"
	"github.com/dtq-io/dtq/internal/workertest"
	"github.com/dtq-io/dtq/internal/workflow"
)

// rawNode is a node as the scripts take it, for driving a submission's
// steps by hand.
func (b *wfBundle) rawNode(t *testing.T, ref, queue string, deps ...string) rdb.WorkflowNode {
	t.Helper()
	r := rdb.New(b.rc, b.prefix)
	num, err := r.QueueNumber(b.ctx, queue)
	require.NoError(t, err)
	now := time.Now()
	return rdb.WorkflowNode{Ref: ref, Queue: queue, Deps: deps, Digest: "d-" + ref,
		Task: rdb.NodeTask{ID: rdb.NewTaskID(num, now), Type: "job", Payload: []byte(`{}`), Priority: 5, MaxAttempts: 1,
			TimeoutMS: 30000, CreatedAt: now.UnixMilli()}}
}

// TestWorkflowSubmitInterruptedIsCompletedBySweep stops a submission after
// each of its steps (the steps run by hand, as a client that died there
// would have left them); the workers' sweep completes the workflow.
func TestWorkflowSubmitInterruptedIsCompletedBySweep(t *testing.T) {
	t.Parallel()
	steps := []string{"marked", "created", "one queue written", "all written", "started", "released"}
	for i, stop := range steps {
		t.Run(stop, func(t *testing.T) {
			t.Parallel()
			b := setupWorkflows(t, nil)
			r := rdb.New(b.rc, b.prefix)
			ctx, now := b.ctx, time.Now()
			nodes := []rdb.WorkflowNode{b.rawNode(t, "x", "a"), b.rawNode(t, "y", "b", "x"), b.rawNode(t, "z", "a", "x")}
			id := rdb.NewWorkflowID(now, rdb.RandomWorkflowTag())
			require.NoError(t, r.WorkflowMark(ctx, rdb.NewAttention(id, now.UnixMilli()), true))
			if i >= 1 {
				_, err := r.WorkflowCreate(ctx, now, &rdb.NewWorkflow{ID: id, Nodes: nodes})
				require.NoError(t, err)
			}
			if i >= 2 {
				require.NoError(t, r.WorkflowWriteNodes(ctx, id, "a", now, 100, []rdb.WorkflowNode{nodes[0], nodes[2]}))
			}
			if i >= 3 {
				require.NoError(t, r.WorkflowWriteNodes(ctx, id, "b", now, 100, nodes[1:2]))
			}
			var st rdb.StartResult
			if i >= 4 {
				var err error
				st, err = r.WorkflowStart(ctx, id, now, time.Hour, []string{"x", "y", "z"})
				require.NoError(t, err)
			}
			if i >= 5 {
				for j := range st.Releases {
					_, err := r.WorkflowRelease(ctx, &st.Releases[j], now, &rdb.ReleaseSettings{EventsMaxLen: 100})
					require.NoError(t, err)
				}
			}
			workertest.Run(t, b.w)
			if i == 0 {
				// Nothing was created: the sweep drops the marks.
				require.Eventually(t, func() bool {
					return b.rc.ZCard(ctx, b.keys.WorkflowAttention()).Val() == 0 && b.rc.ZCard(ctx, b.keys.WorkflowIndex()).Val() == 0
				}, 30*time.Second, 20*time.Millisecond)
				_, err := b.insp.GetWorkflow(ctx, id)
				require.ErrorIs(t, err, dtq.ErrWorkflowNotFound)
				return
			}
			info := b.wait(t, id)
			require.Equal(t, dtqtype.WorkflowSucceeded, info.Status)
			require.Equal(t, 3, info.Counts[dtqtype.StatusSucceeded])
			// The events follow the scripts that ended the workflow (from Go,
			// or from the sweep when that process stopped first).
			require.Eventually(t, func() bool {
				evs := b.sysEvents(t, id)
				return slices.Contains(evs, "WORKFLOW_STARTED") && slices.Contains(evs, "WORKFLOW_SUCCEEDED")
			}, 30*time.Second, 20*time.Millisecond, "WORKFLOW_STARTED and WORKFLOW_SUCCEEDED")
			list, err := b.insp.ListWorkflows(ctx, nil)
			require.NoError(t, err)
			require.Len(t, list.Items, 1)
			require.Eventually(t, func() bool { return b.rc.ZCard(ctx, b.keys.WorkflowAttention()).Val() == 0 },
				30*time.Second, 20*time.Millisecond, "the sweep leaves no mark behind")
		})
	}
}

// TestWorkflowCutShortMarkOutlivesARelay: a fan-out whose activation was
// cut short (wf_add landed, the added node was never written) leaves its
// attention mark for the sweep. A relay marking and unmarking the same
// workflow meanwhile (a node of it ended) must not take that mark away:
// the sweep writes and releases the added node and the workflow ends. When
// every call shared one entry per workflow, the relay's compare-and-remove
// found its own newer score and removed it, and the workflow stayed
// running with the added node never written (found by the fault suite).
func TestWorkflowCutShortMarkOutlivesARelay(t *testing.T) {
	t.Parallel()
	b := setupWorkflows(t, nil)
	r := rdb.New(b.rc, b.prefix)
	ctx, now := b.ctx, time.Now()
	id := rdb.NewWorkflowID(now, rdb.RandomWorkflowTag())
	x := b.rawNode(t, "x", "a")
	_, err := r.WorkflowCreate(ctx, now, &rdb.NewWorkflow{ID: id, Nodes: []rdb.WorkflowNode{x}})
	require.NoError(t, err)
	require.NoError(t, r.WorkflowWriteNodes(ctx, id, "a", now, 100, []rdb.WorkflowNode{x}))
	st, err := r.WorkflowStart(ctx, id, now, time.Hour, []string{"x"})
	require.NoError(t, err)
	require.Len(t, st.Releases, 1)
	_, err = r.WorkflowRelease(ctx, &st.Releases[0], now, &rdb.ReleaseSettings{EventsMaxLen: 100})
	require.NoError(t, err)
	require.NoError(t, r.WorkflowReleased(ctx, id, []string{"x"}))

	// x adds k below itself; the activation never happens.
	add, err := r.WorkflowAdd(ctx, id, now, 100, rdb.FullQueue{}, []rdb.WorkflowNode{b.rawNode(t, "k", "b", "x")})
	require.NoError(t, err)
	require.Equal(t, rdb.AddOK, add.Outcome)
	require.NoError(t, r.WorkflowMark(ctx, rdb.NewAttention(id, now.UnixMilli()), false))
	// A relay of the workflow marks it and, its own steps done, unmarks it.
	relay := rdb.NewAttention(id, now.UnixMilli()+1)
	require.NoError(t, r.WorkflowMark(ctx, relay, false))
	require.NoError(t, r.WorkflowUnmark(ctx, relay))
	require.Equal(t, int64(1), b.rc.ZCard(ctx, b.keys.WorkflowAttention()).Val(), "the fan-out's mark stays")

	workertest.Run(t, b.w)
	info := b.wait(t, id)
	require.Equal(t, dtqtype.WorkflowSucceeded, info.Status)
	require.Equal(t, map[string]dtqtype.Status{"x": dtqtype.StatusSucceeded, "k": dtqtype.StatusSucceeded}, nodeStatus(info))
}

// TestWorkflowFanOutWhoseReplyWasLost: a node's AddNodes whose wf_add
// landed but whose reply was lost fails, and the node gives up (fails for
// good) instead of adding the nodes again. The added nodes, stored but
// never written, still end (cancelled by their failed dep) and the
// workflow ends failed: AddNodes marks the workflow for the sweep before
// wf_add. When it marked only after wf_add answered, nothing ever wrote
// them and the workflow stayed running (found by the fault suite).
func TestWorkflowFanOutWhoseReplyWasLost(t *testing.T) {
	t.Parallel()
	b := setupWorkflows(t, nil)
	proxy, err := faultproxy.Start(b.rc.Options().Addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = proxy.Close() })
	rc := redis.NewClient(&redis.Options{Addr: proxy.Addr(), MaxRetries: -1}) // a lost reply is not sent again
	t.Cleanup(func() { _ = rc.Close() })
	w, err := openPrefix(t, rc, b.prefix).NewWorker(&dtq.WorkerConfig{Queues: map[string]int{"a": 1, "b": 1},
		Concurrency: 4, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	w.HandleFunc("job", b.job)
	w.HandleFunc("fan", func(ctx context.Context, task *dtq.Task) (any, error) {
		if _, err := dtq.AddNodes(ctx, job("k", "b", nil, task.Ref)); err != nil {
			return nil, dtq.Permanent(err)
		}
		return nil, nil
	})
	proxy.CutAfter([]byte(rdb.ScriptHash("wf_add")), 1)
	res, err := b.client.SubmitWorkflow(b.ctx, dtq.Workflow{Nodes: []dtq.Node{
		{Ref: "x", Submission: dtq.Submission{Queue: "a", Type: "fan", MaxAttempts: 1}}}})
	require.NoError(t, err)
	workertest.Run(t, w)
	info := b.wait(t, res.WorkflowID)
	require.EqualValues(t, 1, proxy.Cuts(), "the wf_add reply was lost")
	require.Equal(t, dtqtype.WorkflowFailed, info.Status)
	require.Equal(t, map[string]dtqtype.Status{"x": dtqtype.StatusDeadLettered, "k": dtqtype.StatusCancelled}, nodeStatus(info))
}

// TestWorkflowNodeOfAKilledWorkerIsReclaimed: a node whose worker vanished
// mid-run (claimed, never finished) is reclaimed by a peer; the workflow
// goes on.
func TestWorkflowNodeOfAKilledWorkerIsReclaimed(t *testing.T) {
	t.Parallel()
	b := setupWorkflowsOn(t, lateClock, nil) // past the dead worker's lease
	res, err := b.client.SubmitWorkflow(b.ctx, dtq.Workflow{Nodes: []dtq.Node{
		{Ref: "x", Submission: dtq.Submission{Queue: "a", Type: "job", MaxAttempts: 2}}, job("y", "b", nil, "x")}})
	require.NoError(t, err)
	r := rdb.New(b.rc, b.prefix)
	require.NoError(t, r.EnsureGroups(b.ctx, "a"))
	cl, err := r.Claim(b.ctx, "a", &rdb.WorkerSettings{WorkerID: "dead", Lease: time.Second, EventsMaxLen: 100}, 1, time.Now(), "n")
	require.NoError(t, err)
	require.Len(t, cl.Tasks, 1)
	workertest.Run(t, b.w)
	info := b.wait(t, res.WorkflowID)
	require.Equal(t, dtqtype.WorkflowSucceeded, info.Status)
	ti, err := b.insp.GetTask(b.ctx, res.Nodes[0].TaskID)
	require.NoError(t, err)
	require.Equal(t, 2, ti.Attempt)
	require.Equal(t, "lease_lost", ti.Attempts[0].Outcome)
}

// TestWorkflowRandomized runs random DAGs (chains, diamonds, wide fan-in
// and fan-out) whose nodes fail or are cancelled at random, some of whose
// workflows are cancelled midway, while "killed workers" (claims that are
// never finished) make nodes run again after their lease is reclaimed. At
// rest every workflow has ended; a workflow not cancelled has every node
// in the status internal/workflow's Model gives when the nodes that ran end
// as they did; a cancelled one has every node ended consistently with its
// deps and policy; the WORKFLOW_* events agree with the status.
func TestWorkflowRandomized(t *testing.T) {
	t.Parallel()
	b := setupWorkflows(t, func(c *dtq.WorkerConfig) { c.Concurrency = 16 })
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 7))
	type submitted struct {
		id     string
		nodes  []dtq.Node
		cancel bool // cancelled once a node ended
	}
	var all []submitted
	var blocking []string // task ids to cancel once running
	for w := range 16 {
		n := 3 + rng.IntN(25)
		nodes := make([]dtq.Node, n)
		shape := w % 3
		for i := range n {
			ref := fmt.Sprintf("n%d", i)
			var deps []string
			switch {
			case i == 0:
			case shape == 0: // chains with joins
				deps = append(deps, fmt.Sprintf("n%d", i-1))
				if i > 2 && rng.IntN(3) == 0 {
					deps = append(deps, fmt.Sprintf("n%d", rng.IntN(i-1)))
				}
			case shape == 1: // wide fan-out then a fan-in at the end
				if i == n-1 {
					for j := 1; j < n-1; j++ {
						deps = append(deps, fmt.Sprintf("n%d", j))
					}
				} else {
					deps = []string{"n0"}
				}
			default: // random
				for j := range i {
					if rng.IntN(4) == 0 {
						deps = append(deps, fmt.Sprintf("n%d", j))
					}
				}
			}
			payload := map[string]any{}
			switch p := rng.IntN(100); {
			case p < 15:
				payload["fail"] = true
			case p < 20:
				payload["block"] = true
			}
			nodes[i] = job(ref, []string{"a", "b"}[rng.IntN(2)], payload, deps...)
			nodes[i].MaxAttempts = 2 // a node a killed worker held runs again
			if rng.IntN(3) == 0 {
				nodes[i].OnDepFailure = dtq.DepContinue
			}
		}
		res, err := b.client.SubmitWorkflow(b.ctx, dtq.Workflow{Nodes: nodes})
		require.NoError(t, err)
		all = append(all, submitted{id: res.WorkflowID, nodes: nodes, cancel: w%4 == 3})
		for i, nr := range res.Nodes {
			if nodes[i].Payload.(map[string]any)["block"] == true {
				blocking = append(blocking, nr.TaskID)
			}
		}
	}
	ctx, stop := context.WithCancel(b.ctx)
	defer stop()
	// Killed workers: a claim of one task, never finished, every few
	// claims of the real workers; the lease runs out and a peer reclaims.
	r := rdb.New(b.rc, b.prefix)
	require.NoError(t, r.EnsureGroups(b.ctx, "a"))
	require.NoError(t, r.EnsureGroups(b.ctx, "b"))
	killed := make(chan int, 1)
	go func() {
		n := 0
		defer func() { killed <- n }()
		for i := 0; n < 12 && ctx.Err() == nil; i++ {
			q := []string{"a", "b"}[i%2]
			s := &rdb.WorkerSettings{WorkerID: fmt.Sprintf("killed-%d", i), Lease: 500 * time.Millisecond, EventsMaxLen: 1000}
			if cl, err := r.Claim(ctx, q, s, 1, time.Now(), ""); err == nil && len(cl.Tasks) == 1 {
				n++
			}
			select {
			case <-ctx.Done():
			case <-time.After(time.Duration(5+rng.IntN(30)) * time.Millisecond):
			}
		}
	}()
	workertest.Run(t, b.w)
	workertest.Run(t, b.peer(t)) // two relays per queue: one holds the lock at a time
	// A blocking node is cancelled once it runs (one that is never released
	// ends by its dep, or not at all).
	go func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		left := slices.Clone(blocking)
		for len(left) > 0 && ctx.Err() == nil {
			for i := 0; i < len(left); i++ {
				ti, err := b.insp.GetTask(ctx, left[i])
				if err != nil {
					continue
				}
				if ti.Status == dtqtype.StatusRunning {
					_, _ = b.admin.CancelTask(ctx, left[i], "randomized")
				}
				if ti.Status == dtqtype.StatusRunning || ti.Status.Terminal() {
					left = slices.Delete(left, i, i+1)
					i--
				}
			}
			select {
			case <-ctx.Done():
			case <-tick.C:
			}
		}
	}()
	// A workflow to cancel is cancelled once one of its nodes ended (if it has
	// not ended by then).
	cancelled := map[string]bool{}
	for _, s := range all {
		if !s.cancel {
			continue
		}
		require.Eventually(t, func() bool {
			info, err := b.insp.GetWorkflow(ctx, s.id)
			require.NoError(t, err)
			return info.Status.Terminal() || info.Counts[dtqtype.StatusSucceeded]+info.Counts[dtqtype.StatusFailed] > 0
		}, 30*time.Second, 5*time.Millisecond)
		_, ended, err := b.admin.CancelWorkflow(ctx, s.id)
		require.NoError(t, err)
		cancelled[s.id] = !ended
	}
	for _, s := range all {
		info := b.wait(t, s.id)
		actual := map[string]dtqtype.WorkflowNodeInfo{}
		for _, n := range info.Nodes {
			actual[n.Ref] = n
			ti, err := b.insp.GetTask(b.ctx, n.TaskID)
			require.NoError(t, err)
			require.Equal(t, n.Status, ti.Status, "the task and its workflow agree on node %s of %s", n.Ref, s.id)
			require.True(t, n.Status.Terminal(), "node %s of ended workflow %s is %s", n.Ref, s.id, n.Status)
		}
		if cancelled[s.id] {
			require.Equal(t, dtqtype.WorkflowCancelled, info.Status, "workflow %s", s.id)
			for _, n := range s.nodes {
				a := actual[n.Ref]
				if a.Status != dtqtype.StatusSucceeded && a.Status != dtqtype.StatusFailed && a.Status != dtqtype.StatusDeadLettered {
					continue
				}
				// A node that ran had every dep ended, and under fail each
				// one succeeded.
				for _, d := range n.Deps {
					ds := actual[d].Status
					require.True(t, ds.Terminal(), "node %s ran before its dep %s ended", n.Ref, d)
					if n.OnDepFailure != dtq.DepContinue {
						require.Equal(t, dtqtype.StatusSucceeded, ds, "node %s ran under fail after dep %s", n.Ref, d)
					}
				}
			}
		} else {
			graph := make([]workflow.Node, len(s.nodes))
			for i, n := range s.nodes {
				graph[i] = workflow.Node{Ref: n.Ref, Deps: n.Deps, OnDepFailure: workflow.Policy(n.OnDepFailure)}
			}
			m := workflow.NewModel(graph)
			// The refs are in topological order: each released node ends as
			// it did in fact.
			for _, n := range s.nodes {
				if m.NodeStatus(n.Ref) == dtqtype.StatusQueued {
					_, _, err := m.End(n.Ref, actual[n.Ref].Status)
					require.NoError(t, err, "workflow %s node %s", s.id, n.Ref)
				}
			}
			for _, n := range s.nodes {
				a := actual[n.Ref]
				require.Equal(t, m.NodeStatus(n.Ref), a.Status, "workflow %s node %s", s.id, n.Ref)
				require.Equal(t, m.CancelledByDep(n.Ref), a.ErrorClass == "DependencyFailed", "workflow %s node %s", s.id, n.Ref)
			}
			require.Equal(t, string(m.Status()), string(info.Status), "workflow %s", s.id)
		}
		// The events say what the record says (at least once: repeats of
		// the same event are allowed, a contradicting one is not).
		want := map[dtqtype.WorkflowStatus]string{dtqtype.WorkflowSucceeded: "WORKFLOW_SUCCEEDED",
			dtqtype.WorkflowFailed: "WORKFLOW_FAILED", dtqtype.WorkflowCancelled: "WORKFLOW_CANCELLED"}[info.Status]
		var evs []string
		require.Eventually(t, func() bool {
			evs = b.sysEvents(t, s.id)
			return slices.Contains(evs, want)
		}, 30*time.Second, 20*time.Millisecond, "workflow %s: no %s event", s.id, want)
		for _, e := range evs {
			require.Contains(t, []string{"WORKFLOW_STARTED", want}, e, "workflow %s ended %s", s.id, info.Status)
		}
		require.Contains(t, evs, "WORKFLOW_STARTED")
	}
	for _, q := range []string{"a", "b"} {
		require.Eventually(t, func() bool { return b.rc.Get(b.ctx, b.keys.Depth(q)).Val() == "0" }, 20*time.Second, 10*time.Millisecond)
		require.Zero(t, b.rc.ZCard(b.ctx, b.keys.Waiting(q)).Val(), "no node is left waiting")
	}
	stop()
	n := <-killed
	midway := 0
	for _, c := range cancelled {
		if c {
			midway++
		}
	}
	t.Logf("%d workflows (%d cancelled midway), %d nodes held by killed workers", len(all), midway, n)
	require.Positive(t, n, "some nodes were held by killed workers")
}

// TestWorkflowMaintenanceWithoutWorkerOfTheQueue: node ends on a queue no
// Go worker serves (here: finished by hand, as an HTTP worker's would be)
// reach the workflow through RunWorkflowMaintenance.
func TestWorkflowMaintenanceWithoutWorkerOfTheQueue(t *testing.T) {
	t.Parallel()
	b := setupWorkflows(t, nil)
	res, err := b.client.SubmitWorkflow(b.ctx, dtq.Workflow{Nodes: []dtq.Node{job("x", "remote", nil), job("y", "remote", nil, "x")}})
	require.NoError(t, err)
	ctx, stop := context.WithCancel(b.ctx)
	done := make(chan error, 1)
	go func() { done <- dtq.RunWorkflowMaintenance(ctx, b.d, &dtq.WorkflowMaintenanceConfig{Client: b.client}) }()
	defer func() { stop(); require.NoError(t, <-done) }()
	r := rdb.New(b.rc, b.prefix)
	require.NoError(t, r.EnsureGroups(b.ctx, "remote"))
	s := &rdb.WorkerSettings{WorkerID: "http-1", Lease: time.Minute, EventsMaxLen: 100, SucceededRetention: time.Hour}
	for range 2 {
		var ct rdb.ClaimedTask
		require.Eventually(t, func() bool {
			cl, err := r.Claim(b.ctx, "remote", s, 1, time.Now(), "")
			require.NoError(t, err)
			if len(cl.Tasks) == 1 {
				ct = cl.Tasks[0]
			}
			return len(cl.Tasks) == 1
		}, 20*time.Second, 10*time.Millisecond)
		_, err := r.FinishSucceeded(b.ctx, "remote", s, time.Now(), []rdb.Success{{ID: ct.ID, Attempt: ct.Attempt}})
		require.NoError(t, err)
	}
	info := b.wait(t, res.WorkflowID)
	require.Equal(t, dtqtype.WorkflowSucceeded, info.Status)
}
