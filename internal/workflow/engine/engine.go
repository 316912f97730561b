// Package engine carries out the workflow steps that cross slots (see
// docs/workflows-internals.md): a submission's or a fan-out's writes, releases in
// the nodes' slots, the relay of each queue's outbox, the sweep of the
// attention index, WORKFLOW_* events and on_failure. It reads and writes
// through internal/rdb only, and needs of the library around it a clock,
// its settings and one function (Config): the graph's rules are
// internal/workflow's.
package engine

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
	"strings"
	"sync"
	"time"

	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/internal/rdb"
)

// ErrNotFound is an unknown (or expired) workflow; the dtq package returns
// it as ErrWorkflowNotFound.
var ErrNotFound = errors.New("dtq: workflow not found")

// Workflow event types on the _sys stream (the dtq package's
// EventWorkflow* constants).
const (
	EventStarted   = "WORKFLOW_STARTED"
	EventSucceeded = "WORKFLOW_SUCCEEDED"
	EventFailed    = "WORKFLOW_FAILED"
	EventCancelled = "WORKFLOW_CANCELLED"
)

// Config is what an Engine needs of the process it runs in.
type Config struct {
	// Clock is the time source. Required.
	Clock func() time.Time
	// Logger receives warnings. Default: discarded.
	Logger *slog.Logger
	// EventsMaxLen caps the event streams the engine appends to.
	EventsMaxLen int64
	// FailedRetention is how long a node cancelled by the engine is kept,
	// as the scripts take it (0: deleted as it finishes).
	FailedRetention time.Duration
	// Retention is how long a finished workflow is kept at least.
	Retention time.Duration
	// RecentCap caps a queue's recent-tasks index as nodes are written.
	RecentCap int64
	// IdempotencyTTL is how long an on_failure task's idempotency record
	// is kept after its delay.
	IdempotencyTTL time.Duration
	// SubmitOnFailure submits t, a failed workflow's on_failure task, on
	// queue through the normal ingest path, and returns the id of the task
	// its idempotency key names (t's own, or the one an earlier try
	// created); an error when the ingest refused it. Required.
	SubmitOnFailure func(ctx context.Context, workflowID, queue string, now time.Time, t *rdb.NewTask) (taskID string, err error)
}

