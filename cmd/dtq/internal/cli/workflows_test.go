package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/internal/redistest"
)

// writeWorkflow writes a workflow file for `dtq workflows submit -f`.
func writeWorkflow(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "workflow.json")
	require.NoError(t, os.WriteFile(path, []byte(body), 0o600))
	return path
}

const pairWorkflow = `{"name": "order-42", "nodes": [
  {"ref": "fetch", "queue": "io", "task_type": "fetch", "payload": {"url": "https://example.com/a.png"}},
  {"ref": "resize", "queue": "cpu", "task_type": "resize", "deps": ["fetch"]}
]}`

func TestWorkflowsSubmitGetListCancel(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	file := writeWorkflow(t, pairWorkflow)

	out := b.ok(t, "workflows", "submit", "-f", file, "--idempotency-key", "order-42")
	golden(t, "workflows_submit", out)
	id := hexID.FindString(out)
	require.NotEmpty(t, id)

	// The same key while it runs: in progress.
	code, stdout, stderr := b.run(t, "workflows", "submit", "-f", file, "--idempotency-key", "order-42")
	requireAPIError(t, code, stdout, stderr, "IDEMPOTENCY_IN_PROGRESS")
	require.Contains(t, stderr, id)

	out = b.ok(t, "workflows", "get", id, "--nodes")
	golden(t, "workflows_get_running", out)
	require.Equal(t, "workflow "+id+" is running: 0 of 2 nodes ended", lines(out)[0])

	var w map[string]any
	require.NoError(t, json.Unmarshal([]byte(b.ok(t, "workflows", "get", id, "-o", "json")), &w))
	require.Equal(t, id, w["workflow_id"])
	require.Equal(t, "running", w["status"])
	require.Len(t, w["nodes"], 2)

	// A short wait on a running workflow shows it as it is.
	require.Contains(t, b.ok(t, "workflows", "get", id, "--wait", "100ms"), "is running")

	out = b.ok(t, "workflows", "list", "--status", "running")
	require.Equal(t, []string{"WORKFLOW_ID                       NAME      STATUS   ENDED", id + "  order-42  running  0/2"}, lines(out))
	var items []map[string]any
	require.NoError(t, json.Unmarshal([]byte(b.ok(t, "workflows", "list", "--name", "order-42", "-o", "json")), &items))
	require.Len(t, items, 1)
	require.NotContains(t, b.ok(t, "workflows", "list", "--status", "failed"), id)

	// The API process's maintenance (as dtq api runs it) relays the
	// nodes' ends to the workflow.
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- dtq.RunWorkflowMaintenance(ctx, b.d, &dtq.WorkflowMaintenanceConfig{Client: b.client}) }()
	t.Cleanup(func() { stop(); require.NoError(t, <-done) })
	out = b.ok(t, "workflows", "cancel", id)
	require.Regexp(t, `^(workflow `+id+` cancelled|cancel requested: workflow `+id+` ends cancelled once its nodes' ends are recorded \(dtq workflows get `+id+` --wait 30s\))\n`, out)
	out = b.ok(t, "workflows", "get", id, "--wait", "30s")
	require.Equal(t, "workflow "+id+" cancelled: 2 of 2 nodes ended", lines(out)[0])
	// Ended: the key replays it.
	out = b.ok(t, "workflows", "submit", "-f", file, "--idempotency-key", "order-42")
	require.Equal(t, "duplicate (replayed): the idempotency key belongs to workflow "+id+", which is cancelled", lines(out)[0])
}

