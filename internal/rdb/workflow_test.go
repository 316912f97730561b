package rdb

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq/dtqtype"
)

// snapshot is every key under the test's prefix with its content, to tell
// that a call changed nothing.
func (b *testRDB) snapshot(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	iter := b.admin.Scan(b.ctx, 0, b.keys.Prefix()+":*", 1000).Iterator()
	for iter.Next(b.ctx) {
		k := iter.Val()
		typ, err := b.c.Type(b.ctx, k).Result()
		require.NoError(t, err)
		var v any
		switch typ {
		case "string":
			v = b.c.Get(b.ctx, k).Val()
		case "hash":
			v = b.c.HGetAll(b.ctx, k).Val()
		case "zset":
			v = b.c.ZRangeWithScores(b.ctx, k, 0, -1).Val()
		case "list":
			v = b.c.LRange(b.ctx, k, 0, -1).Val()
		case "stream":
			v = b.c.XRange(b.ctx, k, "-", "+").Val()
		}
		out[k] = fmt.Sprint(typ, v)
	}
	require.NoError(t, iter.Err())
	return out
}

// twice runs call twice: both answers must be equal, and the second call
// must change nothing.
func twice[T any](t *testing.T, b *testRDB, what string, call func() (T, error)) T {
	t.Helper()
	first, err := call()
	require.NoError(t, err, what)
	before := b.snapshot(t)
	second, err := call()
	require.NoError(t, err, what)
	require.Equal(t, first, second, "%s sent again answers otherwise", what)
	require.Equal(t, before, b.snapshot(t), "%s sent again changed something", what)
	return first
}

// wfNode builds a node of queue q for the script tests.
func (b *testRDB) wfNode(t *testing.T, q, ref string, cont bool, deps ...string) WorkflowNode {
	t.Helper()
	num, err := b.r.QueueNumber(b.ctx, q)
	require.NoError(t, err)
	return WorkflowNode{Ref: ref, Queue: q, Deps: deps, Continue: cont, Digest: "d-" + ref,
		Task: NodeTask{ID: NewTaskID(num, b.now), Type: "echo", Payload: []byte(`{"ref":"` + ref + `"}`), Priority: 5,
			MaxAttempts: 1, TimeoutMS: 30000, CreatedAt: b.now.UnixMilli()}}
}

// submitWorkflow runs create, nodes and start for nodes, as the client does.
func (b *testRDB) submitWorkflow(t *testing.T, w *NewWorkflow) StartResult {
	t.Helper()
	res, err := b.r.WorkflowCreate(b.ctx, b.now, w)
	require.NoError(t, err)
	require.Equal(t, WorkflowCreated, res.Outcome)
	byQueue := map[string][]WorkflowNode{}
	var roots []string
	for _, n := range w.Nodes {
		byQueue[n.Queue] = append(byQueue[n.Queue], n)
		roots = append(roots, n.Ref)
	}
	for q, nodes := range byQueue {
		require.NoError(t, b.r.WorkflowWriteNodes(b.ctx, w.ID, q, b.now, 1000, nodes))
	}
	st, err := b.r.WorkflowStart(b.ctx, w.ID, b.now, time.Hour, roots)
	require.NoError(t, err)
	return st
}

var relSettings = &ReleaseSettings{EventsMaxLen: 1000, FailedRetention: time.Hour}

// release carries out rels and drops them.
func (b *testRDB) release(t *testing.T, id string, rels []Release) {
	t.Helper()
	var refs []string
	for i := range rels {
		_, err := b.r.WorkflowRelease(b.ctx, &rels[i], b.now, relSettings)
		require.NoError(t, err)
		refs = append(refs, rels[i].Ref)
	}
	require.NoError(t, b.r.WorkflowReleased(b.ctx, id, refs))
}

// releaseStored carries out every release stored for workflow id (those a
// call answered as stored rather than inline).
func (b *testRDB) releaseStored(t *testing.T, id string) {
	t.Helper()
	var all []Release
	var cursor uint64
	for {
		rels, next, err := b.r.WorkflowScanReleases(b.ctx, id, cursor, ReleaseChunk)
		require.NoError(t, err)
		all = append(all, rels...)
		if cursor = next; cursor == 0 {
			break
		}
	}
	b.release(t, id, all)
}

