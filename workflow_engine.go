package dtq

import (
	"cmp"
	"context"
	crand "crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/internal/maintenance"
	"github.com/dtq-io/dtq/internal/rdb"
)

// workflows carries out the workflow steps that cross slots (see
// docs/workflows.md): a submission's or a fan-out's writes, releases in
// the nodes' slots, the relay of each queue's outbox, the sweep of the
// attention index, WORKFLOW_* events and on_failure.
type workflows struct {
	rdb    *rdb.RDB
	client *Client // submits on_failure tasks
	clock  func() time.Time
	log    *slog.Logger
	rel    rdb.ReleaseSettings
	admin  rdb.AdminSettings // for cancelling nodes
	// retention is how long a finished workflow is kept at least (the
	// longest of the processes' task retentions).
	retention time.Duration
	recentCap int64
	maxNodes  int
	token     string // the relay lock holder
	carry     carriers
}

// carriers carry out, beside the relay, the large releases its passes
// leave behind (see follow), so that the entries after one on the same
// queue wait for none of it.
type carriers struct {
	mu   sync.Mutex
	busy map[string]bool // workflow ids being carried out
	wg   sync.WaitGroup
}

// maxCarriers bounds the large releases carried out at once by a process;
// past it a release is left to the sweep.
const maxCarriers = 4

// Workflow maintenance pacing.
const (
	// sweepAge is how old an attention entry must be before the sweep
	// takes it: younger ones belong to steps still under way.
	sweepAge = 3 * time.Second
	// sweepEvery is how often a worker sweeps.
	sweepEvery = 2 * time.Second
	// relayLease is how long a relay lock lives without renewal.
	relayLease = 5 * time.Second
	// relayBlock bounds one wait for outbox entries (workflow_relay.go).
	relayBlock = time.Second
	// relayBatch is the entries one relay pass reads.
	relayBatch = 100
)

// newWorkflows is the engine of a process with the deployment settings dep.
func newWorkflows(r *rdb.RDB, c *Client, dep deployment, log *slog.Logger, maxNodes int) *workflows {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	clock, eventsMaxLen := dep.clock, dep.eventsMaxLen
	succeeded, failed := dep.succeededRetention, scriptRetention(dep.failedRetention)
	var tok [8]byte
	_, _ = crand.Read(tok[:])
	return &workflows{rdb: r, client: c, clock: clock, log: log,
		rel:       rdb.ReleaseSettings{EventsMaxLen: eventsMaxLen, FailedRetention: failed},
		admin:     rdb.AdminSettings{EventsMaxLen: eventsMaxLen, FailedRetention: failed},
		retention: max(scriptRetention(succeeded), failed), recentCap: DefaultStreamMaxLen, maxNodes: maxNodes,
		token: hex.EncodeToString(tok[:])}
}

// activate writes nodes in their queues (waiting) and activates the batch
// (wf_start), then carries out what that released and emits what is due.
func (e *workflows) activate(ctx context.Context, id string, nodes []rdb.WorkflowNode, now time.Time) (rdb.StartResult, error) {
	byQueue := map[string][]rdb.WorkflowNode{}
	var queues []string
	refs := make([]string, len(nodes))
	for i, n := range nodes {
		if byQueue[n.Queue] == nil {
			queues = append(queues, n.Queue)
		}
		byQueue[n.Queue] = append(byQueue[n.Queue], n)
		refs[i] = n.Ref
	}
	for _, q := range queues {
		if err := e.rdb.WorkflowWriteNodes(ctx, id, q, now, e.recentCap, byQueue[q]); err != nil {
			return rdb.StartResult{}, err
		}
	}
	st, err := e.rdb.WorkflowStart(ctx, id, now, e.retention, refs)
	if err != nil {
		return st, err
	}
	if err := e.carryOut(ctx, id, st.Releases, st.Stored); err != nil {
		return st, err
	}
	return st, e.effects(ctx, id)
}

