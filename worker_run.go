package dtq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"time"

	"github.com/dtq-io/dtq/internal/attempt"
	"github.com/dtq-io/dtq/internal/groupcommit"
	"github.com/dtq-io/dtq/internal/jsonscan"
	"github.com/dtq-io/dtq/internal/maintenance"
	"github.com/dtq-io/dtq/internal/rdb"
)

// idleBlock bounds one blocking wait for new entries, so an idle fetch loop
// notices shutdown and pauses promptly.
const idleBlock = time.Second

// Adaptive batching at moderate rates, where tasks come one at a time and
// each would otherwise cost a claim call and a finalize call of its own: a
// fetch loop woken less than steadyWake after its previous wake-up waits
// claimLinger for more entries before it claims, and a success waits up to
// successLinger for others to share its finalize call. A quiet queue (wake-ups
// further apart) claims and finalizes at once.
const (
	steadyWake    = 5 * time.Millisecond
	claimLinger   = 2 * time.Millisecond
	successLinger = 5 * time.Millisecond
)

// fetchLoop claims and starts tasks of queue until ctx ends. It claims as
// many tasks as it has free slots, band by band inside one script call, and
// blocks on the streams only when the queue has nothing ready.
func (w *Worker) fetchLoop(ctx, hardCtx context.Context, queue string) {
	bg := context.WithoutCancel(ctx)
	errDelay := 50 * time.Millisecond
	wakeID := "0-0"              // the last wake entry seen (see rdb.WaitWake)
	var lastWake time.Time       // when WaitReady last returned new entries
	var groupDelay time.Duration // backoff of failing group creations; 0 = none failing
	// band is the highest priority band the queue (a partition of one) is
	// known to have ready: among a queue's partitions, a higher band gets
	// a freed slot first (slots.Pool).
	band, woke := 0, false // woke: WaitReady just found the queue's first new work
	for ctx.Err() == nil {
		n, err := w.slots.Acquire(ctx, queue, w.cfg.Concurrency, band, woke)
		woke = false
		if err != nil {
			return
		}
		// The claim runs to completion even during shutdown: tasks it claims
		// are started (and then drained), never dropped.
		now, nonce, leasedAt := w.dep.clock(), attempt.NewNonce(), time.Now()
		res, err := attempt.Resend(ctx, w.cfg.VisibilityTimeout/2, func() (*rdb.ClaimResult, error) {
			return w.rdb.Claim(bg, queue, &w.settings, n, now, nonce)
		})
		if err != nil {
			w.slots.Release(n)
			w.cfg.Logger.Warn("claim failed", "queue", queue, "err", err)
			attempt.Sleep(ctx, errDelay)
			errDelay = min(errDelay*2, 5*time.Second)
			continue
		}
		errDelay = 50 * time.Millisecond
		w.slots.Release(n - w.startAll(hardCtx, res.Tasks, leasedAt))
		if res.Held > 0 {
			w.obs.Throttled(queue, "key_concurrency", res.Held)
		}
		switch {
		case res.Limited:
			// Held back by the queue's limits: sleep until the next token,
			// or until a running task finishes (its finalize writes the
			// wake stream), never in a busy loop.
			w.obs.Throttled(queue, res.Reason, 1)
			if res.Wait > 0 {
				attempt.Sleep(ctx, min(res.Wait, idleBlock))
			} else if wakeID, err = w.waiter.Wake(ctx, queue, wakeID, idleBlock); err != nil && ctx.Err() == nil {
				w.cfg.Logger.Warn("wait for a running task to finish failed", "queue", queue, "err", err)
				attempt.Sleep(ctx, errDelay)
			}
		case len(res.Tasks) > 0 && len(res.LastIDs) == 0:
			// Slots ran out first: more may be ready, in the band the
			// claim stopped in (it takes the highest bands first).
			band = res.Tasks[len(res.Tasks)-1].Priority
			continue
		case res.NoGroup:
			if err := w.rdb.EnsureGroups(bg, queue); err != nil {
				// At maxmemory this repeats until memory frees: back off,
				// and log the first failure of a run of them only.
				if groupDelay == 0 {
					w.cfg.Logger.Warn("create consumer groups failed; retrying with backoff", "queue", queue, "err", err)
				}
				groupDelay = min(max(2*groupDelay, time.Second), 30*time.Second)
				attempt.Sleep(ctx, groupDelay)
			} else {
				groupDelay = 0
			}
		case res.Paused:
			attempt.Sleep(ctx, time.Second)
		case len(res.LastIDs) > 0:
			woke = true
			if band, err = w.waiter.ReadyBand(ctx, queue, res.LastIDs, idleBlock); err != nil && ctx.Err() == nil {
				w.cfg.Logger.Warn("wait for tasks failed", "queue", queue, "err", err)
				attempt.Sleep(ctx, errDelay)
				break
			}
			woke := time.Now()
			if woke.Sub(lastWake) < steadyWake {
				attempt.Sleep(ctx, claimLinger) // a steady trickle: let a few gather
			}
			lastWake = woke
		}
	}
}

