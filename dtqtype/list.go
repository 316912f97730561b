package dtqtype

import "encoding/json"

// MaxListLimit is the largest page any list returns.
const MaxListLimit = 1000

// ListResult is one page of a list: its items, and the cursor of the next
// page, to pass back as the list's Cursor; NextCursor is "" on the last
// page. A filtered page may be short, even empty, while more remain: follow
// NextCursor until it is "". Cursors are opaque; one list refuses another's.
type ListResult[T any] struct {
	Items      []T    `json:"items"`
	NextCursor string `json:"next_cursor"`
}

// MarshalJSON writes the API's list answer: nil Items as [], and a ""
// NextCursor as null.
func (r ListResult[T]) MarshalJSON() ([]byte, error) {
	w := struct {
		Items      []T     `json:"items"`
		NextCursor *string `json:"next_cursor"`
	}{Items: r.Items}
	if w.Items == nil {
		w.Items = []T{}
	}
	if r.NextCursor != "" {
		w.NextCursor = &r.NextCursor
	}
	return json.Marshal(w)
}

// TaskListParams select and page Inspector.ListTasks; the zero value lists
// every task.
type TaskListParams struct {
	Queue  string // "" = every queue
	Status Status // "" = any
	Type   string // "" = any
	// Cursor is the NextCursor of the page before ("" = the first page).
	Cursor string
	// Limit is the page size, 1..MaxListLimit; 0 means 50.
	Limit int
}

// DLQListParams select and page Inspector.ListDLQ; the zero value lists
// every dead-letter entry.
type DLQListParams struct {
	Queue      string // "" = every queue
	Type       string // "" = any
	ErrorClass string // "" = any
	// Cursor is the NextCursor of the page before ("" = the first page).
	Cursor string
	// Limit is the page size, 1..MaxListLimit; 0 means 50.
	Limit int
}

// ScheduleListParams select and page Admin.ListSchedules.
type ScheduleListParams struct {
	Queue string // "" = every queue
	// Cursor is the NextCursor of the page before ("" = the first page).
	Cursor string
	// Limit is the page size, 1..MaxListLimit; 0 means 50.
	Limit int
}

// QueueListParams select and page Inspector.ListQueues.
type QueueListParams struct {
	// Only, when not nil, restricts the list to these queues (those in the
	// registry), as for an API key scoped to some queues.
	Only []string
	// Cursor is the NextCursor of the page before ("" = the first page).
	Cursor string
	// Limit is the page size, 1..MaxListLimit; 0 means 100. Each queue's
	// full state costs about thirty Redis commands.
	Limit int
}

// AuditListParams page Inspector.ListAudit.
type AuditListParams struct {
	// Cursor is the NextCursor of the page before ("" = the first page).
	Cursor string
	// Limit is the page size, 1..MaxListLimit; 0 means 50.
	Limit int
}

// WorkerListParams page Inspector.ListWorkers.
type WorkerListParams struct {
	// Cursor is the NextCursor of the page before ("" = the first page).
	Cursor string
	// Limit is the page size, 1..MaxListLimit; 0 means 100.
	Limit int
}
