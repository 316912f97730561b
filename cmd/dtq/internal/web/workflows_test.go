package web_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
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
	Attempts int            `json:"max_attempts,omitempty"`
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

// TestWorkflow500NodesDrawn draws a 500-node workflow (10 layers of 50) and
// checks it stays readable: every node drawn, no two boxes overlapping,
// each ref's text inside its box at a legible size, and a node still opens
// its task.
func TestWorkflow500NodesDrawn(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	w := b.submitWorkflow(t, "big-batch", layered(10, 50))
	require.Len(t, w.Nodes, 500)

	tb := newTab(t, b)
	start := time.Now()
	tb.open("/workflows/" + w.WorkflowID)
	tb.waitPage("workflow")
	tb.waitFor(`document.querySelectorAll('#wf-dag .dag-node').length === 500`)
	t.Logf("500 nodes drawn %v after the page was asked for (load, read, layout, drawing)", time.Since(start))
	require.Equal(t, "drawn", eval[string](tb, `document.querySelector('#wf-graph').dataset.mode`))
	require.Equal(t, "10", eval[string](tb, `document.querySelector('#wf-graph').dataset.layers`))
	require.Equal(t, 900, eval[int](tb, `document.querySelectorAll('#wf-dag .dag-edges path').length`))
	require.JSONEq(t, `{"waiting":450,"pending":50}`, eval[string](tb, `document.querySelector('#wf-counts').dataset.counts`))

	type box struct{ X, Y, W, H, TextW, TextH, Font float64 }
	boxes := eval[[]box](tb, `[...document.querySelectorAll('#wf-dag .dag-node')].map(a => {
		const r = a.querySelector('rect').getBBox(), tx = a.querySelector('text');
		const t = tx.getBBox();
		return {X: r.x, Y: r.y, W: r.width, H: r.height, TextW: t.x + t.width - r.x, TextH: t.height,
			Font: parseFloat(getComputedStyle(tx).fontSize)};
	})`)
	require.Len(t, boxes, 500)
	for i, a := range boxes {
		require.GreaterOrEqual(t, a.Font, 11.0, "node %d's text is too small to read", i)
		require.LessOrEqual(t, a.TextW, a.W, "node %d's ref runs out of its box", i)
		require.LessOrEqual(t, a.TextH, a.H, "node %d's ref is taller than its box", i)
		for j, c := range boxes[:i] {
			overlap := a.X < c.X+c.W && c.X < a.X+a.W && a.Y < c.Y+c.H && c.Y < a.Y+a.H
			require.False(t, overlap, "nodes %d and %d overlap", i, j)
		}
	}
	size := eval[[]float64](tb, `(() => { const s = document.querySelector('#wf-dag'); return [s.width.baseVal.value, s.height.baseVal.value]; })()`)
	t.Logf("the drawing is %.0f × %.0f px, scrolled inside its card", size[0], size[1])

	tb.click(`#wf-dag .dag-node[data-ref="n9-49"]`)
	tb.waitPage("task")
	tb.waitFor(fmt.Sprintf(`document.querySelector('.task-id')?.textContent === %q`, w.taskOf(t, "n9-49")))
	tb.waitFor(`document.querySelectorAll('#task-deps li a').length === 2`)
	require.Empty(t, tb.problems(), "console:\n%s", tb.consoleText())
}

