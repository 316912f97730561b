package rdb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dtq-io/dtq/dtqtype"
)

// The workflow scripts (see lua/_workflow.lua and docs/workflows-internals.md).
var (
	scriptWfAck      = newScript("wf_ack")
	scriptWfAdd      = newScript("wf_add")
	scriptWfApply    = newScript("wf_apply")
	scriptWfCancel   = newScript("wf_cancel")
	scriptWfCreate   = newScript("wf_create")
	scriptWfLock     = newScript("wf_lock")
	scriptWfMark     = newScript("wf_mark")
	scriptWfNodes    = newScript("wf_nodes")
	scriptWfNote     = newScript("wf_note")
	scriptWfPark     = newScript("wf_park")
	scriptWfRelease  = newScript("wf_release")
	scriptWfReleased = newScript("wf_released")
	scriptWfStart    = newScript("wf_start")
	scriptWfUnlist   = newScript("wf_unlist")
	scriptWfUnmark   = newScript("wf_unmark")
)

// WorkflowNode is one node as the workflow scripts store it: its place in
// the graph and the task it runs. Its JSON is the definition kept while the
// node is being written.
type WorkflowNode struct {
	Ref      string   `json:"ref"`
	Queue    string   `json:"queue"`
	Deps     []string `json:"deps,omitempty"`
	Continue bool     `json:"continue,omitempty"` // on_dep_failure continue
	// Digest identifies the definition (without its ids and times), so
	// that a node added again by a re-run handler is no change.
	Digest string   `json:"digest"`
	Task   NodeTask `json:"task"`
}

// NodeTask is the task of a node, normalized.
type NodeTask struct {
	ID             string          `json:"id"`
	Type           string          `json:"type"`
	Payload        json.RawMessage `json:"payload"`
	Priority       int             `json:"priority"`
	MaxAttempts    int             `json:"max_attempts"`
	TimeoutMS      int64           `json:"timeout_ms"`
	Metadata       json.RawMessage `json:"metadata,omitempty"`
	ConcurrencyKey string          `json:"ckey,omitempty"`
	Retention      int64           `json:"ret,omitempty"` // s; 0 = the workers' setting, -1 = none
	KeepPayload    bool            `json:"keep,omitempty"`
	DelayMS        int64           `json:"delay_ms,omitempty"` // after release
	TTLMS          int64           `json:"ttl_ms,omitempty"`   // after release; 0 = none
	CreatedAt      int64           `json:"created_at"`
}

// NewWorkflow is a workflow submission for WorkflowCreate.
type NewWorkflow struct {
	ID, Name       string
	Fingerprint    string // of the whole request, compared on a keyed resubmission
	IdempotencyKey string // "" = none
	IdemTTL        int64  // s
	OnFailure      *WorkflowNode
	Retention      int64 // the longest retention a node asked for (s), 0 = none
	Nodes          []WorkflowNode
	// Full names a queue too full for the workflow's nodes (the zero value:
	// none): WorkflowCreate then answers WorkflowQueueFull unless the key
	// names another workflow.
	Full FullQueue
}

// FullQueue is a queue the submitter found too full (QueueDepths) for the
// nodes it is about to write there, and that queue's depth.
type FullQueue struct {
	Name  string
	Depth int64
}

// Workflow outcomes of WorkflowCreate.
const (
	WorkflowCreated    = "created"
	WorkflowInProgress = "in_progress"
	WorkflowMismatch   = "mismatch"
	WorkflowDuplicate  = "duplicate"
	WorkflowQueueFull  = "queue_full"
)

// CreateResult is WorkflowCreate's answer: Outcome, and the id of the
// workflow it is about (the caller's, or the one its key names) with that
// workflow's status.
type CreateResult struct {
	Outcome string
	ID      string
	Status  dtqtype.WorkflowStatus
	Queue   string // WorkflowQueueFull: the full queue
	Depth   int64  // and its depth
}

// NewWorkflowID returns a workflow id for now: 12 hex digits of the time in
// ms, then the tag (20 hex digits; see WorkflowTag).
func NewWorkflowID(now time.Time, tag string) string {
	return fmt.Sprintf("%012x", now.UnixMilli()&0xffffffffffff) + tag
}

// RandomWorkflowTag is the tag of a workflow without an idempotency key.
func RandomWorkflowTag() string { return NewTaskID(0, time.Now())[12:32] }

// ValidWorkflowID reports whether id has a workflow id's form.
func ValidWorkflowID(id string) bool {
	if len(id) != 32 {
		return false
	}
	for i := range len(id) {
		if !lowerHexByte(id[i]) {
			return false
		}
	}
	return true
}

