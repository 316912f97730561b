package dtq

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/internal/cursor"
	"github.com/dtq-io/dtq/internal/rdb"
	"github.com/dtq-io/dtq/internal/workflow"
	"github.com/dtq-io/dtq/internal/workflow/engine"
)

// Deps returns the outcomes of the node's deps by ref, for a task that is
// a workflow node (nil otherwise): each dep's status and, when it
// succeeded, its result.
func (t *Task) Deps() map[string]DepResult {
	if len(t.deps) == 0 {
		return nil
	}
	out := map[string]DepResult{}
	if err := json.Unmarshal(t.deps, &out); err != nil {
		return nil
	}
	return out
}

// NodeLease names the running attempt of a workflow node that adds nodes
// (Client.AddNodes): its task, attempt and worker, and for an HTTP worker
// the claim nonce its lease token carries ("" = not checked).
type NodeLease struct {
	Queue, TaskID string
	Attempt       int
	WorkerID      string
	Claim         string
	// Queues, when not nil, are the only queues the caller may see (an
	// API key's scope): AddNodes then refuses, with a *ScopeError, a node
	// added on another queue and a dep that is a node of another queue,
	// since a node's claim carries its deps' results.
	Queues []string
}

// ScopeError is a fan-out that reaches outside the queues its caller may
// see (NodeLease.Queues): Node is added on Queue, or, when Dep is set,
// Node depends on Dep, an existing node of Queue.
type ScopeError struct {
	Node, Dep, Queue string
}

// Error names the node, the dep if any, and the queue.
func (e *ScopeError) Error() string {
	if e.Dep != "" {
		return fmt.Sprintf("workflow node %s: dep %q is a node of queue %q, outside the caller's queues", e.Node, e.Dep, e.Queue)
	}
	return fmt.Sprintf("workflow node %s: queue %q is outside the caller's queues", e.Node, e.Queue)
}

// nodeKey carries a running node's lease and client in its handler's
// context, for AddNodes.
type nodeKey struct{}

type nodeCtx struct {
	client *Client
	lease  NodeLease
}

// AddNodes adds nodes to the workflow of the node whose handler calls it
// (fan-out): they may depend on existing refs and on each other. Adding a
// ref again with the same definition is no change (a handler that runs
// again after a retry gets the same nodes back); another definition is a
// *WorkflowError matching ErrNodeMismatch. Outside a workflow node's
// handler it fails with ErrInvalidWorkflow.
func AddNodes(ctx context.Context, nodes ...Node) ([]NodeRef, error) {
	nc, ok := ctx.Value(nodeKey{}).(*nodeCtx)
	if !ok {
		return nil, &WorkflowError{Node: "nodes", Reason: "AddNodes is called from the handler of a workflow node"}
	}
	return nc.client.AddNodes(ctx, nc.lease, nodes...)
}

