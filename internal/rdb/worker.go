package rdb

import "time"

// Group is the consumer group every worker of a queue reads through.
const Group = "workers"

// AttemptsCap bounds the attempt history kept in a task hash.
const AttemptsCap = 20

// WorkerSettings are the limits the worker-side scripts apply.
type WorkerSettings struct {
	WorkerID     string
	Lease        time.Duration // DTQ_VISIBILITY_TIMEOUT_S
	EventsMaxLen int64
	// SucceededRetention and FailedRetention are how long a finished task
	// is kept (failed: also dead-lettered out of the DLQ index, cancelled
	// and expired); 0 deletes it as it finishes. A task's own retention
	// (Submission.Retention) wins over them.
	SucceededRetention time.Duration
	FailedRetention    time.Duration
	ResultRetention    time.Duration
	DLQEnabled         bool
	DLQMaxLen          int64
	// Claim, when set, also fences renewals and finalizes on the nonce of
	// the claim call that started the attempt (a remote worker's lease
	// token names it). Go workers leave it empty: their calls are fenced
	// on task, attempt and worker id.
	Claim string
}

// seconds is d in whole seconds, the unit the scripts take retentions in.
func seconds(d time.Duration) int64 { return int64(d / time.Second) }