func TestWorkflowsErrors(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	code, stdout, stderr := b.run(t, "workflows", "submit", "-f", writeWorkflow(t, `{"nodes": [{"ref": "a", "task_type": "t", "deps": ["a"]}]}`))
	requireAPIError(t, code, stdout, stderr, "INVALID_WORKFLOW")
	code, _, stderr = b.run(t, "workflows", "submit")
	require.Equal(t, exitUsage, code)
	require.Contains(t, stderr, "--file is required")
	code, _, stderr = b.run(t, "workflows", "submit", "-f", writeWorkflow(t, `[1]`))
	require.Equal(t, exitUsage, code)
	require.Contains(t, stderr, "not a JSON object")
	code, _, stderr = b.run(t, "workflows", "submit", "-f", filepath.Join(t.TempDir(), "missing.json"))
	require.Equal(t, exitUsage, code)
	require.Contains(t, stderr, "--file")
	code, stdout, stderr = b.run(t, "workflows", "get", "0190a5c4e2c07000800000000000ffff")
	requireAPIError(t, code, stdout, stderr, "NOT_FOUND")
	code, stdout, stderr = b.run(t, "workflows", "cancel", "nope")
	requireAPIError(t, code, stdout, stderr, "NOT_FOUND")
	code, _, stderr = b.run(t, "workflows", "list", "--status", "sideways")
	require.Equal(t, exitUsage, code)
	require.Contains(t, stderr, "--status")
	code, _, _ = b.run(t, "workflows", "get", "x", "--wait", "-1s")
	require.Equal(t, exitUsage, code)
}

// TestAPIRunsWorkflowMaintenance: with only `dtq api` and an HTTP worker
// running (no Go worker), a workflow's second node is released when the
// first ends and the workflow ends succeeded: the API process relays its
// nodes' ends.
func TestAPIRunsWorkflowMaintenance(t *testing.T) {
	t.Parallel()
	srv := redistest.Shared(t)
	r := startCmd(t, map[string]string{"DTQ_REDIS_URL": srv.URL(), "DTQ_KEY_PREFIX": "apiworkflows"}, "api", "--api-addr", "127.0.0.1:0")
	r.waitHealthy(t)
	status, _, sub := r.do(t, http.MethodPost, "/api/v1/workflows", nil, pairWorkflow)
	require.Equal(t, http.StatusAccepted, status, "%v", sub)
	id, _ := sub["workflow_id"].(string)

	finish := func(queue, ref string) {
		t.Helper()
		var task map[string]any
		require.Eventually(t, func() bool {
			status, _, got := r.do(t, http.MethodPost, "/api/v1/claims", nil, `{"worker_id": "py-1", "queues": ["`+queue+`"], "wait": "1s"}`)
			require.Equal(t, http.StatusOK, status, "%v", got)
			tasks, _ := got["tasks"].([]any)
			if len(tasks) == 0 {
				return false
			}
			task = tasks[0].(map[string]any)
			return true
		}, 60*time.Second, time.Millisecond, "node %s was never released", ref)
		require.Equal(t, id, task["workflow_id"])
		require.Equal(t, ref, task["ref"])
		status, _, got := r.do(t, http.MethodPost, "/api/v1/tasks/"+task["task_id"].(string)+"/complete", nil,
			`{"lease_token": "`+task["lease_token"].(string)+`", "result": {"ref": "`+ref+`"}}`)
		require.Equal(t, http.StatusOK, status, "%v", got)
	}
	finish("io", "fetch")
	finish("cpu", "resize")
	require.Eventually(t, func() bool {
		status, _, w := r.do(t, http.MethodGet, "/api/v1/workflows/"+id+"?wait=5s", nil, "")
		require.Equal(t, http.StatusOK, status)
		return w["status"] == "succeeded"
	}, 60*time.Second, time.Millisecond)
	require.Equal(t, 0, r.stop(t))
}

// graphNodes builds nodes from "ref:status:dep,dep" specs.
func graphNodes(specs ...string) []dtqtype.WorkflowNodeInfo {
	out := make([]dtqtype.WorkflowNodeInfo, 0, len(specs))
	for _, s := range specs {
		parts := strings.SplitN(s, ":", 3)
		n := dtqtype.WorkflowNodeInfo{Ref: parts[0], Status: dtqtype.Status(parts[1])}
		if len(parts) == 3 && parts[2] != "" {
			n.Deps = strings.Split(parts[2], ",")
		}
		out = append(out, n)
	}
	return out
}

// layerRefs is graphLayersOf as refs.
func layerRefs(nodes []dtqtype.WorkflowNodeInfo) [][]string {
	var out [][]string
	for _, l := range graphLayersOf(nodes) {
		refs := []string{}
		for _, i := range l {
			refs = append(refs, nodes[i].Ref)
		}
		out = append(out, refs)
	}
	return out
}

