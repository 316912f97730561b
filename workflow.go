package dtq

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/internal/idemkey"
	"github.com/dtq-io/dtq/internal/rdb"
	"github.com/dtq-io/dtq/internal/workflow"
	"github.com/dtq-io/dtq/internal/workflow/engine"
)

// Workflow is a set of nodes, each an ordinary task on any queue, with
// dependencies between them (a DAG), submitted as one unit
// (Client.SubmitWorkflow). See docs/workflows.md.
type Workflow struct {
	// Name is an optional label, at most 128 printable characters.
	Name string
	// Nodes are the workflow's nodes, 1..MaxWorkflowNodes of them.
	Nodes []Node
	// OnFailure, when set, is submitted once when the workflow fails: its
	// payload as given plus a field workflow: {id, name, failed: [refs]}.
	// Its own IdempotencyKey, RunAt and ExpiresAt must be unset.
	OnFailure *Submission
	// IdempotencyKey maps duplicate submissions to one workflow, as a
	// task's key does (in a space of its own): while the first runs, a
	// duplicate gets *WorkflowConflictError (ErrIdempotencyInProgress);
	// once it ended, its result (Duplicate); with another request,
	// ErrIdempotencyKeyMismatch.
	IdempotencyKey string
}

// DepPolicy is what a node does when one of its deps ends other than
// succeeded (on_dep_failure).
type DepPolicy string

const (
	// DepFail ends the node cancelled (error class DependencyFailed)
	// without running it, and so on down; the default.
	DepFail DepPolicy = "fail"
	// DepContinue runs the node once every dep has ended; it sees each
	// dep's outcome (Task.Deps).
	DepContinue DepPolicy = "continue"
)

// Node is one node of a workflow: a task (the embedded Submission, whose
// IdempotencyKey, RunAt and ExpiresAt must be unset: Delay and TTL count
// from the node's release) with a ref, the refs it depends on and its
// policy.
type Node struct {
	// Ref names the node in its workflow: ^[a-z0-9][a-z0-9_.-]{0,63}$.
	Ref string
	// Deps are the refs this node waits for.
	Deps []string
	// OnDepFailure is DepFail ("" too) or DepContinue.
	OnDepFailure DepPolicy
	Submission
}

// DepResult is the outcome of one dep as a node's handler sees it.
//
// A node's deps inline their results up to DepResultsMaxBytes in all, in
// the order of the node's Deps; from the first result that does not fit
// on, a succeeded dep with a result carries TaskID and ResultOmitted
// instead, and its result is read from its task (Inspector.GetTask, GET
// /api/v1/tasks/{id}). See docs/workflows.md.
type DepResult struct {
	Status dtqtype.Status `json:"status"`
	// Result is the dep's result (succeeded), null otherwise, and null
	// when ResultOmitted.
	Result json.RawMessage `json:"result,omitempty"`
	// ErrorClass is the class of the dep's end other than succeeded, when
	// it had one (DependencyFailed for a dep cancelled by its own dep).
	ErrorClass string `json:"error_class,omitempty"`
	// TaskID is the dep's task, set when ResultOmitted.
	TaskID string `json:"task_id,omitempty"`
	// ResultOmitted: the dep succeeded with a result that was left out,
	// past DepResultsMaxBytes; read it from the dep's task (TaskID).
	ResultOmitted bool `json:"result_omitted,omitempty"`
}

// DepResultsMaxBytes bounds the deps' results inlined in one node's deps
// outcomes (Task.Deps, an HTTP claim's deps): 1 MiB. Past it, later deps
// carry TaskID and ResultOmitted instead of their result, so that a join
// of any number of deps stays bounded (about 100 bytes per left-out dep).
const DepResultsMaxBytes = rdb.DepResultsMaxBytes

// NodeRef is a node as a submission answers it.
type NodeRef struct {
	Ref    string         `json:"ref"`
	TaskID string         `json:"task_id"`
	Status dtqtype.Status `json:"status"`
}

// WorkflowResult is the outcome of a successful SubmitWorkflow.
type WorkflowResult struct {
	WorkflowID string                 `json:"workflow_id"`
	Status     dtqtype.WorkflowStatus `json:"status"`
	Nodes      []NodeRef              `json:"nodes"`
	// Duplicate is true when the idempotency key named a workflow that
	// had ended: nothing new was created.
	Duplicate bool `json:"-"`
}

// ErrInvalidWorkflow is the sentinel of *WorkflowError.
var ErrInvalidWorkflow = errors.New("dtq: invalid workflow")

// ErrWorkflowNotFound is returned for an unknown (or expired) workflow.
var ErrWorkflowNotFound = engine.ErrNotFound

