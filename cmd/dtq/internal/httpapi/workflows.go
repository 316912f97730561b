package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/cmd/dtq/internal/wire"
	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/internal/jsonscan"
)

// maxWorkflowBodyBytes bounds the body of POST /api/v1/workflows and POST
// /api/v1/tasks/{id}/nodes: a batch's cap, room for DTQ_WORKFLOW_MAX_NODES
// (10,000) nodes of about 1.6 KiB each. Larger is 413 PAYLOAD_TOO_LARGE.
const maxWorkflowBodyBytes = maxBatchBodyBytes

// workflowError is a workflow body the server refuses before the library
// sees it (400 INVALID_WORKFLOW): node names the node (its ref, nodes[i],
// nodes, name or on_failure), field the member of it to blame, if any.
type workflowError struct {
	node, field, message string
}

func (e *workflowError) Error() string { return "workflow node " + e.node + ": " + e.message }

func (e *workflowError) apiError() *apiError {
	d := map[string]any{"node": e.node}
	if e.field != "" {
		d["field"] = e.field
	}
	return &apiError{status: http.StatusBadRequest, code: codeInvalidWorkflow, message: e.Error(), details: d}
}

// nodeError is a node's member that cannot be read: a wire error (a task
// field) names its field.
func nodeError(node string, err error) error {
	if ve, ok := errors.AsType[*dtq.ValidationError](err); ok {
		return &workflowError{node: node, field: ve.Field, message: ve.Error()}
	}
	return &workflowError{node: node, message: err.Error()}
}

// decodeWorkflow reads POST /api/v1/workflows's body {name, nodes,
// on_failure, idempotency_key}. Each node is a task submission (read by
// the same decoder as POST /api/v1/tasks, so its fields are checked
// exactly as a task's are) plus ref, deps and on_dep_failure.
func decodeWorkflow(body []byte) (dtq.Workflow, error) {
	var w dtq.Workflow
	top, err := decodeObject(body, `{"name": "order-42", "nodes": [{"ref": "fetch", "task_type": "fetch"}]}`)
	if err != nil {
		return w, err
	}
	for _, k := range slices.Sorted(maps.Keys(top)) {
		raw := top[k]
		switch k {
		case "name":
			if err := json.Unmarshal(raw, &w.Name); err != nil {
				return w, &workflowError{node: "name", field: "name", message: "must be a string"}
			}
		case "idempotency_key":
			if err := json.Unmarshal(raw, &w.IdempotencyKey); err != nil || w.IdempotencyKey == "" {
				return w, badRequest(k, "idempotency_key: must be a string of 1..255 printable characters")
			}
			if err := wire.CheckIdempotencyKey(w.IdempotencyKey); err != nil {
				return w, err
			}
		case "nodes":
			if w.Nodes, err = decodeNodes(raw); err != nil {
				return w, err
			}
		case "on_failure":
			if string(raw) == "null" {
				continue
			}
			var sub dtq.Submission
			if err := sub.UnmarshalJSON(raw); err != nil {
				return w, nodeError("on_failure", err)
			}
			w.OnFailure = &sub
		default:
			return w, badRequest(k, "%s: is not a known field; a workflow has name, nodes, on_failure and idempotency_key", k)
		}
	}
	if _, ok := top["nodes"]; !ok {
		return w, &workflowError{node: "nodes", field: "nodes", message: "is required: a workflow needs at least one node"}
	}
	return w, nil
}

// decodeObject reads body as one JSON object, within the nesting bound
// (a node's payload nests three levels below the body).
func decodeObject(body []byte, example string) (map[string]json.RawMessage, error) {
	body = bytes.TrimSpace(body)
	if d := jsonscan.Depth(body); d > dtq.MaxJSONDepth+4 {
		return nil, badRequest("", "the body nests %d levels deep; a node's payload may nest at most %d", d, dtq.MaxJSONDepth)
	}
	var top map[string]json.RawMessage
	if len(body) == 0 || body[0] != '{' || json.Unmarshal(body, &top) != nil {
		return nil, badRequest("", "the body must be a JSON object like %s", example)
	}
	return top, nil
}