// carryOut carries out releases in their nodes' slots and drops them, then,
// when stored, every release workflow id has stored, read in chunks of
// rdb.ReleaseChunk: a release of 10,000 nodes is never one reply or one
// script call.
func (e *workflows) carryOut(ctx context.Context, id string, rels []rdb.Release, stored bool) error {
	err := e.release(ctx, id, rels)
	if !stored {
		return err
	}
	var cursor uint64
	for {
		chunk, next, serr := e.rdb.WorkflowScanReleases(ctx, id, cursor, rdb.ReleaseChunk)
		if serr != nil {
			return serr
		}
		err = cmp.Or(err, e.release(ctx, id, chunk))
		if cursor = next; cursor == 0 || ctx.Err() != nil {
			return cmp.Or(err, ctx.Err())
		}
	}
}

// release carries out rels and drops the ones carried out, rdb.ReleaseChunk
// a call. One that fails does not hold back the others: it stays stored
// for a later try, and the first error is returned once the rest are done.
func (e *workflows) release(ctx context.Context, id string, rels []rdb.Release) error {
	now := e.clock()
	var first error
	for len(rels) > 0 && ctx.Err() == nil {
		chunk := rels[:min(len(rels), rdb.ReleaseChunk)]
		rels = rels[len(chunk):]
		done := make([]string, 0, len(chunk))
		for i := range chunk {
			if _, err := e.rdb.WorkflowRelease(ctx, &chunk[i], now, &e.rel); err != nil {
				first = cmp.Or(first, err)
				continue
			}
			done = append(done, chunk[i].Ref)
		}
		if err := e.rdb.WorkflowReleased(ctx, id, done); err != nil {
			return err
		}
	}
	return cmp.Or(first, ctx.Err())
}

// Workflow event types on the _sys stream.
const (
	EventWorkflowStarted   = "WORKFLOW_STARTED"
	EventWorkflowSucceeded = "WORKFLOW_SUCCEEDED"
	EventWorkflowFailed    = "WORKFLOW_FAILED"
	EventWorkflowCancelled = "WORKFLOW_CANCELLED"
)

// effects emits the WORKFLOW_* events the record does not note as emitted
// and submits a failed workflow's on_failure task once: at least once
// (a process that dies between the event and its note emits it again).
func (e *workflows) effects(ctx context.Context, id string) error {
	v, err := e.rdb.Client().HMGet(ctx, e.rdb.Keys().Workflow(id), "status", "name", rdb.NoteStarted, rdb.NoteEnded, "of", rdb.NoteOnFailure).Result()
	if err != nil || v[0] == nil {
		return err
	}
	s := func(i int) string { x, _ := v[i].(string); return x }
	status := dtqtype.WorkflowStatus(s(0))
	if status != dtqtype.WorkflowSubmitting && s(2) == "" {
		if err := e.event(ctx, id, s(1), EventWorkflowStarted, status); err != nil {
			return err
		}
		if err := e.rdb.WorkflowNote(ctx, id, rdb.NoteStarted, "1"); err != nil {
			return err
		}
	}
	if !status.Terminal() {
		return nil
	}
	if status == dtqtype.WorkflowFailed && s(4) != "" && s(5) == "" {
		if err := e.onFailure(ctx, id, s(1), s(4)); err != nil {
			return err
		}
	}
	if s(3) == "" {
		ev := map[dtqtype.WorkflowStatus]string{dtqtype.WorkflowSucceeded: EventWorkflowSucceeded,
			dtqtype.WorkflowFailed: EventWorkflowFailed, dtqtype.WorkflowCancelled: EventWorkflowCancelled}[status]
		if err := e.event(ctx, id, s(1), ev, status); err != nil {
			return err
		}
		return e.rdb.WorkflowNote(ctx, id, rdb.NoteEnded, "1")
	}
	return nil
}