// Bounds of the workflow scripts' work per call (see docs/workflows-internals.md).
const (
	// ReleaseChunk bounds the releases carried out and dropped per
	// wf_released call, and read per chunk of a releases hash.
	ReleaseChunk = 1000
	// InlineReleases bounds the releases wf_apply and wf_start answer
	// inline; past it they answer that releases are stored, read in
	// chunks (WorkflowScanReleases).
	InlineReleases = 100
	// DepResultsMaxBytes bounds the deps' results inlined in one node's
	// deps outcomes: past it, a succeeded dep carries its task id and
	// result_omitted instead of its result.
	DepResultsMaxBytes = 1 << 20
)

// jsonList is refs as a JSON list ("" for none). Refs are
// [a-z0-9_.-]: nothing to escape.
func jsonList(refs []string) string {
	if len(refs) == 0 {
		return ""
	}
	return `["` + strings.Join(refs, `","`) + `"]`
}

func flag(b bool, v string) string {
	if b {
		return v
	}
	return ""
}

// WorkflowCreate writes a workflow's record, graph and definitions
// (wf_create.lua), after its idempotency check.
func (r *RDB) WorkflowCreate(ctx context.Context, now time.Time, w *NewWorkflow) (CreateResult, error) {
	k := r.keys
	keys := &wfCreateKeys{Workflow: k.Workflow(w.ID), Nodes: k.WorkflowNodes(w.ID), Defs: k.WorkflowDefs(w.ID)}
	if w.IdempotencyKey != "" {
		keys.Idem = k.WorkflowIdempotency(w.IdempotencyKey)
	}
	of, ret := "", ""
	if w.OnFailure != nil {
		b, err := json.Marshal(w.OnFailure)
		if err != nil {
			return CreateResult{}, err
		}
		of = string(b)
	}
	if w.Retention > 0 {
		ret = strconv.FormatInt(w.Retention, 10)
	}
	dependants := map[string][]string{}
	for _, n := range w.Nodes {
		for _, d := range n.Deps {
			dependants[d] = append(dependants[d], n.Ref)
		}
	}
	args := &wfCreateArgs{
		Now: now.UnixMilli(), ID: w.ID, Name: w.Name, Fingerprint: w.Fingerprint, IdemTTLS: w.IdemTTL, OnFailure: of,
		Retention: ret, IdemKey: w.IdempotencyKey, WorkflowPrefix: k.WorkflowPrefix(WorkflowTag(w.ID)),
		FullQueue: w.Full.Name, FullDepth: w.Full.Depth, Nodes: make([]wfCreateNodesItem, len(w.Nodes)),
	}
	for i := range w.Nodes {
		n := &w.Nodes[i]
		def, err := json.Marshal(n)
		if err != nil {
			return CreateResult{}, err
		}
		args.Nodes[i] = wfCreateNodesItem{Ref: n.Ref, TaskID: n.Task.ID, Queue: n.Queue, Deps: jsonList(n.Deps),
			Dependants: jsonList(dependants[n.Ref]), Cont: flag(n.Continue, "c"), Digest: n.Digest, Def: def}
	}
	v, err := r.callWfCreate(ctx, keys, args)
	if err != nil {
		return CreateResult{}, err
	}
	switch {
	case len(v) == 3 && v[0] == WorkflowQueueFull:
		depth, _ := strconv.ParseInt(v[2], 10, 64)
		return CreateResult{Outcome: v[0], Queue: v[1], Depth: depth}, nil
	case len(v) == 2 && v[0] == WorkflowCreated:
		return CreateResult{Outcome: v[0], ID: w.ID, Status: dtqtype.WorkflowStatus(v[1])}, nil
	case len(v) == 2:
		return CreateResult{Outcome: v[0], ID: v[1]}, nil
	case len(v) == 3:
		return CreateResult{Outcome: v[0], ID: v[1], Status: dtqtype.WorkflowStatus(v[2])}, nil
	}
	return CreateResult{}, fmt.Errorf("rdb: wf_create answered %v", v)
}

