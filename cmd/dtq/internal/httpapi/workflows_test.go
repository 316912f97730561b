package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/dtqtype"
)

// runWorkflowMaintenance runs the relay and sweep of every queue known now
// until the test ends (the API process's share, as dtq api runs it).
func (b *bundle) runWorkflowMaintenance(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- dtq.RunWorkflowMaintenance(ctx, b.d, &dtq.WorkflowMaintenanceConfig{Client: b.client}) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })
}

// wfSubmitJSON is POST /api/v1/workflows's answer.
type wfSubmitJSON struct {
	WorkflowID string `json:"workflow_id"`
	Status     string `json:"status"`
	Nodes      []struct {
		Ref    string `json:"ref"`
		TaskID string `json:"task_id"`
		Status string `json:"status"`
	} `json:"nodes"`
	Duplicate bool `json:"duplicate"`
}

// wfJSON is the part of a workflow answer tests look at.
type wfJSON struct {
	WorkflowID      string         `json:"workflow_id"`
	Name            string         `json:"name"`
	Status          string         `json:"status"`
	Counts          map[string]int `json:"counts"`
	CancelRequested bool           `json:"cancel_requested"`
	Nodes           []struct {
		Ref        string   `json:"ref"`
		TaskID     string   `json:"task_id"`
		Queue      string   `json:"queue"`
		Deps       []string `json:"deps"`
		Status     string   `json:"status"`
		ErrorClass string   `json:"error_class"`
	} `json:"nodes"`
}

// claimedNode is a claimed task's workflow part.
type claimedNode struct {
	TaskID     string                     `json:"task_id"`
	LeaseToken string                     `json:"lease_token"`
	WorkflowID string                     `json:"workflow_id"`
	Ref        string                     `json:"ref"`
	Deps       map[string]json.RawMessage `json:"deps"`
}

// claimOne claims one task of queue over HTTP, waiting for it.
func (b *bundle) claimOne(t *testing.T, queue string, hdr ...string) claimedNode {
	t.Helper()
	var out struct{ Tasks []claimedNode }
	require.Eventually(t, func() bool {
		res := b.do(t, http.MethodPost, "/api/v1/claims", `{"worker_id":"wf-http","queues":["`+queue+`"],"wait":"1s"}`, hdr...)
		require.Equal(t, http.StatusOK, res.status, string(res.body))
		res.decode(t, &out)
		return len(out.Tasks) == 1
	}, 30*time.Second, time.Millisecond, "nothing to claim on %s", queue)
	return out.Tasks[0]
}

func (b *bundle) getWorkflow(t *testing.T, id string) wfJSON {
	t.Helper()
	res := b.do(t, http.MethodGet, "/api/v1/workflows/"+id, "")
	require.Equal(t, http.StatusOK, res.status, string(res.body))
	var w wfJSON
	res.decode(t, &w)
	return w
}