// TestWorkflowSummarizedAndCancelled shows a workflow with a layer too wide
// to draw (1 + 120 nodes) as counts per layer, cancels it through the
// confirmation dialog, and follows the counts live to cancelled.
func TestWorkflowSummarizedAndCancelled(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	nodes := []wfNode{{Ref: "root", TaskType: "echo", DelayMS: 3600000}}
	for i := range 120 {
		nodes = append(nodes, wfNode{Ref: fmt.Sprintf("part-%03d", i), TaskType: "echo", Deps: []string{"root"}})
	}
	w := b.submitWorkflow(t, "fan-out", nodes)

	tb := newTab(t, b)
	tb.open("/workflows/" + w.WorkflowID)
	tb.waitPage("workflow")
	tb.waitFor(`document.querySelector('#wf-graph')?.dataset.mode === 'summary'`)
	require.Zero(t, eval[int](tb, `document.querySelectorAll('#wf-dag').length`), "a summarized graph draws no nodes")
	require.Contains(t, eval[string](tb, `document.querySelector('#wf-graph-note').textContent`), "widest 120")
	layer := func(l int) string {
		return fmt.Sprintf(`document.querySelector('#wf-layers tr[data-layer="%d"]')?.dataset.counts`, l)
	}
	require.Equal(t, `{"pending":1}`, eval[string](tb, layer(0)))
	require.Equal(t, `{"waiting":120}`, eval[string](tb, layer(1)))
	require.Contains(t, eval[string](tb, `document.querySelector('#wf-layers tr[data-layer="1"]').textContent`), "120 waiting")

	// A node of a summarized graph is opened by its ref.
	tb.do(chromedp.SendKeys(chromedp.CSS("#wf-node-ref"), "part-nope"), chromedp.Click(chromedp.CSS("#wf-node-open")))
	tb.waitFor(`document.querySelector('#wf-node-ref-error').textContent.includes('no node part-nope')`)

	// Cancel asks first; saying no changes nothing.
	tb.click("#wf-cancel")
	tb.waitFor(`document.querySelector('#confirm').open`)
	require.Equal(t, "Cancel this workflow?", eval[string](tb, `document.querySelector('#confirm-title').textContent`))
	tb.click("#confirm-cancel")
	tb.waitFor(`!document.querySelector('#confirm').open`)
	require.Equal(t, "running", b.workflow(t, w.WorkflowID).Status)

	tb.click("#wf-cancel")
	tb.waitFor(`document.querySelector('#confirm').open`)
	tb.click("#confirm-ok")
	tb.waitFor(`[...document.querySelectorAll('.toast')].some(e => e.textContent.includes('Workflow cancel'))`)
	b.waitWorkflow(t, w.WorkflowID, "cancelled")
	tb.waitFor(`document.querySelector('#wf-status')?.dataset.status === 'cancelled'`)
	tb.waitFor(layer(1) + ` === '{"cancelled":120}'`)
	require.Equal(t, `{"cancelled":1}`, eval[string](tb, layer(0)))
	tb.waitFor(`!document.querySelector('#wf-cancel')`)

	tb.do(evalVoid(`document.querySelector('#wf-node-ref').value = ''`),
		chromedp.SendKeys(chromedp.CSS("#wf-node-ref"), "part-007"), chromedp.Click(chromedp.CSS("#wf-node-open")))
	tb.waitPage("task")
	tb.waitFor(fmt.Sprintf(`document.querySelector('.task-id')?.textContent === %q`, w.taskOf(t, "part-007")))
	tb.waitFor(`document.querySelector('#task-status')?.dataset.status === 'cancelled'`)
	require.Empty(t, tb.problems(), "console:\n%s", tb.consoleText())
}

