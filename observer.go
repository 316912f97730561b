package dtq

import "time"

// Observer is told what a Worker does, so that metrics (or anything else)
// can be recorded without the library depending on a metrics system: the
// dtqprom package records them in Prometheus, which is what the dtq binary
// serves. Its methods are called from many goroutines at once and must not
// block. Set it in WorkerConfig.Observer; nil records nothing.
type Observer interface {
	// Serving is called once the worker has started, with the queues it
	// serves and the task types it handles (so counters can start at 0).
	Serving(queues, taskTypes []string)
	// TaskStarted is called when an attempt starts running.
	TaskStarted(s TaskStart)
	// TaskFinished is called when an attempt has ended and its outcome was
	// written (or could not be).
	TaskFinished(e TaskEnd)
	// Throttled is called when a flow-control limit held starts back: n
	// starts for reason "rate", "concurrency", "key_concurrency" or "key_rate".
	Throttled(queue, reason string, n int)
	// FinalizeRetried is called when an attempt's outcome is written again
	// after a Redis error.
	FinalizeRetried(queue string)
}

// TaskStart describes an attempt that starts.
type TaskStart struct {
	Queue, Type string
	Attempt     int
	// Waited is the time since the task was created.
	Waited time.Duration
}

// TaskEnd describes an attempt that ended.
type TaskEnd struct {
	// ID is the task's id, which ties the end to the attempt's handler
	// call (dtqotel's settle spans).
	ID          string
	Queue, Type string
	Attempt     int
	// Outcome is what the attempt led to: "succeeded", "retrying",
	// "dead_lettered", "failed", "cancelled", "lease_lost" (the outcome was
	// not written: another worker owns the task), "handback" (handed back
	// at the drain deadline) or "error" (the outcome could not be written).
	Outcome string
	// Took is the handler's run time.
	Took time.Duration
	// RetryDelay is the backoff chosen, with Outcome "retrying".
	RetryDelay time.Duration
	// SinceCreated is the time from the task's creation to this end.
	SinceCreated time.Duration
}

// noObserver records nothing.
type noObserver struct{}

func (noObserver) Serving([]string, []string)    {}
func (noObserver) TaskStarted(TaskStart)         {}
func (noObserver) TaskFinished(TaskEnd)          {}
func (noObserver) Throttled(string, string, int) {}
func (noObserver) FinalizeRetried(string)        {}
