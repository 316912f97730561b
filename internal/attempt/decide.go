package attempt

import "time"

// Op is the finalize script an ended attempt needs.
type Op int

const (
	// None writes nothing (the lease was lost, or the task was handed back).
	None Op = iota
	// Succeed runs finish_succeeded.lua.
	Succeed
	// Retry runs finish_retry.lua; it ends the task cancelled when a cancel
	// was requested.
	Retry
	// Dead runs finish_dead.lua (dead-lettered, or failed with the DLQ
	// off); likewise cancelled when a cancel was requested.
	Dead
)

// Decision is what an ended attempt means for its task.
type Decision struct {
	Op Op
	// Outcome, with None, is the metric's outcome: "lease_lost" or "handback".
	Outcome string
	// Class and Message are the error_class and the one-line error_message.
	Class, Message string
	// Retryable, with Dead: the error was retryable but attempts ran out.
	Retryable bool
	// Delay, with Retry, is the wait before the next attempt.
	Delay time.Duration
}

// Exhausted is the dead-letter decision that replaces d, a retry, when
// the retry script finds the task's attempts used up.
func (d Decision) Exhausted() Decision {
	return Decision{Op: Dead, Class: d.Class, Message: d.Message, Retryable: true}
}

// Policy shapes the backoff of retryable failures.
type Policy struct {
	Base, Max time.Duration
	// Jitter spreads each delay by ±Jitter·delay, 0..1.
	Jitter float64
}

// End is how an attempt ended, as the process that ran it saw it.
type End struct {
	// Attempt is the attempt's number, from 1. MaxAttempts is the task's
	// limit; 0 means it is not known here, and the retry script checks it
	// (see Decision.Exhausted).
	Attempt, MaxAttempts int
	// LeaseLost: another worker owns the task now; nothing may be written.
	LeaseLost bool
	// Failed: the handler returned an error (false: it succeeded).
	Failed bool
	// Shutdown: the task was handed back at the drain deadline.
	Shutdown bool
	// Panicked: the handler panicked, a permanent failure of class Panic.
	Panicked bool
	// TimedOut: the attempt ran out of time, whatever the handler returned;
	// its class is Timeout.
	TimedOut bool
	// Permanent: the failure is not retried.
	Permanent bool
	// Class and Message are the failure's error_class and one-line message.
	Class, Message string
	// RetryAfter, when HasRetryAfter, replaces the backoff (negative is 0).
	RetryAfter    time.Duration
	HasRetryAfter bool
}

// Decide maps an attempt's end to its finalize; rnd in [0,1) draws the
// jitter. Lease loss wins over everything, success over a shutdown. A
// cancel request is not decided here: the retry and dead scripts end the
// task cancelled when its flag is set in Redis.
func Decide(e *End, p Policy, rnd float64) Decision {
	switch {
	case e.LeaseLost:
		return Decision{Op: None, Outcome: "lease_lost"}
	case !e.Failed:
		return Decision{Op: Succeed}
	case e.Shutdown:
		return Decision{Op: None, Outcome: "handback"}
	case e.Panicked:
		return Decision{Op: Dead, Class: "Panic", Message: e.Message}
	}
	class := e.Class
	if e.TimedOut {
		class = "Timeout"
	}
	switch {
	case e.Permanent:
		return Decision{Op: Dead, Class: class, Message: e.Message}
	case e.MaxAttempts > 0 && e.Attempt >= e.MaxAttempts:
		return Decision{Op: Dead, Class: class, Message: e.Message, Retryable: true}
	}
	delay := Backoff(e.Attempt, p.Base, p.Max, p.Jitter, rnd)
	if e.HasRetryAfter {
		delay = max(e.RetryAfter, 0)
	}
	return Decision{Op: Retry, Class: class, Message: e.Message, Delay: delay}
}

// Backoff returns the delay before the attempt after attempt:
// base·2^(attempt-1) capped at ceiling, then jitter of ±jitter·delay (r in
// [0,1) picks where), then clamped to [0, ceiling] again.
func Backoff(attempt int, base, ceiling time.Duration, jitter, r float64) time.Duration {
	d := base
	for i := 1; i < attempt && d < ceiling; i++ {
		d *= 2
	}
	d = min(d, ceiling)
	d = time.Duration(float64(d) * (1 + jitter*(2*r-1)))
	return min(max(d, 0), ceiling)
}

// Outcome names what a finalize of d did, for metrics and logs; err is
// the finalize's error and dlq whether the dead-letter queue is on.
func Outcome(d *Decision, err error, dlq bool) string {
	switch {
	case isLeaseLost(err):
		return "lease_lost"
	case isCancelWon(err):
		return "cancelled"
	case err != nil:
		return "error"
	case d.Op == Succeed:
		return "succeeded"
	case d.Op == Retry:
		return "retrying"
	case !dlq:
		return "failed"
	}
	return "dead_lettered"
}