// decodeNodes reads a nodes array.
func decodeNodes(raw json.RawMessage) ([]dtq.Node, error) {
	var raws []json.RawMessage
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '[' || json.Unmarshal(raw, &raws) != nil {
		return nil, &workflowError{node: "nodes", field: "nodes", message: "must be an array of node objects"}
	}
	nodes := make([]dtq.Node, len(raws))
	for i, r := range raws {
		n, err := decodeNode(r, i)
		if err != nil {
			return nil, err
		}
		nodes[i] = n
	}
	return nodes, nil
}

// decodeNode reads one node: ref, deps and on_dep_failure here, the rest
// as a task submission.
func decodeNode(raw json.RawMessage, i int) (dtq.Node, error) {
	var n dtq.Node
	where := fmt.Sprintf("nodes[%d]", i)
	var m map[string]json.RawMessage
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' || json.Unmarshal(raw, &m) != nil {
		return n, &workflowError{node: where, message: `must be an object like {"ref": "fetch", "task_type": "fetch"}`}
	}
	if v, ok := m["ref"]; ok {
		if json.Unmarshal(v, &n.Ref) != nil {
			return n, &workflowError{node: where, field: "ref", message: "ref: must be a string"}
		}
		if n.Ref != "" && refPattern(n.Ref) {
			where = n.Ref
		}
	}
	if v, ok := m["deps"]; ok && string(v) != "null" {
		if json.Unmarshal(v, &n.Deps) != nil {
			return n, &workflowError{node: where, field: "deps", message: `deps: must be an array of refs like ["fetch"]`}
		}
	}
	if v, ok := m["on_dep_failure"]; ok && string(v) != "null" {
		var p string
		if json.Unmarshal(v, &p) != nil || (p != string(dtq.DepFail) && p != string(dtq.DepContinue)) {
			return n, &workflowError{node: where, field: "on_dep_failure", message: `on_dep_failure: must be "fail" or "continue"`}
		}
		n.OnDepFailure = dtq.DepPolicy(p)
	}
	delete(m, "ref")
	delete(m, "deps")
	delete(m, "on_dep_failure")
	rest, err := json.Marshal(m)
	if err != nil {
		return n, &workflowError{node: where, message: "is not valid JSON"}
	}
	var sub dtq.Submission
	if err := sub.UnmarshalJSON(rest); err != nil {
		return n, nodeError(where, err)
	}
	n.Submission = sub
	return n, nil
}

// refPattern reports whether ref has a node ref's form
// (^[a-z0-9][a-z0-9_.-]{0,63}$); the library checks it again.
func refPattern(ref string) bool {
	if len(ref) == 0 || len(ref) > 64 {
		return false
	}
	for i := range len(ref) {
		c := ref[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case i > 0 && (c == '_' || c == '.' || c == '-'):
		default:
			return false
		}
	}
	return true
}

// workflowQueues is every queue w's tasks go to, each once.
func workflowQueues(w *dtq.Workflow) []string {
	var qs []string
	add := func(s *dtq.Submission) {
		if q := queueOf(*s); !slices.Contains(qs, q) {
			qs = append(qs, q)
		}
	}
	for i := range w.Nodes {
		add(&w.Nodes[i].Submission)
	}
	if w.OnFailure != nil {
		add(w.OnFailure)
	}
	return qs
}

// submitResponse is POST /api/v1/workflows's answer.
type submitResponse struct {
	*dtq.WorkflowResult
	Duplicate bool `json:"duplicate"`
}

