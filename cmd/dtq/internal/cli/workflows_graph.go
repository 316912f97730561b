package cli

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/dtq-io/dtq/dtqtype"
)

// Bounds of the graph's text rendering, so that a workflow of 10,000 nodes
// (a wide fan-out, a long chain, a 10,000-dep join) prints a screenful,
// not a file.
const (
	// graphLayerNodes is the most nodes a layer lists one by one; a wider
	// layer shows its counts by status.
	graphLayerNodes = 50
	// graphLayers is the most layers shown; deeper ones are summed up in
	// one line.
	graphLayers = 100
	// graphNodeDeps is the most deps a node line names.
	graphNodeDeps = 8
)

// graphLayers groups a workflow's nodes in layers by dependency depth:
// layer 0 holds the nodes without deps, layer k the nodes whose deepest dep
// is in layer k-1. Each layer lists node indexes in the workflow's order.
// Deps on refs the workflow does not hold are ignored; nodes on a cycle
// (which the API refuses, so only a corrupt record has one) go to one
// layer after the others.
func graphLayersOf(nodes []dtqtype.WorkflowNodeInfo) [][]int {
	index := make(map[string]int, len(nodes))
	for i, n := range nodes {
		if _, dup := index[n.Ref]; !dup {
			index[n.Ref] = i
		}
	}
	// Kahn's algorithm, iterative: a 10,000-node chain needs no deep
	// recursion. left[i] counts node i's known deps not yet placed.
	left := make([]int, len(nodes))
	dependants := make([][]int, len(nodes))
	for i, n := range nodes {
		for _, d := range n.Deps {
			if j, ok := index[d]; ok && j != i {
				left[i]++
				dependants[j] = append(dependants[j], i)
			}
		}
	}
	depth := make([]int, len(nodes))
	ready := make([]int, 0, len(nodes))
	for i := range nodes {
		if left[i] == 0 {
			ready = append(ready, i)
		}
	}
	placed, deepest := 0, -1
	for len(ready) > 0 {
		i := ready[0]
		ready = ready[1:]
		placed++
		deepest = max(deepest, depth[i])
		for _, k := range dependants[i] {
			depth[k] = max(depth[k], depth[i]+1)
			if left[k]--; left[k] == 0 {
				ready = append(ready, k)
			}
		}
	}
	if placed < len(nodes) { // a cycle: its nodes after every other
		for i := range nodes {
			if left[i] > 0 {
				depth[i] = deepest + 1
			}
		}
		deepest++
	}
	layers := make([][]int, deepest+1)
	for i := range nodes {
		layers[depth[i]] = append(layers[depth[i]], i)
	}
	return layers
}

// graphLines renders a workflow's graph: a heading, then each layer's
// nodes as "ref [status]" with their deps, within the bounds above.
func graphLines(nodes []dtqtype.WorkflowNodeInfo) []string {
	if len(nodes) == 0 {
		return []string{"GRAPH (no nodes)"}
	}
	layers := graphLayersOf(nodes)
	out := []string{fmt.Sprintf("GRAPH (%s in %s by dependency depth)", plural(len(nodes), "node"), plural(len(layers), "layer"))}
	for k, layer := range layers {
		if k == graphLayers {
			rest, counts := 0, map[dtqtype.Status]int{}
			for _, l := range layers[k:] {
				for _, i := range l {
					rest++
					counts[nodes[i].Status]++
				}
			}
			out = append(out, fmt.Sprintf("layers %d..%d: %s: %s", k, len(layers)-1, plural(rest, "node"), countsText(counts)))
			break
		}
		if len(layer) > graphLayerNodes {
			counts := map[dtqtype.Status]int{}
			for _, i := range layer {
				counts[nodes[i].Status]++
			}
			out = append(out, fmt.Sprintf("layer %d: %d nodes: %s", k, len(layer), countsText(counts)))
			continue
		}
		out = append(out, fmt.Sprintf("layer %d", k))
		for _, i := range layer {
			out = append(out, "  "+nodeLine(&nodes[i]))
		}
	}
	return out
}

// nodeLine is "ref [status]", "ref [cancelled: DependencyFailed]", and
// " <- dep, dep" naming at most graphNodeDeps of its deps.
func nodeLine(n *dtqtype.WorkflowNodeInfo) string {
	var b strings.Builder
	b.WriteString(cell(n.Ref))
	b.WriteString(" [")
	b.WriteString(string(n.Status))
	if n.ErrorClass != "" {
		b.WriteString(": ")
		b.WriteString(cell(n.ErrorClass))
	}
	b.WriteString("]")
	if len(n.Deps) > 0 {
		b.WriteString("  <- ")
		shown := n.Deps[:min(len(n.Deps), graphNodeDeps)]
		for i, d := range shown {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(cell(d))
		}
		if more := len(n.Deps) - len(shown); more > 0 {
			b.WriteString(", … +" + strconv.Itoa(more) + " more")
		}
	}
	return b.String()
}

// nodeState is what a watch compares of a node between two reads.
type nodeState struct {
	status     dtqtype.Status
	errorClass string
}

// workflowChanges lists what changed from before to now as lines (no
// time stamp): the workflow's status or cancel request, each node added or
// whose status changed, in the workflow's order; past graphLayerNodes
// node changes, the rest as counts of their new statuses.
func workflowChanges(before, now *workflowView) []string {
	var out []string
	if before.Status != now.Status {
		out = append(out, fmt.Sprintf("workflow %s -> %s", before.Status, now.Status))
	}
	if now.CancelRequested && !before.CancelRequested {
		out = append(out, "workflow cancel requested")
	}
	was := make(map[string]nodeState, len(before.Nodes))
	for _, n := range before.Nodes {
		was[n.Ref] = nodeState{n.Status, n.ErrorClass}
	}
	changed, rest := 0, map[dtqtype.Status]int{}
	for i := range now.Nodes {
		n := &now.Nodes[i]
		old, seen := was[n.Ref]
		if seen && old == (nodeState{n.Status, n.ErrorClass}) {
			continue
		}
		if changed++; changed > graphLayerNodes {
			rest[n.Status]++
			continue
		}
		if !seen {
			out = append(out, "added "+nodeLine(n))
			continue
		}
		to := string(n.Status)
		if n.ErrorClass != "" {
			to += ": " + cell(n.ErrorClass)
		}
		out = append(out, fmt.Sprintf("%s %s -> %s", cell(n.Ref), old.status, to))
	}
	if changed > graphLayerNodes {
		out = append(out, fmt.Sprintf("%d more nodes changed, now: %s", changed-graphLayerNodes, countsText(rest)))
	}
	return out
}

// plural is "1 node", "2 nodes".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}