// ErrWorkflowNotRunning is returned by AddNodes when the workflow has ended
// or is being cancelled.
var ErrWorkflowNotRunning = errors.New("dtq: workflow is not running")

// ErrNodeMismatch is returned by AddNodes when a ref exists with another
// definition.
var ErrNodeMismatch = errors.New("dtq: node exists with another definition")

// WorkflowError is a workflow that cannot be accepted: Node names the node
// (its ref, "nodes[i]", "nodes" or "name"), Field the JSON name of the
// node's member to blame ("ref", "deps", "queue" …; "" when the node as a
// whole is), Reason says why. It matches ErrInvalidWorkflow, and
// ErrNodeMismatch for a fan-out whose ref exists with another definition.
type WorkflowError struct {
	Node   string
	Field  string
	Reason string
	kind   error
}

// Error names the node and the reason.
func (e *WorkflowError) Error() string { return "workflow node " + e.Node + ": " + e.Reason }

// Unwrap returns ErrNodeMismatch, or ErrInvalidWorkflow and, for a
// node's invalid task, the task's sentinel (ErrInvalidTask …).
func (e *WorkflowError) Unwrap() []error {
	if errors.Is(e.kind, ErrNodeMismatch) {
		return []error{e.kind}
	}
	if e.kind != nil {
		return []error{ErrInvalidWorkflow, e.kind}
	}
	return []error{ErrInvalidWorkflow}
}

// WorkflowConflictError is an idempotency key of a workflow whose
// submission cannot be answered with it: it matches
// ErrIdempotencyInProgress (the workflow runs) or ErrIdempotencyKeyMismatch
// (another request used the key).
type WorkflowConflictError struct {
	Key        string
	WorkflowID string // the workflow the key names
	err        error
}

// Error names the key and the workflow.
func (e *WorkflowConflictError) Error() string {
	return fmt.Sprintf("%v: workflow idempotency key %q names workflow %s", e.err, e.Key, e.WorkflowID)
}

// Unwrap returns the sentinel.
func (e *WorkflowConflictError) Unwrap() error { return e.err }

// maxWorkflowName bounds a workflow's name.
const maxWorkflowName = 128

// graphOf is nodes as internal/workflow validates them.
func graphOf(nodes []Node) []workflow.Node {
	out := make([]workflow.Node, len(nodes))
	for i := range nodes {
		out[i] = workflow.Node{Ref: nodes[i].Ref, Deps: nodes[i].Deps, OnDepFailure: workflow.Policy(nodes[i].OnDepFailure)}
	}
	return out
}

func graphError(err error) error {
	if we, ok := errors.AsType[*workflow.Error](err); ok {
		return &WorkflowError{Node: we.Node, Field: we.Field, Reason: we.Reason}
	}
	return err
}

// nodeTask normalizes one node's submission (where says which, for errors).
func nodeTask(s *Submission, lim *limits, now time.Time, where string) (*normalized, error) {
	switch {
	case s.IdempotencyKey != "":
		return nil, &WorkflowError{Node: where, Field: "idempotency_key", Reason: "a node has no idempotency key of its own (the workflow's key covers it)"}
	case !s.RunAt.IsZero():
		return nil, &WorkflowError{Node: where, Field: "run_at", Reason: "run_at is not allowed in a workflow; delay counts from the node's release"}
	case !s.ExpiresAt.IsZero():
		return nil, &WorkflowError{Node: where, Field: "expires_at", Reason: "expires_at is not allowed in a workflow; ttl counts from the node's release"}
	case s.Dedup != nil:
		// A collapsed or replaced node would leave its dependants waiting
		// on a task that is not theirs.
		return nil, &WorkflowError{Node: where, Field: "dedup", Reason: "dedup is not allowed on a workflow node (the workflow's idempotency key makes a workflow once)"}
	}
	n, err := normalize(s, lim, now)
	if err != nil {
		if ve, ok := errors.AsType[*ValidationError](err); ok {
			return nil, &WorkflowError{Node: where, Field: ve.Field, Reason: ve.Error(), kind: ve.kind}
		}
		return nil, err
	}
	return n, nil
}

// definition is what a node's digest covers: everything its submission
// says, without ids and times.
type definition struct {
	Ref         string          `json:"ref"`
	Queue       string          `json:"queue"`
	Deps        []string        `json:"deps"`
	Continue    bool            `json:"continue"`
	Type        string          `json:"type"`
	Payload     json.RawMessage `json:"payload"`
	Priority    int             `json:"priority"`
	MaxAttempts int             `json:"max_attempts"`
	TimeoutMS   int64           `json:"timeout_ms"`
	Metadata    json.RawMessage `json:"metadata"`
	CKey        string          `json:"ckey"`
	Retention   int64           `json:"ret"`
	Keep        bool            `json:"keep"`
	DelayMS     int64           `json:"delay_ms"`
	TTLMS       int64           `json:"ttl_ms"`
}