func TestWorkflowGraphLayers(t *testing.T) {
	t.Parallel()
	chain := make([]string, 300)
	want := make([][]string, 300)
	for i := range chain {
		dep := ""
		if i > 0 {
			dep = "n" + strconv.Itoa(i-1)
		}
		// Listed last to first: the layers follow the deps, not the order.
		chain[len(chain)-1-i] = "n" + strconv.Itoa(i) + ":queued:" + dep
		want[i] = []string{"n" + strconv.Itoa(i)}
	}
	for _, tc := range []struct {
		name  string
		nodes []string
		want  [][]string
	}{
		{"none", nil, nil},
		{"one", []string{"a:queued"}, [][]string{{"a"}}},
		{"independent nodes share layer 0, in the workflow's order", []string{"b:queued", "a:queued", "c:queued"}, [][]string{{"b", "a", "c"}}},
		{"pair", []string{"fetch:succeeded", "resize:running:fetch"}, [][]string{{"fetch"}, {"resize"}}},
		{"diamond", []string{"a:succeeded", "b:running:a", "c:queued:a", "d:waiting:b,c"}, [][]string{{"a"}, {"b", "c"}, {"d"}}},
		{"a node's layer is one past its deepest dep", []string{"a:queued", "b:waiting:a", "c:waiting:b", "d:waiting:a,c"},
			[][]string{{"a"}, {"b"}, {"c"}, {"d"}}},
		{"deps listed after their dependant", []string{"join:waiting:x,y", "x:queued", "y:queued"}, [][]string{{"x", "y"}, {"join"}}},
		{"unknown deps and self-deps are ignored", []string{"a:queued:ghost", "b:waiting:a,b"}, [][]string{{"a"}, {"b"}}},
		{"a cycle goes after the rest", []string{"a:queued", "x:waiting:y", "y:waiting:x", "b:waiting:a"}, [][]string{{"a"}, {"b"}, {"x", "y"}}},
		{"a long chain", chain, want},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, layerRefs(graphNodes(tc.nodes...)))
		})
	}
}

func TestWorkflowGraphLines(t *testing.T) {
	t.Parallel()
	wide := []string{"split:succeeded"}
	for i := range 60 {
		st := "succeeded"
		if i%3 == 0 {
			st = "running"
		}
		wide = append(wide, fmt.Sprintf("part-%02d:%s:split", i, st))
	}
	partRefs := make([]string, 0, 60)
	for i := range 60 {
		partRefs = append(partRefs, fmt.Sprintf("part-%02d", i))
	}
	wide = append(wide, "join:waiting:"+strings.Join(partRefs, ","))
	deep := make([]string, 0, 105)
	for i := range 105 {
		dep := ""
		if i > 0 {
			dep = "n" + strconv.Itoa(i-1)
		}
		st := "succeeded"
		if i >= 103 {
			st = "waiting"
		}
		deep = append(deep, "n"+strconv.Itoa(i)+":"+st+":"+dep)
	}
	failed := graphNodes("a:dead_lettered", "b:cancelled:a", "c:succeeded:a")
	failed[1].ErrorClass = "DependencyFailed"
	failed[0].ErrorClass = "Timeout"
	for _, tc := range []struct {
		name  string
		nodes []dtqtype.WorkflowNodeInfo
		want  []string
	}{
		{"no nodes", nil, []string{"GRAPH (no nodes)"}},
		{"diamond", graphNodes("a:succeeded", "b:running:a", "c:queued:a", "d:waiting:b,c"), []string{
			"GRAPH (4 nodes in 3 layers by dependency depth)",
			"layer 0", "  a [succeeded]",
			"layer 1", "  b [running]  <- a", "  c [queued]  <- a",
			"layer 2", "  d [waiting]  <- b, c",
		}},
		{"error classes", failed, []string{
			"GRAPH (3 nodes in 2 layers by dependency depth)",
			"layer 0", "  a [dead_lettered: Timeout]",
			"layer 1", "  b [cancelled: DependencyFailed]  <- a", "  c [succeeded]  <- a",
		}},
		{"a layer over 50 nodes shows counts; a node names 8 deps at most", graphNodes(wide...), []string{
			"GRAPH (62 nodes in 3 layers by dependency depth)",
			"layer 0", "  split [succeeded]",
			"layer 1: 60 nodes: running=20 succeeded=40",
			"layer 2", "  join [waiting]  <- part-00, part-01, part-02, part-03, part-04, part-05, part-06, part-07, … +52 more",
		}},
		{"layers past 100 are summed up", graphNodes(deep...), func() []string {
			out := []string{"GRAPH (105 nodes in 105 layers by dependency depth)", "layer 0", "  n0 [succeeded]"}
			for i := 1; i < 100; i++ {
				out = append(out, fmt.Sprintf("layer %d", i), fmt.Sprintf("  n%d [succeeded]  <- n%d", i, i-1))
			}
			return append(out, "layers 100..104: 5 nodes: waiting=2 succeeded=3")
		}()},
		{"control characters in refs are shown escaped", graphNodes("a\tb:queued"), []string{
			"GRAPH (1 node in 1 layer by dependency depth)", "layer 0", `  a\tb [queued]`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, graphLines(tc.nodes))
		})
	}
}