// submitWorkflow is POST /api/v1/workflows (docs/http-api.md#workflows).
func (s *Server) submitWorkflow(w http.ResponseWriter, r *http.Request) {
	if _, err := parseQuery(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := requireJSON(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	key, hasKey, err := idempotencyHeader(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	body, err := readBody(w, r, maxWorkflowBodyBytes)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	wf, err := decodeWorkflow(body)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if hasKey {
		wf.IdempotencyKey = key // the header wins over the body
	}
	for _, q := range workflowQueues(&wf) {
		if err := requireScope(r, q); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	res, err := s.cfg.Client.SubmitWorkflow(r.Context(), wf)
	if ou, ok := errors.AsType[*dtq.OutcomeUnknownError](err); ok {
		s.writeAPIError(w, r, workflowOutcomeUnknown(ou))
		return
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	status := http.StatusAccepted
	if res.Duplicate {
		status = http.StatusOK
		w.Header().Set("Idempotent-Replayed", "true")
	} else {
		s.warnUnserved(w, r, workflowQueues(&wf))
	}
	w.Header().Set("Location", "/api/v1/workflows/"+res.WorkflowID)
	s.writeJSON(w, r, status, submitResponse{WorkflowResult: res, Duplicate: res.Duplicate})
}

// workflowOutcomeUnknown is the 503 OUTCOME_UNKNOWN of a workflow whose
// record write got no answer.
func workflowOutcomeUnknown(ou *dtq.OutcomeUnknownError) *apiError {
	e := &apiError{status: http.StatusServiceUnavailable, code: codeOutcomeUnknown, retryAfter: 1,
		details: map[string]any{"workflow_id": ou.TaskID}}
	if ou.Key != "" {
		e.details["idempotency_key"] = ou.Key
		e.message = fmt.Sprintf("Redis stopped answering after the workflow was sent: workflow %s may or may not exist; "+
			"submit again with the same idempotency key (safe: it maps to that workflow if it exists)", ou.TaskID)
	} else {
		e.message = fmt.Sprintf("Redis stopped answering after the workflow was sent: workflow %s may or may not exist; "+
			"look it up with GET /api/v1/workflows/%s before submitting again, or submit with an Idempotency-Key so that a retry is safe", ou.TaskID, ou.TaskID)
	}
	return e
}

// requireWorkflowScope refuses a scoped key a workflow with a node (or its
// on_failure task) outside the key's queues, so that no key reads or acts
// on another tenant's work.
func requireWorkflowScope(r *http.Request, info *dtqtype.WorkflowInfo) error {
	for i := range info.Nodes {
		if err := requireScope(r, info.Nodes[i].Queue); err != nil {
			return err
		}
	}
	return nil
}

// getWorkflow is GET /api/v1/workflows/{id}[?wait=].
func (s *Server) getWorkflow(w http.ResponseWriter, r *http.Request) {
	q, err := parseQuery(r, "wait")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	wait, err := parseWait(q.Get("wait"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	id := r.PathValue("id")
	var info *dtqtype.WorkflowInfo
	if k, ok := KeyFromContext(r.Context()); wait == 0 || (ok && k.Scoped()) {
		// A scoped key may wait only on a workflow wholly on its queues:
		// it sees the graph first. Others wait on the status alone.
		info, err = s.cfg.Inspector.GetWorkflow(r.Context(), id)
		if err == nil {
			err = requireWorkflowScope(r, info)
		}
	}
	if err == nil && wait > 0 && (info == nil || !info.Status.Terminal()) {
		c := caller(r)
		if scope, limit := s.waits.acquire(c); scope != "" {
			s.writeAPIError(w, r, tooManyWaits(scope, limit))
			return
		}
		defer s.waits.release(c)
		// One poll of the workflow's status serves every request waiting
		// on it, and the graph is read once when it ends.
		if info, err = s.wfWatches.await(r.Context(), id, wait); err == nil {
			err = requireWorkflowScope(r, info) // a fan-out may have added nodes
		}
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, info)
}

// listWorkflows is GET /api/v1/workflows?status=&name=&limit=&cursor=.
func (s *Server) listWorkflows(w http.ResponseWriter, r *http.Request) {
	q, err := parseQuery(r, "status", "name", "limit", "cursor")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	limit, err := parseLimit(q)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	res, err := s.cfg.Inspector.ListWorkflows(r.Context(), &dtq.WorkflowListParams{Status: dtqtype.WorkflowStatus(q.Get("status")),
		Name: q.Get("name"), Cursor: q.Get("cursor"), Limit: limit})
	if err != nil {
		s.writeError(w, r, queryError(err))
		return
	}
	s.writeJSON(w, r, http.StatusOK, res)
}

// workflowCancelBody is POST /api/v1/workflows/{id}/cancel's answer.
type workflowCancelBody struct {
	Workflow *dtqtype.WorkflowInfo `json:"workflow"`
}

// cancelWorkflow is POST /api/v1/workflows/{id}/cancel: every node not
// ended is cancelled (running ones get a cancel request) and the workflow
// ends cancelled with its last node. Cancelling a cancelled workflow again
// is 202 too; one that ended otherwise is 409 WORKFLOW_NOT_RUNNING.
func (s *Server) cancelWorkflow(w http.ResponseWriter, r *http.Request) {
	if _, err := parseQuery(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	var in struct{}
	if _, err := decodeActionBody(w, r, &in, `{}`); err != nil {
		s.writeError(w, r, err)
		return
	}
	id := r.PathValue("id")
	info, err := s.cfg.Inspector.GetWorkflow(r.Context(), id)
	if err == nil {
		err = requireWorkflowScope(r, info)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	ctx, cancel := actionContext(r.Context())
	defer cancel()
	info, ended, err := s.cfg.Admin.CancelWorkflow(ctx, id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if ended && info.Status != dtqtype.WorkflowCancelled {
		s.writeAPIError(w, r, &apiError{status: http.StatusConflict, code: codeWorkflowNotRunning,
			message: fmt.Sprintf("workflow %s is %s: a finished workflow does not change any more", id, info.Status),
			details: map[string]any{"workflow_id": id, "status": info.Status}})
		return
	}
	if !ended {
		s.audited(r, "workflow.cancel", id, "")
	}
	s.writeJSON(w, r, http.StatusAccepted, workflowCancelBody{Workflow: info})
}

// addNodesBody is POST /api/v1/tasks/{id}/nodes's body, nodes as raw JSON.
type addNodesAnswer struct {
	Nodes []dtq.NodeRef `json:"nodes"`
}

// addNodes is POST /api/v1/tasks/{id}/nodes {"lease_token", "nodes"}: the
// running node holding the lease adds nodes to its workflow (fan-out).
func (s *Server) addNodes(w http.ResponseWriter, r *http.Request) {
	if _, err := parseQuery(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := requireJSON(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	body, err := readBody(w, r, maxWorkflowBodyBytes)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	top, err := decodeObject(body, `{"lease_token": "…", "nodes": [{"ref": "part-1", "task_type": "part"}]}`)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var token string
	var nodes []dtq.Node
	for _, k := range slices.Sorted(maps.Keys(top)) {
		switch k {
		case "lease_token":
			if json.Unmarshal(top[k], &token) != nil {
				s.writeError(w, r, badRequest(k, "lease_token: must be the string the claim returned"))
				return
			}
		case "nodes":
			if nodes, err = decodeNodes(top[k]); err != nil {
				s.writeError(w, r, err)
				return
			}
		default:
			s.writeError(w, r, badRequest(k, `%s: is not a known field; the body is {"lease_token": "…", "nodes": [...]}`, k))
			return
		}
	}
	if _, ok := top["nodes"]; !ok {
		s.writeError(w, r, &workflowError{node: "nodes", field: "nodes", message: "is required"})
		return
	}
	wf := dtq.Workflow{Nodes: nodes}
	for _, q := range workflowQueues(&wf) {
		if err := requireScope(r, q); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	lease, err := s.cfg.WorkerGateway.NodeLease(r.Context(), r.PathValue("id"), token)
	if err != nil {
		s.writeError(w, r, queryError(err))
		return
	}
	k, hasKey := KeyFromContext(r.Context())
	if hasKey && k.Scoped() {
		lease.Queues = k.Queues // the library checks the deps' queues too
	}
	refs, err := s.cfg.Client.AddNodes(r.Context(), lease, nodes...)
	if se, ok := errors.AsType[*dtq.ScopeError](err); ok {
		s.writeAPIError(w, r, fanOutScopeError(k, se))
		return
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if refs == nil {
		refs = []dtq.NodeRef{}
	}
	s.writeJSON(w, r, http.StatusOK, addNodesAnswer{Nodes: refs})
}

// fanOutScopeError is the 403 FORBIDDEN of a scoped key's fan-out that
// names a dep on a queue outside the key's: the dep's result would reach
// the key's worker in the new node's claim.
func fanOutScopeError(k APIKey, se *dtq.ScopeError) *apiError {
	if se.Dep == "" {
		return (&scopeError{key: k.Name, queue: se.Queue, queues: k.Queues}).apiError()
	}
	return &apiError{status: http.StatusForbidden, code: codeForbidden,
		message: fmt.Sprintf("the key %q is limited to the queues %s; node %s depends on %q, a node of queue %q, whose result it would read",
			k.Name, strings.Join(k.Queues, ", "), se.Node, se.Dep, se.Queue),
		details: map[string]any{"queues": k.Queues, "queue": se.Queue, "node": se.Node, "dep": se.Dep}}
}

// classifyWorkflow maps the library's workflow errors to their answers, or
// nil for any other error.
func classifyWorkflow(err error) *apiError {
	var (
		we *workflowError
		wf *dtq.WorkflowError
		wc *dtq.WorkflowConflictError
	)
	switch {
	case errors.As(err, &we):
		return we.apiError()
	case errors.As(err, &wc):
		e := &apiError{status: http.StatusConflict, code: codeIdemInProgress,
			message: fmt.Sprintf("the workflow %s with this idempotency key is still running; retry later to get its outcome, or read it with GET /api/v1/workflows/%s", wc.WorkflowID, wc.WorkflowID),
			details: map[string]any{"workflow_id": wc.WorkflowID}}
		if errors.Is(err, dtq.ErrIdempotencyKeyMismatch) {
			e.status, e.code = http.StatusUnprocessableEntity, codeIdemKeyMismatch
			e.message = fmt.Sprintf("this idempotency key was used for workflow %s with a different request; use a new key for different work", wc.WorkflowID)
		}
		return e
	case errors.As(err, &wf):
		d := map[string]any{"node": wf.Node}
		if wf.Field != "" {
			d["field"] = wf.Field
		}
		switch {
		case errors.Is(err, dtq.ErrNodeMismatch):
			return &apiError{status: http.StatusUnprocessableEntity, code: codeIdemKeyMismatch, details: d,
				message: fmt.Sprintf("node %s: the workflow already has a node with this ref and another definition; a ref added again must be defined the same (use a new ref for other work)", wf.Node)}
		case errors.Is(err, dtq.ErrPayloadTooLarge):
			return &apiError{status: http.StatusRequestEntityTooLarge, code: codePayloadTooLarge, details: d,
				message: wf.Error()}
		}
		return &apiError{status: http.StatusBadRequest, code: codeInvalidWorkflow, message: wf.Error(), details: d}
	case errors.Is(err, dtq.ErrWorkflowNotFound):
		return &apiError{status: http.StatusNotFound, code: codeNotFound,
			message: "no workflow has this id (or its retention has passed)"}
	case errors.Is(err, dtq.ErrWorkflowNotRunning):
		return &apiError{status: http.StatusConflict, code: codeWorkflowNotRunning,
			message: "the workflow has ended or is being cancelled: it takes no more nodes"}
	}
	return nil
}