// TestWorkflowsList lists workflows newest first with their counts by
// status, pages with Load more, follows new workflows and node changes
// live, and filters by status and name (controls and URL agree).
func TestWorkflowsList(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	done := b.submitWorkflow(t, "nightly", []wfNode{{Ref: "a", TaskType: "echo"}})
	held := b.submitWorkflow(t, "nightly", []wfNode{{Ref: "a", TaskType: "echo", DelayMS: 3600000},
		{Ref: "b", TaskType: "echo", Deps: []string{"a"}}})
	failed := b.submitWorkflow(t, "import", []wfNode{{Ref: "load", TaskType: "always_fail", Attempts: 1},
		{Ref: "index", TaskType: "echo", Deps: []string{"load"}}})
	for i := range 21 {
		b.submitWorkflow(t, fmt.Sprintf("bulk-%02d", i), []wfNode{{Ref: "only", TaskType: "echo", DelayMS: 3600000}})
	}
	b.waitWorkflow(t, done.WorkflowID, "succeeded")
	b.waitWorkflow(t, failed.WorkflowID, "failed")

	tb := newTab(t, b)
	tb.open("/workflows")
	tb.waitPage("workflows")
	rows := `document.querySelectorAll('#workflows-table tbody tr[data-workflow-id]').length`
	tb.waitFor(rows + ` === 20`)
	require.Equal(t, "bulk-20", eval[string](tb, `document.querySelector('#workflows-table tbody tr .cell-type').textContent`))
	tb.click("#workflows-more")
	tb.waitFor(rows + ` === 24`)
	tb.waitFor(`document.querySelector('#workflows-more').hidden`)
	row := func(id string) string {
		return fmt.Sprintf(`document.querySelector('#workflows-table tr[data-workflow-id=%q]')`, id)
	}
	for id, want := range map[string]string{
		done.WorkflowID:   `{"succeeded":1}`,
		held.WorkflowID:   `{"pending":1,"waiting":1}`,
		failed.WorkflowID: `{"dead_lettered":1,"cancelled":1}`,
	} {
		tb.waitFor(row(id) + `?.dataset.counts`)
		require.JSONEq(t, want, eval[string](tb, row(id)+`.dataset.counts`), id)
	}
	require.Equal(t, "failed", eval[string](tb, row(failed.WorkflowID)+`.dataset.status`))
	require.Contains(t, eval[string](tb, row(failed.WorkflowID)+`.textContent`), "1 dead lettered · 1 cancelled")

	// Live: a new workflow appears on top; a held one runs to the end.
	tb.do(evalVoid(`window.__sameDocument = true`))
	fresh := b.submitWorkflow(t, "fresh", []wfNode{{Ref: "x", TaskType: "echo", DelayMS: 3600000}})
	tb.waitFor(fmt.Sprintf(`document.querySelector('#workflows-table tbody tr')?.dataset.workflowId === %q`, fresh.WorkflowID))
	require.Equal(t, http.StatusOK, b.call(t, http.MethodPost, "/api/v1/tasks/"+held.taskOf(t, "a")+"/run-now", "", nil))
	tb.waitFor(row(held.WorkflowID) + `?.dataset.status === 'succeeded'`)
	tb.waitFor(row(held.WorkflowID) + `?.dataset.counts === '{"succeeded":2}'`)
	require.True(t, eval[bool](tb, `window.__sameDocument === true`), "the list reloaded the page")

	// Filters, from the controls and from the URL.
	tb.do(evalVoid(`(() => { const s = document.querySelector('#workflows-status'); s.value = 'failed'; s.dispatchEvent(new Event('change')); })()`))
	tb.waitFor(`location.hash === '#/workflows?status=failed'`)
	tb.waitFor(rows + ` === 1`)
	tb.waitFor(row(failed.WorkflowID))
	tests := []struct {
		route string
		want  []string
		ctl   map[string]string
	}{
		{"/workflows?name=nightly", []string{held.WorkflowID, done.WorkflowID}, map[string]string{"workflows-status": "", "workflows-name": "nightly"}},
		{"/workflows?status=succeeded&name=nightly", []string{held.WorkflowID, done.WorkflowID}, map[string]string{"workflows-status": "succeeded", "workflows-name": "nightly"}},
		{"/workflows?status=running&name=fresh", []string{fresh.WorkflowID}, map[string]string{"workflows-status": "running", "workflows-name": "fresh"}},
		{"/workflows?status=failed&name=fresh", []string{}, map[string]string{"workflows-status": "failed", "workflows-name": "fresh"}},
		{"/workflows?status=cancelled", []string{}, map[string]string{"workflows-status": "cancelled", "workflows-name": ""}},
	}
	for _, tt := range tests {
		tb.goTo(tt.route)
		tb.waitPage("workflows")
		for id, v := range tt.ctl {
			tb.waitFor(fmt.Sprintf(`document.getElementById(%q)?.value === %q`, id, v))
		}
		if len(tt.want) == 0 {
			tb.waitFor(`document.querySelector('#workflows-table tr.empty')`)
			continue
		}
		tb.waitFor(fmt.Sprintf(`%s === %d`, rows, len(tt.want)))
		got := eval[[]string](tb, `[...document.querySelectorAll('#workflows-table tbody tr[data-workflow-id]')].map(r => r.dataset.workflowId)`)
		require.Equal(t, tt.want, got, tt.route)
	}
	// Apply takes what the controls show.
	tb.do(evalVoid(`document.querySelector('#workflows-name').value = 'import'`))
	tb.do(evalVoid(`document.querySelector('#workflows-status').value = ''`))
	tb.click(`form[aria-label="Filter workflows"] button[type=submit]`)
	tb.waitFor(`location.hash === '#/workflows?name=import'`)
	tb.waitFor(rows + ` === 1`)
	tb.waitFor(row(failed.WorkflowID))
	require.Empty(t, tb.problems(), "console:\n%s", tb.consoleText())
}

