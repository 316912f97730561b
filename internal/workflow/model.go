package workflow

import (
	"fmt"

	"github.com/dtq-io/dtq/dtqtype"
)

// Waiting is the status of a node some of whose deps have not ended yet.
const Waiting = dtqtype.StatusWaiting

// DependencyFailed is the error class of a node cancelled because a dep
// ended other than succeeded and its policy is Fail.
const DependencyFailed = "DependencyFailed"

// Status is a workflow's status.
type Status string

// Workflow statuses.
const (
	Running   Status = "running"
	Succeeded Status = "succeeded"
	Failed    Status = "failed"
	Cancelled Status = "cancelled"
)

// Model is a workflow's graph state changed one operation at a time: each
// ended dep is counted once against each dependant (O(1) per dep), a dep
// that ends other than succeeded resolves its Fail dependants at once, and
// no node is left waiting on a dep that has ended. Tests replay histories
// against it.
type Model struct {
	nodes     map[string]*modelNode
	order     []string // refs in the order they were added
	cancelled bool     // the workflow was cancelled
	forced    bool     // a node was cancelled on its own: the workflow fails
}

type modelNode struct {
	Node
	status     dtqtype.Status // Waiting, dtqtype.StatusQueued (released), or terminal
	pending    int            // deps not ended yet
	depFailed  bool           // a dep ended other than succeeded
	dependants []string
	byDep      bool // cancelled because of a dep (DependencyFailed)
}

// NewModel starts a workflow of nodes, which must pass Validate: nodes
// without deps are released (queued) at once, the others wait.
func NewModel(nodes []Node) *Model {
	m := &Model{nodes: make(map[string]*modelNode, len(nodes))}
	m.Add(nodes)
	return m
}

// Add adds nodes to the running workflow (fan-out from a running node;
// NewModel's nodes come this way too) and returns the refs released at
// once and those cancelled at once because a dep had already failed.
// nodes must pass ValidateAdded.
func (m *Model) Add(nodes []Node) (released, cancelled []string) {
	for i := range nodes {
		n := &modelNode{Node: nodes[i], status: Waiting}
		m.nodes[n.Ref] = n
		m.order = append(m.order, n.Ref)
	}
	for i := range nodes {
		n := m.nodes[nodes[i].Ref]
		for _, d := range n.Deps {
			dep := m.nodes[d]
			dep.dependants = append(dep.dependants, n.Ref)
			switch {
			case !dep.status.Terminal():
				n.pending++
			case dep.status != dtqtype.StatusSucceeded:
				n.depFailed = true
			}
		}
	}
	for i := range nodes {
		n := m.nodes[nodes[i].Ref]
		if n.status != Waiting {
			continue // cancelled by a new dep cancelled just now
		}
		if n.depFailed && n.policy() == Fail {
			r, c := m.cancelByDep(n)
			released, cancelled = append(released, r...), append(cancelled, c...)
			continue
		}
		if n.pending == 0 {
			n.status = dtqtype.StatusQueued
			released = append(released, n.Ref)
		}
	}
	return released, cancelled
}

// End records that node ref's task ended with status (terminal) and
// resolves its dependants: it returns the refs released (queued) and
// those cancelled with DependencyFailed, in the order it resolved them.
// Only a released node can end; a node ended cancelled on its own (a
// cancel of that node) makes the workflow fail.
func (m *Model) End(ref string, status dtqtype.Status) (released, cancelled []string, err error) {
	n, ok := m.nodes[ref]
	switch {
	case !ok:
		return nil, nil, fmt.Errorf("no node %q", ref)
	case !status.Terminal():
		return nil, nil, fmt.Errorf("node %q: %s is not an end", ref, status)
	case n.status != dtqtype.StatusQueued:
		return nil, nil, fmt.Errorf("node %q is %s, not released", ref, n.status)
	}
	n.status = status
	if status == dtqtype.StatusCancelled {
		m.forced = true
	}
	released, cancelled = m.resolve(n)
	return released, cancelled, nil
}

// resolve counts n's end against each of its dependants.
func (m *Model) resolve(n *modelNode) (released, cancelled []string) {
	for _, r := range n.dependants {
		d := m.nodes[r]
		if d.status != Waiting {
			continue // already resolved by another dep's failure
		}
		d.pending--
		if n.status != dtqtype.StatusSucceeded {
			d.depFailed = true
			if d.policy() == Fail {
				r, c := m.cancelByDep(d)
				released, cancelled = append(released, r...), append(cancelled, c...)
				continue
			}
		}
		if d.pending == 0 {
			d.status = dtqtype.StatusQueued
			released = append(released, d.Ref)
		}
	}
	return released, cancelled
}

// cancelByDep ends waiting node n cancelled with DependencyFailed and
// resolves its own dependants in turn (a Continue dependant of n may be
// released by it).
func (m *Model) cancelByDep(n *modelNode) (released, cancelled []string) {
	n.status, n.byDep = dtqtype.StatusCancelled, true
	released, cancelled = m.resolve(n)
	return released, append([]string{n.Ref}, cancelled...)
}

// Cancel cancels the workflow: every node not ended yet ends cancelled.
// It returns those refs.
func (m *Model) Cancel() []string {
	m.cancelled = true
	var out []string
	for _, r := range m.order {
		if n := m.nodes[r]; !n.status.Terminal() {
			n.status = dtqtype.StatusCancelled
			out = append(out, r)
		}
	}
	return out
}

// NodeStatus is node ref's status: Waiting, queued (released), or its end.
func (m *Model) NodeStatus(ref string) dtqtype.Status { return m.nodes[ref].status }

// CancelledByDep reports whether node ref was cancelled with
// DependencyFailed.
func (m *Model) CancelledByDep(ref string) bool { return m.nodes[ref].byDep }

// Status is the workflow's status: Running until every node has ended;
// then Cancelled if it was cancelled, Succeeded if every node succeeded or
// ended otherwise only where each of its dependants said Continue, else
// Failed.
func (m *Model) Status() Status {
	for _, r := range m.order {
		if !m.nodes[r].status.Terminal() {
			return Running
		}
	}
	switch {
	case m.cancelled:
		return Cancelled
	case m.forced:
		return Failed
	}
	for _, r := range m.order {
		n := m.nodes[r]
		if n.status == dtqtype.StatusSucceeded {
			continue
		}
		if len(n.dependants) == 0 {
			return Failed
		}
		for _, d := range n.dependants {
			if m.nodes[d].policy() != Continue {
				return Failed
			}
		}
	}
	return Succeeded
}

// FailedRefs are the refs of nodes that ended other than succeeded,
// dependants cancelled with DependencyFailed included, in the order they
// were added: what on_failure's payload names.
func (m *Model) FailedRefs() []string {
	var out []string
	for _, r := range m.order {
		if s := m.nodes[r].status; s.Terminal() && s != dtqtype.StatusSucceeded {
			out = append(out, r)
		}
	}
	return out
}