// reclaimStep takes over tasks of queue whose lease expired, as free slots
// allow; it runs about once per heartbeat interval (see maintenance.Run).
func (w *Worker) reclaimStep(hardCtx context.Context, queue string) func(context.Context) (maintenance.Result, error) {
	return attempt.Reclaim{RDB: w.rdb, Queue: queue, Settings: &w.settings, Clock: w.dep.clock, Logger: w.cfg.Logger,
		Every: w.cfg.HeartbeatInterval, Window: w.cfg.VisibilityTimeout / 2, Runner: &reclaimRunner{w: w}}.StepUnder(hardCtx)
}

// reclaimRunner lends the worker's slots and handlers to its reclaim step.
// The step calls Acquire just before its reclaim call and Start after it,
// one step at a time: acquired is when the leases it takes began at the
// latest.
type reclaimRunner struct {
	w        *Worker
	acquired time.Time
}

func (r *reclaimRunner) Acquire() int {
	r.acquired = time.Now()
	return r.w.slots.TryAcquire(r.w.cfg.Concurrency)
}
func (r *reclaimRunner) Release(n int)                       { r.w.slots.Release(n) }
func (r *reclaimRunner) Running(queue string) []rdb.LeaseRef { return r.w.runningLeases(queue) }
func (r *reclaimRunner) Start(ctx context.Context, tasks []rdb.ClaimedTask) int {
	return r.w.startAll(ctx, tasks, r.acquired)
}

// runKey names one attempt in flight. The task id alone is not enough: a
// newer attempt of a task may start while an older one is being finalized,
// and one's cleanup must not remove the other's entry.
type runKey struct {
	id      string
	attempt int
}

// runningLeases lists the attempts of queue this process runs now.
func (w *Worker) runningLeases(queue string) []rdb.LeaseRef {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []rdb.LeaseRef
	for k, r := range w.inflight {
		if r.ct.Queue == queue {
			out = append(out, rdb.LeaseRef{ID: k.id, Attempt: k.attempt})
		}
	}
	return out
}

// startAll starts the claimed tasks, whose leases began at leasedAt (or
// later), and returns how many it started (each holds one slot until its
// handler returns).
func (w *Worker) startAll(hardCtx context.Context, tasks []rdb.ClaimedTask, leasedAt time.Time) int {
	n := 0
	for _, ct := range tasks {
		if w.start(hardCtx, ct, leasedAt) {
			n++
		}
	}
	return n
}

