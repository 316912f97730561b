package dtq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dtq-io/dtq/internal/rdb"
)

// idleBlock bounds one blocking wait for new entries, so an idle fetch loop
// notices shutdown and pauses promptly.
const idleBlock = time.Second

// fetchLoop claims and starts tasks of queue until ctx ends. It claims as
// many tasks as it has free slots, band by band inside one script call, and
// blocks on the streams only when the queue has nothing ready.
func (w *Worker) fetchLoop(ctx, hardCtx context.Context, queue string) {
	bg := context.WithoutCancel(ctx)
	errDelay := 50 * time.Millisecond
	for ctx.Err() == nil {
		n, err := w.slots.acquire(ctx, queue, w.cfg.Concurrency)
		if err != nil {
			return
		}
		// The claim runs to completion even during shutdown: tasks it claims
		// are started (and then drained), never dropped.
		res, err := w.rdb.Claim(bg, queue, &w.settings, n, w.cfg.Clock())
		if err != nil {
			w.slots.release(n)
			w.cfg.Logger.Warn("claim failed", "queue", queue, "err", err)
			sleepCtx(ctx, errDelay)
			errDelay = min(errDelay*2, 5*time.Second)
			continue
		}
		errDelay = 50 * time.Millisecond
		for _, ct := range res.Tasks {
			w.start(hardCtx, ct)
		}
		w.slots.release(n - len(res.Tasks))
		switch {
		case len(res.Tasks) > 0 && len(res.LastIDs) == 0:
			continue // slots ran out first: more may be ready
		case res.NoGroup:
			if err := w.rdb.EnsureGroups(bg, queue); err != nil {
				w.cfg.Logger.Warn("create consumer groups failed", "queue", queue, "err", err)
				sleepCtx(ctx, time.Second)
			}
		case res.Paused:
			sleepCtx(ctx, time.Second)
		case len(res.LastIDs) > 0:
			if err := w.rdb.WaitReady(ctx, queue, res.LastIDs, idleBlock); err != nil && ctx.Err() == nil {
				w.cfg.Logger.Warn("wait for tasks failed", "queue", queue, "err", err)
				sleepCtx(ctx, errDelay)
			}
		}
	}
}

// reclaimLoop takes over tasks of queue whose lease expired, as free slots
// allow, about once per heartbeat interval.
func (w *Worker) reclaimLoop(ctx, hardCtx context.Context, queue string) {
	lastPrune := time.Now()
	for {
		d := time.Duration(float64(w.cfg.HeartbeatInterval) * (0.8 + 0.4*rand.Float64()))
		if !sleepCtx(ctx, d) {
			return
		}
		w.reclaimOnce(hardCtx, queue)
		if time.Since(lastPrune) > consumerPruneEvery {
			lastPrune = time.Now()
			if _, err := w.rdb.PruneConsumers(ctx, queue, consumerIdleLimit); err != nil && ctx.Err() == nil {
				w.cfg.Logger.Warn("pruning idle consumers failed", "queue", queue, "err", err)
			}
		}
	}
}

// Idle consumers (stopped or replaced workers) are removed from the group
// once they have nothing pending and have not read for consumerIdleLimit.
const (
	consumerPruneEvery = 5 * time.Minute
	consumerIdleLimit  = time.Hour
)

func (w *Worker) reclaimOnce(hardCtx context.Context, queue string) {
	room := w.slots.tryAcquire(w.cfg.Concurrency)
	tasks, err := w.rdb.Reclaim(context.WithoutCancel(hardCtx), queue, &w.settings, room, w.cfg.Clock())
	if err != nil {
		w.slots.release(room)
		w.cfg.Logger.Warn("reclaim failed", "queue", queue, "err", err)
		return
	}
	for _, ct := range tasks {
		w.cfg.Logger.Info("took over task with expired lease", "task_id", ct.ID, "queue", queue, "task_type", ct.Type, "attempt", ct.Attempt)
		w.start(hardCtx, ct)
	}
	w.slots.release(room - len(tasks))
}

