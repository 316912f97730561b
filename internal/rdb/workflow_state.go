package rdb

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/dtq-io/dtq/dtqtype"
)

// WorkflowState is a workflow's record as its engine and readers see it:
// the fields of the record hash decoded, so that no caller names them.
type WorkflowState struct {
	Status     dtqtype.WorkflowStatus
	Name       string
	CreatedAt  int64 // ms
	FinishedAt int64 // ms; 0 while it runs
	// CancelRequested is set once a cancel was asked for (wf_cancel).
	CancelRequested bool
	// OnFailureTaskID is the on_failure task submitted for it ("" while
	// none is).
	OnFailureTaskID string
	// What WorkflowNote recorded as done outside the workflow's slot:
	// WORKFLOW_STARTED emitted, its end event emitted, in the listing
	// index.
	StartedEmitted, EndedEmitted, Listed bool
	// onFailure is the on_failure node's definition JSON ("" = none).
	onFailure string
}

// OnFailure is the workflow's on_failure node as submitted, nil when it
// has none.
func (s *WorkflowState) OnFailure() (*WorkflowNode, error) {
	if s.onFailure == "" {
		return nil, nil //nolint:nilnil // no on_failure is not an error
	}
	var n WorkflowNode
	if err := json.Unmarshal([]byte(s.onFailure), &n); err != nil {
		return nil, err
	}
	return &n, nil
}

// stateFields are the record fields WorkflowState holds.
var stateFields = []string{"status", "name", "created_at", "finished_at", "cancel", "of", NoteOnFailure,
	NoteStarted, NoteEnded, NoteListed}

// stateOf decodes the record fields f (those of stateFields; a missing one
// reads "").
func stateOf(f map[string]string) WorkflowState {
	ms := func(k string) int64 { n, _ := strconv.ParseInt(f[k], 10, 64); return n }
	return WorkflowState{Status: dtqtype.WorkflowStatus(f["status"]), Name: f["name"], CreatedAt: ms("created_at"),
		FinishedAt: ms("finished_at"), CancelRequested: f["cancel"] == "1", OnFailureTaskID: f[NoteOnFailure],
		StartedEmitted: f[NoteStarted] != "", EndedEmitted: f[NoteEnded] != "", Listed: f[NoteListed] != "",
		onFailure: f["of"]}
}

// ReadWorkflowState reads workflow id's record, without its graph (one
// small read); ErrWorkflowNotFound when it does not exist.
func (r *RDB) ReadWorkflowState(ctx context.Context, id string) (*WorkflowState, error) {
	v, err := r.c.HMGet(ctx, r.keys.Workflow(id), stateFields...).Result()
	if err != nil {
		return nil, err
	}
	f := make(map[string]string, len(stateFields))
	for i, name := range stateFields {
		if s, ok := v[i].(string); ok {
			f[name] = s
		}
	}
	if _, ok := f["status"]; !ok {
		return nil, ErrWorkflowNotFound
	}
	s := stateOf(f)
	return &s, nil
}

// NodeReleased is the status a workflow records for a node it released,
// until the node's end reaches it: its task's own status says more.
const NodeReleased dtqtype.Status = "released"

// GraphNode is one node of a workflow's graph as the workflow records it.
type GraphNode struct {
	Ref, TaskID, Queue string
	Deps               []string // the refs it waits for
	// Status is waiting, NodeReleased, or the status its task ended with.
	Status dtqtype.Status
	// ErrorClass is the error class its end recorded ("" for none).
	ErrorClass string
}

// WorkflowGraph is a workflow's record and its nodes.
type WorkflowGraph struct {
	WorkflowState
	Nodes []GraphNode // in no particular order
}

// ReadWorkflow reads workflow id's record and graph; ErrWorkflowNotFound
// when it does not exist.
func (r *RDB) ReadWorkflow(ctx context.Context, id string) (*WorkflowGraph, error) {
	k := r.keys
	pipe := r.c.Pipeline()
	w := pipe.HGetAll(ctx, k.Workflow(id))
	n := pipe.HGetAll(ctx, k.WorkflowNodes(id))
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, err
	}
	if len(w.Val()) == 0 {
		return nil, ErrWorkflowNotFound
	}
	g := &WorkflowGraph{WorkflowState: stateOf(w.Val())}
	nodes := n.Val()
	for f, st := range nodes {
		ref, ok := strings.CutPrefix(f, "s:")
		if !ok {
			continue
		}
		gn := GraphNode{Ref: ref, TaskID: nodes["t:"+ref], Queue: nodes["q:"+ref], Status: dtqtype.Status(st)}
		if d := nodes["d:"+ref]; d != "" {
			_ = json.Unmarshal([]byte(d), &gn.Deps)
		}
		if o := nodes["o:"+ref]; o != "" {
			var end struct {
				ErrorClass string `json:"error_class"`
			}
			if json.Unmarshal([]byte(o), &end) == nil {
				gn.ErrorClass = end.ErrorClass
			}
		}
		g.Nodes = append(g.Nodes, gn)
	}
	return g, nil
}