func (e *workflows) event(ctx context.Context, id, name, typ string, status dtqtype.WorkflowStatus) error {
	meta, err := json.Marshal(map[string]string{"workflow_id": id, "name": name, "status": string(status)})
	if err != nil {
		return err
	}
	return e.rdb.AppendSysEvent(ctx, e.rel.EventsMaxLen, []any{"type", typ, "workflow_id", id, "ts", e.clock().UnixMilli(),
		"meta", string(meta)})
}

// onFailure submits a failed workflow's on_failure task through the normal
// ingest path, under the idempotency key workflow:<id>:on_failure, and
// notes its id on the workflow.
func (e *workflows) onFailure(ctx context.Context, id, name, def string) error {
	var n rdb.WorkflowNode
	if err := json.Unmarshal([]byte(def), &n); err != nil {
		return fmt.Errorf("dtq: workflow %s: on_failure: %w", id, err)
	}
	rec, err := e.rdb.ReadWorkflow(ctx, id)
	if err != nil {
		return err
	}
	failed := failedRefs(rec)
	var payload map[string]any
	if err := json.Unmarshal(n.Task.Payload, &payload); err != nil || payload == nil {
		payload = map[string]any{}
	}
	payload["workflow"] = map[string]any{"id": id, "name": name, "failed": failed}
	body, err := json.Marshal(payload)
	if err != nil {
		return err
	}
	num, err := e.rdb.QueueNumber(ctx, n.Queue)
	if err != nil {
		return err
	}
	now := e.clock()
	key := "workflow:" + id + ":on_failure"
	fp := sha256.Sum256([]byte(key))
	t := rdb.NewTask{ID: rdb.NewTaskID(num, now), Type: n.Task.Type, Payload: body, Priority: n.Task.Priority,
		MaxAttempts: n.Task.MaxAttempts, TimeoutMS: n.Task.TimeoutMS, IdempotencyKey: key,
		AvailableAt: now.UnixMilli() + n.Task.DelayMS, Metadata: n.Task.Metadata, Fingerprint: string(fp[:]),
		IdemTTL: int64(e.client.dep.idempotencyTTL/time.Second) + n.Task.DelayMS/1000 + 1, CreatedAt: now.UnixMilli(),
		ConcurrencyKey: n.Task.ConcurrencyKey, Retention: n.Task.Retention, KeepPayload: n.Task.KeepPayload}
	if len(t.Metadata) == 0 {
		t.Metadata = []byte("{}")
	}
	if n.Task.TTLMS > 0 {
		t.ExpiresAt = t.AvailableAt + n.Task.TTLMS
	}
	res, err := e.client.ingestSure(ctx, n.Queue, now, []rdb.NewTask{t})
	if err != nil {
		return err
	}
	r := res[0]
	switch r.Outcome {
	case rdb.Created, rdb.Duplicate, rdb.InProgress:
	default:
		return onFailureRefused(id, n.Queue, r)
	}
	tid := r.TaskID
	if tid == "" {
		tid = t.ID
	}
	return e.rdb.WorkflowNote(ctx, id, rdb.NoteOnFailure, tid)
}

// onFailureRefused says why a workflow's on_failure task was not
// submitted, from the ingest outcome that refused it.
func onFailureRefused(id, queue string, r rdb.IngestResult) error {
	prefix := "dtq: workflow " + id + ": on_failure not submitted: "
	switch r.Outcome {
	case rdb.QueueFull:
		return fmt.Errorf("%squeue %q is full (%d live tasks, its depth limit): %w", prefix, queue, r.Depth, ErrQueueFull)
	case rdb.Mismatch:
		return fmt.Errorf("%sits idempotency key is held by task %s of another request: %w", prefix, r.TaskID, ErrIdempotencyKeyMismatch)
	case rdb.Absent:
		if r.Err == nil {
			return fmt.Errorf("%sits submission's reply was lost and it was not created", prefix)
		}
		return fmt.Errorf("%sits submission's reply was lost and it was not created: %w", prefix, r.Err)
	case rdb.Deduplicated:
		return fmt.Errorf("%sit was collapsed into task %s by a dedup key", prefix, r.TaskID)
	}
	return fmt.Errorf("%sunknown ingest outcome %d", prefix, r.Outcome)
}