// QueueDepths reads the live-task count of each queue (one read per
// queue, pipelined; a queue never written counts 0).
func (r *RDB) QueueDepths(ctx context.Context, queues []string) (map[string]int64, error) {
	pipe := r.c.Pipeline()
	cmds := make([]*redis.StringCmd, len(queues))
	for i, q := range queues {
		cmds[i] = pipe.Get(ctx, r.keys.Depth(q))
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	out := make(map[string]int64, len(queues))
	for i, q := range queues {
		n, err := cmds[i].Int64()
		if err != nil && !errors.Is(err, redis.Nil) {
			return nil, err
		}
		out[q] = n
	}
	return out, nil
}

// MaxCallArgs is the most arguments a command dtq sends takes, its name
// included: some proxies in front of managed Redis refuse more
// (docs/compatibility.md). Long lists travel packed (pack.go) or in
// several calls.
const MaxCallArgs = 3999

// wfNodesPerCall is the most nodes a wf_nodes call writes: EVALSHA, its
// hash, the key count, three keys and two values, then two keys and 14
// values per node.
const wfNodesPerCall = (MaxCallArgs - 8) / 16

// WorkflowWriteNodes writes nodes of workflow id that live in queue as
// waiting tasks (wf_nodes.lua), at most wfNodesPerCall a call.
func (r *RDB) WorkflowWriteNodes(ctx context.Context, id, queue string, now time.Time, recentCap int64, nodes []WorkflowNode) error {
	k := r.keys
	for len(nodes) > 0 {
		batch := nodes[:min(len(nodes), wfNodesPerCall)]
		nodes = nodes[len(batch):]
		keys := &wfNodesKeys{Waiting: k.Waiting(queue), Depth: k.Depth(queue), Recent: k.Recent(queue),
			Tasks: make([]wfNodesTasksItem, len(batch))}
		args := &wfNodesArgs{Now: now.UnixMilli(), RecentCap: recentCap, Nodes: make([]wfNodesNodesItem, len(batch))}
		for i := range batch {
			n := &batch[i]
			t := &n.Task
			keys.Tasks[i] = wfNodesTasksItem{Task: k.Task(queue, t.ID), Ended: k.TaskEnded(queue, t.ID)}
			meta, ret, keep := storedFields(t.Metadata, t.Retention, t.KeepPayload)
			ttl := ""
			if t.TTLMS > 0 {
				ttl = strconv.FormatInt(t.TTLMS, 10)
			}
			args.Nodes[i] = wfNodesNodesItem{ID: t.ID, Wf: id + ":" + n.Ref, Type: t.Type, Payload: string(t.Payload),
				Priority: t.Priority, MaxAttempts: t.MaxAttempts, TimeoutMS: t.TimeoutMS, Metadata: meta,
				ConcurrencyKey: t.ConcurrencyKey, Retention: ret, Keep: keep, DelayMS: t.DelayMS, TTL: ttl, CreatedAt: t.CreatedAt}
		}
		if _, err := r.callWfNodes(ctx, keys, args); err != nil {
			return err
		}
	}
	return nil
}

// Release is a workflow's decision about one node, to carry out in the
// node's slot (WorkflowRelease): Kind "run" with the deps' outcomes as
// Detail, or "cancel" with an error class.
type Release struct {
	Ref, Kind, TaskID, Queue, Detail string
}

func parseReleases(v []string) []Release {
	out := make([]Release, 0, len(v))
	for _, s := range v {
		p := strings.SplitN(s, "|", 5)
		if len(p) == 5 {
			out = append(out, Release{Ref: p[0], Kind: p[1], TaskID: p[2], Queue: p[3], Detail: p[4]})
		}
	}
	return out
}

// StartResult is WorkflowStart's answer.
type StartResult struct {
	// Started: the workflow runs and WORKFLOW_STARTED is not noted as
	// emitted (the caller emits it, then notes it).
	Started bool
	// Final is the workflow's status once it has ended, else "".
	Final    dtqtype.WorkflowStatus
	Releases []Release
	// Stored: the batch's releases were too many to answer inline; they
	// are read from the releases hash (WorkflowScanReleases).
	Stored bool
}

// ErrWorkflowNotFound is a workflow that does not exist (or expired).
var ErrWorkflowNotFound = errors.New("rdb: workflow not found")

// WorkflowStart activates a batch of nodes whose tasks are written
// (wf_start.lua): a submitting workflow starts running.
func (r *RDB) WorkflowStart(ctx context.Context, id string, now time.Time, retention time.Duration, refs []string) (StartResult, error) {
	k := r.keys
	v, err := r.callWfStart(ctx, &wfStartKeys{
		Workflow: k.Workflow(id), Nodes: k.WorkflowNodes(id), Releases: k.WorkflowReleases(id), Defs: k.WorkflowDefs(id),
		Parked: k.WorkflowParked(id),
	}, &wfStartArgs{
		Now: now.UnixMilli(), RetentionMS: retention.Milliseconds(), DepBytes: DepResultsMaxBytes, Inline: InlineReleases,
		Refs: refs,
	})
	if err != nil {
		return StartResult{}, err
	}
	if len(v) < 3 {
		return StartResult{}, ErrWorkflowNotFound
	}
	return StartResult{Started: v[0] == "1", Final: dtqtype.WorkflowStatus(v[1]), Stored: v[2] == "1",
		Releases: parseReleases(v[3:])}, nil
}

// OutboxEntry is one node end from a queue's workflow outbox.
type OutboxEntry struct {
	ID                 string // stream entry id
	Workflow, Ref      string
	Status             dtqtype.Status
	Result, ErrorClass string
}

// ApplyResult is WorkflowApply's answer.
type ApplyResult struct {
	Gone bool // the workflow (or node) no longer exists
	// Known: the workflow knew the node as ended (nothing was applied).
	Known    bool
	Final    dtqtype.WorkflowStatus
	Releases []Release
	// Stored: releases are stored that Releases does not list (Known: any
	// at all; else this call's, too many to answer inline), to read with
	// WorkflowScanReleases.
	Stored bool
}

// WorkflowApply records a node's end in its workflow (wf_apply.lua).
// parked: e was parked (WorkflowPark) and leaves the parked hash.
func (r *RDB) WorkflowApply(ctx context.Context, e *OutboxEntry, now time.Time, retention time.Duration, parked bool) (ApplyResult, error) {
	k, id := r.keys, e.Workflow
	v, err := r.callWfApply(ctx, &wfApplyKeys{
		Workflow: k.Workflow(id), Nodes: k.WorkflowNodes(id), Releases: k.WorkflowReleases(id), Defs: k.WorkflowDefs(id),
		Parked: k.WorkflowParked(id),
	}, &wfApplyArgs{
		Now: now.UnixMilli(), Ref: e.Ref, Status: string(e.Status), Result: e.Result, Class: e.ErrorClass,
		RetentionMS: retention.Milliseconds(), DepBytes: DepResultsMaxBytes, Inline: InlineReleases,
		ParkedEnd: boolArg(parked),
	})
	if err != nil {
		return ApplyResult{}, err
	}
	if len(v) == 0 || v[0] == "gone" {
		return ApplyResult{Gone: true}, nil
	}
	if len(v) < 3 {
		return ApplyResult{}, fmt.Errorf("rdb: wf_apply answered %v", v)
	}
	return ApplyResult{Known: v[0] == "known", Final: dtqtype.WorkflowStatus(v[1]), Stored: v[2] == "1",
		Releases: parseReleases(v[3:])}, nil
}

// WorkflowPark keeps e, an end wf_apply failed on, in its workflow's slot
// for the sweep (wf_park.lua), so that the relay can acknowledge it.
// gone: the workflow no longer exists (nothing to keep).
func (r *RDB) WorkflowPark(ctx context.Context, e *OutboxEntry) (gone bool, err error) {
	k := r.keys
	v, err := r.callWfPark(ctx, &wfParkKeys{Workflow: k.Workflow(e.Workflow), Parked: k.WorkflowParked(e.Workflow)},
		&wfParkArgs{Ref: e.Ref, Status: string(e.Status), Result: e.Result, Class: e.ErrorClass})
	return v == "gone", err
}

// WorkflowParked reads up to about n parked ends of workflow id from
// cursor (0 = the start); next is 0 once the whole hash was read.
func (r *RDB) WorkflowParked(ctx context.Context, id string, cursor uint64, n int) (es []OutboxEntry, next uint64, err error) {
	kv, next, err := r.c.HScan(ctx, r.keys.WorkflowParked(id), cursor, "", int64(n)).Result()
	if err != nil {
		return nil, 0, err
	}
	for i := 0; i+1 < len(kv); i += 2 {
		var p struct{ S, V, E string }
		if err := json.Unmarshal([]byte(kv[i+1]), &p); err != nil {
			return nil, 0, fmt.Errorf("rdb: workflow %s: parked end of %s: %w", id, kv[i], err)
		}
		es = append(es, OutboxEntry{Workflow: id, Ref: kv[i], Status: dtqtype.Status(p.S), Result: p.V, ErrorClass: p.E})
	}
	return es, next, nil
}

// ReleaseSettings are what carrying out a release needs of the process.
type ReleaseSettings struct {
	EventsMaxLen    int64
	FailedRetention time.Duration
}

// WorkflowRelease carries out one release in the node's slot
// (wf_release.lua) and returns the task's status after it.
func (r *RDB) WorkflowRelease(ctx context.Context, rel *Release, now time.Time, s *ReleaseSettings) (dtqtype.Status, error) {
	k, q := r.keys, rel.Queue
	st, err := r.callWfRelease(ctx, &wfReleaseKeys{
		Task: k.Task(q, rel.TaskID), Waiting: k.Waiting(q), Schedule: k.Schedule(q), Expiry: k.Expiry(q),
		Events: k.Events(q), Depth: k.Depth(q), Retained: k.Retained(q), Outbox: k.WorkflowOutbox(q),
	}, &wfReleaseArgs{
		Now: now.UnixMilli(), ID: rel.TaskID, Kind: rel.Kind, Detail: rel.Detail, StreamPrefix: k.StreamPrefix(q),
		EventsMaxLen: s.EventsMaxLen, FailedRetS: seconds(s.FailedRetention), IdemPrefix: k.IdempotencyPrefix(q),
		Outcomes: boolArg(r.outcomesOnly(ctx, q)),
	})
	return dtqtype.Status(st), err
}

// WorkflowReleased drops carried-out releases of workflow id, at most
// ReleaseChunk a call.
func (r *RDB) WorkflowReleased(ctx context.Context, id string, refs []string) error {
	key := r.keys.WorkflowReleases(id)
	return runChunked(refs, func(chunk []string) error {
		_, err := r.callWfReleased(ctx, &wfReleasedKeys{Releases: key}, &wfReleasedArgs{Refs: chunk})
		return err
	})
}

// WorkflowScanReleases reads up to about n releases of workflow id not yet
// carried out from cursor (0 = the start), in ref order within the chunk;
// next is 0 once the whole hash was read. A release stored for the whole
// scan is read at least once.
func (r *RDB) WorkflowScanReleases(ctx context.Context, id string, cursor uint64, n int) (rels []Release, next uint64, err error) {
	kv, next, err := r.c.HScan(ctx, r.keys.WorkflowReleases(id), cursor, "", int64(n)).Result()
	if err != nil {
		return nil, 0, err
	}
	v := make([]string, 0, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		v = append(v, kv[i]+"|"+kv[i+1])
	}
	slices.Sort(v)
	return parseReleases(v), next, nil
}

// WorkflowDefinitions reads the definitions of workflow id's nodes still
// being written, in ref order.
func (r *RDB) WorkflowDefinitions(ctx context.Context, id string) ([]WorkflowNode, error) {
	m, err := r.c.HGetAll(ctx, r.keys.WorkflowDefs(id)).Result()
	if err != nil {
		return nil, err
	}
	out := make([]WorkflowNode, 0, len(m))
	for _, raw := range m {
		var n WorkflowNode
		if err := json.Unmarshal([]byte(raw), &n); err != nil {
			return nil, fmt.Errorf("rdb: workflow %s: definition: %w", id, err)
		}
		out = append(out, n)
	}
	slices.SortFunc(out, func(a, b WorkflowNode) int { return strings.Compare(a.Task.ID, b.Task.ID) })
	return out, nil
}

// Fan-out outcomes of WorkflowAdd.
const (
	AddOK         = "ok"
	AddNotFound   = "not_found"
	AddNotRunning = "not_running"
	AddMismatch   = "mismatch"
	AddUnknownDep = "unknown_dep"
	AddTooMany    = "too_many"
)

// AddResult is WorkflowAdd's answer: Outcome "ok" with every node of the
// call (Def set while a node is still being written, so the caller writes
// it from there), or a refusal with what it names.
type AddResult struct {
	Outcome  string
	Ref, Dep string // mismatch, unknown_dep
	Status   string // not_running
	Total    int    // too_many
	Queue    string // queue_full: the full queue
	Depth    int64  // and its depth
	Nodes    []AddedNode
}

// AddedNode is one node of a fan-out call.
type AddedNode struct {
	Ref, TaskID string
	Def         *WorkflowNode // nil once it is activated
}

// WorkflowAdd adds nodes to running workflow id (wf_add.lua).
func (r *RDB) WorkflowAdd(ctx context.Context, id string, now time.Time, maxNodes int, full FullQueue, nodes []WorkflowNode) (AddResult, error) {
	k := r.keys
	args := &wfAddArgs{Now: now.UnixMilli(), MaxNodes: maxNodes, FullQueue: full.Name, FullDepth: full.Depth,
		Nodes: make([]wfAddNodesItem, len(nodes))}
	for i := range nodes {
		n := &nodes[i]
		def, err := json.Marshal(n)
		if err != nil {
			return AddResult{}, err
		}
		args.Nodes[i] = wfAddNodesItem{Ref: n.Ref, TaskID: n.Task.ID, Queue: n.Queue, Deps: jsonList(n.Deps),
			Cont: flag(n.Continue, "c"), Digest: n.Digest, Def: def}
	}
	v, err := r.callWfAdd(ctx, &wfAddKeys{Workflow: k.Workflow(id), Nodes: k.WorkflowNodes(id), Defs: k.WorkflowDefs(id)}, args)
	if err != nil {
		return AddResult{}, err
	}
	if len(v) < addArity[v0(v)] {
		return AddResult{}, fmt.Errorf("rdb: wf_add answered %v", v)
	}
	res := AddResult{Outcome: v[0]}
	switch res.Outcome {
	case AddOK:
		for i := 1; i+2 < len(v); i += 3 {
			an := AddedNode{Ref: v[i], TaskID: v[i+1]}
			if v[i+2] != "" {
				var n WorkflowNode
				if err := json.Unmarshal([]byte(v[i+2]), &n); err != nil {
					return AddResult{}, fmt.Errorf("rdb: workflow %s: definition: %w", id, err)
				}
				an.Def = &n
			}
			res.Nodes = append(res.Nodes, an)
		}
	case AddNotRunning:
		res.Status = v[1]
	case AddMismatch:
		res.Ref = v[1]
	case AddUnknownDep:
		res.Ref, res.Dep = v[1], v[2]
	case AddTooMany:
		res.Total = int(atoi64(v[1]))
	case WorkflowQueueFull:
		res.Queue, res.Depth = v[1], atoi64(v[2])
	}
	return res, nil
}

// NodeRef names one node's task.
type NodeRef struct {
	Ref, TaskID, Queue string
}

// WorkflowCancel marks workflow id cancelled (wf_cancel.lua) and returns
// its nodes not ended yet in one page of its nodes hash (ReleaseChunk
// fields looked at, about a tenth as many nodes), from cursor
// (0 = the first page), for the caller to cancel in their slots; next is
// the cursor of the next page, 0 after the last. outcome is "cancelling",
// "terminal" (with status) or "not_found".
func (r *RDB) WorkflowCancel(ctx context.Context, id string, now time.Time, cursor uint64) (outcome, status string, nodes []NodeRef, next uint64, err error) {
	k := r.keys
	v, err := r.callWfCancel(ctx, &wfCancelKeys{Workflow: k.Workflow(id), Nodes: k.WorkflowNodes(id)},
		&wfCancelArgs{Now: now.UnixMilli(), Cursor: strconv.FormatUint(cursor, 10), Count: ReleaseChunk})
	if err != nil {
		return "", "", nil, 0, err
	}
	if len(v) < cancelArity[v0(v)] {
		return "", "", nil, 0, fmt.Errorf("rdb: wf_cancel answered %v", v)
	}
	switch v[0] {
	case "terminal":
		return v[0], v[1], nil, 0, nil
	case "cancelling":
		if len(v) < 2 {
			return "", "", nil, 0, fmt.Errorf("rdb: wf_cancel answered %v", v)
		}
		if next, err = strconv.ParseUint(v[1], 10, 64); err != nil {
			return "", "", nil, 0, fmt.Errorf("rdb: wf_cancel answered cursor %q", v[1])
		}
		for _, s := range v[2:] {
			if p := strings.SplitN(s, "|", 3); len(p) == 3 {
				nodes = append(nodes, NodeRef{Ref: p[0], TaskID: p[1], Queue: p[2]})
			}
		}
	}
	return v[0], "", nodes, next, nil
}

// Fields WorkflowNote records.
const (
	NoteStarted   = "ev_s"   // WORKFLOW_STARTED emitted
	NoteEnded     = "ev_e"   // the workflow's end event emitted
	NoteOnFailure = "oft"    // the on_failure task's id
	NoteListed    = "listed" // in the listing index
)

// WorkflowNote records on workflow id what was done outside its slot.
func (r *RDB) WorkflowNote(ctx context.Context, id, field, value string) error {
	_, err := r.callWfNote(ctx, &wfNoteKeys{Workflow: r.keys.Workflow(id)}, &wfNoteArgs{Field: field, Value: value})
	return err
}

// WorkflowMark puts a's entry in the attention index with its score (ms)
// and, when list, its workflow in the listing index (score 0: ids sort by
// creation time, so the index is read by id, ZRANGEBYLEX).
func (r *RDB) WorkflowMark(ctx context.Context, a Attention, list bool) error {
	k := r.keys
	keys := &wfMarkKeys{Attention: k.WorkflowAttention()}
	args := &wfMarkArgs{Member: a.member(), Score: a.Score}
	if list {
		keys.Index, args.ID = k.WorkflowIndex(), a.ID
	}
	_, err := r.callWfMark(ctx, keys, args)
	return err
}

// WorkflowUnmark removes a's entry from the attention index if its score is
// still a.Score.
func (r *RDB) WorkflowUnmark(ctx context.Context, a Attention) error {
	_, err := r.callWfUnmark(ctx, &wfUnmarkKeys{Attention: r.keys.WorkflowAttention()},
		&wfUnmarkArgs{Member: a.member(), Score: a.Score})
	return err
}

// Attention is one entry of the attention index: a workflow, and the mark
// one call left there. Every marking call has an entry of its own (Token):
// a caller that removes its entry once its own steps are done never
// removes another's, whose steps may have been cut short and wait for the
// sweep.
type Attention struct {
	ID    string
	Token string // "" for an entry named by the workflow id alone
	Score int64
	// Tries counts the sweep's failed tries of the entry (Retry), kept in
	// its member as "~<tries>" after the token.
	Tries int
}

// Retry is a's entry after one more failed try, due at score (ms): the
// same token with Tries one higher, a member of its own.
func (a Attention) Retry(score int64) Attention {
	return Attention{ID: a.ID, Token: a.Token, Score: score, Tries: a.Tries + 1}
}

// NewAttention is a new entry, of its caller's own, for workflow id marked
// at score (ms).
func NewAttention(id string, score int64) Attention {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return Attention{ID: id, Token: hex.EncodeToString(b[:]), Score: score}
}

// member is a's member of the attention index: "<workflow id>|<token>".
func (a Attention) member() string {
	m := a.ID
	if a.Token != "" {
		m += "|" + a.Token
	}
	if a.Tries > 0 {
		m += "~" + strconv.Itoa(a.Tries)
	}
	return m
}

// WorkflowsNeedingAttention returns up to n attention entries marked before
// before, oldest first.
func (r *RDB) WorkflowsNeedingAttention(ctx context.Context, before time.Time, n int) ([]Attention, error) {
	zs, err := r.c.ZRangeByScoreWithScores(ctx, r.keys.WorkflowAttention(), &redis.ZRangeBy{
		Min: "-inf", Max: strconv.FormatInt(before.UnixMilli(), 10), Count: int64(n)}).Result()
	if err != nil {
		return nil, err
	}
	out := make([]Attention, len(zs))
	for i, z := range zs {
		m := zMember(z)
		m, tries, _ := strings.Cut(m, "~")
		id, token, _ := strings.Cut(m, "|")
		n, _ := strconv.Atoi(tries)
		out[i] = Attention{ID: id, Token: token, Score: int64(z.Score), Tries: n}
	}
	return out, nil
}

// ReadOutbox returns up to n of queue's outbox entries, oldest first.
func (r *RDB) ReadOutbox(ctx context.Context, queue string, n int) ([]OutboxEntry, error) {
	xs, err := r.c.XRangeN(ctx, r.keys.WorkflowOutbox(queue), "-", "+", int64(n)).Result()
	if err != nil {
		return nil, err
	}
	out := make([]OutboxEntry, 0, len(xs))
	for _, x := range xs {
		str := func(f string) string { s, _ := x.Values[f].(string); return s }
		e := OutboxEntry{ID: x.ID, Status: dtqtype.Status(str("s")), Result: str("v"), ErrorClass: str("e")}
		e.Workflow, e.Ref, _ = strings.Cut(str("w"), ":")
		out = append(out, e)
	}
	return out, nil
}

// OutboxLastID returns the id of the newest entry of queue's outbox
// ("0-0" when it is empty).
func (r *RDB) OutboxLastID(ctx context.Context, queue string) (string, error) {
	xs, err := r.c.XRevRangeN(ctx, r.keys.WorkflowOutbox(queue), "+", "-", 1).Result()
	if err != nil || len(xs) == 0 {
		return "0-0", err
	}
	return xs[0].ID, nil
}

// AckOutbox deletes carried-out entries of queue's outbox.
func (r *RDB) AckOutbox(ctx context.Context, queue string, ids []string) error {
	key := r.keys.WorkflowOutbox(queue)
	return runChunked(ids, func(chunk []string) error {
		_, err := r.callWfAck(ctx, &wfAckKeys{Outbox: key}, &wfAckArgs{IDs: chunk})
		return err
	})
}

// RelayLock takes or keeps (lease > 0) or gives up (lease 0) the right to
// relay queue's outbox under token; it reports whether token holds it.
func (r *RDB) RelayLock(ctx context.Context, queue, token string, lease time.Duration) (bool, error) {
	n, err := r.callWfLock(ctx, &wfLockKeys{Lock: r.keys.WorkflowRelayLock(queue)},
		&wfLockArgs{Token: token, LeaseMS: lease.Milliseconds()})
	return n == 1, err
}

// ReadWorkflowStatus reads the status (and name) of each workflow of ids
// ("" for one that is gone).
func (r *RDB) ReadWorkflowStatus(ctx context.Context, ids []string) ([]dtqtype.WorkflowSummary, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	pipe := r.c.Pipeline()
	cmds := make([]*redis.SliceCmd, len(ids))
	for i, id := range ids {
		cmds[i] = pipe.HMGet(ctx, r.keys.Workflow(id), "status", "name", "nodes", "ended")
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	out := make([]dtqtype.WorkflowSummary, len(ids))
	for i, c := range cmds {
		v := c.Val()
		if len(v) != 4 {
			continue
		}
		s := &out[i]
		s.ID = ids[i]
		st, _ := v[0].(string)
		s.Status = dtqtype.WorkflowStatus(st)
		s.Name, _ = v[1].(string)
		nodes, _ := v[2].(string)
		ended, _ := v[3].(string)
		s.Nodes, _ = strconv.Atoi(nodes)
		s.Ended, _ = strconv.Atoi(ended)
	}
	return out, nil
}

// WorkflowIndexPage reads up to n ids of the listing index, newest first,
// older than the id before ("" = from the newest).
func (r *RDB) WorkflowIndexPage(ctx context.Context, before string, n int) ([]string, error) {
	upper := "+"
	if before != "" {
		upper = "(" + before
	}
	return r.c.ZRevRangeByLex(ctx, r.keys.WorkflowIndex(), &redis.ZRangeBy{Max: upper, Min: "-", Count: int64(n)}).Result()
}

// DropFromWorkflowIndex removes workflows that are gone from the listing
// index (a read found no record).
func (r *RDB) DropFromWorkflowIndex(ctx context.Context, ids []string) error {
	key := r.keys.WorkflowIndex()
	return runChunked(ids, func(chunk []string) error {
		_, err := r.callWfUnlist(ctx, &wfUnlistKeys{Index: key}, &wfUnlistArgs{IDs: chunk})
		return err
	})
}

// runChunked calls call over vals, at most ReleaseChunk values a call
// (none for an empty vals): a script whose arguments are a list of values.
func runChunked(vals []string, call func(chunk []string) error) error {
	for len(vals) > 0 {
		chunk := vals[:min(len(vals), ReleaseChunk)]
		vals = vals[len(chunk):]
		if err := call(chunk); err != nil {
			return err
		}
	}
	return nil
}

// TaskStatuses reads the status of each task (queue and id pairs), "" for
// one that is gone.
func (r *RDB) TaskStatuses(ctx context.Context, refs []NodeRef) ([]dtqtype.Status, error) {
	pipe := r.c.Pipeline()
	cmds := make([]*redis.StringCmd, len(refs))
	for i, n := range refs {
		cmds[i] = pipe.HGet(ctx, r.keys.Task(n.Queue, n.TaskID), "status")
	}
	if len(refs) > 0 {
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return nil, err
		}
	}
	out := make([]dtqtype.Status, len(refs))
	for i, c := range cmds {
		out[i] = dtqtype.Status(c.Val())
	}
	return out, nil
}

// NodeLease reads what AddNodes checks of a running node: its status,
// attempt, worker, claim nonce and wf field.
func (r *RDB) NodeLease(ctx context.Context, queue, id string) (status, attempt, worker, claim, wf string, err error) {
	v, err := r.c.HMGet(ctx, r.keys.Task(queue, id), "status", "attempt", "worker_id", "claim", "wf").Result()
	if err != nil {
		return "", "", "", "", "", err
	}
	s := func(i int) string { x, _ := v[i].(string); return x }
	return s(0), s(1), s(2), s(3), s(4), nil
}

// OutboxWatch waits for new entries in the workflow outboxes of many
// queues at once, with one read per call: a blocking XREAD on a
// connection of its own where one read may name keys of several slots (a
// single Redis, or one Sentinel manages), else a pipelined non-blocking
// poll (Redis Cluster). Used by one goroutine at a time.
type OutboxWatch struct {
	r   *RDB
	own *redis.Client // nil: polls
}

// WatchOutboxes returns a watch; Close it when done.
func (r *RDB) WatchOutboxes() *OutboxWatch {
	w := &OutboxWatch{r: r}
	if opt, ok := DedicatedOptions(r.c); ok {
		w.own = redis.NewClient(opt)
	}
	return w
}

// Blocking reports whether Wait blocks (else it looks once and returns).
func (w *OutboxWatch) Blocking() bool { return w.own != nil }

// Wait returns the indexes of the queues whose outbox holds an entry after
// the id at the same index of after: when Blocking, waiting up to block
// for one; else as they are now.
func (w *OutboxWatch) Wait(ctx context.Context, queues, after []string, block time.Duration) ([]int, error) {
	keys := make([]string, len(queues))
	for i, q := range queues {
		keys[i] = w.r.keys.WorkflowOutbox(q)
	}
	if w.own != nil {
		return WaitAnyStream(ctx, w.own, keys, after, block)
	}
	return PollAnyStream(ctx, w.r.c, keys, after)
}

// Close closes the watch's own connection.
func (w *OutboxWatch) Close() error {
	if w.own == nil {
		return nil
	}
	return w.own.Close()
}

// v0 is a script reply's first element, its outcome ("" for an empty
// reply, which the arity maps below refuse).
func v0(v []string) string {
	if len(v) == 0 {
		return ""
	}
	return v[0]
}

// addArity and cancelArity are the fewest elements wf_add's and
// wf_cancel's replies have per outcome (see their headers); an empty reply
// needs one.
var (
	addArity = map[string]int{"": 1, AddNotRunning: 2, AddMismatch: 2, AddUnknownDep: 3, AddTooMany: 2,
		WorkflowQueueFull: 3}
	cancelArity = map[string]int{"": 1, "terminal": 2, "cancelling": 2}
)
