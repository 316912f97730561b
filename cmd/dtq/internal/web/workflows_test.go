package web_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// wfNode is one node of a workflow the tests submit.
type wfNode struct {
	Ref      string         `json:"ref"`
	TaskType string         `json:"task_type"`
	Queue    string         `json:"queue,omitempty"`
	Payload  map[string]any `json:"payload,omitempty"`
	Deps     []string       `json:"deps,omitempty"`
	DelayMS  int64          `json:"delay_ms,omitempty"`
}

// wfAnswer is the part of a workflow answer the tests look at.
type wfAnswer struct {
	WorkflowID string `json:"workflow_id"`
	Status     string `json:"status"`
	Nodes      []struct {
		Ref    string `json:"ref"`
		TaskID string `json:"task_id"`
		Status string `json:"status"`
	} `json:"nodes"`
}

// taskOf returns the task id of a node.
func (w wfAnswer) taskOf(t *testing.T, ref string) string {
	t.Helper()
	for _, n := range w.Nodes {
		if n.Ref == ref {
			return n.TaskID
		}
	}
	t.Fatalf("workflow %s has no node %s", w.WorkflowID, ref)
	return ""
}

// submitWorkflow posts a workflow through the API.
func (b *bundle) submitWorkflow(t *testing.T, name string, nodes []wfNode) wfAnswer {
	t.Helper()
	body, err := json.Marshal(map[string]any{"name": name, "nodes": nodes})
	require.NoError(t, err)
	var w wfAnswer
	require.Equal(t, http.StatusAccepted, b.call(t, http.MethodPost, "/api/v1/workflows", string(body), &w))
	return w
}

func (b *bundle) workflow(t *testing.T, id string) wfAnswer {
	t.Helper()
	var w wfAnswer
	require.Equal(t, http.StatusOK, b.call(t, http.MethodGet, "/api/v1/workflows/"+id, "", &w))
	return w
}

// waitWorkflow polls the API until the workflow has the status.
func (b *bundle) waitWorkflow(t *testing.T, id, status string) {
	t.Helper()
	require.Eventually(t, func() bool { return b.workflow(t, id).Status == status },
		20*time.Second, 25*time.Millisecond, "workflow %s never became %s", id, status)
}

// layered builds a workflow of layers × width nodes ("n<layer>-<i>"), each
// node past the first layer depending on two nodes of the layer before,
// picked so that the submission order crosses many edges. The first
// layer's nodes are delayed for an hour, so nothing runs.
func layered(layers, width int) []wfNode {
	var nodes []wfNode
	for l := range layers {
		for i := range width {
			n := wfNode{Ref: fmt.Sprintf("n%d-%d", l, i), TaskType: "echo"}
			if l == 0 {
				n.DelayMS = 3600000
			} else {
				a, c := (i*7+l)%width, (i*13+3*l+1)%width
				n.Deps = []string{fmt.Sprintf("n%d-%d", l-1, a), fmt.Sprintf("n%d-%d", l-1, c)}
			}
			nodes = append(nodes, n)
		}
	}
	return nodes
}