// start runs one claimed task, leased at leasedAt, in its own goroutine.
// It reports false, and starts nothing, when this process already runs that
// attempt (a claim answered twice).
func (w *Worker) start(hardCtx context.Context, ct rdb.ClaimedTask, leasedAt time.Time) bool {
	key := runKey{ct.ID, ct.Attempt}
	timeout := time.Duration(ct.TimeoutMS) * time.Millisecond
	hctx, cancel := context.WithCancelCause(hardCtx)
	deadline := time.Now().Add(timeout)
	tctx, tcancel := context.WithDeadlineCause(hctx, deadline, errTimeout)
	t := &Task{
		ID: ct.ID, Queue: queueOf(ct.Queue), Type: ct.Type, Attempt: ct.Attempt, MaxAttempts: ct.MaxAttempts,
		IdempotencyKey: ct.IdempotencyKey, Payload: json.RawMessage(ct.Payload), Metadata: json.RawMessage(ct.Metadata),
		CreatedAt: time.UnixMilli(ct.CreatedAt).UTC(), Deadline: deadline, WorkerID: w.cfg.WorkerID,
		WorkflowID: ct.Workflow, Ref: ct.Ref, deps: ct.Deps,
	}
	r := &running{task: t, ct: ct, cancel: cancel,
		log: newTaskLog(&ct, w.cfg.taskLogCaps(), w.dep.clock, w.cfg.Logger.Handler())}
	r.lease = newLeaseWatch(leasedAt, w.cfg.VisibilityTimeout, func() { cancel(ErrLeaseLost) })
	w.mu.Lock()
	if _, dup := w.inflight[key]; dup {
		w.mu.Unlock()
		r.lease.stop()
		tcancel()
		cancel(nil)
		return false
	}
	w.inflight[key] = r
	w.mu.Unlock()
	w.obs.TaskStarted(TaskStart{Queue: queueOf(ct.Queue), Type: ct.Type, Attempt: ct.Attempt,
		Waited: time.Since(time.UnixMilli(ct.CreatedAt))})
	if ct.CancelRequested {
		r.cancelRequested.Store(true)
		cancel(errCancelRequested)
	}
	w.handlers.Go(func() {
		began := time.Now()
		res, panicked, err := w.invoke(context.WithValue(w.handlerContext(tctx, &ct), progressKey{}, r.log), t)
		took, cause := time.Since(began), context.Cause(tctx)
		r.lease.stop()
		r.returned.Store(true)
		tcancel()
		cancel(nil)
		// The slot bounds running handlers: it is free as soon as this one
		// returns, so the next claim overlaps this task's finalize. The task
		// stays in flight (its lease renewed) until the finalize is done.
		w.slots.Release(1)
		// What the handler reported lands before its outcome does.
		r.log.flushFinal(hardCtx, w)
		w.finish(hardCtx, r, res, err, panicked, cause, took)
		w.mu.Lock()
		delete(w.inflight, key)
		w.mu.Unlock()
	})
	return true
}

// invoke calls the handler; a panic becomes a permanent failure.
func (w *Worker) invoke(ctx context.Context, t *Task) (res any, panicked bool, err error) {
	defer func() {
		if p := recover(); p != nil {
			res, panicked, err = nil, true, fmt.Errorf("panic: %v", p)
		}
	}()
	res, err = w.ProcessTask(ctx, t) // the embedded ServeMux routes by type
	return res, false, err
}

// attemptEnd is how an attempt of ct ended: the handler's error (nil on
// success), whether it panicked, and why its context ended (cause).
func attemptEnd(ct *rdb.ClaimedTask, herr error, panicked bool, cause error) *attempt.End {
	e := &attempt.End{Attempt: ct.Attempt, MaxAttempts: ct.MaxAttempts, LeaseLost: errors.Is(cause, ErrLeaseLost),
		Failed: herr != nil, Shutdown: errors.Is(cause, errShutdown)}
	if herr == nil {
		return e
	}
	e.Message = oneLine(herr.Error(), maxErrorMessage)
	e.Panicked, e.Class, e.Permanent = panicked, errorClass(herr), IsPermanent(herr)
	e.TimedOut = errors.Is(cause, errTimeout)
	if ra, ok := errors.AsType[*retryAfterError](herr); ok {
		e.RetryAfter, e.HasRetryAfter = ra.d, true
	}
	return e
}