// storedNode builds the node as the scripts store it, with a fresh task id.
func (c *Client) storedNode(ctx context.Context, ref string, deps []string, policy DepPolicy, n *normalized, now time.Time) (rdb.WorkflowNode, error) {
	t, err := c.newTask(ctx, n, now)
	if err != nil {
		return rdb.WorkflowNode{}, err
	}
	created := now.UnixMilli()
	var ttl int64
	if n.expiresAt != 0 {
		ttl = n.expiresAt - created
	}
	wn := rdb.WorkflowNode{Ref: ref, Queue: n.queue, Deps: deps, Continue: policy == DepContinue,
		Task: rdb.NodeTask{ID: t.ID, Type: n.typ, Payload: n.payload, Priority: n.priority, MaxAttempts: n.maxAttempts,
			TimeoutMS: n.timeoutMS, Metadata: n.metadata, ConcurrencyKey: n.concurrencyKey, Retention: n.retention,
			KeepPayload: n.keepPayload, DelayMS: n.availableAt - created, TTLMS: ttl, CreatedAt: created}}
	d, err := json.Marshal(definition{Ref: ref, Queue: n.queue, Deps: deps, Continue: wn.Continue, Type: n.typ,
		Payload: n.payload, Priority: n.priority, MaxAttempts: n.maxAttempts, TimeoutMS: n.timeoutMS, Metadata: n.metadata,
		CKey: n.concurrencyKey, Retention: n.retention, Keep: n.keepPayload, DelayMS: wn.Task.DelayMS, TTLMS: ttl})
	if err != nil {
		return rdb.WorkflowNode{}, err
	}
	sum := sha256.Sum256(d)
	wn.Digest = hex.EncodeToString(sum[:16])
	return wn, nil
}