// failedRefs are the refs of rec's nodes that ended other than succeeded,
// in the order they were added (their task ids sort so).
func failedRefs(rec *rdb.WorkflowRecord) []string {
	type node struct{ ref, id string }
	var out []node
	for f, st := range rec.Nodes {
		ref, ok := strings.CutPrefix(f, "s:")
		if !ok || st == "succeeded" || !dtqtype.Status(st).Terminal() {
			continue
		}
		out = append(out, node{ref, rec.Nodes["t:"+ref]})
	}
	slices.SortFunc(out, func(a, b node) int { return strings.Compare(a.id, b.id) })
	refs := make([]string, len(out))
	for i, n := range out {
		refs[i] = n.ref
	}
	return refs
}

// apply records one outbox entry on its workflow (wf_apply; parked: the
// entry comes from the parked hash), then follows it up (see follow).
// applied reports that wf_apply answered: an error after that leaves
// nothing of the entry itself to retry, only its workflow to the sweep.
func (e *workflows) apply(ctx context.Context, en *rdb.OutboxEntry, parked bool) (keep, applied bool, err error) {
	res, err := e.rdb.WorkflowApply(ctx, en, e.clock(), e.retention, parked)
	if err != nil {
		return false, false, err
	}
	keep, err = e.follow(ctx, en.Workflow, &res, !parked)
	return keep, true, err
}

// follow carries out the releases wf_apply answered and, when the entry
// ended the workflow, its event and on_failure. keep reports that the
// workflow's attention mark must stay for the sweep: the entry was one the
// workflow already knew (a resend, or a node the cascade cancelled) while
// the workflow has ended, or while more releases are stored than answered
// inline, so this relay may not be the one that emits its effects, and
// leaves a large release to the call that stored it (or the sweep) rather
// than reading it again for every cancelled node of a cascade. From a
// relay pass (relay), a large release is carried out beside the relay
// (carryLater): the entries behind it on the same queue do not wait for
// thousands of releases.
func (e *workflows) follow(ctx context.Context, id string, res *rdb.ApplyResult, relay bool) (keep bool, err error) {
	if res.Gone {
		return false, nil
	}
	if res.Known && res.Stored {
		return true, nil
	}
	if res.Stored && relay {
		if err := e.release(ctx, id, res.Releases); err != nil {
			return false, err
		}
		e.carryLater(ctx, id)
		return true, nil
	}
	if err := e.carryOut(ctx, id, res.Releases, res.Stored); err != nil {
		return false, err
	}
	switch {
	case res.Final != "" && res.Known:
		return true, nil
	case res.Final != "":
		return false, e.effects(ctx, id)
	}
	return false, nil
}

// carryLater carries out workflow id's stored releases, then its effects,
// in a goroutine of its own, unless one is at it already or maxCarriers
// are busy. Either way the workflow's attention mark stays, so the sweep
// finishes what a carrier does not (a crash, an error, a release stored
// after the carrier's scan went by).
func (e *workflows) carryLater(ctx context.Context, id string) {
	c := &e.carry
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.busy[id] || len(c.busy) >= maxCarriers {
		return
	}
	if c.busy == nil {
		c.busy = map[string]bool{}
	}
	c.busy[id] = true
	c.wg.Go(func() {
		defer func() {
			c.mu.Lock()
			delete(c.busy, id)
			c.mu.Unlock()
		}()
		err := e.carryOut(ctx, id, nil, true)
		if err == nil {
			err = e.effects(ctx, id)
		}
		if err != nil && ctx.Err() == nil {
			e.log.Warn("workflow relay: a large release is left to the sweep", "workflow_id", id, "err", err)
		}
	})
}