func TestWorkflowChanges(t *testing.T) {
	t.Parallel()
	view := func(st dtqtype.WorkflowStatus, cancel bool, nodes ...string) *workflowView {
		return &workflowView{ID: "w", Status: st, CancelRequested: cancel, Nodes: graphNodes(nodes...)}
	}
	var many, manyDone []string
	for i := range 53 {
		many = append(many, fmt.Sprintf("p%d:running", i))
		manyDone = append(manyDone, fmt.Sprintf("p%d:succeeded", i))
	}
	manyDone[52] = "p52:failed"
	cancelled := view(dtqtype.WorkflowRunning, false, "a:succeeded", "b:cancelled:a")
	cancelled.Nodes[1].ErrorClass = "DependencyFailed"
	for _, tc := range []struct {
		name        string
		before, now *workflowView
		want        []string
	}{
		{"nothing", view(dtqtype.WorkflowRunning, false, "a:queued"), view(dtqtype.WorkflowRunning, false, "a:queued"), nil},
		{"a node's status", view(dtqtype.WorkflowRunning, false, "a:queued", "b:waiting:a"),
			view(dtqtype.WorkflowRunning, false, "a:running", "b:waiting:a"), []string{"a queued -> running"}},
		{"the end", view(dtqtype.WorkflowRunning, false, "a:running"), view(dtqtype.WorkflowSucceeded, false, "a:succeeded"),
			[]string{"workflow running -> succeeded", "a running -> succeeded"}},
		{"an error class", view(dtqtype.WorkflowRunning, false, "a:failed", "b:waiting:a"), cancelled,
			[]string{"a failed -> succeeded", "b waiting -> cancelled: DependencyFailed"}},
		{"nodes added", view(dtqtype.WorkflowRunning, false, "split:running"),
			view(dtqtype.WorkflowRunning, false, "split:running", "p1:waiting:split", "p2:waiting:split"),
			[]string{"added p1 [waiting]  <- split", "added p2 [waiting]  <- split"}},
		{"a cancel request", view(dtqtype.WorkflowRunning, false, "a:running"), view(dtqtype.WorkflowRunning, true, "a:running"),
			[]string{"workflow cancel requested"}},
		{"past 50 node changes, counts", view(dtqtype.WorkflowRunning, false, many...), view(dtqtype.WorkflowRunning, false, manyDone...),
			func() []string {
				var out []string
				for i := range 50 {
					out = append(out, fmt.Sprintf("p%d running -> succeeded", i))
				}
				return append(out, "3 more nodes changed, now: succeeded=2 failed=1")
			}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, workflowChanges(tc.before, tc.now))
		})
	}
}

