package events

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/internal/rdb"
)

// SysQueue names the stream of worker events in event ids, cursors and the
// queue filter. It cannot clash with a queue: queue names start with a
// letter or a digit.
const SysQueue = "_sys"

// Event types. Task events go to their queue's stream inside the script
// that makes the transition; worker events go to the system stream.
const (
	// TypeTaskPending: a delayed task was submitted.
	TypeTaskPending = "TASK_PENDING"
	// TypeTaskQueued: a task was submitted, became due, was handed back at
	// shutdown or was requeued from the DLQ.
	TypeTaskQueued = "TASK_QUEUED"
	// TypeTaskRetried: a retrying task is queued again, attempt +1.
	TypeTaskRetried = "TASK_RETRIED"
	// TypeTaskStarted: a worker claimed the task.
	TypeTaskStarted = "TASK_STARTED"
	// TypeTaskLeaseLost: an expired lease was taken over, attempt +1.
	TypeTaskLeaseLost = "TASK_LEASE_LOST"
	// TypeTaskSucceeded: the handler returned a result.
	TypeTaskSucceeded = "TASK_SUCCEEDED"
	// TypeTaskRetryScheduled: the handler failed retryably; a retry is due.
	TypeTaskRetryScheduled = "TASK_RETRY_SCHEDULED"
	// TypeTaskFailed: the task failed for good and the DLQ is off.
	TypeTaskFailed = "TASK_FAILED"
	// TypeTaskDeadLettered: the task failed for good and is in the DLQ.
	TypeTaskDeadLettered = "TASK_DEAD_LETTERED"
	// TypeTaskCancelled: the task was cancelled.
	TypeTaskCancelled = "TASK_CANCELLED"
	// TypeTaskCancelRequested: cancel was requested while it ran.
	TypeTaskCancelRequested = "TASK_CANCEL_REQUESTED"
	// TypeTaskExpired: the task's deadline to start passed.
	TypeTaskExpired = "TASK_EXPIRED"
	// TypeTaskDuplicateAbsorbed: a stale stream entry of the task was dropped.
	TypeTaskDuplicateAbsorbed = "TASK_DUPLICATE_ABSORBED"
	// TypeTaskDeduplicated: a submission was collapsed into the task (its
	// dedup key's task: drop, throttle, debounce; metadata {mode}), or the
	// queued task was cancelled for a newer submission of its key
	// (replace, keep_last; metadata {mode, replaced_by, previous_status}).
	TypeTaskDeduplicated = "TASK_DEDUPLICATED"
	// TypeTaskProgress: a running task reported progress (at most one a
	// second per task; metadata {progress}).
	TypeTaskProgress = "TASK_PROGRESS"
	// TypeQueuePaused: the queue was paused.
	TypeQueuePaused = "QUEUE_PAUSED"
	// TypeQueueResumed: the queue was resumed.
	TypeQueueResumed = "QUEUE_RESUMED"
	// TypeWorkerStarted: a worker process started.
	TypeWorkerStarted = "WORKER_STARTED"
	// TypeWorkerStopped: a worker process stopped.
	TypeWorkerStopped = "WORKER_STOPPED"
	// TypeScheduleFired: a schedule made its task for a tick, or was
	// triggered (docs/schedules.md).
	TypeScheduleFired = "SCHEDULE_FIRED"
)

// Types lists every event type, in lifecycle order. The type filter
// accepts only these.
var Types = []string{
	TypeTaskPending, TypeTaskQueued, TypeTaskRetried, TypeTaskStarted, TypeTaskLeaseLost,
	TypeTaskSucceeded, TypeTaskRetryScheduled, TypeTaskFailed, TypeTaskDeadLettered,
	TypeTaskCancelled, TypeTaskCancelRequested, TypeTaskExpired, TypeTaskDuplicateAbsorbed, TypeTaskDeduplicated, TypeTaskProgress,
	TypeQueuePaused, TypeQueueResumed, TypeWorkerStarted, TypeWorkerStopped,
	TypeScheduleFired,
}

// Envelope is one event as the feed sends it. Empty strings and a zero
// Attempt are sent as null: queue events have no task, worker events no
// queue.
type Envelope struct {
	// EventID is "<queue>/<stream entry id>" ("<queue>#<k>/…" for partition k
	// of a partitioned queue, "_sys/…" for worker events),
	// unique across queues.
	EventID string
	// TS is when the transition happened (the script's clock).
	TS time.Time
	// Type is one of Types.
	Type string
	// TaskID is the task the event is about; "" for queue and worker events.
	TaskID string
	// Queue is the task's queue; "" for worker events.
	Queue string
	// TaskType is the task's type; "" for queue and worker events.
	TaskType string
	// Attempt is the task's attempt after the transition; 0 when none.
	Attempt int
	// WorkerID is the worker involved, or "".
	WorkerID string
	// Metadata is a JSON object with type-specific details; "{}" when none.
	Metadata json.RawMessage
}

