package events

import (
	"fmt"
	"slices"
	"strings"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/internal/rdb"
)

// Filter selects the events a subscription delivers. The zero Filter
// selects every event. Events it drops still move the subscription's
// cursor, so a resumed subscription does not read them again.
type Filter struct {
	// Queues limits the feed to these queues; SysQueue selects worker
	// events. Empty = every queue and the worker events.
	Queues []string
	// TaskID limits the feed to one task's events. Empty = any.
	TaskID string
	// Types limits the feed to these event types. Empty = any.
	Types []string
}

// FilterError reports an invalid filter or cursor; Field names the query
// parameter to blame.
type FilterError struct {
	Field   string
	Message string
}

// Error names the field and what is wrong with it.
func (e *FilterError) Error() string { return e.Field + ": " + e.Message }

// Validate checks every name in f.
func (f *Filter) Validate() error {
	for _, q := range f.Queues {
		if q != SysQueue && !dtq.ValidQueueName(q) {
			return &FilterError{Field: "queue", Message: fmt.Sprintf("%q is not a valid queue name", q)}
		}
	}
	if f.TaskID != "" {
		if _, ok := rdb.ParseTaskID(f.TaskID); !ok {
			return &FilterError{Field: "task_id", Message: "must be a task id (32 lowercase hex digits)"}
		}
	}
	for _, t := range f.Types {
		if !slices.Contains(Types, t) {
			return &FilterError{Field: "type", Message: fmt.Sprintf("%q is not an event type; accepted: %s", t, strings.Join(Types, ", "))}
		}
	}
	return nil
}

// readsQueue reports whether the subscription needs queue's stream at all.
func (f *Filter) readsQueue(queue string) bool {
	if len(f.Queues) > 0 {
		q, _ := rdb.PartitionOf(queue) // a partitioned queue's feed is its partitions'
		return slices.Contains(f.Queues, q)
	}
	// Worker events carry no task id.
	return queue != SysQueue || f.TaskID == ""
}

func (f *Filter) match(e *entry) bool {
	if f.TaskID != "" && e.taskID != f.TaskID {
		return false
	}
	return len(f.Types) == 0 || slices.Contains(f.Types, e.typ)
}

// splitList splits a comma-separated query value, dropping empty items and
// duplicates.
func splitList(v string) []string {
	var out []string
	for s := range strings.SplitSeq(v, ",") {
		s = strings.TrimSpace(s)
		if s != "" && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}