// relay applies every outbox entry of q and carries out its releases.
func (b *testRDB) relay(t *testing.T, q string) []dtqtype.WorkflowStatus {
	t.Helper()
	es, err := b.r.ReadOutbox(b.ctx, q, 100)
	require.NoError(t, err)
	var finals []dtqtype.WorkflowStatus
	for i := range es {
		res, err := b.r.WorkflowApply(b.ctx, &es[i], b.now, time.Hour, false)
		require.NoError(t, err)
		b.release(t, es[i].Workflow, res.Releases)
		if res.Stored {
			b.releaseStored(t, es[i].Workflow)
		}
		require.NoError(t, b.r.AckOutbox(b.ctx, q, []string{es[i].ID}))
		if res.Final != "" {
			finals = append(finals, res.Final)
		}
	}
	return finals
}

func refsOf(rels []Release) []string {
	out := make([]string, len(rels))
	for i, r := range rels {
		out[i] = r.Kind + ":" + r.Ref
	}
	slices.Sort(out)
	return out
}

// TestWorkflowScriptsSentTwice sends each workflow script twice in a row
// through one workflow's life: the second call answers the same and
// changes nothing.
func TestWorkflowScriptsSentTwice(t *testing.T) {
	t.Parallel()
	b := newTestRDB(t)
	ctx, r := b.ctx, b.r
	a, bb := b.wfNode(t, "qa", "a", false), b.wfNode(t, "qb", "b", false, "a")
	c := b.wfNode(t, "qa", "c", true, "a", "b")
	id := NewWorkflowID(b.now, WorkflowKeyTag("key-1"))
	w := &NewWorkflow{ID: id, Name: "order-1", Fingerprint: "fp", IdempotencyKey: "key-1", IdemTTL: 3600,
		Nodes: []WorkflowNode{a, bb, c}}

	cr := twice(t, b, "wf_create", func() (CreateResult, error) { return r.WorkflowCreate(ctx, b.now, w) })
	require.Equal(t, CreateResult{Outcome: WorkflowCreated, ID: id, Status: dtqtype.WorkflowSubmitting}, cr)
	// Another submission with the key: in progress, or a mismatch.
	other := *w
	other.ID = NewWorkflowID(b.now.Add(time.Millisecond), WorkflowKeyTag("key-1"))
	got, err := r.WorkflowCreate(ctx, b.now, &other)
	require.NoError(t, err)
	require.Equal(t, CreateResult{Outcome: WorkflowInProgress, ID: id}, got)
	other.Fingerprint = "another"
	got, err = r.WorkflowCreate(ctx, b.now, &other)
	require.NoError(t, err)
	require.Equal(t, CreateResult{Outcome: WorkflowMismatch, ID: id}, got)

	twice(t, b, "wf_nodes", func() (int, error) {
		return 0, r.WorkflowWriteNodes(ctx, id, "qa", b.now, 1000, []WorkflowNode{a, c})
	})
	require.NoError(t, r.WorkflowWriteNodes(ctx, id, "qb", b.now, 1000, []WorkflowNode{bb}))
	ti, err := r.GetTask(ctx, a.Task.ID)
	require.NoError(t, err)
	require.Equal(t, dtqtype.StatusWaiting, ti.Status)
	require.Equal(t, id, ti.WorkflowID)
	require.Equal(t, "a", ti.Ref)

	st := twice(t, b, "wf_start", func() (StartResult, error) {
		return r.WorkflowStart(ctx, id, b.now, time.Hour, []string{"a", "b", "c"})
	})
	require.True(t, st.Started)
	require.Equal(t, []string{"run:a"}, refsOf(st.Releases))

	rel := st.Releases[0]
	status := twice(t, b, "wf_release", func() (dtqtype.Status, error) { return r.WorkflowRelease(ctx, &rel, b.now, relSettings) })
	require.Equal(t, dtqtype.StatusQueued, status)
	twice(t, b, "wf_released", func() (int, error) { return 0, r.WorkflowReleased(ctx, id, []string{"a"}) })
	twice(t, b, "wf_note", func() (int, error) { return 0, r.WorkflowNote(ctx, id, NoteStarted, "1") })

	// a runs and succeeds: its end reaches the outbox in the finish script.
	require.NoError(t, r.EnsureGroups(ctx, "qa"))
	cl, err := r.Claim(ctx, "qa", testSettings, 10, b.now, "n1")
	require.NoError(t, err)
	require.Len(t, cl.Tasks, 1)
	require.Equal(t, id, cl.Tasks[0].Workflow)
	require.Equal(t, "a", cl.Tasks[0].Ref)
	require.JSONEq(t, `{}`, string(cl.Tasks[0].Deps))
	_, err = r.FinishSucceeded(ctx, "qa", testSettings, b.now, []Success{{ID: a.Task.ID, Attempt: 1, Result: []byte(`{"x":1}`)}})
	require.NoError(t, err)
	es, err := r.ReadOutbox(ctx, "qa", 10)
	require.NoError(t, err)
	require.Len(t, es, 1)
	require.Equal(t, OutboxEntry{ID: es[0].ID, Workflow: id, Ref: "a", Status: dtqtype.StatusSucceeded, Result: `{"x":1}`}, es[0])

	ap := twice(t, b, "wf_apply", func() (ApplyResult, error) {
		res, err := r.WorkflowApply(ctx, &es[0], b.now, time.Hour, false)
		res.Known = false // the resend says it knew the end; the rest is the same
		return res, err
	})
	require.Equal(t, []string{"run:b"}, refsOf(ap.Releases))
	require.JSONEq(t, `{"a":{"status":"succeeded","result":{"x":1}}}`, ap.Releases[0].Detail)
	twice(t, b, "wf_ack", func() (int, error) { return 0, r.AckOutbox(ctx, "qa", []string{es[0].ID}) })
	b.release(t, id, ap.Releases)

	// b, running, adds d (after b) and e (after a, already succeeded).
	d, e := b.wfNode(t, "qb", "d", false, "b"), b.wfNode(t, "qa", "e", false, "a")
	add := twice(t, b, "wf_add", func() (AddResult, error) {
		return r.WorkflowAdd(ctx, id, b.now, 100, FullQueue{}, []WorkflowNode{d, e})
	})
	require.Equal(t, "ok", add.Outcome)
	require.Len(t, add.Nodes, 2)
	require.NotNil(t, add.Nodes[0].Def)
	d2 := d
	d2.Digest = "changed"
	mis, err := r.WorkflowAdd(ctx, id, b.now, 100, FullQueue{}, []WorkflowNode{d2})
	require.NoError(t, err)
	require.Equal(t, AddResult{Outcome: AddMismatch, Ref: "d"}, mis)
	unk := b.wfNode(t, "qa", "f", false, "nope")
	mis, err = r.WorkflowAdd(ctx, id, b.now, 100, FullQueue{}, []WorkflowNode{unk})
	require.NoError(t, err)
	require.Equal(t, AddResult{Outcome: AddUnknownDep, Ref: "f", Dep: "nope"}, mis)
	mis, err = r.WorkflowAdd(ctx, id, b.now, 5, FullQueue{}, []WorkflowNode{unk, b.wfNode(t, "qa", "g", false)})
	require.NoError(t, err)
	require.Equal(t, AddResult{Outcome: AddUnknownDep, Ref: "f", Dep: "nope"}, mis)
	mis, err = r.WorkflowAdd(ctx, id, b.now, 5, FullQueue{}, []WorkflowNode{b.wfNode(t, "qa", "g", false), b.wfNode(t, "qa", "h", false)})
	require.NoError(t, err)
	require.Equal(t, AddResult{Outcome: AddTooMany, Total: 7}, mis)
	require.NoError(t, r.WorkflowWriteNodes(ctx, id, "qb", b.now, 1000, []WorkflowNode{d}))
	require.NoError(t, r.WorkflowWriteNodes(ctx, id, "qa", b.now, 1000, []WorkflowNode{e}))
	act, err := r.WorkflowStart(ctx, id, b.now, time.Hour, []string{"d", "e"})
	require.NoError(t, err)
	require.Equal(t, []string{"run:e"}, refsOf(act.Releases))
	again, err := r.WorkflowAdd(ctx, id, b.now, 100, FullQueue{}, []WorkflowNode{d, e})
	require.NoError(t, err)
	require.Nil(t, again.Nodes[0].Def, "an activated node is no longer being written")
	// A full queue refuses a new node there, not nodes added before nor new
	// nodes elsewhere.
	full := FullQueue{Name: "qa", Depth: 9}
	same, err := r.WorkflowAdd(ctx, id, b.now, 100, full, []WorkflowNode{d, e})
	require.NoError(t, err)
	require.Equal(t, "ok", same.Outcome)
	refused := twice(t, b, "wf_add refused", func() (AddResult, error) {
		return r.WorkflowAdd(ctx, id, b.now, 100, full, []WorkflowNode{b.wfNode(t, "qb", "k", false), b.wfNode(t, "qa", "g", false)})
	})
	require.Equal(t, AddResult{Outcome: WorkflowQueueFull, Queue: "qa", Depth: 9}, refused)
	require.False(t, b.c.HExists(ctx, b.keys.WorkflowNodes(id), "t:k").Val(), "a refused call writes nothing")

	out := twice(t, b, "wf_cancel", func() ([]NodeRef, error) {
		o, _, nodes, next, err := r.WorkflowCancel(ctx, id, b.now, 0)
		require.Equal(t, "cancelling", o)
		require.Zero(t, next, "one page")
		return nodes, err
	})
	var left []string
	for _, n := range out {
		left = append(left, n.Ref)
	}
	require.Equal(t, []string{"b", "c", "d", "e"}, left)

	mark := NewAttention(id, 5)
	twice(t, b, "wf_mark", func() (int, error) { return 0, r.WorkflowMark(ctx, mark, true) })
	twice(t, b, "wf_unmark", func() (int, error) { return 0, r.WorkflowUnmark(ctx, mark) })
	twice(t, b, "wf_unlist", func() (int, error) { return 0, r.DropFromWorkflowIndex(ctx, []string{id}) })
	ok := twice(t, b, "wf_lock", func() (bool, error) { return r.RelayLock(ctx, "qa", "me", time.Minute) })
	require.True(t, ok)
	held, err := r.RelayLock(ctx, "qa", "other", time.Minute)
	require.NoError(t, err)
	require.False(t, held)
}