// finish finalizes one attempt: the decision, one write (tried again until
// it lands), one metrics call and one log line.
func (w *Worker) finish(hardCtx context.Context, r *running, res any, herr error, panicked bool, cause error, took time.Duration) {
	ct := &r.ct
	log := w.cfg.Logger.With("task_id", ct.ID, "queue", queueOf(ct.Queue), "task_type", ct.Type, "attempt", ct.Attempt, "duration_ms", took.Milliseconds())
	d := attempt.Decide(attemptEnd(ct, herr, panicked, cause), w.retryPolicy(), mrand.Float64())
	outcome := d.Outcome
	if d.Op != attempt.None {
		var s *rdb.Success
		if d.Op == attempt.Succeed {
			s = w.success(ct, res, log)
		}
		outcome = attempt.Outcome(&d, w.finalize(hardCtx, w.finishArgs(r), &d, s, log), !w.dep.disableDLQ)
	}
	w.reportOutcome(ct, &d, outcome, took, log)
}

// retryPolicy is the backoff of the worker's retryable failures.
func (w *Worker) retryPolicy() attempt.Policy {
	return attempt.Policy{Base: w.cfg.RetryBaseDelay, Max: w.cfg.RetryMaxDelay, Jitter: w.cfg.RetryJitter}
}

// success builds the success finalize of a handler's result.
func (w *Worker) success(ct *rdb.ClaimedTask, res any, log *slog.Logger) *rdb.Success {
	body, err := attempt.ResultJSON(res)
	if err != nil {
		log.Warn("result is not JSON-encodable; stored as null", "err", err)
		body = nil
	}
	// Dependants and readers decode the result as stored, so it keeps the
	// payload's nesting bound; deeper, it is dropped as an oversized one is.
	if d := jsonscan.Depth(body); d > MaxJSONDepth {
		log.Warn("result nests too deep; dropped and flagged truncated", "depth", d, "limit", MaxJSONDepth)
		return &rdb.Success{ID: ct.ID, Attempt: ct.Attempt, Truncated: true}
	}
	s := attempt.Success(ct.ID, ct.Attempt, body, w.cfg.ResultMaxBytes)
	return &s
}

// finalize runs the decision's script until it lands (see attempt.Persist).
// Successes of a queue share script calls (see succeeder).
func (w *Worker) finalize(hardCtx context.Context, a *rdb.FinishArgs, d *attempt.Decision, s *rdb.Success, log *slog.Logger) error {
	return attempt.Persist(hardCtx, func(ctx context.Context) error {
		if d.Op != attempt.Succeed {
			return attempt.WriteFailure(ctx, w.rdb, a, &w.settings, d)
		}
		// One finalize call serves many tasks' successes, so it runs under
		// none of their contexts (see succeeder); ctx bounds only the wait.
		taskErr, err := w.succeeder(a.Queue).Do(ctx, *s) //nolint:contextcheck // see above
		if err != nil {
			return err
		}
		return taskErr
	}, func() { w.obs.FinalizeRetried(a.Queue) }, log)
}

// reportOutcome counts and logs one attempt's outcome.
func (w *Worker) reportOutcome(ct *rdb.ClaimedTask, d *attempt.Decision, outcome string, took time.Duration, log *slog.Logger) {
	var delay time.Duration
	switch outcome {
	case "succeeded":
		w.processed.Add(1)
		log.Info("task succeeded")
	case "cancelled":
		w.processed.Add(1)
		log.Info("task cancelled")
	case "retrying":
		delay = d.Delay
		w.retried.Add(1)
		log.Info("task failed; retry scheduled", "error_class", d.Class, "error", logErrorMessage(d.Message), "retry_delay_ms", delay.Milliseconds())
	case "dead_lettered", "failed":
		w.failed.Add(1)
		w.processed.Add(1)
		log.Warn("task "+outcome, "error_class", d.Class, "error", logErrorMessage(d.Message))
	case "lease_lost":
		if d.Op == attempt.None {
			log.Warn("task lease lost; result discarded")
		} else {
			log.Warn("task lease lost before finalize; nothing written")
		}
	}
	w.obs.TaskFinished(TaskEnd{ID: ct.ID, Queue: queueOf(ct.Queue), Type: ct.Type, Attempt: ct.Attempt, Outcome: outcome, Took: took,
		RetryDelay: delay, SinceCreated: time.Since(time.UnixMilli(ct.CreatedAt))})
}