// relayPass carries out up to relayBatch entries of queue's outbox, in
// order, if this process holds the queue's relay lock (held). It returns
// the id of the last entry it carried out and whether the batch was full.
//
// The scripts per pass: one attention mark per workflow of the batch
// before any of its entries is applied (a crash from there on leaves the
// workflow to the sweep), one wf_apply per entry (and the releases it
// decided), one wf_ack for the whole batch, one unmark per workflow. A
// crash before the ack applies those entries again, which wf_apply answers
// as known. Per entry that is one script instead of four in a row, so that
// the relay keeps up with the workers' batched finalizes (a 10,000-leaf
// join, docs/benchmarks.md).
//
// An entry never holds back the ones behind it: one wf_apply fails on is
// parked in its workflow's slot (wf_park), and one whose releases or
// effects fail was applied; either way it is acknowledged, and its
// workflow's mark stays for the sweep, which retries with backoff. Only
// when parking fails too (Redis itself failing) does the pass stop, its
// entries left in the outbox.
func (e *workflows) relayPass(ctx context.Context, queue string) (held bool, last string, full bool, err error) {
	held, err = e.rdb.RelayLock(ctx, queue, e.token, relayLease)
	if err != nil || !held {
		return false, "", false, err
	}
	es, err := e.rdb.ReadOutbox(ctx, queue, relayBatch)
	if err != nil || len(es) == 0 {
		return true, "", false, err
	}
	score := e.clock().UnixMilli()
	marks := map[string]rdb.Attention{}
	var order []string // the batch's workflows, in order
	for i := range es {
		id := es[i].Workflow
		if _, ok := marks[id]; ok {
			continue
		}
		m := rdb.NewAttention(id, score)
		if err := e.rdb.WorkflowMark(ctx, m, false); err != nil {
			return true, "", false, err
		}
		marks[id] = m
		order = append(order, id)
	}
	keep := map[string]bool{}
	ids := make([]string, len(es))
	for i := range es {
		en := &es[i]
		k, applied, err := e.apply(ctx, en, false)
		if err != nil && !applied {
			if _, perr := e.rdb.WorkflowPark(ctx, en); perr != nil {
				return true, "", false, err // the marks stay for the sweep
			}
		}
		if err != nil {
			e.log.Warn("workflow relay: an entry is left to the sweep", "queue", queue, "workflow_id", en.Workflow,
				"ref", en.Ref, "parked", !applied, "err", err)
		}
		if k || err != nil {
			keep[en.Workflow] = true
		}
		ids[i] = en.ID
	}
	if err := e.rdb.AckOutbox(ctx, queue, ids); err != nil {
		return true, "", false, err
	}
	for _, id := range order {
		if !keep[id] {
			if err := e.rdb.WorkflowUnmark(ctx, marks[id]); err != nil {
				return true, ids[len(ids)-1], false, err
			}
		}
	}
	return true, ids[len(ids)-1], len(es) == relayBatch, nil
}

// runSweep sweeps the attention index every sweepEvery (jittered), at once
// again while a sweep was full, until ctx ends: the lifecycle every
// background loop shares (maintenance.Run).
func (e *workflows) runSweep(ctx context.Context) {
	maintenance.Run(ctx, maintenance.Service{Name: "workflow sweep", Logger: e.log, MaxSleep: sweepEvery,
		Step: func(ctx context.Context) (maintenance.Result, error) {
			full, err := e.sweep(ctx, sweepAge)
			return maintenance.Result{Full: full}, err
		}})
}

// sweepBatch bounds the workflows one sweep finishes.
const sweepBatch = 100