// TestWorkflowResolution drives small graphs through the scripts, ending
// nodes as the table says, and checks what is released and how the
// workflow ends.
func TestWorkflowResolution(t *testing.T) {
	t.Parallel()
	type end struct {
		ref    string
		status dtqtype.Status
	}
	cases := []struct {
		name  string
		nodes func(b *testRDB) []WorkflowNode
		ends  []end
		want  dtqtype.WorkflowStatus
		runs  []string // refs released to run, in all
	}{
		{"chain", func(b *testRDB) []WorkflowNode {
			return []WorkflowNode{b.wfNode(t, "q", "a", false), b.wfNode(t, "q", "b", false, "a")}
		}, []end{{"a", dtqtype.StatusSucceeded}, {"b", dtqtype.StatusSucceeded}}, dtqtype.WorkflowSucceeded, []string{"a", "b"}},
		{"a failed dep cancels the chain", func(b *testRDB) []WorkflowNode {
			return []WorkflowNode{b.wfNode(t, "q", "a", false), b.wfNode(t, "q", "b", false, "a"), b.wfNode(t, "q", "c", false, "b")}
		}, []end{{"a", dtqtype.StatusDeadLettered}}, dtqtype.WorkflowFailed, []string{"a"}},
		{"continue runs and the workflow succeeds", func(b *testRDB) []WorkflowNode {
			return []WorkflowNode{b.wfNode(t, "q", "a", false), b.wfNode(t, "q", "b", true, "a")}
		}, []end{{"a", dtqtype.StatusFailed}, {"b", dtqtype.StatusSucceeded}}, dtqtype.WorkflowSucceeded, []string{"a", "b"}},
		{"continue below a dep-cancelled node runs", func(b *testRDB) []WorkflowNode {
			return []WorkflowNode{b.wfNode(t, "q", "a", false), b.wfNode(t, "q", "b", false, "a"), b.wfNode(t, "q", "c", true, "b")}
		}, []end{{"a", dtqtype.StatusFailed}, {"c", dtqtype.StatusSucceeded}}, dtqtype.WorkflowFailed, []string{"a", "c"}},
		{"a node cancelled on its own fails the workflow", func(b *testRDB) []WorkflowNode {
			return []WorkflowNode{b.wfNode(t, "q", "a", false), b.wfNode(t, "q", "b", true, "a")}
		}, []end{{"a", dtqtype.StatusCancelled}, {"b", dtqtype.StatusSucceeded}}, dtqtype.WorkflowFailed, []string{"a", "b"}},
		{"diamond", func(b *testRDB) []WorkflowNode {
			return []WorkflowNode{b.wfNode(t, "q", "a", false), b.wfNode(t, "q", "b", false, "a"),
				b.wfNode(t, "q2", "c", false, "a"), b.wfNode(t, "q", "d", false, "b", "c")}
		}, []end{{"a", dtqtype.StatusSucceeded}, {"b", dtqtype.StatusSucceeded}, {"c", dtqtype.StatusSucceeded}, {"d", dtqtype.StatusSucceeded}},
			dtqtype.WorkflowSucceeded, []string{"a", "b", "c", "d"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := newTestRDB(t)
			nodes := tc.nodes(b)
			id := NewWorkflowID(b.now, RandomWorkflowTag())
			st := b.submitWorkflow(t, &NewWorkflow{ID: id, Nodes: nodes})
			runs := refsOf(st.Releases)
			b.release(t, id, st.Releases)
			var final dtqtype.WorkflowStatus
			for _, e := range tc.ends {
				res, err := b.r.WorkflowApply(b.ctx, &OutboxEntry{Workflow: id, Ref: e.ref, Status: e.status}, b.now, time.Hour, false)
				require.NoError(t, err)
				runs = append(runs, refsOf(res.Releases)...)
				b.release(t, id, res.Releases)
				final = res.Final
			}
			var want []string
			for _, r := range tc.runs {
				want = append(want, "run:"+r)
			}
			var gotRuns []string
			for _, r := range runs {
				if strings.HasPrefix(r, "run:") {
					gotRuns = append(gotRuns, r)
				}
			}
			slices.Sort(gotRuns)
			require.Equal(t, want, gotRuns)
			require.Equal(t, tc.want, final)
			rec, err := b.r.ReadWorkflow(b.ctx, id)
			require.NoError(t, err)
			require.Equal(t, tc.want, rec.Status)
			ttl, err := b.c.PTTL(b.ctx, b.keys.Workflow(id)).Result()
			require.NoError(t, err)
			require.Greater(t, ttl, time.Duration(0), "a finished workflow's record expires")
		})
	}
}

