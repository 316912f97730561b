package dtq

import "github.com/dtq-io/dtq/dtqtype"

// Every list takes its params (nil means the defaults) and returns one
// page as a *dtqtype.ListResult: the items and the cursor of the next page,
// "" on the last. The params live in dtqtype so that the storage layer
// reads them as they are.

// TaskListParams select and page Inspector.ListTasks.
type TaskListParams = dtqtype.TaskListParams

// DLQListParams select and page Inspector.ListDLQ.
type DLQListParams = dtqtype.DLQListParams

// ScheduleListParams select and page Admin.ListSchedules.
type ScheduleListParams = dtqtype.ScheduleListParams

// QueueListParams select and page Inspector.ListQueues.
type QueueListParams = dtqtype.QueueListParams

// AuditListParams page Inspector.ListAudit.
type AuditListParams = dtqtype.AuditListParams

// WorkerListParams page Inspector.ListWorkers.
type WorkerListParams = dtqtype.WorkerListParams

// listParams returns a copy of p (the zero value for nil), so that
// applying defaults never writes to the caller's params.
func listParams[P any](p *P) P {
	if p == nil {
		var zero P
		return zero
	}
	return *p
}

// checkList applies a list's default page size to *limit (when 0) and
// refuses a limit outside 1..dtqtype.MaxListLimit or an invalid queue
// filter (queue is "" for a list without one).
func checkList(limit *int, def int, queue string) error {
	if *limit == 0 {
		*limit = def
	}
	if *limit < 1 || *limit > dtqtype.MaxListLimit {
		return invalid("limit", "must be between 1 and %d", dtqtype.MaxListLimit)
	}
	if queue != "" && !ValidQueueName(queue) {
		return invalid("queue", "must match ^[a-z0-9][a-z0-9_-]{0,63}$")
	}
	return nil
}