// TestWorkflowLayout checks the graph layout the workflow page draws:
// layers by dependency depth, crossings reduced by the barycenter sweeps,
// and the bounds past which a graph is summarized.
func TestWorkflowLayout(t *testing.T) {
	t.Parallel()
	tb := scriptTab(t)
	type result struct {
		Layers    [][]string `json:"layers"`
		Crossings int        `json:"crossings"`
		Before    int        `json:"before"`
		Fits      bool       `json:"fits"`
		Widest    int        `json:"widest"`
		Edges     int        `json:"edges"`
	}
	tests := []struct {
		name  string
		nodes string // a JS array of {ref, deps}
		want  result
	}{
		{"one node", `[{ref: 'a'}]`,
			result{Layers: [][]string{{"a"}}, Fits: true, Widest: 1}},
		{"depth is the longest path", `[{ref: 'a'}, {ref: 'b', deps: ['a']}, {ref: 'c', deps: ['a', 'b']}, {ref: 'd'}]`,
			result{Layers: [][]string{{"a", "d"}, {"b"}, {"c"}}, Fits: true, Widest: 2, Edges: 3}},
		{"a crossing is removed", `[{ref: 'a'}, {ref: 'b'}, {ref: 'c', deps: ['b']}, {ref: 'd', deps: ['a']}]`,
			result{Layers: [][]string{{"a", "b"}, {"d", "c"}}, Before: 1, Fits: true, Widest: 2, Edges: 2}},
		{"a diamond needs no change", `[{ref: 'a'}, {ref: 'b', deps: ['a']}, {ref: 'c', deps: ['a']}, {ref: 'd', deps: ['b', 'c']}]`,
			result{Layers: [][]string{{"a"}, {"b", "c"}, {"d"}}, Fits: true, Widest: 2, Edges: 4}},
		{"unknown deps and repeats are ignored", `[{ref: 'a', deps: ['zz', 'a']}, {ref: 'b', deps: ['a', 'a']}]`,
			result{Layers: [][]string{{"a"}, {"b"}}, Fits: true, Widest: 1, Edges: 1}},
		{"nodes on a cycle are kept, after the rest", `[{ref: 'a'}, {ref: 'b', deps: ['c']}, {ref: 'c', deps: ['b']}]`,
			result{Layers: [][]string{{"a"}, {"b", "c"}}, Fits: true, Widest: 2, Edges: 2}},
		{"a layer wider than 100 is summarized", `[{ref: 'r'}, ...Array.from({length: 101}, (_, i) => ({ref: 'c' + i, deps: ['r']}))]`,
			result{Fits: false, Widest: 101, Edges: 101}},
		{"more than 500 nodes are summarized", `Array.from({length: 501}, (_, i) => ({ref: 'n' + i, deps: i % 100 ? ['n' + (i - 1)] : []}))`,
			result{Fits: false, Widest: 6, Edges: 495}},
	}
	for _, tt := range tests {
		got := run[result](tb, fmt.Sprintf(`const {layout, layers, crossings} = await mod('dag.js');
			const nodes = %s;
			const lay = layout(nodes);
			const init = layers(nodes);
			const before = crossings(init.layers, new Map(nodes.map(n => [n.ref, n])), init.depth);
			return {layers: lay.fits ? lay.order : [], crossings: lay.crossings ?? 0, before, fits: lay.fits, widest: lay.widest, edges: lay.edges};`, tt.nodes))
		if tt.want.Layers == nil {
			tt.want.Layers = [][]string{}
		}
		if !tt.want.Fits {
			got.Before = 0
		}
		require.Equal(t, tt.want, got, tt.name)
	}

	// The barycenter sweeps cut the crossings of a scrambled 500-node graph.
	nodes, err := json.Marshal(layered(10, 50))
	require.NoError(t, err)
	cut := run[[]int](tb, fmt.Sprintf(`const {layout, layers, crossings} = await mod('dag.js');
		const nodes = %s;
		const init = layers(nodes);
		const lay = layout(nodes);
		return [crossings(init.layers, new Map(nodes.map(n => [n.ref, n])), init.depth), lay.crossings, lay.fits ? 1 : 0];`, nodes))
	t.Logf("500 nodes: %d crossings in submission order, %d after the sweeps", cut[0], cut[1])
	require.Equal(t, 1, cut[2], "a 500-node graph of 50 per layer is drawn")
	require.Less(t, cut[1], cut[0]/2, "the sweeps should at least halve the crossings")
}

// watchNodes records, in the page, every status each drawn node shows (a
// MutationObserver on data-status), so that a test sees the colours a node
// went through even when two events arrive together. Records come in
// batches: the value a change set is the old value of the next change of
// that node, or its value now for the last one.
const watchNodes = `(() => {
	window.__seen = {};
	for (const a of document.querySelectorAll('#wf-dag .dag-node')) window.__seen[a.dataset.ref] = [a.dataset.status];
	new MutationObserver(ms => {
		ms.forEach((m, i) => {
			const later = ms.slice(i + 1).find(n => n.target === m.target);
			const v = later ? later.oldValue : m.target.dataset.status;
			const seen = window.__seen[m.target.dataset.ref];
			if (seen[seen.length - 1] !== v) seen.push(v);
		});
	}).observe(document.querySelector('#wf-dag'), {subtree: true, attributes: true, attributeOldValue: true, attributeFilter: ['data-status']});
})()`

// order maps node statuses to their place in a node's life.
func order(statuses []string) []int {
	place := map[string]int{"waiting": 0, "pending": 0, "queued": 1, "running": 2, "succeeded": 3}
	out := make([]int, len(statuses))
	for i, s := range statuses {
		out[i] = place[s]
	}
	return out
}