// TestWorkflowNodeEndsReachTheOutbox: every script that ends a node writes
// its outbox entry; a task without a workflow writes none.
func TestWorkflowNodeEndsReachTheOutbox(t *testing.T) {
	t.Parallel()
	b := newTestRDB(t)
	ctx, r := b.ctx, b.r
	nodes := []WorkflowNode{b.wfNode(t, "q", "run", false), b.wfNode(t, "q", "wait", false, "run"),
		b.wfNode(t, "q", "dead", false), b.wfNode(t, "q", "exp", false)}
	nodes[3].Task.TTLMS = 1000
	id := NewWorkflowID(b.now, RandomWorkflowTag())
	st := b.submitWorkflow(t, &NewWorkflow{ID: id, Nodes: nodes})
	b.release(t, id, st.Releases)
	b.ingest(t, "q", b.task(t, "q", "")) // a plain task: no entry

	// A waiting node cancelled by an admin; an expired one; a dead one.
	as := &AdminSettings{EventsMaxLen: 1000, FailedRetention: time.Hour}
	o, _, err := r.CancelTask(ctx, "q", nodes[1].Task.ID, as, b.now, "test")
	require.NoError(t, err)
	require.Equal(t, "cancelled", o)
	_, err = r.SweepExpired(ctx, "q", testSettings, b.now.Add(2*time.Second))
	require.NoError(t, err)
	require.NoError(t, r.EnsureGroups(ctx, "q"))
	cl, err := r.Claim(ctx, "q", testSettings, 10, b.now, "n1")
	require.NoError(t, err)
	for _, ct := range cl.Tasks {
		if ct.Ref == "dead" {
			require.NoError(t, r.FinishDead(ctx, finishArgsOf(ct, b.now), testSettings, "Boom", "boom", false))
		}
	}
	es, err := r.ReadOutbox(ctx, "q", 10)
	require.NoError(t, err)
	got := map[string]dtqtype.Status{}
	for _, e := range es {
		require.Equal(t, id, e.Workflow)
		got[e.Ref] = e.Status
	}
	require.Equal(t, map[string]dtqtype.Status{"wait": dtqtype.StatusCancelled, "exp": dtqtype.StatusExpired,
		"dead": dtqtype.StatusDeadLettered}, got)
	finals := b.relay(t, "q")
	require.Empty(t, finals, "run is still running")
	rec, err := r.ReadWorkflow(ctx, id)
	require.NoError(t, err)
	require.Equal(t, dtqtype.WorkflowRunning, rec.Status)
}