// claimNode claims the one task of queue through the bundle's API (as an
// HTTP worker with the admin key) and returns its id and lease token.
func claimNode(t *testing.T, api *running, queue string) (id, token string) {
	t.Helper()
	auth := map[string]string{"Authorization": "Bearer " + adminToken}
	require.Eventually(t, func() bool {
		status, _, got := api.do(t, http.MethodPost, "/api/v1/claims", auth, `{"worker_id": "watch-1", "queues": ["`+queue+`"], "wait": "1s"}`)
		require.Equal(t, http.StatusOK, status, "%v", got)
		tasks, _ := got["tasks"].([]any)
		if len(tasks) == 0 {
			return false
		}
		task := tasks[0].(map[string]any)
		id, token = task["task_id"].(string), task["lease_token"].(string)
		return true
	}, 60*time.Second, time.Millisecond, "nothing to claim on %s", queue)
	return id, token
}

// completeNode completes a claimed task through the bundle's API.
func completeNode(t *testing.T, api *running, id, token string) {
	t.Helper()
	status, _, got := api.do(t, http.MethodPost, "/api/v1/tasks/"+id+"/complete", map[string]string{"Authorization": "Bearer " + adminToken},
		`{"lease_token": "`+token+`", "result": "done"}`)
	require.Equal(t, http.StatusOK, status, "%v", got)
}

// startWatch runs `dtq workflows get <id> --watch` with args in the
// background; wait returns its exit code once it ended by itself.
func startWatch(t *testing.T, b *apiBundle, id string, args ...string) (out *syncBuffer, wait func() int) {
	t.Helper()
	out = &syncBuffer{}
	errOut := &syncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- execute(ctx, append([]string{"workflows", "get", id, "--watch"}, args...), &env{stdout: out, stderr: errOut, lookupEnv: mapEnv(b.vars)})
	}()
	t.Cleanup(func() { cancel(); <-done })
	return out, func() int {
		t.Helper()
		select {
		case code := <-done:
			done <- code // for the cleanup
			require.Empty(t, errOut.String())
			return code
		case <-time.After(60 * time.Second):
			t.Fatalf("the watch did not end with its workflow; it printed:\n%s", out)
			return -1
		}
	}
}

