// Package workflow holds what a workflow (a DAG of tasks submitted as one
// unit) is as a graph, apart from its tasks: the rules a submitted graph
// must satisfy, and the reference model of how a node's end resolves its
// dependants and when the workflow ends. dtq's Client checks a submitted
// workflow against the rules; the tests hold the workflow scripts to the
// model. internal/workflow/engine runs workflows.
package workflow

import (
	"fmt"
	"regexp"
	"slices"
)

// DefaultMaxNodes is the default bound on a workflow's nodes
// (DTQ_WORKFLOW_MAX_NODES).
const DefaultMaxNodes = 10000

// Policy is what a node does when one of its deps ends other than
// succeeded (on_dep_failure).
type Policy string

const (
	// Fail ends the node cancelled (error class DependencyFailed), without
	// running it; the default.
	Fail Policy = "fail"
	// Continue runs the node anyway once every dep has ended; it sees each
	// dep's outcome.
	Continue Policy = "continue"
)

// Node is one node of a workflow as a graph: its ref, the refs it depends
// on and its policy. The task it runs is not described here.
type Node struct {
	Ref          string
	Deps         []string
	OnDepFailure Policy // "" means Fail
}

// policy is n's policy with the default applied.
func (n *Node) policy() Policy {
	if n.OnDepFailure == "" {
		return Fail
	}
	return n.OnDepFailure
}

// Error is a graph that cannot be a workflow: Node names the node (its ref,
// or "nodes[i]" when the ref itself is wrong), Field the member to blame
// (ref, deps, on_dep_failure; nodes for the whole list), Reason says why.
type Error struct {
	Node   string
	Field  string
	Reason string
}

func (e *Error) Error() string { return fmt.Sprintf("workflow node %s: %s", e.Node, e.Reason) }