// TestWorkflowRunByHTTPWorkers: a 2-node workflow submitted over HTTP is
// run by HTTP workers alone; the second node's claim carries the first's
// result; the workflow ends succeeded, and waiting on it, listing it and
// replaying its key answer so.
func TestWorkflowRunByHTTPWorkers(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	body := `{"name":"pair","nodes":[
		{"ref":"fetch","queue":"wfa","task_type":"fetch","payload":{"url":"u"}},
		{"ref":"resize","queue":"wfb","task_type":"resize","deps":["fetch"],"priority":7}]}`
	res := b.do(t, http.MethodPost, "/api/v1/workflows", body, "Idempotency-Key", "pair-1")
	require.Equal(t, http.StatusAccepted, res.status, string(res.body))
	var sub wfSubmitJSON
	res.decode(t, &sub)
	require.Equal(t, "running", sub.Status)
	require.False(t, sub.Duplicate)
	require.Equal(t, "/api/v1/workflows/"+sub.WorkflowID, res.header.Get("Location"))
	require.Len(t, sub.Nodes, 2)
	require.Equal(t, "queued", sub.Nodes[0].Status)
	require.Equal(t, "waiting", sub.Nodes[1].Status)
	b.runWorkflowMaintenance(t)

	// While it runs, the key is in progress and names the workflow.
	e := b.do(t, http.MethodPost, "/api/v1/workflows", body, "Idempotency-Key", "pair-1").
		requireError(t, http.StatusConflict, codeIdemInProgress, "")
	require.Equal(t, sub.WorkflowID, e.Details["workflow_id"])
	require.Contains(t, e.Message, sub.WorkflowID)
	e = b.do(t, http.MethodPost, "/api/v1/workflows", `{"nodes":[{"ref":"other","task_type":"x"}]}`, "Idempotency-Key", "pair-1").
		requireError(t, http.StatusUnprocessableEntity, codeIdemKeyMismatch, "")
	require.Equal(t, sub.WorkflowID, e.Details["workflow_id"])

	first := b.claimOne(t, "wfa")
	require.Equal(t, sub.WorkflowID, first.WorkflowID)
	require.Equal(t, "fetch", first.Ref)
	require.Empty(t, first.Deps)
	require.NotNil(t, first.Deps, "a node without deps carries deps: {}")
	res = b.do(t, http.MethodPost, "/api/v1/tasks/"+first.TaskID+"/complete", `{"lease_token":"`+first.LeaseToken+`","result":{"bytes":42}}`)
	require.Equal(t, http.StatusOK, res.status, string(res.body))

	second := b.claimOne(t, "wfb")
	require.Equal(t, "resize", second.Ref)
	var dep dtq.DepResult
	require.NoError(t, json.Unmarshal(second.Deps["fetch"], &dep))
	require.Equal(t, dtqtype.StatusSucceeded, dep.Status)
	require.JSONEq(t, `{"bytes":42}`, string(dep.Result))
	res = b.do(t, http.MethodPost, "/api/v1/tasks/"+second.TaskID+"/complete", `{"lease_token":"`+second.LeaseToken+`"}`)
	require.Equal(t, http.StatusOK, res.status, string(res.body))

	res = b.do(t, http.MethodGet, "/api/v1/workflows/"+sub.WorkflowID+"?wait=30s", "")
	require.Equal(t, http.StatusOK, res.status, string(res.body))
	var w wfJSON
	res.decode(t, &w)
	require.Equal(t, "succeeded", w.Status)
	require.Equal(t, "pair", w.Name)
	require.Equal(t, map[string]int{"succeeded": 2}, w.Counts)
	require.Equal(t, []string{"fetch"}, w.Nodes[1].Deps)
	require.Equal(t, "wfb", w.Nodes[1].Queue)

	// Ended: the key replays it.
	res = b.do(t, http.MethodPost, "/api/v1/workflows", body, "Idempotency-Key", "pair-1")
	require.Equal(t, http.StatusOK, res.status, string(res.body))
	require.Equal(t, "true", res.header.Get("Idempotent-Replayed"))
	var again wfSubmitJSON
	res.decode(t, &again)
	require.Equal(t, sub.WorkflowID, again.WorkflowID)
	require.True(t, again.Duplicate)
	require.Equal(t, "succeeded", again.Status)

	// Listing, filtered.
	var page struct {
		Items []struct {
			WorkflowID string `json:"workflow_id"`
			Status     string `json:"status"`
		} `json:"items"`
		NextCursor *string `json:"next_cursor"`
	}
	res = b.do(t, http.MethodGet, "/api/v1/workflows?status=succeeded&name=pair", "")
	require.Equal(t, http.StatusOK, res.status, string(res.body))
	res.decode(t, &page)
	require.Len(t, page.Items, 1)
	require.Equal(t, sub.WorkflowID, page.Items[0].WorkflowID)
	res = b.do(t, http.MethodGet, "/api/v1/workflows?status=running", "")
	res.decode(t, &page)
	require.Empty(t, page.Items)
}

