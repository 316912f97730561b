// Package dtqtype holds the plain data types dtq shares between its public
// library, its storage layer and its front ends: the task record, statuses
// and timestamps. It has no dependencies so that every layer can use it.
package dtqtype

import (
	"encoding/json"
	"slices"
	"time"
)

// Status is the lifecycle state of a task. On the wire it is lowercase.
type Status string

// Task statuses. Waiting, Pending, Queued, Running and Retrying are live;
// the rest are terminal and accept no further transition. Waiting is a
// workflow node whose deps have not all ended.
const (
	StatusWaiting      Status = "waiting"
	StatusPending      Status = "pending"
	StatusQueued       Status = "queued"
	StatusRunning      Status = "running"
	StatusRetrying     Status = "retrying"
	StatusSucceeded    Status = "succeeded"
	StatusFailed       Status = "failed"
	StatusDeadLettered Status = "dead_lettered"
	StatusCancelled    Status = "cancelled"
	StatusExpired      Status = "expired"
)

// Statuses lists every status in lifecycle order.
var Statuses = []Status{
	StatusWaiting, StatusPending, StatusQueued, StatusRunning, StatusRetrying,
	StatusSucceeded, StatusFailed, StatusDeadLettered, StatusCancelled, StatusExpired,
}

// Valid reports whether s is a known status.
func (s Status) Valid() bool {
	return slices.Contains(Statuses, s)
}

// Terminal reports whether s is a final status.
func (s Status) Terminal() bool {
	switch s {
	case StatusSucceeded, StatusFailed, StatusDeadLettered, StatusCancelled, StatusExpired:
		return true
	case StatusWaiting, StatusPending, StatusQueued, StatusRunning, StatusRetrying:
		return false
	}
	return false // not a status
}

// TimeLayout is the wire format of every timestamp: UTC with milliseconds.
const TimeLayout = "2006-01-02T15:04:05.000Z"

// Time is a timestamp that marshals to JSON as TimeLayout. The zero Time
// marshals as null.
type Time struct{ time.Time }

// MarshalJSON implements json.Marshaler.
func (t Time) MarshalJSON() ([]byte, error) {
	return t.appendJSON(make([]byte, 0, len(TimeLayout)+2)), nil
}

// UnmarshalJSON implements json.Unmarshaler; it accepts TimeLayout, RFC 3339
// and null.
func (t *Time) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		t.Time = time.Time{}
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return err
	}
	t.Time = v.UTC()
	return nil
}

// MillisTime converts epoch milliseconds to a Time; 0 is the zero Time.
func MillisTime(ms int64) Time {
	if ms == 0 {
		return Time{}
	}
	return Time{time.UnixMilli(ms).UTC()}
}

// TaskInfo is a task as stored in Redis and shown by the API.
type TaskInfo struct {
	ID             string          `json:"task_id"`
	Queue          string          `json:"queue"`
	Type           string          `json:"task_type"`
	Payload        json.RawMessage `json:"payload"`
	Priority       int             `json:"priority"`
	MaxAttempts    int             `json:"max_attempts"`
	Attempt        int             `json:"attempt"`
	TimeoutMS      int64           `json:"timeout_ms"`
	IdempotencyKey *string         `json:"idempotency_key"`
	ConcurrencyKey string          `json:"concurrency_key,omitempty"`
	// DedupKey is the deduplication key the task was submitted with
	// (docs/deduplication.md): its dedup.key, or the key its dedup.by
	// paths made; empty when none.
	DedupKey         string          `json:"dedup_key,omitempty"`
	Status           Status          `json:"status"`
	CreatedAt        Time            `json:"created_at"`
	AvailableAt      Time            `json:"available_at"`
	ExpiresAt        Time            `json:"expires_at"`
	Metadata         json.RawMessage `json:"metadata"`
	CancelRequested  bool            `json:"cancel_requested"`
	Execution        Execution       `json:"execution"`
	Attempts         []AttemptRecord `json:"attempts"`
	Result           json.RawMessage `json:"result"`
	ResultTruncated  bool            `json:"result_truncated"`
	ResultExpired    bool            `json:"result_expired"`
	PreviousAttempts int             `json:"previous_attempts"`
	// RetentionSeconds is how long the task is kept once finished, when
	// its submission chose (0: deleted as it finishes); nil means the
	// workers' setting.
	RetentionSeconds *int64 `json:"retention_seconds,omitempty"`
	// KeepPayload says the submission asked to keep the payload once the
	// task succeeded (metadata is always kept).
	KeepPayload bool `json:"keep_payload,omitempty"`
	// PayloadDropped says the task succeeded and its payload was not kept
	// (it is null; the metadata is kept).
	PayloadDropped bool `json:"payload_dropped,omitempty"`
	// WorkflowID and Ref name the workflow node the task is; empty for a
	// task submitted on its own.
	WorkflowID string `json:"workflow_id,omitempty"`
	Ref        string `json:"ref,omitempty"`
	// Progress is the last progress the task's handler reported (a number
	// 0..100 or a JSON object), nil when it reported none.
	Progress json.RawMessage `json:"progress,omitempty"`
	// ProgressAt is when Progress was written; nil when there is none.
	ProgressAt *Time `json:"progress_at,omitempty"`
	// LogAttempts is the highest attempt that logged lines (read them with
	// the task's logs); 0 when none did.
	LogAttempts int `json:"log_attempts,omitempty"`
}

// LogLine is one line a task's handler logged (docs/progress.md).
type LogLine struct {
	Attempt int    `json:"attempt"`
	TS      Time   `json:"ts"`
	Line    string `json:"line"`
}

// Execution describes the current or last attempt of a task.
type Execution struct {
	StartedAt    Time   `json:"started_at"`
	FinishedAt   Time   `json:"finished_at"`
	DurationMS   *int64 `json:"duration_ms"`
	WorkerID     string `json:"worker_id,omitempty"`
	ErrorClass   string `json:"error_class,omitempty"`
	ErrorMessage string `json:"error_message,omitempty"`
	Retryable    *bool  `json:"retryable"`
	RetryDelayMS *int64 `json:"retry_delay_ms"`
}

// AttemptRecord is one finished attempt in a task's history.
type AttemptRecord struct {
	Attempt      int    `json:"attempt"`
	WorkerID     string `json:"worker_id"`
	StartedAt    Time   `json:"started_at"`
	FinishedAt   Time   `json:"finished_at"`
	DurationMS   int64  `json:"duration_ms"`
	Outcome      string `json:"outcome"`
	ErrorClass   string `json:"error_class,omitempty"`
	ErrorMessage string `json:"error_message,omitempty"`
}