// TestWorkflowPageLive draws a small DAG whose nodes change colour live as
// they run, then follows a node to its task page, which links back to the
// workflow and to the node's deps.
func TestWorkflowPageLive(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	// fetch is held (delayed an hour) until the test lets it run.
	w := b.submitWorkflow(t, "thumbnails", []wfNode{
		{Ref: "fetch", TaskType: "sleep", Payload: map[string]any{"seconds": 0.2}, DelayMS: 3600000},
		{Ref: "resize", TaskType: "sleep", Payload: map[string]any{"seconds": 0.2}, Deps: []string{"fetch"}},
		{Ref: "scan", TaskType: "echo", Queue: "emails", Deps: []string{"fetch"}},
		{Ref: "notify", TaskType: "echo", Deps: []string{"resize", "scan"}},
	})

	tb := newTab(t, b)
	tb.open("/workflows/" + w.WorkflowID)
	tb.waitPage("workflow")
	tb.waitFor(`document.querySelectorAll('#wf-dag .dag-node').length === 4`)
	tb.waitFor(`document.querySelector('#conn').dataset.state === 'live'`)
	require.Equal(t, "drawn", eval[string](tb, `document.querySelector('#wf-graph').dataset.mode`))
	require.Equal(t, "3", eval[string](tb, `document.querySelector('#wf-graph').dataset.layers`))
	require.Equal(t, "0", eval[string](tb, `document.querySelector('#wf-graph').dataset.crossings`))
	require.Equal(t, "thumbnails", eval[string](tb, `document.querySelector('.task-type').textContent`))
	// Columns are layers: fetch left of resize and scan, left of notify.
	xs := eval[map[string]float64](tb, `Object.fromEntries([...document.querySelectorAll('#wf-dag .dag-node')].map(a => [a.dataset.ref, a.getBBox().x]))`)
	require.Less(t, xs["fetch"], xs["resize"])
	require.Equal(t, xs["resize"], xs["scan"])
	require.Less(t, xs["scan"], xs["notify"])
	node := func(ref string) string {
		return fmt.Sprintf(`document.querySelector('#wf-dag .dag-node[data-ref=%q]')`, ref)
	}
	require.Equal(t, "pending", eval[string](tb, node("fetch")+`.dataset.status`))
	require.Equal(t, "waiting", eval[string](tb, node("notify")+`.dataset.status`))
	require.Equal(t, "running", eval[string](tb, `document.querySelector('#wf-status').dataset.status`))

	tb.do(evalVoid(watchNodes), evalVoid(`window.__sameDocument = true`))
	require.Equal(t, http.StatusOK, b.call(t, http.MethodPost, "/api/v1/tasks/"+w.taskOf(t, "fetch")+"/run-now", "", nil))
	tb.waitFor(`document.querySelector('#wf-status').dataset.status === 'succeeded'`)
	for _, ref := range []string{"fetch", "resize", "scan", "notify"} {
		tb.waitFor(node(ref) + `.dataset.status === 'succeeded'`)
	}
	seen := eval[map[string][]string](tb, `window.__seen`)
	t.Logf("statuses shown: %v", seen)
	// fetch's events all arrive before any read they cause (reads wait for
	// a burst to end), so it shows every step. A later node may skip steps
	// when a read got ahead of its events, but never goes back.
	require.Equal(t, []string{"pending", "queued", "running", "succeeded"}, seen["fetch"])
	for _, ref := range []string{"resize", "scan", "notify"} {
		require.Subset(t, []string{"waiting", "queued", "running", "succeeded"}, seen[ref], ref)
		require.Equal(t, "waiting", seen[ref][0], ref)
		require.Equal(t, "succeeded", seen[ref][len(seen[ref])-1], ref)
		require.IsIncreasing(t, order(seen[ref]), "%s went back: %v", ref, seen[ref])
	}
	require.True(t, eval[bool](tb, `window.__sameDocument === true`), "the workflow page reloaded")
	require.Equal(t, `{"succeeded":4}`, eval[string](tb, `document.querySelector('#wf-counts').dataset.counts`))
	require.Zero(t, eval[int](tb, `document.querySelectorAll('#wf-cancel').length`), "a finished workflow offers no cancel")

	// A node opens its task, which links to the workflow and to its deps.
	tb.click(`#wf-dag .dag-node[data-ref="notify"]`)
	tb.waitPage("task")
	tb.waitFor(fmt.Sprintf(`document.querySelector('.task-id')?.textContent === %q`, w.taskOf(t, "notify")))
	require.Equal(t, "#/workflows/"+w.WorkflowID, eval[string](tb, `document.querySelector('#task-workflow').getAttribute('href')`))
	require.Equal(t, "notify", eval[string](tb, `document.querySelector('#task-ref').textContent`))
	tb.waitFor(`document.querySelectorAll('#task-deps li').length === 2`)
	deps := eval[map[string]string](tb, `Object.fromEntries([...document.querySelectorAll('#task-deps li')].map(li => [li.dataset.ref, li.querySelector('a').getAttribute('href')]))`)
	require.Equal(t, map[string]string{"resize": "#/tasks/" + w.taskOf(t, "resize"), "scan": "#/tasks/" + w.taskOf(t, "scan")}, deps)
	require.Contains(t, eval[string](tb, `document.querySelector('#task-wf').textContent`), "thumbnails")

	// A first node says it depends on nothing.
	tb.goTo("/tasks/" + w.taskOf(t, "fetch"))
	tb.waitPage("task")
	tb.waitFor(`document.querySelector('#task-deps')?.textContent.includes('nothing')`)
	require.Empty(t, tb.problems(), "console:\n%s", tb.consoleText())
}