// stubAPI replaces the page's fetch, in a scriptTab, with answers for the
// API paths given (a path prefix -> JSON answer); other calls fail.
const stubAPI = `const answers = %s;
	window.fetch = async url => {
		const u = String(url);
		const key = Object.keys(answers).filter(k => u.startsWith(k)).sort((a, b) => b.length - a.length)[0];
		if (!key) return new Response('{}', {status: 503});
		return new Response(JSON.stringify(answers[key]), {status: 200, headers: {'Content-Type': 'application/json'}});
	};
	const mountPage = async (name, ctx) => {
		const {mount} = await mod('pages/' + name + '.js');
		const root = document.createElement('div');
		document.body.append(root);
		const page = mount(root, {app: {navigate() {}, session: {canAdmin: false}}, params: new URLSearchParams(), setTitle() {}, ...ctx});
		await new Promise(r => { const t = setInterval(() => { if (root.dataset.ready) { clearInterval(t); r(); } }, 10); });
		return {root, page};
	};`

// TestDedupKeyShown: a task's dedup_key shows in the task list, the dead
// letters and the task page when the task has one, and nothing does when
// it has none. The API is stubbed: the pages are shown tasks as the API
// will answer them.
func TestDedupKeyShown(t *testing.T) {
	t.Parallel()
	tb := scriptTab(t)
	const with, without = "0190a1b2c3d47000800000000000000a", "0190a1b2c3d47000800000000000000b"
	task := func(id, extra string) string {
		return fmt.Sprintf(`{"task_id": %q, "task_type": "email", "queue": "default", "status": "queued", "attempt": 1, "max_attempts": 3,
			"created_at": "2026-01-02T03:04:05Z", "execution": {}, "attempts": [], "payload": {}, "metadata": {}%s}`, id, extra)
	}
	answers := fmt.Sprintf(`{
		"api/v1/tasks/%[1]s/logs": {"items": [], "next_cursor": ""},
		"api/v1/tasks/%[1]s": %[2]s,
		"api/v1/tasks": {"items": [%[2]s, %[3]s], "next_cursor": null},
		"api/v1/dlq": {"items": [%[2]s, %[3]s], "next_cursor": null},
		"api/v1/queues": {"items": [], "next_cursor": null}
	}`, with, task(with, `, "dedup_key": "user-42"`), task(without, ""))
	got := run[map[string][]any](tb, fmt.Sprintf(stubAPI, answers)+fmt.Sprintf(`
		const out = {};
		const list = await mountPage('tasks');
		out.tasks = [...list.root.querySelectorAll('tr[data-task-id]')].map(tr => tr.querySelector('.cell-dedup')?.textContent ?? null);
		list.page.destroy();
		const dlq = await mountPage('dlq');
		out.dlq = [...dlq.root.querySelectorAll('article[data-task-id]')].map(a => a.querySelector('.dlq-dedup')?.textContent ?? null);
		dlq.page.destroy();
		const one = await mountPage('task', {arg: %q});
		out.task = [one.root.querySelector('#task-dedup-key')?.textContent ?? null];
		one.page.destroy();
		return out;`, with))
	require.Equal(t, map[string][]any{
		"tasks": {"dedup user-42", nil},
		"dlq":   {"dedup user-42", nil},
		"task":  {"user-42"},
	}, got)
}