// start runs one claimed task in its own goroutine; it holds one slot until
// the handler returns.
func (w *Worker) start(hardCtx context.Context, ct rdb.ClaimedTask) {
	timeout := time.Duration(ct.TimeoutMS) * time.Millisecond
	hctx, cancel := context.WithCancelCause(hardCtx)
	deadline := time.Now().Add(timeout)
	tctx, tcancel := context.WithDeadlineCause(hctx, deadline, errTimeout)
	t := &Task{
		ID: ct.ID, Queue: ct.Queue, Type: ct.Type, Attempt: ct.Attempt, MaxAttempts: ct.MaxAttempts,
		IdempotencyKey: ct.IdempotencyKey, Payload: json.RawMessage(ct.Payload), Metadata: json.RawMessage(ct.Metadata),
		CreatedAt: time.UnixMilli(ct.CreatedAt).UTC(), Deadline: deadline, WorkerID: w.cfg.WorkerID,
	}
	r := &running{task: t, ct: ct, cancel: cancel}
	w.mu.Lock()
	w.inflight[ct.ID] = r
	w.mu.Unlock()
	w.metrics.started(&ct, time.Now())
	if ct.CancelRequested {
		r.cancelRequested.Store(true)
		cancel(errCancelRequested)
	}
	w.handlers.Add(1)
	go func() {
		defer w.handlers.Done()
		began := time.Now()
		res, err, panicked := w.invoke(withWorkerPrefix(tctx, w.cfg.KeyPrefix), t)
		took, cause := time.Since(began), context.Cause(tctx)
		r.returned.Store(true)
		tcancel()
		cancel(nil)
		// The slot bounds running handlers: it is free as soon as this one
		// returns, so the next claim overlaps this task's finalize. The task
		// stays in flight (its lease renewed) until the finalize is done.
		w.slots.release(1)
		w.finish(r, res, err, panicked, cause, took)
		w.mu.Lock()
		delete(w.inflight, ct.ID)
		w.mu.Unlock()
	}()
}

// invoke calls the handler; a panic becomes a permanent failure.
func (w *Worker) invoke(ctx context.Context, t *Task) (res any, err error, panicked bool) {
	defer func() {
		if p := recover(); p != nil {
			res, err, panicked = nil, fmt.Errorf("panic: %v", p), true
		}
	}()
	res, err = w.ServeMux.ProcessTask(ctx, t)
	return res, err, false
}

// finish finalizes one attempt with the script matching its outcome.
func (w *Worker) finish(r *running, res any, herr error, panicked bool, cause error, took time.Duration) {
	ctx := context.Background()
	a := w.finishArgs(r)
	ct := &r.ct
	log := w.cfg.Logger.With("task_id", ct.ID, "queue", ct.Queue, "task_type", ct.Type, "attempt", ct.Attempt, "duration_ms", took.Milliseconds())

	if errors.Is(cause, ErrLeaseLost) {
		// Another worker owns the task now: write nothing.
		w.metrics.finished(ct, "lease_lost", took, 0, time.Now())
		log.Warn("task lease lost; result discarded")
		return
	}
	var err error
	var delay time.Duration
	outcome := ""
	switch {
	case herr == nil:
		err = w.finishSuccess(ctx, a, res, log)
		outcome = "succeeded"
	case errors.Is(cause, errShutdown):
		w.metrics.finished(ct, "handback", took, 0, time.Now())
		return // handed back at the drain deadline
	case panicked:
		outcome, err = w.bury(ctx, a, ct.Type, "Panic", herr, false)
	default:
		if r.cancelRequested.Load() || errors.Is(cause, errCancelRequested) {
			err = w.rdb.FinishCancelled(ctx, a, &w.settings, oneLine(herr.Error(), maxErrorMessage))
			if !errors.Is(err, rdb.ErrNotCancelled) {
				outcome = "cancelled"
				break
			}
		}
		class := errorClass(herr)
		if errors.Is(cause, errTimeout) {
			class = "Timeout" // whatever the handler returned, it ran out of time
		}
		var ra *retryAfterError
		switch {
		case IsPermanent(herr):
			outcome, err = w.bury(ctx, a, ct.Type, class, herr, false)
		case ct.Attempt >= ct.MaxAttempts:
			outcome, err = w.bury(ctx, a, ct.Type, class, herr, true)
		default:
			delay = backoff(ct.Attempt, w.cfg.RetryBaseDelay, w.cfg.RetryMaxDelay, w.cfg.RetryJitter, rand.Float64())
			if errors.As(herr, &ra) {
				delay = max(ra.d, 0)
			}
			err = w.rdb.FinishRetry(ctx, a, &w.settings, delay, class, oneLine(herr.Error(), maxErrorMessage))
			outcome = "retrying"
			if err == nil {
				w.retried.Add(1)
				log.Info("task failed; retry scheduled", "error_class", class, "retry_delay_ms", delay.Milliseconds())
			}
		}
	}
	switch {
	case errors.Is(err, rdb.ErrLeaseLost):
		w.metrics.finished(ct, "lease_lost", took, 0, time.Now())
		log.Warn("task lease lost before finalize; nothing written", "outcome", outcome)
	case err != nil:
		w.metrics.finished(ct, "error", took, 0, time.Now())
		log.Error("finalize failed", "outcome", outcome, "err", err)
	default:
		w.metrics.finished(ct, outcome, took, delay, time.Now())
		if outcome == "succeeded" || outcome == "cancelled" {
			log.Info("task " + outcome)
		}
	}
}