// TestWorkflowSubmitRefusals: each malformed workflow is refused before
// anything is written, with the code and the node to blame.
func TestWorkflowSubmitRefusals(t *testing.T) {
	t.Parallel()
	b := setup(t, options{client: func(c *dtq.ClientConfig) { c.MaxWorkflowNodes = 3 }})
	big := strings.Repeat("x", testPayloadLimit)
	for _, tc := range []struct {
		name, body   string
		status       int
		code, node   string
		field, words string
	}{
		{"cycle", `{"nodes":[{"ref":"a","task_type":"t","deps":["b"]},{"ref":"b","task_type":"t","deps":["a"]}]}`,
			400, codeInvalidWorkflow, "", "deps", "cycle"},
		{"unknown dep", `{"nodes":[{"ref":"a","task_type":"t","deps":["nope"]}]}`, 400, codeInvalidWorkflow, "a", "deps", "nope"},
		{"duplicate ref", `{"nodes":[{"ref":"a","task_type":"t"},{"ref":"a","task_type":"t"}]}`, 400, codeInvalidWorkflow, "a", "ref", ""},
		{"bad ref", `{"nodes":[{"ref":"A B","task_type":"t"}]}`, 400, codeInvalidWorkflow, "nodes[0]", "ref", ""},
		{"too many nodes", `{"nodes":[{"ref":"a","task_type":"t"},{"ref":"b","task_type":"t"},{"ref":"c","task_type":"t"},{"ref":"d","task_type":"t"}]}`,
			400, codeInvalidWorkflow, "nodes", "nodes", "DTQ_WORKFLOW_MAX_NODES"},
		{"no nodes", `{"nodes":[]}`, 400, codeInvalidWorkflow, "nodes", "nodes", ""},
		{"nodes missing", `{"name":"x"}`, 400, codeInvalidWorkflow, "nodes", "nodes", ""},
		{"node idempotency key", `{"nodes":[{"ref":"a","task_type":"t","idempotency_key":"k"}]}`, 400, codeInvalidWorkflow, "a", "idempotency_key", "idempotency key"},
		{"node run_at", `{"nodes":[{"ref":"a","task_type":"t","run_at":"2030-01-01T00:00:00Z"}]}`, 400, codeInvalidWorkflow, "a", "run_at", "run_at"},
		{"node unknown field", `{"nodes":[{"ref":"a","task_type":"t","colour":"red"}]}`, 400, codeInvalidWorkflow, "a", "colour", ""},
		{"node bad priority", `{"nodes":[{"ref":"a","task_type":"t","priority":12}]}`, 400, codeInvalidWorkflow, "a", "priority", ""},
		{"node without type", `{"nodes":[{"ref":"a"}]}`, 400, codeInvalidWorkflow, "a", "task_type", "task_type"},
		{"node not an object", `{"nodes":[7]}`, 400, codeInvalidWorkflow, "nodes[0]", "", ""},
		{"bad policy", `{"nodes":[{"ref":"a","task_type":"t","on_dep_failure":"maybe"}]}`, 400, codeInvalidWorkflow, "a", "on_dep_failure", ""},
		{"deps not refs", `{"nodes":[{"ref":"a","task_type":"t","deps":"b"}]}`, 400, codeInvalidWorkflow, "a", "deps", ""},
		{"bad on_failure", `{"nodes":[{"ref":"a","task_type":"t"}],"on_failure":{"task_type":"t","priority":-1}}`,
			400, codeInvalidWorkflow, "on_failure", "priority", ""},
		{"name too long", `{"name":"` + strings.Repeat("n", 129) + `","nodes":[{"ref":"a","task_type":"t"}]}`, 400, codeInvalidWorkflow, "name", "name", ""},
		{"unknown top-level field", `{"nodes":[{"ref":"a","task_type":"t"}],"nodez":[]}`, 400, codeInvalidRequest, "", "nodez", ""},
		{"node payload too large", `{"nodes":[{"ref":"a","task_type":"t","payload":{"p":"` + big + `"}}]}`, 413, codePayloadTooLarge, "a", "payload", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := b.do(t, http.MethodPost, "/api/v1/workflows", tc.body)
			e := res.requireError(t, tc.status, tc.code, tc.field)
			if tc.node != "" {
				require.Equal(t, tc.node, e.Details["node"], string(res.body))
			}
			if tc.words != "" {
				require.Contains(t, e.Message, tc.words)
			}
		})
	}
	require.Zero(t, b.keyCount(t), "a refused workflow writes nothing")

	// A body over the workflow cap is 413 before it is parsed.
	huge := `{"nodes":[{"ref":"a","task_type":"t","payload":{"p":"` + strings.Repeat("y", maxWorkflowBodyBytes) + `"}}]}`
	b.do(t, http.MethodPost, "/api/v1/workflows", huge).requireError(t, http.StatusRequestEntityTooLarge, codePayloadTooLarge, "")
}