// TestWorkflowsGetWatch: --watch shows the workflow at once, prints each
// change as a line (stdout is no terminal) and ends when the workflow ends;
// with -o json each change is a line of the workflow's JSON.
func TestWorkflowsGetWatch(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	api := &running{base: b.srv.URL}
	id := hexID.FindString(b.ok(t, "workflows", "submit", "-f", writeWorkflow(t, pairWorkflow)))
	require.NotEmpty(t, id)

	out, wait := startWatch(t, b, id, "--interval", "100ms")
	jsonOut, waitJSON := startWatch(t, b, id, "--interval", "100ms", "-o", "json")
	require.Eventually(t, func() bool { return strings.Contains(out.String(), "  resize [waiting]  <- fetch\n") }, 30*time.Second, time.Millisecond)
	first := lines(out.String())
	require.Equal(t, "workflow "+id+" is running: 0 of 2 nodes ended", first[0])
	require.Contains(t, first, "GRAPH (2 nodes in 2 layers by dependency depth)")
	require.NotContains(t, out.String(), "NODES", "the node table only with --nodes")

	// The API process's maintenance relays the nodes' ends.
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- dtq.RunWorkflowMaintenance(ctx, b.d, &dtq.WorkflowMaintenanceConfig{Client: b.client}) }()
	t.Cleanup(func() { stop(); require.NoError(t, <-done) })

	fetch, token := claimNode(t, api, "io")
	change := regexp.MustCompile(`(?m)^\d{4}-\d\d-\d\dT[\d:.]+Z  fetch queued -> running$`)
	require.Eventually(t, func() bool { return change.MatchString(out.String()) }, 30*time.Second, time.Millisecond, "the watch printed:\n%s", out)
	completeNode(t, api, fetch, token)
	resize, token := claimNode(t, api, "cpu")
	completeNode(t, api, resize, token)

	require.Equal(t, 0, wait())
	all := lines(out.String())
	require.Regexp(t, `^\d{4}-\d\d-\d\dT[\d:.]+Z  workflow `+id+` succeeded: 2 of 2 nodes ended$`, all[len(all)-1])
	require.Regexp(t, `(?m)^\S+  resize \S+ -> succeeded$`, out.String())
	require.NotContains(t, out.String(), clearScreen, "no redraws unless stdout is a terminal")
	for _, l := range all[len(first):] {
		require.Regexp(t, `^\d{4}-\d\d-\d\dT[\d:.]+Z  \S`, l, "after the first view, only change lines")
	}

	require.Equal(t, 0, waitJSON())
	var views []workflowView
	for _, l := range lines(jsonOut.String()) {
		var w workflowView
		require.NoError(t, json.Unmarshal([]byte(l), &w), l)
		views = append(views, w)
	}
	require.GreaterOrEqual(t, len(views), 2)
	require.Equal(t, dtqtype.WorkflowRunning, views[0].Status)
	require.Equal(t, dtqtype.WorkflowSucceeded, views[len(views)-1].Status)
	for i := 1; i < len(views); i++ {
		require.NotEmpty(t, workflowChanges(&views[i-1], &views[i]), "a JSON line per change only")
	}

	// An ended workflow: shown once (--nodes adds the table), and done.
	code, stdout, stderr := b.run(t, "workflows", "get", id, "--watch", "--nodes")
	require.Equal(t, 0, code, stderr)
	require.Equal(t, "workflow "+id+" succeeded: 2 of 2 nodes ended", lines(stdout)[0])
	require.Contains(t, stdout, "\nNODES\nREF ")
	require.Contains(t, stdout, "  resize [succeeded]  <- fetch\n")

	// On a terminal the view is redrawn in place.
	s, err := (&remote{e: &env{lookupEnv: mapEnv(b.vars)}, apiURL: b.srv.URL, token: adminToken, output: outputTable, timeout: 10 * time.Second}).open(newWorkflowsGetCmd(&remote{}))
	require.NoError(t, err)
	defer s.close()
	var screen bytes.Buffer
	s.out = &printer{w: &screen}
	require.NoError(t, (&workflowWatch{s: s, id: id, interval: time.Second, redraw: true}).run(context.Background()))
	require.True(t, strings.HasPrefix(screen.String(), clearScreen+"workflow "+id+" succeeded: 2 of 2 nodes ended\n"), screen.String())
}

// TestWorkflowsGetWatchCancelled: a watch of a workflow that is cancelled
// ends with it; --watch refuses --wait and a bad --interval.
func TestWorkflowsGetWatchCancelled(t *testing.T) {
	t.Parallel()
	b := setupAPI(t)
	id := hexID.FindString(b.ok(t, "workflows", "submit", "-f", writeWorkflow(t, pairWorkflow)))
	out, wait := startWatch(t, b, id, "--interval", "100ms")
	require.Eventually(t, func() bool { return strings.Contains(out.String(), "GRAPH") }, 30*time.Second, time.Millisecond)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- dtq.RunWorkflowMaintenance(ctx, b.d, &dtq.WorkflowMaintenanceConfig{Client: b.client}) }()
	t.Cleanup(func() { stop(); require.NoError(t, <-done) })
	b.ok(t, "workflows", "cancel", id)
	require.Equal(t, 0, wait())
	all := lines(out.String())
	require.Regexp(t, `  workflow `+id+` cancelled: 2 of 2 nodes ended$`, all[len(all)-1])
	require.Regexp(t, `(?m)  fetch queued -> cancelled$`, out.String())

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--watch", "--wait", "1s"}, "--wait and --watch do not go together"},
		{[]string{"--watch", "--interval", "1ms"}, "--interval=1ms: must be between 100ms and 1m0s"},
		{[]string{"--watch", "--interval", "2m"}, "--interval=2m0s: must be between"},
	} {
		code, stdout, stderr := b.run(t, append([]string{"workflows", "get", id}, tc.args...)...)
		require.Equal(t, exitUsage, code, "%v", tc.args)
		require.Empty(t, stdout)
		require.Contains(t, stderr, tc.want)
	}
}