// exerciseWorkflowScripts runs the workflow scripts on queue "emails" for
// the slot check (exerciseScripts).
func exerciseWorkflowScripts(t *testing.T, r *RDB) {
	t.Helper()
	b := &testRDB{ctx: context.Background(), r: r, c: nil, keys: r.Keys(), now: time.Now()}
	ctx := b.ctx
	a, c := b.wfNode(t, "emails", "a", false), b.wfNode(t, "emails", "c", true, "a")
	id := NewWorkflowID(b.now, WorkflowKeyTag("k"))
	w := &NewWorkflow{ID: id, Nodes: []WorkflowNode{a, c}, IdempotencyKey: "k", IdemTTL: 60}
	mark := NewAttention(id, b.now.UnixMilli())
	require.NoError(t, r.WorkflowMark(ctx, mark, true))
	_, err := r.WorkflowCreate(ctx, b.now, w)
	require.NoError(t, err)
	w.IdempotencyKey = ""
	_, err = r.WorkflowCreate(ctx, b.now, w)
	require.NoError(t, err)
	require.NoError(t, r.WorkflowWriteNodes(ctx, id, "emails", b.now, 100, w.Nodes))
	st, err := r.WorkflowStart(ctx, id, b.now, time.Hour, []string{"a", "c"})
	require.NoError(t, err)
	for i := range st.Releases {
		_, err := r.WorkflowRelease(ctx, &st.Releases[i], b.now, relSettings)
		require.NoError(t, err)
	}
	require.NoError(t, r.WorkflowReleased(ctx, id, []string{"a"}))
	require.NoError(t, r.WorkflowNote(ctx, id, NoteStarted, "1"))
	_, err = r.WorkflowApply(ctx, &OutboxEntry{Workflow: id, Ref: "a", Status: dtqtype.StatusFailed}, b.now, time.Hour, false)
	require.NoError(t, err)
	_, err = r.WorkflowAdd(ctx, id, b.now, 10, FullQueue{}, []WorkflowNode{b.wfNode(t, "emails", "d", false, "c")})
	require.NoError(t, err)
	_, err = r.WorkflowPark(ctx, &OutboxEntry{Workflow: id, Ref: "c", Status: dtqtype.StatusSucceeded})
	require.NoError(t, err)
	_, _, _, _, err = r.WorkflowCancel(ctx, id, b.now, 0)
	require.NoError(t, err)
	require.NoError(t, r.AckOutbox(ctx, "emails", []string{"1-1"}))
	_, err = r.RelayLock(ctx, "emails", "tok", time.Second)
	require.NoError(t, err)
	require.NoError(t, r.WorkflowUnmark(ctx, mark))
	require.NoError(t, r.DropFromWorkflowIndex(ctx, []string{id}))
}

// TestWorkflowCreateQueueFullSentTwice: a submission refused for a full
// queue writes nothing, and sent again answers the same refusal.
func TestWorkflowCreateQueueFullSentTwice(t *testing.T) {
	t.Parallel()
	b := newTestRDB(t)
	w := &NewWorkflow{ID: NewWorkflowID(b.now, RandomWorkflowTag()), Nodes: []WorkflowNode{b.wfNode(t, "qa", "x", false)},
		Full: FullQueue{Name: "qa", Depth: 7}}
	res := twice(t, b, "wf_create refused", func() (CreateResult, error) { return b.r.WorkflowCreate(b.ctx, b.now, w) })
	require.Equal(t, CreateResult{Outcome: WorkflowQueueFull, Queue: "qa", Depth: 7}, res)
	require.Zero(t, b.c.Exists(b.ctx, b.keys.Workflow(w.ID), b.keys.WorkflowNodes(w.ID), b.keys.WorkflowDefs(w.ID)).Val())
}