// AddNodes adds nodes to the workflow of the node running under lease (see
// the package function AddNodes, which calls it from a handler; the HTTP
// gateway calls it with a lease token's fields). A lease that is no longer
// held gives ErrLeaseLost; a workflow that ended or is being cancelled,
// ErrWorkflowNotRunning.
func (c *Client) AddNodes(ctx context.Context, lease NodeLease, nodes ...Node) ([]NodeRef, error) {
	if len(nodes) > c.cfg.MaxWorkflowNodes {
		return nil, &WorkflowError{Node: "nodes", Field: "nodes", Reason: fmt.Sprintf("%d nodes in one call; the limit is %d (DTQ_WORKFLOW_MAX_NODES)",
			len(nodes), c.cfg.MaxWorkflowNodes)}
	}
	st, att, worker, claim, wf, err := c.rdb.NodeLease(ctx, lease.Queue, lease.TaskID)
	if err != nil {
		return nil, err
	}
	if st != string(dtqtype.StatusRunning) || att != strconv.Itoa(lease.Attempt) || worker != lease.WorkerID ||
		(lease.Claim != "" && claim != lease.Claim) {
		return nil, ErrLeaseLost
	}
	id, _, ok := cutWorkflow(wf)
	if !ok {
		return nil, &WorkflowError{Node: "nodes", Reason: "the task is not a workflow node"}
	}
	if len(nodes) == 0 {
		// Checked like any fan-out first: an ended lease adds nothing.
		return []NodeRef{}, nil
	}
	// Deps outside the batch are existing nodes (wf_add checks that they
	// exist): a cycle can only run through the batch.
	inBatch := map[string]bool{}
	for _, n := range nodes {
		inBatch[n.Ref] = true
	}
	var existing []workflow.Node
	seen := map[string]bool{}
	for _, n := range nodes {
		for _, d := range n.Deps {
			if !workflow.ValidRef(d) {
				return nil, &WorkflowError{Node: n.Ref, Field: "deps", Reason: fmt.Sprintf("dep %q is not a node of the workflow", d)}
			}
			if !inBatch[d] && !seen[d] {
				seen[d] = true
				existing = append(existing, workflow.Node{Ref: d})
			}
		}
	}
	if _, err := workflow.ValidateAdded(existing, graphOf(nodes), c.cfg.MaxWorkflowNodes+len(existing),
		func(string) bool { return true }); err != nil {
		return nil, graphError(err)
	}
	now := c.dep.clock()
	built, err := c.buildNodes(ctx, nodes, now)
	if err != nil {
		return nil, err
	}
	if lease.Queues != nil {
		if err := c.checkFanOutScope(ctx, id, lease.Queues, nodes, built); err != nil {
			return nil, err
		}
	}
	full, err := c.fullQueue(ctx, built)
	if err != nil {
		return nil, err
	}
	res, done, err := c.wf.Add(ctx, id, now, c.cfg.MaxWorkflowNodes, full, built)
	if err != nil {
		return nil, err
	}
	switch res.Outcome {
	case rdb.WorkflowQueueFull:
		return nil, c.queueFull(ctx, res.Queue, res.Depth, c.cfg.MaxQueueDepth, now)
	case rdb.AddNotFound:
		return nil, ErrWorkflowNotFound
	case rdb.AddNotRunning:
		return nil, fmt.Errorf("%w (%s)", ErrWorkflowNotRunning, res.Status)
	case rdb.AddMismatch:
		return nil, &WorkflowError{Node: res.Ref, Field: "ref", Reason: "the workflow already has a node with this ref and another definition", kind: ErrNodeMismatch}
	case rdb.AddUnknownDep:
		return nil, &WorkflowError{Node: res.Ref, Field: "deps", Reason: fmt.Sprintf("dep %q is not a node of the workflow", res.Dep)}
	case rdb.AddTooMany:
		return nil, &WorkflowError{Node: "nodes", Field: "nodes", Reason: fmt.Sprintf("the workflow would have %d nodes; the limit is %d (DTQ_WORKFLOW_MAX_NODES)",
			res.Total, c.cfg.MaxWorkflowNodes)}
	}
	out := make([]NodeRef, len(res.Nodes))
	for i, n := range res.Nodes {
		out[i] = NodeRef{Ref: n.Ref, TaskID: n.TaskID, Status: dtqtype.StatusWaiting}
	}
	if !done {
		return out, nil // the nodes exist: the sweep writes and releases them
	}
	// The nodes' statuses now.
	refs := make([]rdb.NodeRef, len(out))
	for i, n := range out {
		refs[i] = rdb.NodeRef{Ref: n.Ref, TaskID: n.TaskID, Queue: queueOfNode(res.Nodes[i], built)}
	}
	if sts, err := c.rdb.TaskStatuses(ctx, refs); err == nil {
		for i, st := range sts {
			if st != "" {
				out[i].Status = st
			}
		}
	}
	return out, nil
}

// checkFanOutScope refuses a fan-out, for a caller limited to queues, that
// reaches outside them: a node added on another queue, or a dep that is an
// existing node of another queue (its result would be in the claim of the
// caller's node). A ref's queue never changes once added, so what is read
// here still holds when wf_add runs; a dep the workflow does not have yet
// is refused as unknown, since another fan-out could add it on any queue.
func (c *Client) checkFanOutScope(ctx context.Context, id string, queues []string, nodes []Node, built []rdb.WorkflowNode) error {
	inBatch := map[string]bool{}
	for _, b := range built {
		if !slices.Contains(queues, b.Queue) {
			return &ScopeError{Node: b.Ref, Queue: b.Queue}
		}
		inBatch[b.Ref] = true
	}
	var deps, by []string
	for _, n := range nodes {
		for _, d := range n.Deps {
			if !inBatch[d] {
				inBatch[d] = true // read once
				deps, by = append(deps, d), append(by, n.Ref)
			}
		}
	}
	qs, err := c.rdb.NodeQueues(ctx, id, deps)
	if err != nil {
		return err
	}
	for i, q := range qs {
		switch {
		case q == "":
			return &WorkflowError{Node: by[i], Reason: fmt.Sprintf("dep %q is not a node of the workflow", deps[i])}
		case !slices.Contains(queues, q):
			return &ScopeError{Node: by[i], Dep: deps[i], Queue: q}
		}
	}
	return nil
}

// queueOfNode finds the queue of an added node: its definition's, or the
// batch's for an existing ref (a ref's queue is part of its definition).
func queueOfNode(n rdb.AddedNode, built []rdb.WorkflowNode) string {
	if n.Def != nil {
		return n.Def.Queue
	}
	for _, b := range built {
		if b.Ref == n.Ref {
			return b.Queue
		}
	}
	return ""
}

// cutWorkflow splits a task's wf field into workflow id and ref.
func cutWorkflow(wf string) (id, ref string, ok bool) {
	if len(wf) < 34 || wf[32] != ':' {
		return "", "", false
	}
	return wf[:32], wf[33:], true
}