// buildNodes validates and normalizes nodes and gives each a task id.
func (c *Client) buildNodes(ctx context.Context, nodes []Node, now time.Time) ([]rdb.WorkflowNode, error) {
	out := make([]rdb.WorkflowNode, len(nodes))
	for i := range nodes {
		nd := &nodes[i]
		where := nd.Ref
		if !workflow.ValidRef(where) {
			where = fmt.Sprintf("nodes[%d]", i)
		}
		n, err := nodeTask(&nd.Submission, &c.lim, now, where)
		if err != nil {
			return nil, err
		}
		if out[i], err = c.storedNode(ctx, nd.Ref, slices.Clone(nd.Deps), nd.OnDepFailure, n, now); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// SubmitWorkflow submits w: every node is written in its queue, waiting,
// and the workflow starts running once all are (nodes without deps are
// queued at once). Every step is safe to repeat; a submission that stops
// midway (a lost connection, a crash) is completed by the workers'
// maintenance within seconds, so once the workflow's record is written
// the answer is its id (Status "submitting" when the last steps did not
// answer). Only when the record's write itself gets no answer is the
// outcome unknown: *OutcomeUnknownError (TaskID is the workflow id).
// Invalid workflows give *WorkflowError (ErrInvalidWorkflow); a key in use
// gives *WorkflowConflictError or, for an ended workflow, its result with
// Duplicate set.
func (c *Client) SubmitWorkflow(ctx context.Context, w Workflow) (*WorkflowResult, error) {
	now := c.dep.clock()
	if len(w.Name) > maxWorkflowName || !printable(w.Name) {
		return nil, &WorkflowError{Node: "name", Field: "name", Reason: "must be at most 128 printable characters"}
	}
	if err := workflow.Validate(graphOf(w.Nodes), c.cfg.MaxWorkflowNodes); err != nil {
		return nil, graphError(err)
	}
	key := ""
	if w.IdempotencyKey != "" {
		k, err := idemkey.Normalize(w.IdempotencyKey, MaxIdempotencyKey)
		if err != nil {
			return nil, &ValidationError{Field: "idempotency_key", Message: err.Error()}
		}
		key = k
	}
	nodes, err := c.buildNodes(ctx, w.Nodes, now)
	if err != nil {
		return nil, err
	}
	nw := &rdb.NewWorkflow{Name: w.Name, IdempotencyKey: key, IdemTTL: int64(c.dep.idempotencyTTL / time.Second), Nodes: nodes}
	if w.OnFailure != nil {
		n, err := nodeTask(w.OnFailure, &c.lim, now, "on_failure")
		if err != nil {
			return nil, err
		}
		of, err := c.storedNode(ctx, "on_failure", nil, DepFail, n, now)
		if err != nil {
			return nil, err
		}
		nw.OnFailure = &of
	}
	fp := sha256.New()
	fp.Write([]byte(strconv.Quote(w.Name)))
	for i := range nodes {
		fp.Write([]byte(nodes[i].Digest))
		nw.Retention = max(nw.Retention, nodes[i].Task.Retention)
	}
	if nw.OnFailure != nil {
		fp.Write([]byte("on_failure:" + nw.OnFailure.Digest))
	}
	nw.Fingerprint = hex.EncodeToString(fp.Sum(nil))
	tag := rdb.RandomWorkflowTag()
	if key != "" {
		tag = rdb.WorkflowKeyTag(key)
	}
	nw.ID = rdb.NewWorkflowID(now, tag)
	full, err := c.fullQueue(ctx, nw.Nodes)
	if err != nil {
		return nil, err
	}
	nw.Full = full
	return c.submitWorkflow(ctx, nw, now)
}

// fullQueue finds the first queue that nodes would take past
// MaxQueueDepth, for wf_create (wf_add) to refuse them whole after the
// idempotency (same-definition) check. The depths are read before the
// write, so workflows submitted at the same moment may each pass: a queue
// can go past its bound by at most their nodes.
func (c *Client) fullQueue(ctx context.Context, nodes []rdb.WorkflowNode) (rdb.FullQueue, error) {
	per := map[string]int64{}
	var queues []string
	for i := range nodes {
		q := nodes[i].Queue
		if per[q] == 0 {
			queues = append(queues, q)
		}
		per[q]++
	}
	depths, err := c.rdb.QueueDepths(ctx, queues)
	if err != nil {
		return rdb.FullQueue{}, fmt.Errorf("dtq: workflow: read queue depths: %w", err)
	}
	for _, q := range queues {
		if depths[q]+per[q] > c.cfg.MaxQueueDepth {
			return rdb.FullQueue{Name: q, Depth: depths[q]}, nil
		}
	}
	return rdb.FullQueue{}, nil
}

// printable reports whether s holds only printable ASCII.
func printable(s string) bool {
	for i := range len(s) {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// submitWorkflow runs the steps of a submission after validation (the
// engine's Submit) and answers it.
func (c *Client) submitWorkflow(ctx context.Context, nw *rdb.NewWorkflow, now time.Time) (*WorkflowResult, error) {
	sub, err := c.wf.Submit(ctx, nw, now)
	if u, ok := errors.AsType[*engine.UnansweredError](err); ok {
		return nil, &OutcomeUnknownError{TaskID: nw.ID, Key: nw.IdempotencyKey, Err: u.Err}
	}
	if err != nil {
		return nil, err
	}
	switch cr := sub.Create; cr.Outcome {
	case rdb.WorkflowQueueFull:
		return nil, c.queueFull(ctx, cr.Queue, cr.Depth, c.cfg.MaxQueueDepth, now)
	case rdb.WorkflowInProgress:
		return nil, &WorkflowConflictError{Key: nw.IdempotencyKey, WorkflowID: cr.ID, err: ErrIdempotencyInProgress}
	case rdb.WorkflowMismatch:
		return nil, &WorkflowConflictError{Key: nw.IdempotencyKey, WorkflowID: cr.ID, err: ErrIdempotencyKeyMismatch}
	case rdb.WorkflowDuplicate:
		info, err := engine.Info(ctx, c.rdb, cr.ID)
		if err != nil {
			return nil, err
		}
		res := resultOf(info)
		res.Duplicate = true
		return res, nil
	}
	res := &WorkflowResult{WorkflowID: nw.ID, Status: dtqtype.WorkflowSubmitting, Nodes: make([]NodeRef, len(nw.Nodes))}
	for i, n := range nw.Nodes {
		res.Nodes[i] = NodeRef{Ref: n.Ref, TaskID: n.Task.ID, Status: dtqtype.StatusWaiting}
	}
	st := sub.Start
	if st == nil {
		return res, nil // left to maintenance
	}
	res.Status = dtqtype.WorkflowRunning
	if st.Final != "" {
		res.Status = st.Final
	}
	for _, r := range st.Releases {
		if i := slices.IndexFunc(res.Nodes, func(n NodeRef) bool { return n.Ref == r.Ref }); i >= 0 {
			res.Nodes[i].Status = dtqtype.StatusQueued
			if r.Kind == "cancel" {
				res.Nodes[i].Status = dtqtype.StatusCancelled
			}
		}
	}
	return res, nil
}

// resultOf answers a submission with a stored workflow.
func resultOf(info *dtqtype.WorkflowInfo) *WorkflowResult {
	res := &WorkflowResult{WorkflowID: info.ID, Status: info.Status, Nodes: make([]NodeRef, len(info.Nodes))}
	for i, n := range info.Nodes {
		res.Nodes[i] = NodeRef{Ref: n.Ref, TaskID: n.TaskID, Status: n.Status}
	}
	return res
}
