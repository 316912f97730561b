package dtqtype

import "encoding/json"

// ScheduleInfo is a schedule (docs/schedules.md) as stored and shown by the API:
// its definition, with the task fields' defaults applied, and its state.
type ScheduleInfo struct {
	Name        string          `json:"name"`
	Spec        string          `json:"spec"`
	Timezone    string          `json:"timezone"`
	Queue       string          `json:"queue"`
	TaskType    string          `json:"task_type"`
	Payload     json.RawMessage `json:"payload"`
	Priority    int             `json:"priority"`
	MaxAttempts int             `json:"max_attempts"`
	TimeoutMS   int64           `json:"timeout_ms"`
	Metadata    json.RawMessage `json:"metadata"`
	Paused      bool            `json:"paused"`
	// NextRunAt is the next tick; null while paused.
	NextRunAt Time `json:"next_run_at"`
	// LastRunAt is when a task was last made for the schedule (by a tick or
	// a trigger); LastTaskID is that task. Both null before the first.
	LastRunAt  Time    `json:"last_run_at"`
	LastTaskID *string `json:"last_task_id"`
	// LastScheduledFor is the last tick the schedulers handled, whether or
	// not it made a task.
	LastScheduledFor Time `json:"last_scheduled_for"`
	// LastError says why the last tick made no task (the queue was full or
	// not declared, or the task was refused); null once a task is made.
	LastError   *string `json:"last_error"`
	LastErrorAt Time    `json:"last_error_at"`
	CreatedAt   Time    `json:"created_at"`
	UpdatedAt   Time    `json:"updated_at"`
	// Version counts the definition's replacements, from 1.
	Version int64 `json:"version"`
}