// sweep finishes what the workflows marked before age ago need, then
// removes their marks unless marked again meanwhile. full reports a whole
// batch finished: more may be due.
func (e *workflows) sweep(ctx context.Context, age time.Duration) (full bool, err error) {
	due, err := e.rdb.WorkflowsNeedingAttention(ctx, e.clock().Add(-age), sweepBatch)
	if err != nil {
		return false, err
	}
	failed := 0
	for _, a := range due {
		if err := e.finish(ctx, a); err != nil {
			e.log.Warn("workflow sweep: finishing failed; retrying with backoff", "workflow_id", a.ID,
				"tries", a.Tries+1, "err", err)
			failed++
			if err := e.retryLater(ctx, a); err != nil {
				return false, err
			}
			continue
		}
		if err := e.rdb.WorkflowUnmark(ctx, a); err != nil {
			return false, err
		}
	}
	// Entries left after a failure come back in the next batch: calling again
	// at once would only spin on them.
	return len(due) == sweepBatch && failed == 0, nil
}

// sweepBackoff bounds how long a workflow whose finish keeps failing waits
// for its next try.
const sweepBackoff = 5 * time.Minute

// retryLater moves a's entry, whose finish failed, to a score in the
// future that doubles with its tries (sweepEvery, then twice that, up to
// sweepBackoff), so that the sweep retries a failing workflow at a bounded
// rate instead of every pass; the index keeps one entry for it. The new
// entry is written before the old one is removed (compare and remove): a
// crash between leaves both, never none.
func (e *workflows) retryLater(ctx context.Context, a rdb.Attention) error {
	wait := sweepEvery << min(a.Tries, 10)
	next := a.Retry(e.clock().Add(min(wait, sweepBackoff) - sweepAge).UnixMilli())
	if err := e.rdb.WorkflowMark(ctx, next, false); err != nil {
		return err
	}
	return e.rdb.WorkflowUnmark(ctx, a)
}

// finish does what workflow a.ID needs: a listing entry, its definitions
// written and activated (a submission or fan-out cut short), its stored
// releases carried out, a cancel's node cancels, events and on_failure.
func (e *workflows) finish(ctx context.Context, a rdb.Attention) error {
	v, err := e.rdb.Client().HMGet(ctx, e.rdb.Keys().Workflow(a.ID), "status", "cancel", rdb.NoteListed).Result()
	if err != nil {
		return err
	}
	if v[0] == nil {
		return e.rdb.DropFromWorkflowIndex(ctx, []string{a.ID})
	}
	if v[2] == nil {
		if err := e.rdb.WorkflowMark(ctx, a, true); err != nil {
			return err
		}
		if err := e.rdb.WorkflowNote(ctx, a.ID, rdb.NoteListed, "1"); err != nil {
			return err
		}
	}
	defs, err := e.rdb.WorkflowDefinitions(ctx, a.ID)
	if err != nil {
		return err
	}
	if len(defs) > 0 || v[0] == string(dtqtype.WorkflowSubmitting) {
		if _, err := e.activate(ctx, a.ID, defs, e.clock()); err != nil {
			return err
		}
	}
	if err := e.applyParked(ctx, a.ID); err != nil {
		return err
	}
	if err := e.carryOut(ctx, a.ID, nil, true); err != nil {
		return err
	}
	if v[1] == "1" {
		if _, err := e.cancel(ctx, a.ID); err != nil && !errors.Is(err, ErrWorkflowNotFound) {
			return err
		}
	}
	return e.effects(ctx, a.ID)
}

// applyParked applies the ends of workflow id the relay parked (wf_park),
// in chunks; each leaves the parked hash as it is applied. An end that
// fails again stays parked, and does not hold back the others.
func (e *workflows) applyParked(ctx context.Context, id string) error {
	var cursor uint64
	var first error
	for {
		es, next, err := e.rdb.WorkflowParked(ctx, id, cursor, rdb.ReleaseChunk)
		if err != nil {
			return err
		}
		for i := range es {
			if _, _, err := e.apply(ctx, &es[i], true); err != nil {
				first = cmp.Or(first, err)
			}
		}
		if cursor = next; cursor == 0 || ctx.Err() != nil {
			return cmp.Or(first, ctx.Err())
		}
	}
}