// GetWorkflow returns workflow id: its status, counts and each node with
// its task's status. ErrWorkflowNotFound for an unknown or expired one.
func (i *Inspector) GetWorkflow(ctx context.Context, id string) (*dtqtype.WorkflowInfo, error) {
	return engine.Info(ctx, i.rdb, id)
}

// WaitWorkflow returns workflow id once it has ended, or as it is when
// timeout passes; when ctx ends first it returns ctx's error and no
// workflow. While it waits it reads only the workflow's status (one
// small read, backing off from 20 ms to 500 ms); the whole graph is read
// once, when the wait ends, so that waiting on a large workflow costs no
// more than on a small one.
func (i *Inspector) WaitWorkflow(ctx context.Context, id string, timeout time.Duration) (*dtqtype.WorkflowInfo, error) {
	if timeout <= 0 {
		return engine.Info(ctx, i.rdb, id)
	}
	ended := func() (bool, error) {
		st, err := workflowStatus(ctx, i.rdb, id)
		return err == nil && st.Terminal(), err
	}
	done, err := ended()
	if err != nil {
		return nil, err
	}
	if done {
		return engine.Info(ctx, i.rdb, id)
	}
	end, err := poll(ctx, timeout, 20*time.Millisecond, 500*time.Millisecond, ended)
	switch {
	case end == pollCancelled:
		return nil, ctx.Err()
	case err != nil:
		return nil, err
	}
	return engine.Info(ctx, i.rdb, id)
}

// workflowStatus reads only workflow id's status: ErrWorkflowNotFound for
// an unknown or expired one.
func workflowStatus(ctx context.Context, r *rdb.RDB, id string) (dtqtype.WorkflowStatus, error) {
	if !rdb.ValidWorkflowID(id) {
		return "", ErrWorkflowNotFound
	}
	heads, err := r.ReadWorkflowStatus(ctx, []string{id})
	if err != nil {
		return "", err
	}
	if heads[0].Status == "" {
		return "", ErrWorkflowNotFound
	}
	return heads[0].Status, nil
}

// WorkflowListParams select and page Inspector.ListWorkflows.
type WorkflowListParams = dtqtype.WorkflowListParams

// maxListScan bounds the index entries one listing call examines.
const maxListScan = 5000

// ListWorkflows returns a page of workflows, newest first. A call examines
// at most 5000 index entries, so a filtered page may be short, even empty,
// while more remain. A bad filter or Limit is a *ValidationError, a bad
// cursor ErrInvalidCursor.
func (i *Inspector) ListWorkflows(ctx context.Context, params *WorkflowListParams) (*dtqtype.ListResult[*dtqtype.WorkflowSummary], error) {
	p := listParams(params)
	if err := checkList(&p.Limit, 50, ""); err != nil {
		return nil, err
	}
	if p.Status != "" && !slices.Contains(dtqtype.WorkflowStatuses, p.Status) {
		return nil, invalid("status", "must be one of %v", dtqtype.WorkflowStatuses)
	}
	after := ""
	if p.Cursor != "" {
		r := cursor.Read(p.Cursor, cursor.Workflows)
		after = r.String(rdb.ValidWorkflowID)
		if err := r.Err(); err != nil {
			return nil, err
		}
	}
	out := &dtqtype.ListResult[*dtqtype.WorkflowSummary]{Items: []*dtqtype.WorkflowSummary{}}
	for scanned := 0; scanned < maxListScan; {
		ids, err := i.rdb.WorkflowIndexPage(ctx, after, min(500, maxListScan-scanned))
		if err != nil {
			return nil, err
		}
		if len(ids) == 0 {
			return out, nil
		}
		heads, err := i.rdb.ReadWorkflowStatus(ctx, ids)
		if err != nil {
			return nil, err
		}
		var gone []string
		for j, id := range ids {
			scanned++
			after = id
			switch {
			case heads[j].Status == "":
				gone = append(gone, id)
				continue
			case p.Status != "" && heads[j].Status != p.Status, p.Name != "" && heads[j].Name != p.Name:
				continue
			}
			out.Items = append(out.Items, &heads[j])
			if len(out.Items) == p.Limit {
				break
			}
		}
		_ = i.rdb.DropFromWorkflowIndex(ctx, gone)
		if len(out.Items) == p.Limit {
			break
		}
	}
	out.NextCursor = cursor.Encode(cursor.Workflows, after)
	return out, nil
}

// CancelWorkflow cancels workflow id: every node not ended is cancelled
// (running ones get a cancel request, as CancelTask), and the workflow ends
// cancelled once its last node has. A workflow that already ended is left
// as it is, with ended true. ErrWorkflowNotFound for an unknown one.
func (a *Admin) CancelWorkflow(ctx context.Context, id string) (info *dtqtype.WorkflowInfo, ended bool, err error) {
	if !rdb.ValidWorkflowID(id) {
		return nil, false, ErrWorkflowNotFound
	}
	ended, err = a.client.wf.Cancel(ctx, id)
	if err != nil {
		return nil, false, err
	}
	info, err = engine.Info(ctx, a.rdb, id)
	return info, ended, err
}