type wireEnvelope struct {
	EventID  string          `json:"event_id"`
	TS       dtqtype.Time    `json:"ts"`
	Type     string          `json:"type"`
	TaskID   *string         `json:"task_id"`
	Queue    *string         `json:"queue"`
	TaskType *string         `json:"task_type"`
	Attempt  *int            `json:"attempt"`
	WorkerID *string         `json:"worker_id"`
	Metadata json.RawMessage `json:"metadata"`
}

func orNull[T comparable](v T) *T {
	var zero T
	if v == zero {
		return nil
	}
	return &v
}

// MarshalJSON implements json.Marshaler with the wire field names.
func (e Envelope) MarshalJSON() ([]byte, error) {
	meta := e.Metadata
	if !isJSONObject(meta) {
		meta = json.RawMessage("{}")
	}
	return json.Marshal(wireEnvelope{
		EventID: e.EventID, TS: dtqtype.Time{Time: e.TS}, Type: e.Type,
		TaskID: orNull(e.TaskID), Queue: orNull(e.Queue), TaskType: orNull(e.TaskType),
		Attempt: orNull(e.Attempt), WorkerID: orNull(e.WorkerID), Metadata: meta,
	})
}

// UnmarshalJSON implements json.Unmarshaler; nulls become zero values.
func (e *Envelope) UnmarshalJSON(b []byte) error {
	var w wireEnvelope
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*e = Envelope{EventID: w.EventID, TS: w.TS.Time, Type: w.Type, Metadata: w.Metadata}
	if w.TaskID != nil {
		e.TaskID = *w.TaskID
	}
	if w.Queue != nil {
		e.Queue = *w.Queue
	}
	if w.TaskType != nil {
		e.TaskType = *w.TaskType
	}
	if w.Attempt != nil {
		e.Attempt = *w.Attempt
	}
	if w.WorkerID != nil {
		e.WorkerID = *w.WorkerID
	}
	return nil
}

func isJSONObject(b []byte) bool {
	b = bytes.TrimSpace(b)
	return len(b) >= 2 && b[0] == '{' && json.Valid(b)
}

// entry is one stream entry, decoded once and shared read-only by every
// subscription that delivers it.
type entry struct {
	id     streamID
	queue  string // SysQueue for worker events
	typ    string
	taskID string
	data   []byte // the envelope's JSON
	ord    int64  // its ordinal in the stream (see store.go), or unknownOrd
}

// maxTSOffset bounds a task event's ts offset (see event_ts in lua/_events.lua):
// anything larger is an epoch-ms time.
const maxTSOffset = 100_000_000_000

// decodeEntry turns a stream entry of queue's stream into an entry. Fields
// the scripts did not write stay empty; a missing or bad ts falls back to
// the entry id's time.
func decodeEntry(queue string, m redis.XMessage) (*entry, error) {
	id, err := parseStreamID(m.ID)
	if err != nil {
		return nil, err
	}
	str := func(k string) string {
		s, _ := m.Values[k].(string)
		return s
	}
	env := Envelope{EventID: queue + "/" + m.ID, Type: str("type"), TaskID: str("task_id"),
		TaskType: str("task_type"), WorkerID: str("worker_id"), Metadata: json.RawMessage(str("meta"))}
	if queue != SysQueue {
		env.Queue = queue
		if q, k := rdb.PartitionOf(queue); k > 0 {
			// A partition's events are its queue's; the id names the
			// partition, so that it stays unique.
			env.Queue, env.EventID = q, q+"#"+strconv.Itoa(k)+"/"+m.ID
		}
	}
	env.Attempt, _ = strconv.Atoi(str("attempt"))
	ms, err := strconv.ParseInt(str("ts"), 10, 64)
	switch {
	case err != nil:
		ms = int64(min(id.ms, math.MaxInt64))
	case ms > -maxTSOffset && ms < maxTSOffset && env.TaskID != "":
		// A task's event stores ts as ms since the time in the task id.
		ms += rdb.TaskIDTime(env.TaskID).UnixMilli()
	}
	env.TS = time.UnixMilli(ms)
	data, err := env.MarshalJSON()
	if err != nil {
		return nil, err
	}
	return &entry{id: id, queue: queue, typ: env.Type, taskID: env.TaskID, data: data}, nil
}
