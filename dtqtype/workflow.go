package dtqtype

// WorkflowStatus is a workflow's status. On the wire it is lowercase.
type WorkflowStatus string

// Workflow statuses. Submitting and Running are live; the rest are final.
const (
	// WorkflowSubmitting: its nodes are being written; no node runs yet.
	WorkflowSubmitting WorkflowStatus = "submitting"
	// WorkflowRunning: some node has not ended.
	WorkflowRunning WorkflowStatus = "running"
	// WorkflowSucceeded: every node succeeded, or ended otherwise only
	// where each of its dependants said continue.
	WorkflowSucceeded WorkflowStatus = "succeeded"
	// WorkflowFailed: a node failed (or was cancelled on its own).
	WorkflowFailed WorkflowStatus = "failed"
	// WorkflowCancelled: the workflow was cancelled.
	WorkflowCancelled WorkflowStatus = "cancelled"
)

// WorkflowStatuses lists every workflow status.
var WorkflowStatuses = []WorkflowStatus{WorkflowSubmitting, WorkflowRunning, WorkflowSucceeded, WorkflowFailed, WorkflowCancelled}

// Terminal reports whether s is a final status.
func (s WorkflowStatus) Terminal() bool {
	return s == WorkflowSucceeded || s == WorkflowFailed || s == WorkflowCancelled
}

// WorkflowInfo is a workflow as stored and shown by the API.
type WorkflowInfo struct {
	ID     string         `json:"workflow_id"`
	Name   string         `json:"name,omitempty"`
	Status WorkflowStatus `json:"status"`
	// Counts is the number of nodes in each status.
	Counts     map[Status]int `json:"counts"`
	CreatedAt  Time           `json:"created_at"`
	FinishedAt Time           `json:"finished_at"`
	// CancelRequested says the workflow is being cancelled.
	CancelRequested bool `json:"cancel_requested,omitempty"`
	// OnFailureTaskID is the id of the on_failure task once it was
	// submitted.
	OnFailureTaskID string             `json:"on_failure_task_id,omitempty"`
	Nodes           []WorkflowNodeInfo `json:"nodes"`
}

// WorkflowNodeInfo is one node of a workflow.
type WorkflowNodeInfo struct {
	Ref    string   `json:"ref"`
	TaskID string   `json:"task_id"`
	Queue  string   `json:"queue"`
	Deps   []string `json:"deps"`
	// Status is the node's task status (waiting until it is released).
	Status Status `json:"status"`
	// ErrorClass is DependencyFailed for a node cancelled because a dep
	// failed, else the error class its end carried, if any.
	ErrorClass string `json:"error_class,omitempty"`
}

// WorkflowListParams select and page Inspector.ListWorkflows.
type WorkflowListParams struct {
	Status WorkflowStatus // "" = any
	Name   string         // "" = any; else exactly this name
	// Cursor is the NextCursor of the page before ("" = the first page).
	Cursor string
	// Limit is the page size, 1..MaxListLimit; 0 means 50.
	Limit int
}

// WorkflowSummary is one workflow of a listing.
type WorkflowSummary struct {
	ID     string         `json:"workflow_id"`
	Name   string         `json:"name,omitempty"`
	Status WorkflowStatus `json:"status"`
	// Nodes is how many nodes the workflow has, and Ended how many of them
	// ended, as the workflow has recorded their ends (GET of the workflow
	// has each node's status).
	Nodes int `json:"nodes"`
	Ended int `json:"ended"`
}