// Engine runs the workflows of one process. It is safe for concurrent use.
type Engine struct {
	rdb   *rdb.RDB
	cfg   Config
	log   *slog.Logger
	rel   rdb.ReleaseSettings
	admin rdb.AdminSettings // for cancelling nodes
	token string            // the relay lock holder
	carry carriers
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

// New returns the engine of a process whose storage is r.
func New(r *rdb.RDB, cfg *Config) *Engine {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var tok [8]byte
	_, _ = crand.Read(tok[:])
	return &Engine{rdb: r, cfg: *cfg, log: log,
		rel:   rdb.ReleaseSettings{EventsMaxLen: cfg.EventsMaxLen, FailedRetention: cfg.FailedRetention},
		admin: rdb.AdminSettings{EventsMaxLen: cfg.EventsMaxLen, FailedRetention: cfg.FailedRetention},
		token: hex.EncodeToString(tok[:])}
}

// activate writes nodes in their queues (waiting) and activates the batch
// (wf_start), then carries out what that released and emits what is due.
func (e *Engine) activate(ctx context.Context, id string, nodes []rdb.WorkflowNode, now time.Time) (rdb.StartResult, error) {
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
		if err := e.rdb.WorkflowWriteNodes(ctx, id, q, now, e.cfg.RecentCap, byQueue[q]); err != nil {
			return rdb.StartResult{}, err
		}
	}
	st, err := e.rdb.WorkflowStart(ctx, id, now, e.cfg.Retention, refs)
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
func (e *Engine) carryOut(ctx context.Context, id string, rels []rdb.Release, stored bool) error {
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
func (e *Engine) release(ctx context.Context, id string, rels []rdb.Release) error {
	now := e.cfg.Clock()
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

// endEvents are the events of a workflow's ends.
var endEvents = map[dtqtype.WorkflowStatus]string{dtqtype.WorkflowSucceeded: EventSucceeded,
	dtqtype.WorkflowFailed: EventFailed, dtqtype.WorkflowCancelled: EventCancelled}

// effects emits the WORKFLOW_* events the record does not note as emitted
// and submits a failed workflow's on_failure task once: at least once
// (a process that dies between the event and its note emits it again).
func (e *Engine) effects(ctx context.Context, id string) error {
	s, err := e.rdb.ReadWorkflowState(ctx, id)
	if errors.Is(err, rdb.ErrWorkflowNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if s.Status != dtqtype.WorkflowSubmitting && !s.StartedEmitted {
		if err := e.event(ctx, id, s.Name, EventStarted, s.Status); err != nil {
			return err
		}
		if err := e.rdb.WorkflowNote(ctx, id, rdb.NoteStarted, "1"); err != nil {
			return err
		}
	}
	if !s.Status.Terminal() {
		return nil
	}
	if s.Status == dtqtype.WorkflowFailed && s.OnFailureTaskID == "" {
		of, err := s.OnFailure()
		if err != nil {
			return fmt.Errorf("dtq: workflow %s: on_failure: %w", id, err)
		}
		if of != nil {
			if err := e.onFailure(ctx, id, s.Name, of); err != nil {
				return err
			}
		}
	}
	if !s.EndedEmitted {
		if err := e.event(ctx, id, s.Name, endEvents[s.Status], s.Status); err != nil {
			return err
		}
		return e.rdb.WorkflowNote(ctx, id, rdb.NoteEnded, "1")
	}
	return nil
}

func (e *Engine) event(ctx context.Context, id, name, typ string, status dtqtype.WorkflowStatus) error {
	meta, err := json.Marshal(map[string]string{"workflow_id": id, "name": name, "status": string(status)})
	if err != nil {
		return err
	}
	return e.rdb.AppendSysEvent(ctx, e.rel.EventsMaxLen, []any{"type", typ, "workflow_id", id, "ts", e.cfg.Clock().UnixMilli(),
		"meta", string(meta)})
}

// onFailure submits a failed workflow's on_failure task n through the
// normal ingest path, under the idempotency key workflow:<id>:on_failure,
// and notes its id on the workflow.
func (e *Engine) onFailure(ctx context.Context, id, name string, n *rdb.WorkflowNode) error {
	g, err := e.rdb.ReadWorkflow(ctx, id)
	if err != nil {
		return err
	}
	var payload map[string]any
	if err := json.Unmarshal(n.Task.Payload, &payload); err != nil || payload == nil {
		payload = map[string]any{}
	}
	payload["workflow"] = map[string]any{"id": id, "name": name, "failed": failedRefs(g.Nodes)}
	body, err := json.Marshal(payload)
	if err != nil {
		return err
	}
	num, err := e.rdb.QueueNumber(ctx, n.Queue)
	if err != nil {
		return err
	}
	now := e.cfg.Clock()
	key := "workflow:" + id + ":on_failure"
	fp := sha256.Sum256([]byte(key))
	t := rdb.NewTask{ID: rdb.NewTaskID(num, now), Type: n.Task.Type, Payload: body, Priority: n.Task.Priority,
		MaxAttempts: n.Task.MaxAttempts, TimeoutMS: n.Task.TimeoutMS, IdempotencyKey: key,
		AvailableAt: now.UnixMilli() + n.Task.DelayMS, Metadata: n.Task.Metadata, Fingerprint: string(fp[:]),
		IdemTTL: int64(e.cfg.IdempotencyTTL/time.Second) + n.Task.DelayMS/1000 + 1, CreatedAt: now.UnixMilli(),
		ConcurrencyKey: n.Task.ConcurrencyKey, Retention: n.Task.Retention, KeepPayload: n.Task.KeepPayload}
	if len(t.Metadata) == 0 {
		t.Metadata = []byte("{}")
	}
	if n.Task.TTLMS > 0 {
		t.ExpiresAt = t.AvailableAt + n.Task.TTLMS
	}
	tid, err := e.cfg.SubmitOnFailure(ctx, id, n.Queue, now, &t)
	if err != nil {
		return err
	}
	return e.rdb.WorkflowNote(ctx, id, rdb.NoteOnFailure, tid)
}

// failedRefs are the refs of the nodes that ended other than succeeded,
// in the order they were added (their task ids sort so).
func failedRefs(nodes []rdb.GraphNode) []string {
	var out []rdb.GraphNode
	for _, n := range nodes {
		if n.Status != dtqtype.StatusSucceeded && n.Status.Terminal() {
			out = append(out, n)
		}
	}
	slices.SortFunc(out, func(a, b rdb.GraphNode) int { return strings.Compare(a.TaskID, b.TaskID) })
	refs := make([]string, len(out))
	for i, n := range out {
		refs[i] = n.Ref
	}
	return refs
}

// apply records one outbox entry on its workflow (wf_apply; parked: the
// entry comes from the parked hash), then follows it up (see follow).
// applied reports that wf_apply answered: an error after that leaves
// nothing of the entry itself to retry, only its workflow to the sweep.
func (e *Engine) apply(ctx context.Context, en *rdb.OutboxEntry, parked bool) (keep, applied bool, err error) {
	res, err := e.rdb.WorkflowApply(ctx, en, e.cfg.Clock(), e.cfg.Retention, parked)
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
func (e *Engine) follow(ctx context.Context, id string, res *rdb.ApplyResult, relay bool) (keep bool, err error) {
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
func (e *Engine) carryLater(ctx context.Context, id string) {
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