// succeeder merges concurrent successes of one queue into one finalize
// script call.
func (w *Worker) succeeder(queue string) *groupcommit.Group[rdb.Success, error] {
	return w.succeeders.Get(queue, func() *groupcommit.Group[rdb.Success, error] {
		return &groupcommit.Group[rdb.Success, error]{
			Max: maxScriptTasks,
			// At a steady rate a success waits up to successLinger for others
			// (or until half the concurrency is waiting) to share their
			// finalize call: one script call per few tasks instead of each.
			Linger: successLinger,
			Gather: max(2, w.cfg.Concurrency/2),
			Run: func(batch []rdb.Success) ([]error, error) {
				return w.rdb.FinishSucceeded(context.Background(), queue, &w.settings, w.dep.clock(), batch)
			},
		}
	})
}

// heartbeatLoop renews the leases of running tasks (cancelling a handler
// whose lease is lost, or whose task has a cancel request) and refreshes the
// worker's heartbeat record.
func (w *Worker) heartbeatLoop(ctx context.Context) {
	tick := time.NewTicker(w.cfg.HeartbeatInterval)
	defer tick.Stop()
	for {
		w.heartbeat(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (w *Worker) heartbeat(ctx context.Context) {
	now, sent := w.dep.clock(), time.Now()
	byQueue := map[string][]*running{}
	w.mu.Lock()
	for _, r := range w.inflight {
		byQueue[r.ct.Queue] = append(byQueue[r.ct.Queue], r)
	}
	w.mu.Unlock()
	for q, rs := range byQueue {
		refs := make([]rdb.LeaseRef, len(rs))
		for i, r := range rs {
			refs[i] = rdb.LeaseRef{ID: r.ct.ID, Attempt: r.ct.Attempt}
		}
		st, err := w.rdb.RenewLeases(ctx, q, &w.settings, now, refs)
		if err != nil {
			w.cfg.Logger.Warn("lease renewal failed", "queue", q, "err", err)
			continue
		}
		for i, s := range st {
			switch s {
			case rdb.Renewed:
				rs[i].lease.renewed(sent)
			case rdb.LeaseLost:
				rs[i].cancel(ErrLeaseLost)
			case rdb.CancelRequested:
				rs[i].cancelRequested.Store(true)
				rs[i].cancel(errCancelRequested)
			}
		}
	}
	if w.unrecorded.Load() {
		err := w.rdb.WorkerStart(ctx, w.cfg.WorkerID, w.started, 3*w.cfg.HeartbeatInterval, w.dep.eventsMaxLen, w.heartbeatRecord(w.status()))
		switch {
		case err == nil:
			w.unrecorded.Store(false)
			w.cfg.Logger.Info("worker record written", "worker_id", w.cfg.WorkerID)
		case unrecordable(err) || ctx.Err() != nil: // logged at start
		default:
			w.cfg.Logger.Warn("worker record not written", "worker_id", w.cfg.WorkerID, "err", err)
		}
		return
	}
	if err := w.rdb.WorkerBeat(ctx, w.cfg.WorkerID, w.instance, now, w.dep.eventsMaxLen, false, w.heartbeatRecord(w.status())); err != nil && ctx.Err() == nil {
		w.cfg.Logger.Warn("heartbeat failed", "worker_id", w.cfg.WorkerID, "err", err)
	}
}

// cancelListener cancels running handlers when a cancel request for their
// task is published on a served queue's cancel channel.
func (w *Worker) cancelListener(ctx context.Context) {
	w.rdb.ListenCancels(ctx, w.partitionsAtStart(), w.cancelRequested)
}

// cancelRequested cancels the running handlers of task id.
func (w *Worker) cancelRequested(id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for k, r := range w.inflight {
		if k.id == id {
			r.cancelRequested.Store(true)
			r.cancel(errCancelRequested)
		}
	}
}

func toJSON(ss []string) string { return string(mustJSON(ss)) }

// mustJSON encodes v, made only of values encoding/json always encodes
// (strings, numbers, bools, json.Number and json.RawMessage taken from a
// decoder, and maps, slices and structs of them): an error would be a bug
// in dtq, not a condition a caller could handle.
func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("dtq: encoding %T: %v", v, err))
	}
	return b
}