func (w *Worker) finishSuccess(ctx context.Context, a *rdb.FinishArgs, res any, log interface{ Warn(string, ...any) }) error {
	body, err := resultJSON(res)
	if err != nil {
		log.Warn("result is not JSON-encodable; stored as null", "err", err)
		body = nil
	}
	truncated := len(body) > w.cfg.ResultMaxBytes
	if truncated {
		body = nil
	}
	taskErr, err := w.succeeder(a.Queue).do(ctx, rdb.Success{ID: a.ID, Attempt: a.Attempt, Result: body, Truncated: truncated})
	if err == nil {
		err = taskErr
	}
	if err == nil {
		w.processed.Add(1)
	}
	return err
}

// succeeder merges concurrent successes of one queue into one finalize
// script call.
func (w *Worker) succeeder(queue string) *groupCommit[rdb.Success, error] {
	if g, ok := w.succeeders.Load(queue); ok {
		return g.(*groupCommit[rdb.Success, error])
	}
	g, _ := w.succeeders.LoadOrStore(queue, &groupCommit[rdb.Success, error]{
		max: maxScriptTasks,
		run: func(batch []rdb.Success) ([]error, error) {
			return w.rdb.FinishSucceeded(context.Background(), queue, &w.settings, w.cfg.Clock(), batch)
		},
	})
	return g.(*groupCommit[rdb.Success, error])
}

func (w *Worker) bury(ctx context.Context, a *rdb.FinishArgs, taskType, class string, herr error, retryable bool) (string, error) {
	err := w.rdb.FinishDead(ctx, a, &w.settings, class, oneLine(herr.Error(), maxErrorMessage), retryable)
	outcome := "dead_lettered"
	if w.cfg.DisableDLQ {
		outcome = "failed"
	}
	if err == nil {
		w.failed.Add(1)
		w.processed.Add(1)
		w.cfg.Logger.Warn("task "+outcome, "task_id", a.ID, "queue", a.Queue, "task_type", taskType, "attempt", a.Attempt, "error_class", class)
	}
	return outcome, err
}

// resultJSON encodes a handler's result: nil stays nil; json.RawMessage and
// []byte must already be valid JSON.
func resultJSON(res any) ([]byte, error) {
	switch v := res.(type) {
	case nil:
		return nil, nil
	case json.RawMessage:
		if !json.Valid(v) {
			return nil, errors.New("result is not valid JSON")
		}
		return v, nil
	case []byte:
		if !json.Valid(v) {
			return nil, errors.New("result is not valid JSON")
		}
		return v, nil
	}
	return json.Marshal(res)
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
	now := w.cfg.Clock()
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
			case rdb.LeaseLost:
				rs[i].cancel(ErrLeaseLost)
			case rdb.CancelRequested:
				rs[i].cancelRequested.Store(true)
				rs[i].cancel(errCancelRequested)
			}
		}
	}
	if err := w.rdb.WorkerBeat(ctx, w.cfg.WorkerID, w.instance, now, w.cfg.EventsMaxLen, false, w.record(w.status())); err != nil && ctx.Err() == nil {
		w.cfg.Logger.Warn("heartbeat failed", "worker_id", w.cfg.WorkerID, "err", err)
	}
}

// cancelListener cancels running handlers when a cancel request for their
// task is published on a served queue's cancel channel.
func (w *Worker) cancelListener(ctx context.Context) {
	var channels []string
	for _, q := range w.queues() {
		channels = append(channels, w.rdb.Keys().CancelChannel(q))
	}
	var ps *redis.PubSub
	if cc, ok := w.rdb.Client().(*redis.ClusterClient); ok {
		ps = cc.SSubscribe(ctx, channels...)
	} else {
		ps = w.rdb.Client().Subscribe(ctx, channels...)
	}
	defer ps.Close()
	ch := ps.Channel()
	for {
		select {
		case <-ctx.Done():
			return
		case m, ok := <-ch:
			if !ok {
				return
			}
			w.mu.Lock()
			r := w.inflight[m.Payload]
			w.mu.Unlock()
			if r != nil {
				r.cancelRequested.Store(true)
				r.cancel(errCancelRequested)
			}
		}
	}
}

// sleepCtx sleeps for d or until ctx ends; it reports whether it slept fully.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func toJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