// refPattern is a node ref's form.
var refPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,63}$`)

// ValidRef reports whether ref is a well-formed node ref.
func ValidRef(ref string) bool { return refPattern.MatchString(ref) }

// Validate checks nodes as a whole workflow: at least one node and at most
// maxNodes (0 = DefaultMaxNodes), refs well formed and unique, deps naming
// other nodes of the workflow each at most once, policies known, and no
// cycle. The first problem found is returned as an *Error.
func Validate(nodes []Node, maxNodes int) error {
	if maxNodes <= 0 {
		maxNodes = DefaultMaxNodes
	}
	switch {
	case len(nodes) == 0:
		return &Error{Node: "nodes", Field: "nodes", Reason: "a workflow needs at least one node"}
	case len(nodes) > maxNodes:
		return &Error{Node: "nodes", Field: "nodes", Reason: fmt.Sprintf("%d nodes; the limit is %d (DTQ_WORKFLOW_MAX_NODES)", len(nodes), maxNodes)}
	}
	return check(nodes, nil)
}

// ValidateAdded checks nodes added to a running workflow whose nodes are
// existing: the same rules as Validate over the union, except that a node
// whose ref and definition equal an existing node's is no change (a
// handler adding its nodes again after a retry). Telling whether a
// definition is the same is the caller's, with same; a different one is
// an *Error.
func ValidateAdded(existing, added []Node, maxNodes int, same func(ref string) bool) (fresh []Node, err error) {
	if maxNodes <= 0 {
		maxNodes = DefaultMaxNodes
	}
	known := make(map[string]bool, len(existing))
	for i := range existing {
		known[existing[i].Ref] = true
	}
	seen := map[string]bool{}
	for i := range added {
		ref := added[i].Ref
		if !ValidRef(ref) {
			return nil, &Error{Node: fmt.Sprintf("nodes[%d]", i), Field: "ref", Reason: refReason(ref)}
		}
		if seen[ref] {
			return nil, &Error{Node: ref, Field: "ref", Reason: "ref used twice"}
		}
		seen[ref] = true
		if known[ref] {
			if !same(ref) {
				return nil, &Error{Node: ref, Field: "ref", Reason: "the workflow already has a node with this ref and another definition"}
			}
			continue
		}
		fresh = append(fresh, added[i])
	}
	if len(existing)+len(fresh) > maxNodes {
		return nil, &Error{Node: "nodes", Field: "nodes", Reason: fmt.Sprintf("the workflow would have %d nodes; the limit is %d (DTQ_WORKFLOW_MAX_NODES)",
			len(existing)+len(fresh), maxNodes)}
	}
	// Existing nodes cannot depend on new ones, so a cycle can only run
	// through new nodes: checking the new ones, with existing refs as
	// known leaves, finds it.
	return fresh, check(fresh, known)
}

func refReason(ref string) string {
	if ref == "" {
		return "ref is missing"
	}
	return fmt.Sprintf("ref %q must be 1..64 of a-z 0-9 _ . - starting with a letter or digit", ref)
}

// check validates nodes whose deps may also name outside (refs that exist
// already and end the search).
func check(nodes []Node, outside map[string]bool) error {
	index := make(map[string]int, len(nodes))
	for i := range nodes {
		n := &nodes[i]
		if !ValidRef(n.Ref) {
			return &Error{Node: fmt.Sprintf("nodes[%d]", i), Field: "ref", Reason: refReason(n.Ref)}
		}
		if _, dup := index[n.Ref]; dup || outside[n.Ref] {
			return &Error{Node: n.Ref, Field: "ref", Reason: "ref used twice"}
		}
		index[n.Ref] = i
		switch n.OnDepFailure {
		case "", Fail, Continue:
		default:
			return &Error{Node: n.Ref, Field: "on_dep_failure", Reason: fmt.Sprintf("on_dep_failure %q must be \"fail\" or \"continue\"", n.OnDepFailure)}
		}
	}
	for i := range nodes {
		n := &nodes[i]
		seen := make(map[string]bool, len(n.Deps))
		for _, d := range n.Deps {
			switch {
			case d == n.Ref:
				return &Error{Node: n.Ref, Field: "deps", Reason: "depends on itself"}
			case seen[d]:
				return &Error{Node: n.Ref, Field: "deps", Reason: fmt.Sprintf("dep %q listed twice", d)}
			}
			seen[d] = true
			if _, ok := index[d]; !ok && !outside[d] {
				return &Error{Node: n.Ref, Field: "deps", Reason: fmt.Sprintf("dep %q is not a node of the workflow", d)}
			}
		}
	}
	if ref, ok := cycle(nodes, index); ok {
		return &Error{Node: ref, Field: "deps", Reason: "is on a dependency cycle"}
	}
	return nil
}

// cycle finds a node on a dependency cycle, if there is one, by Kahn's
// algorithm: nodes never freed of their deps are on or behind a cycle,
// and following unfreed deps from one of them reaches the cycle itself.
func cycle(nodes []Node, index map[string]int) (string, bool) {
	waiting := make([]int, len(nodes))
	dependants := make([][]int, len(nodes))
	for i := range nodes {
		for _, d := range nodes[i].Deps {
			if j, ok := index[d]; ok {
				waiting[i]++
				dependants[j] = append(dependants[j], i)
			}
		}
	}
	ready := make([]int, 0, len(nodes))
	for i, w := range waiting {
		if w == 0 {
			ready = append(ready, i)
		}
	}
	freed := 0
	for len(ready) > 0 {
		i := ready[len(ready)-1]
		ready = ready[:len(ready)-1]
		freed++
		for _, j := range dependants[i] {
			if waiting[j]--; waiting[j] == 0 {
				ready = append(ready, j)
			}
		}
	}
	if freed == len(nodes) {
		return "", false
	}
	// Walk unfreed deps until a node repeats: that node is on a cycle.
	at := slices.IndexFunc(waiting, func(w int) bool { return w > 0 })
	visited := map[int]bool{}
	for !visited[at] {
		visited[at] = true
		for _, d := range nodes[at].Deps {
			if j, ok := index[d]; ok && waiting[j] > 0 {
				at = j
				break
			}
		}
	}
	return nodes[at].Ref, true
}