// cancel marks workflow id cancelled and cancels each node not ended in its
// slot, a page of nodes at a time (wf_cancel). It reports whether the
// workflow had ended already. A node whose cancel fails does not hold back
// the others; the first error is returned once every page is done (the
// sweep repeats the cancel).
func (e *workflows) cancel(ctx context.Context, id string) (ended bool, err error) {
	now := e.clock()
	var cursor uint64
	var first error
	for {
		out, _, nodes, next, err := e.rdb.WorkflowCancel(ctx, id, now, cursor)
		switch {
		case err != nil:
			return false, err
		case out == rdb.OutcomeNotFound:
			return false, ErrWorkflowNotFound
		case out == rdb.OutcomeTerminal:
			return cursor == 0, first
		}
		for _, n := range nodes {
			if _, _, err := e.rdb.CancelTask(ctx, n.Queue, n.TaskID, &e.admin, now, "workflow cancelled"); err != nil {
				first = cmp.Or(first, err)
			}
		}
		if cursor = next; cursor == 0 || ctx.Err() != nil {
			return false, cmp.Or(first, ctx.Err())
		}
	}
}

// getWorkflow reads workflow id as the API shows it: the live status of
// each released node is read from its task.
func getWorkflow(ctx context.Context, r *rdb.RDB, id string) (*dtqtype.WorkflowInfo, error) {
	if !rdb.ValidWorkflowID(id) {
		return nil, ErrWorkflowNotFound
	}
	rec, err := r.ReadWorkflow(ctx, id)
	if errors.Is(err, rdb.ErrWorkflowNotFound) {
		return nil, ErrWorkflowNotFound
	}
	if err != nil {
		return nil, err
	}
	f := rec.Fields
	info := &dtqtype.WorkflowInfo{ID: id, Name: f["name"], Status: dtqtype.WorkflowStatus(f["status"]),
		CreatedAt: dtqtype.MillisTime(atoi(f["created_at"])), FinishedAt: dtqtype.MillisTime(atoi(f["finished_at"])),
		CancelRequested: f["cancel"] == "1", OnFailureTaskID: f["oft"], Counts: map[dtqtype.Status]int{}}
	var live []rdb.NodeRef
	var liveAt []int
	for k, st := range rec.Nodes {
		ref, ok := strings.CutPrefix(k, "s:")
		if !ok {
			continue
		}
		n := dtqtype.WorkflowNodeInfo{Ref: ref, TaskID: rec.Nodes["t:"+ref], Queue: rec.Nodes["q:"+ref],
			Deps: []string{}, Status: dtqtype.Status(st)}
		if d := rec.Nodes["d:"+ref]; d != "" {
			_ = json.Unmarshal([]byte(d), &n.Deps)
		}
		if o := rec.Nodes["o:"+ref]; o != "" {
			var dr DepResult
			if json.Unmarshal([]byte(o), &dr) == nil {
				n.ErrorClass = dr.ErrorClass
			}
		}
		if st == "released" {
			live = append(live, rdb.NodeRef{Ref: ref, TaskID: n.TaskID, Queue: n.Queue})
			liveAt = append(liveAt, len(info.Nodes))
			n.Status = dtqtype.StatusQueued
		}
		info.Nodes = append(info.Nodes, n)
	}
	sts, err := r.TaskStatuses(ctx, live)
	if err != nil {
		return nil, err
	}
	for i, st := range sts {
		// The task's own status, an end the relay has not recorded yet
		// included: a node never shows queued once its task ran.
		if st != "" {
			info.Nodes[liveAt[i]].Status = st
		}
	}
	slices.SortFunc(info.Nodes, func(a, b dtqtype.WorkflowNodeInfo) int { return strings.Compare(a.TaskID, b.TaskID) })
	for _, n := range info.Nodes {
		info.Counts[n.Status]++
	}
	return info, nil
}

func atoi(s string) int64 {
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}