// TestWorkflowBodyFitsTheNodeLimit: a workflow of DTQ_WORKFLOW_MAX_NODES
// (10,000) small nodes fits the body cap, which the single-task cap would
// refuse.
func TestWorkflowBodyFitsTheNodeLimit(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	var sb strings.Builder
	sb.WriteString(`{"name":"wide","nodes":[`)
	for i := range 10000 {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"ref":"n%d","queue":"wide","task_type":"work","payload":{"part":%d,"of":"a batch of ten thousand parts"}}`, i, i)
	}
	sb.WriteString(`]}`)
	require.Greater(t, int64(sb.Len()), b.api.maxBody, "the body is larger than a single task may be")
	res := b.do(t, http.MethodPost, "/api/v1/workflows", sb.String())
	require.Equal(t, http.StatusAccepted, res.status, string(res.body[:min(len(res.body), 500)]))
	var sub wfSubmitJSON
	res.decode(t, &sub)
	require.Len(t, sub.Nodes, 10000)
}

// TestWorkflowReadsAndCancel: unknown and malformed ids are 404, the
// wait is bounded like a task's, a cancel ends a workflow cancelled and
// repeats, a finished one refuses it.
func TestWorkflowReadsAndCancel(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	for _, id := range []string{missingID, "not-an-id", strings.Repeat("f", 32)} {
		b.do(t, http.MethodGet, "/api/v1/workflows/"+id, "").requireError(t, http.StatusNotFound, codeNotFound, "")
		b.do(t, http.MethodPost, "/api/v1/workflows/"+id+"/cancel", "").requireError(t, http.StatusNotFound, codeNotFound, "")
	}
	res := b.do(t, http.MethodPost, "/api/v1/workflows", `{"nodes":[{"ref":"a","queue":"wfc","task_type":"t"},{"ref":"b","queue":"wfc","task_type":"t","deps":["a"]}]}`)
	require.Equal(t, http.StatusAccepted, res.status, string(res.body))
	var sub wfSubmitJSON
	res.decode(t, &sub)
	b.do(t, http.MethodGet, "/api/v1/workflows/"+sub.WorkflowID+"?wait=61s", "").requireError(t, http.StatusBadRequest, codeInvalidRequest, "wait")
	b.do(t, http.MethodGet, "/api/v1/workflows/"+sub.WorkflowID+"?stale=1", "").requireError(t, http.StatusBadRequest, codeInvalidRequest, "stale")
	b.do(t, http.MethodGet, "/api/v1/workflows?cursor=garbage", "").requireError(t, http.StatusBadRequest, codeInvalidRequest, "cursor")
	b.do(t, http.MethodGet, "/api/v1/workflows?status=bogus", "").requireError(t, http.StatusBadRequest, codeInvalidRequest, "status")
	b.do(t, http.MethodGet, "/api/v1/workflows?limit=0", "").requireError(t, http.StatusBadRequest, codeInvalidRequest, "limit")
	// A short wait on a running workflow answers it running.
	res = b.do(t, http.MethodGet, "/api/v1/workflows/"+sub.WorkflowID+"?wait=0.05", "")
	require.Equal(t, http.StatusOK, res.status)
	var w wfJSON
	res.decode(t, &w)
	require.Equal(t, "running", w.Status)

	b.runWorkflowMaintenance(t)
	res = b.do(t, http.MethodPost, "/api/v1/workflows/"+sub.WorkflowID+"/cancel", "")
	require.Equal(t, http.StatusAccepted, res.status, string(res.body))
	es, err := b.insp.ListAudit(b.ctx, &dtq.AuditListParams{Limit: 10})
	require.NoError(t, err)
	require.Len(t, es.Items, 1)
	require.Equal(t, "workflow.cancel", es.Items[0].Action)
	require.Equal(t, sub.WorkflowID, es.Items[0].Target)
	require.Eventually(t, func() bool { return b.getWorkflow(t, sub.WorkflowID).Status == "cancelled" }, 30*time.Second, 5*time.Millisecond)
	require.Equal(t, http.StatusAccepted, b.do(t, http.MethodPost, "/api/v1/workflows/"+sub.WorkflowID+"/cancel", "").status, "a repeated cancel")
	w = b.getWorkflow(t, sub.WorkflowID)
	require.Equal(t, map[string]int{"cancelled": 2}, w.Counts)

	// A succeeded workflow does not change any more.
	res = b.do(t, http.MethodPost, "/api/v1/workflows", `{"nodes":[{"ref":"only","queue":"wfd","task_type":"t"}]}`)
	res.decode(t, &sub)
	l := b.claimOne(t, "wfd")
	require.Equal(t, http.StatusOK, b.do(t, http.MethodPost, "/api/v1/tasks/"+l.TaskID+"/complete", `{"lease_token":"`+l.LeaseToken+`"}`).status)
	res = b.do(t, http.MethodGet, "/api/v1/workflows/"+sub.WorkflowID+"?wait=30s", "")
	res.decode(t, &w)
	if w.Status != "succeeded" {
		// The relay of the new queue starts within DTQ's queue refresh.
		require.Eventually(t, func() bool { return b.getWorkflow(t, sub.WorkflowID).Status == "succeeded" }, 30*time.Second, 10*time.Millisecond)
	}
	e := b.do(t, http.MethodPost, "/api/v1/workflows/"+sub.WorkflowID+"/cancel", "").requireError(t, http.StatusConflict, codeWorkflowNotRunning, "")
	require.Equal(t, "succeeded", e.Details["status"])
}

// TestWorkflowFanOutOverHTTP: a running node adds nodes with its lease
// token; the same ref again is no change, another definition 422; a stale
// token is LEASE_LOST, a task outside a workflow INVALID_WORKFLOW, a
// cancelled workflow WORKFLOW_NOT_RUNNING.
func TestWorkflowFanOutOverHTTP(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	res := b.do(t, http.MethodPost, "/api/v1/workflows", `{"nodes":[{"ref":"root","queue":"fan","task_type":"split"}]}`)
	require.Equal(t, http.StatusAccepted, res.status, string(res.body))
	var sub wfSubmitJSON
	res.decode(t, &sub)
	root := b.claimOne(t, "fan")
	add := func(token, nodes string) *response {
		return b.do(t, http.MethodPost, "/api/v1/tasks/"+root.TaskID+"/nodes", `{"lease_token":"`+token+`","nodes":`+nodes+`}`)
	}
	kids := `[{"ref":"part-1","queue":"fan","task_type":"part","deps":["root"]},{"ref":"join","queue":"fan","task_type":"join","deps":["part-1"]}]`
	res = add(root.LeaseToken, kids)
	require.Equal(t, http.StatusOK, res.status, string(res.body))
	var added struct {
		Nodes []struct {
			Ref    string `json:"ref"`
			TaskID string `json:"task_id"`
			Status string `json:"status"`
		} `json:"nodes"`
	}
	res.decode(t, &added)
	require.Len(t, added.Nodes, 2)
	require.Equal(t, "waiting", added.Nodes[0].Status)
	res = add(root.LeaseToken, kids)
	require.Equal(t, http.StatusOK, res.status, string(res.body))
	var again struct {
		Nodes []struct {
			TaskID string `json:"task_id"`
		} `json:"nodes"`
	}
	res.decode(t, &again)
	require.Equal(t, added.Nodes[0].TaskID, again.Nodes[0].TaskID, "the same ref again is no change")
	e := add(root.LeaseToken, `[{"ref":"part-1","queue":"fan","task_type":"other","deps":["root"]}]`).
		requireError(t, http.StatusUnprocessableEntity, codeIdemKeyMismatch, "")
	require.Equal(t, "part-1", e.Details["node"])
	add(root.LeaseToken, `[{"ref":"x","queue":"fan","task_type":"t","deps":["ghost"]}]`).requireError(t, http.StatusBadRequest, codeInvalidWorkflow, "deps")
	add(root.LeaseToken, `[{"ref":"x","queue":"fan","task_type":"t","idempotency_key":"k"}]`).requireError(t, http.StatusBadRequest, codeInvalidWorkflow, "idempotency_key")
	b.do(t, http.MethodPost, "/api/v1/tasks/"+root.TaskID+"/nodes", `{"lease_token":"`+root.LeaseToken+`"}`).
		requireError(t, http.StatusBadRequest, codeInvalidWorkflow, "nodes")
	b.do(t, http.MethodPost, "/api/v1/tasks/"+root.TaskID+"/nodes", `{"lease_token":"`+root.LeaseToken+`","nodes":[],"more":1}`).
		requireError(t, http.StatusBadRequest, codeInvalidRequest, "more")
	// A forged or stale token writes nothing.
	forged := strings.TrimSuffix(strings.TrimPrefix(staleToken(root.TaskID), `{"lease_token": "`), `"}`)
	add(forged, kids).requireError(t, http.StatusConflict, codeLeaseLost, "")
	add("", kids).requireError(t, http.StatusBadRequest, codeInvalidRequest, "lease_token")

	// A plain task is not a workflow node.
	b.submit(t, dtq.Submission{Type: "plain", Queue: "plainq"})
	plain := b.claimOne(t, "plainq")
	e = b.do(t, http.MethodPost, "/api/v1/tasks/"+plain.TaskID+"/nodes", `{"lease_token":"`+plain.LeaseToken+`","nodes":`+kids+`}`).
		requireError(t, http.StatusBadRequest, codeInvalidWorkflow, "")
	require.Contains(t, e.Message, "not a workflow node")

	// A cancelled workflow takes no more nodes.
	require.Equal(t, http.StatusAccepted, b.do(t, http.MethodPost, "/api/v1/workflows/"+sub.WorkflowID+"/cancel", "").status)
	add(root.LeaseToken, `[{"ref":"late","queue":"fan","task_type":"t"}]`).requireError(t, http.StatusConflict, codeWorkflowNotRunning, "")

	// Once the attempt ended, its token adds nothing, not even no nodes.
	res = b.do(t, http.MethodPost, "/api/v1/tasks/"+root.TaskID+"/complete", `{"lease_token":"`+root.LeaseToken+`"}`)
	require.Equal(t, http.StatusOK, res.status, string(res.body))
	for _, nodes := range []string{`[]`, kids} {
		add(root.LeaseToken, nodes).requireError(t, http.StatusConflict, codeLeaseLost, "")
	}
}

// TestWorkflowScopedKeys: a key scoped to queues submits, reads and
// cancels only workflows wholly on its queues, and lists none.
func TestWorkflowScopedKeys(t *testing.T) {
	t.Parallel()
	keys := []APIKey{{Role: RoleProducer, Name: "billing", Secret: "billing-secret", Queues: []string{"billing", "invoices"}},
		{Role: RoleAdmin, Name: "root", Secret: "root-secret"}}
	b := setup(t, options{keys: keys})
	mine := []string{"Authorization", "Bearer billing-secret"}
	root := []string{"Authorization", "Bearer root-secret"}
	e := b.do(t, http.MethodPost, "/api/v1/workflows", `{"nodes":[{"ref":"a","queue":"billing","task_type":"t"},{"ref":"b","queue":"payroll","task_type":"t"}]}`, mine...).
		requireError(t, http.StatusForbidden, codeForbidden, "")
	require.Equal(t, "payroll", e.Details["queue"])
	b.do(t, http.MethodPost, "/api/v1/workflows", `{"nodes":[{"ref":"a","queue":"billing","task_type":"t"}],"on_failure":{"queue":"payroll","task_type":"alert"}}`, mine...).
		requireError(t, http.StatusForbidden, codeForbidden, "")
	b.do(t, http.MethodPost, "/api/v1/workflows", `{"nodes":[{"ref":"a","task_type":"t"}]}`, mine...).
		requireError(t, http.StatusForbidden, codeForbidden, "") // the default queue
	require.Zero(t, b.keyCount(t))

	res := b.do(t, http.MethodPost, "/api/v1/workflows", `{"nodes":[{"ref":"a","queue":"billing","task_type":"t"},{"ref":"b","queue":"invoices","task_type":"t","deps":["a"]}]}`, mine...)
	require.Equal(t, http.StatusAccepted, res.status, string(res.body))
	var own wfSubmitJSON
	res.decode(t, &own)
	res = b.do(t, http.MethodPost, "/api/v1/workflows", `{"nodes":[{"ref":"a","queue":"billing","task_type":"t"},{"ref":"b","queue":"payroll","task_type":"t","deps":["a"]}]}`, root...)
	require.Equal(t, http.StatusAccepted, res.status, string(res.body))
	var mixed wfSubmitJSON
	res.decode(t, &mixed)

	require.Equal(t, http.StatusOK, b.do(t, http.MethodGet, "/api/v1/workflows/"+own.WorkflowID, "", mine...).status)
	b.do(t, http.MethodGet, "/api/v1/workflows/"+mixed.WorkflowID, "", mine...).requireError(t, http.StatusForbidden, codeForbidden, "")
	b.do(t, http.MethodGet, "/api/v1/workflows/"+mixed.WorkflowID+"?wait=1s", "", mine...).requireError(t, http.StatusForbidden, codeForbidden, "")
	b.do(t, http.MethodPost, "/api/v1/workflows/"+mixed.WorkflowID+"/cancel", "", mine...).requireError(t, http.StatusForbidden, codeForbidden, "")
	require.Equal(t, "running", b.getWorkflowAs(t, mixed.WorkflowID, root...).Status, "a refused cancel changed nothing")
	b.do(t, http.MethodGet, "/api/v1/workflows", "", mine...).requireError(t, http.StatusForbidden, codeForbidden, "")
	require.Equal(t, http.StatusOK, b.do(t, http.MethodGet, "/api/v1/workflows", "", root...).status)
	require.Equal(t, http.StatusAccepted, b.do(t, http.MethodPost, "/api/v1/workflows/"+own.WorkflowID+"/cancel", "", mine...).status)
}

func (b *bundle) getWorkflowAs(t *testing.T, id string, hdr ...string) wfJSON {
	t.Helper()
	res := b.do(t, http.MethodGet, "/api/v1/workflows/"+id, "", hdr...)
	require.Equal(t, http.StatusOK, res.status, string(res.body))
	var w wfJSON
	res.decode(t, &w)
	return w
}

// TestWorkflowWaitBounds: a workflow long-poll counts against the same
// bounds as a task's: past DTQ_MAX_WAITS_PER_KEY it is 429 TOO_MANY_WAITS.
func TestWorkflowWaitBounds(t *testing.T) {
	t.Parallel()
	b := setup(t, options{maxWaits: 10, maxWaitsPerKey: 1})
	res := b.do(t, http.MethodPost, "/api/v1/workflows", `{"nodes":[{"ref":"a","queue":"unserved","task_type":"t"}]}`)
	require.Equal(t, http.StatusAccepted, res.status, string(res.body))
	var sub wfSubmitJSON
	res.decode(t, &sub)
	ctx, cancel := context.WithCancel(b.ctx)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.srv.URL+"/api/v1/workflows/"+sub.WorkflowID+"?wait=60s", nil)
	require.NoError(t, err)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if res, err := b.srv.Client().Do(req); err == nil {
			res.Body.Close()
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	require.Eventually(t, func() bool {
		b.api.waits.mu.Lock()
		defer b.api.waits.mu.Unlock()
		return b.api.waits.inFlight == 1
	}, 10*time.Second, 5*time.Millisecond)
	e := b.do(t, http.MethodGet, "/api/v1/workflows/"+sub.WorkflowID+"?wait=1s", "").requireError(t, http.StatusTooManyRequests, codeTooManyWaits, "")
	require.Equal(t, "key", e.Details["scope"])
	// A read without wait is not a long-poll.
	require.Equal(t, http.StatusOK, b.do(t, http.MethodGet, "/api/v1/workflows/"+sub.WorkflowID, "").status)
}

// TestWorkflowQueueFull: a workflow whose nodes would take a queue past
// DTQ_MAX_QUEUE_DEPTH is refused whole, 429 QUEUE_FULL with Retry-After,
// and so is a fan-out.
func TestWorkflowQueueFull(t *testing.T) {
	t.Parallel()
	b := setup(t, options{client: func(c *dtq.ClientConfig) { c.MaxQueueDepth = 2 }})
	res := b.do(t, http.MethodPost, "/api/v1/workflows", `{"nodes":[{"ref":"a","queue":"full","task_type":"t"},{"ref":"b","queue":"full","task_type":"t"},{"ref":"c","queue":"full","task_type":"t"}]}`)
	e := res.requireError(t, http.StatusTooManyRequests, codeQueueFull, "")
	require.Equal(t, "full", e.Details["queue"])
	require.NotEmpty(t, res.header.Get("Retry-After"))
	list, err := b.insp.ListWorkflows(b.ctx, nil)
	require.NoError(t, err)
	require.Empty(t, list.Items, "refused whole")

	res = b.do(t, http.MethodPost, "/api/v1/workflows", `{"nodes":[{"ref":"root","queue":"full","task_type":"t"}]}`)
	require.Equal(t, http.StatusAccepted, res.status, string(res.body))
	root := b.claimOne(t, "full")
	b.do(t, http.MethodPost, "/api/v1/tasks/"+root.TaskID+"/nodes", `{"lease_token":"`+root.LeaseToken+`","nodes":[
		{"ref":"x","queue":"full","task_type":"t","deps":["root"]},{"ref":"y","queue":"full","task_type":"t","deps":["root"]}]}`).
		requireError(t, http.StatusTooManyRequests, codeQueueFull, "")
}

// TestWorkflowFanOutDepsStayInScope: a worker key scoped to a queue may
// not add a node that depends on a node of another queue (the new node's
// claim would carry that node's result): 403 FORBIDDEN naming the dep and
// its queue, and nothing is added. Deps on its own queue's nodes, existing
// or added alongside, are fine; a dep the workflow lacks is 400.
func TestWorkflowFanOutDepsStayInScope(t *testing.T) {
	t.Parallel()
	keys := []APIKey{{Role: RoleWorker, Name: "qa-worker", Secret: "qa-secret", Queues: []string{"qa"}},
		{Role: RoleAdmin, Name: "root", Secret: "root-secret"}}
	b := setup(t, options{keys: keys})
	qa := []string{"Authorization", "Bearer qa-secret"}
	root := []string{"Authorization", "Bearer root-secret"}
	res := b.do(t, http.MethodPost, "/api/v1/workflows", `{"nodes":[{"ref":"secret","queue":"qb","task_type":"t"},{"ref":"parent","queue":"qa","task_type":"t"}]}`, root...)
	require.Equal(t, http.StatusAccepted, res.status, string(res.body))
	var sub wfSubmitJSON
	res.decode(t, &sub)
	b.runWorkflowMaintenance(t)
	secret := b.claimOne(t, "qb", root...)
	res = b.do(t, http.MethodPost, "/api/v1/tasks/"+secret.TaskID+"/complete", `{"lease_token":"`+secret.LeaseToken+`","result":{"pin":"1234"}}`, root...)
	require.Equal(t, http.StatusOK, res.status, string(res.body))

	parent := b.claimOne(t, "qa", qa...)
	add := func(nodes string) *response {
		return b.do(t, http.MethodPost, "/api/v1/tasks/"+parent.TaskID+"/nodes", `{"lease_token":"`+parent.LeaseToken+`","nodes":`+nodes+`}`, qa...)
	}
	for _, nodes := range []string{
		`[{"ref":"peek","queue":"qa","task_type":"t","deps":["secret"]}]`,
		`[{"ref":"mid","queue":"qa","task_type":"t","deps":["parent"]},{"ref":"peek","queue":"qa","task_type":"t","deps":["mid","secret"]}]`,
	} {
		res = add(nodes)
		e := res.requireError(t, http.StatusForbidden, codeForbidden, "")
		require.Equal(t, "secret", e.Details["dep"], string(res.body))
		require.Equal(t, "qb", e.Details["queue"])
		require.Equal(t, "peek", e.Details["node"])
		require.Contains(t, e.Message, `"secret"`)
		require.Contains(t, e.Message, `"qb"`)
	}
	add(`[{"ref":"peek","queue":"qb","task_type":"t","deps":["parent"]}]`).requireError(t, http.StatusForbidden, codeForbidden, "")
	add(`[{"ref":"peek","queue":"qa","task_type":"t","deps":["ghost"]}]`).requireError(t, http.StatusBadRequest, codeInvalidWorkflow, "")
	require.Len(t, b.getWorkflowAs(t, sub.WorkflowID, root...).Nodes, 2, "a refused fan-out adds nothing")

	res = add(`[{"ref":"mid","queue":"qa","task_type":"t","deps":["parent"]},{"ref":"end","queue":"qa","task_type":"t","deps":["mid","parent"]}]`)
	require.Equal(t, http.StatusOK, res.status, string(res.body))
	require.Len(t, b.getWorkflowAs(t, sub.WorkflowID, root...).Nodes, 4)
}
