package dtq

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

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
	for ctx.Err() == nil {
		n, err := w.slots.acquire(ctx, queue, w.cfg.Concurrency)
		if err != nil {
			return
		}
		// The claim runs to completion even during shutdown: tasks it claims
		// are started (and then drained), never dropped.
		now, nonce := w.cfg.Clock(), newNonce()
		res, err := resend(ctx, w.cfg.VisibilityTimeout/2, func() (*rdb.ClaimResult, error) {
			return w.rdb.Claim(bg, queue, &w.settings, n, now, nonce)
		})
		if err != nil {
			w.slots.release(n)
			w.cfg.Logger.Warn("claim failed", "queue", queue, "err", err)
			sleepCtx(ctx, errDelay)
			errDelay = min(errDelay*2, 5*time.Second)
			continue
		}
		errDelay = 50 * time.Millisecond
		w.slots.release(n - w.startAll(hardCtx, res.Tasks))
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
				sleepCtx(ctx, min(res.Wait, idleBlock))
			} else if wakeID, err = w.rdb.WaitWake(ctx, queue, wakeID, idleBlock); err != nil && ctx.Err() == nil {
				w.cfg.Logger.Warn("wait for a running task to finish failed", "queue", queue, "err", err)
				sleepCtx(ctx, errDelay)
			}
		case len(res.Tasks) > 0 && len(res.LastIDs) == 0:
			continue // slots ran out first: more may be ready
		case res.NoGroup:
			if err := w.rdb.EnsureGroups(bg, queue); err != nil {
				// At maxmemory this repeats until memory frees: back off,
				// and log the first failure of a run of them only.
				if groupDelay == 0 {
					w.cfg.Logger.Warn("create consumer groups failed; retrying with backoff", "queue", queue, "err", err)
				}
				groupDelay = min(max(2*groupDelay, time.Second), 30*time.Second)
				sleepCtx(ctx, groupDelay)
			} else {
				groupDelay = 0
			}
		case res.Paused:
			sleepCtx(ctx, time.Second)
		case len(res.LastIDs) > 0:
			if err := w.rdb.WaitReady(ctx, queue, res.LastIDs, idleBlock); err != nil && ctx.Err() == nil {
				w.cfg.Logger.Warn("wait for tasks failed", "queue", queue, "err", err)
				sleepCtx(ctx, errDelay)
				break
			}
			woke := time.Now()
			if woke.Sub(lastWake) < steadyWake {
				sleepCtx(ctx, claimLinger) // a steady trickle: let a few gather
			}
			lastWake = woke
		}
	}
}

// resend runs call, and after an error runs it again with the same
// arguments until it answers, ctx ends or window passes. Claim and reclaim
// calls need this: after an error it is unknown whether the script ran, and
// only the same call (same time and nonce) answers the tasks a run whose
// reply was lost started. Past the window those tasks' leases are near
// their end and reclaim takes them back instead.
func resend[T any](ctx context.Context, window time.Duration, call func() (T, error)) (T, error) {
	deadline := time.Now().Add(window)
	delay := 50 * time.Millisecond
	for {
		v, err := call()
		if err == nil || time.Now().Add(delay).After(deadline) || !sleepCtx(ctx, delay) {
			return v, err
		}
		delay = min(delay*2, time.Second)
	}
}

// newNonce names one claim or reclaim call (see resend).
func newNonce() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// reclaimStep takes over tasks of queue whose lease expired, as free slots
// allow; it runs about once per heartbeat interval (see maintenance.Run).
// Now and then it also prunes the group's idle consumers.
func (w *Worker) reclaimStep(hardCtx context.Context, queue string) func(context.Context) (maintenance.Result, error) {
	lastPrune := time.Now()
	return func(ctx context.Context) (maintenance.Result, error) {
		next := maintenance.Result{Wait: w.cfg.HeartbeatInterval}
		room := w.slots.tryAcquire(w.cfg.Concurrency)
		now, nonce, mine := w.cfg.Clock(), newNonce(), w.running(queue)
		tasks, err := resend(ctx, w.cfg.VisibilityTimeout/2, func() ([]rdb.ClaimedTask, error) {
			return w.rdb.Reclaim(context.WithoutCancel(hardCtx), queue, &w.settings, room, now, nonce, mine)
		})
		if err != nil {
			w.slots.release(room)
			return next, err
		}
		for _, ct := range tasks {
			w.cfg.Logger.Info("took over task with expired lease", "task_id", ct.ID, "queue", queue, "task_type", ct.Type, "attempt", ct.Attempt)
		}
		w.slots.release(room - w.startAll(hardCtx, tasks))
		if time.Since(lastPrune) > consumerPruneEvery {
			lastPrune = time.Now()
			if _, err := w.rdb.PruneConsumers(ctx, queue, consumerIdleLimit); err != nil && ctx.Err() == nil {
				w.cfg.Logger.Warn("pruning idle consumers failed", "queue", queue, "err", err)
			}
		}
		return next, nil
	}
}

// Idle consumers (stopped or replaced workers) are removed from the group
// once they have nothing pending and have not read for consumerIdleLimit.
const (
	consumerPruneEvery = 5 * time.Minute
	consumerIdleLimit  = time.Hour
)

// runKey names one attempt in flight. The task id alone is not enough: a
// newer attempt of a task may start while an older one is being finalized,
// and one's cleanup must not remove the other's entry.
type runKey struct {
	id      string
	attempt int
}

// running lists the attempts of queue this process runs now.
func (w *Worker) running(queue string) []rdb.LeaseRef {
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

// startAll starts the claimed tasks and returns how many it started (each
// holds one slot until its handler returns).
func (w *Worker) startAll(hardCtx context.Context, tasks []rdb.ClaimedTask) int {
	n := 0
	for _, ct := range tasks {
		if w.start(hardCtx, ct) {
			n++
		}
	}
	return n
}

// start runs one claimed task in its own goroutine. It reports false, and
// starts nothing, when this process already runs that attempt (a claim
// answered twice).
func (w *Worker) start(hardCtx context.Context, ct rdb.ClaimedTask) bool {
	key := runKey{ct.ID, ct.Attempt}
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
	if _, dup := w.inflight[key]; dup {
		w.mu.Unlock()
		tcancel()
		cancel(nil)
		return false
	}
	w.inflight[key] = r
	w.mu.Unlock()
	w.obs.TaskStarted(TaskStart{Queue: ct.Queue, Type: ct.Type, Attempt: ct.Attempt,
		Waited: time.Since(time.UnixMilli(ct.CreatedAt))})
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
		w.finish(hardCtx, r, res, err, panicked, cause, took)
		w.mu.Lock()
		delete(w.inflight, key)
		w.mu.Unlock()
	}()
	return true
}

// invoke calls the handler; a panic becomes a permanent failure.
func (w *Worker) invoke(ctx context.Context, t *Task) (res any, err error, panicked bool) {
	defer func() {
		if p := recover(); p != nil {
			res, err, panicked = nil, fmt.Errorf("panic: %v", p), true
		}
	}()
	res, err = w.ProcessTask(ctx, t) // the embedded ServeMux routes by type
	return res, err, false
}

// finalizeOp is the script a finished attempt needs.
type finalizeOp int

const (
	opNone    finalizeOp = iota // write nothing (lease lost, handed back)
	opSucceed                   // finish_succeeded.lua
	opRetry                     // finish_retry.lua (ends cancelled when a cancel was requested)
	opDead                      // finish_dead.lua (likewise)
)

// decision is what a returned handler means for its task.
type decision struct {
	op        finalizeOp
	outcome   string // with opNone: the metric's outcome, "lease_lost" or "handback"
	class     string // error_class
	message   string // error_message, one line
	retryable bool   // opDead: the error was retryable but attempts ran out
	delay     time.Duration
}

// retryPolicy shapes the backoff of retryable errors.
type retryPolicy struct {
	base, max time.Duration
	jitter    float64
}

// decide maps an attempt's end to its finalize: the handler's result or
// error, whether it panicked, and why its context ended (cause). rnd in
// [0,1) draws the jitter. A cancel request is not decided here: the retry
// and dead scripts end the task cancelled when its flag is set in Redis.
func decide(ct *rdb.ClaimedTask, herr error, panicked bool, cause error, p retryPolicy, rnd float64) decision {
	switch {
	case errors.Is(cause, ErrLeaseLost):
		return decision{op: opNone, outcome: "lease_lost"} // another worker owns the task now
	case herr == nil:
		return decision{op: opSucceed}
	case errors.Is(cause, errShutdown):
		return decision{op: opNone, outcome: "handback"} // handed back at the drain deadline
	}
	msg := oneLine(herr.Error(), maxErrorMessage)
	if panicked {
		return decision{op: opDead, class: "Panic", message: msg}
	}
	class := errorClass(herr)
	if errors.Is(cause, errTimeout) {
		class = "Timeout" // whatever the handler returned, it ran out of time
	}
	switch {
	case IsPermanent(herr):
		return decision{op: opDead, class: class, message: msg}
	case ct.Attempt >= ct.MaxAttempts:
		return decision{op: opDead, class: class, message: msg, retryable: true}
	}
	delay := backoff(ct.Attempt, p.base, p.max, p.jitter, rnd)
	var ra *retryAfterError
	if errors.As(herr, &ra) {
		delay = max(ra.d, 0)
	}
	return decision{op: opRetry, class: class, message: msg, delay: delay}
}

// Finalize writes that fail (Redis unreachable, refusing writes, failing
// over) are tried again with a doubling delay between these bounds, for as
// long as the lease is not lost and the worker not hard-stopped.
const (
	finalizeRetryMin = 50 * time.Millisecond
	finalizeRetryMax = 2 * time.Second
)

// finish finalizes one attempt: the decision, one write (tried again until
// it lands), one metrics call and one log line.
func (w *Worker) finish(hardCtx context.Context, r *running, res any, herr error, panicked bool, cause error, took time.Duration) {
	ct := &r.ct
	log := w.cfg.Logger.With("task_id", ct.ID, "queue", ct.Queue, "task_type", ct.Type, "attempt", ct.Attempt, "duration_ms", took.Milliseconds())
	d := decide(ct, herr, panicked, cause, retryPolicy{w.cfg.RetryBaseDelay, w.cfg.RetryMaxDelay, w.cfg.RetryJitter}, mrand.Float64())
	outcome := d.outcome
	if d.op != opNone {
		var s *rdb.Success
		if d.op == opSucceed {
			s = w.success(ct, res, log)
		}
		outcome = w.outcomeOf(d, w.finalize(hardCtx, w.finishArgs(r), &d, s, log))
	}
	w.report(ct, &d, outcome, took, log)
}

// success builds the success finalize of a handler's result.
func (w *Worker) success(ct *rdb.ClaimedTask, res any, log *slog.Logger) *rdb.Success {
	body, err := resultJSON(res)
	if err != nil {
		log.Warn("result is not JSON-encodable; stored as null", "err", err)
		body = nil
	}
	truncated := len(body) > w.cfg.ResultMaxBytes
	if truncated {
		body = nil
	}
	return &rdb.Success{ID: ct.ID, Attempt: ct.Attempt, Result: body, Truncated: truncated}
}

// finalize runs the decision's script until it lands. Every finalize script
// is idempotent (a call whose first run landed answers as that run did), so
// sending it again after an error is safe. The task stays in flight
// meanwhile, so its lease keeps being renewed. It stops at a fencing refusal
// (the lease is really lost) and at hard shutdown: then the lease runs out
// and the task is reclaimed (at-least-once).
func (w *Worker) finalize(hardCtx context.Context, a *rdb.FinishArgs, d *decision, s *rdb.Success, log *slog.Logger) error {
	ctx := context.WithoutCancel(hardCtx) // a write is never cut in half
	delay := finalizeRetryMin
	for tries := 0; ; tries++ {
		var err error
		switch d.op {
		case opSucceed:
			var taskErr error
			if taskErr, err = w.succeeder(a.Queue).do(ctx, *s); err == nil {
				err = taskErr
			}
		case opRetry:
			err = w.rdb.FinishRetry(ctx, a, &w.settings, d.delay, d.class, d.message)
		case opDead:
			err = w.rdb.FinishDead(ctx, a, &w.settings, d.class, d.message, d.retryable)
		}
		if err == nil || errors.Is(err, rdb.ErrLeaseLost) || errors.Is(err, rdb.ErrCancelWon) {
			if tries > 0 {
				log.Info("finalize landed after retries", "tries", tries+1)
			}
			return err
		}
		switch {
		case tries == 0:
			log.Warn("finalize failed; retrying while the lease is renewed", "err", err)
		case tries%30 == 0: // about once a minute at the 2 s cap: a fault that does not pass shows
			log.Error("finalize still failing; the task stays in flight with its lease renewed", "tries", tries, "err", err)
		}
		w.obs.FinalizeRetried(a.Queue)
		if !sleepCtx(hardCtx, delay) {
			log.Error("finalize abandoned at shutdown; the task will be reclaimed when its lease expires", "err", err)
			return err
		}
		delay = min(delay*2, finalizeRetryMax)
	}
}

// outcomeOf names what a finalize did, for metrics and logs.
func (w *Worker) outcomeOf(d decision, err error) string {
	switch {
	case errors.Is(err, rdb.ErrLeaseLost):
		return "lease_lost"
	case errors.Is(err, rdb.ErrCancelWon):
		return "cancelled"
	case err != nil:
		return "error"
	case d.op == opSucceed:
		return "succeeded"
	case d.op == opRetry:
		return "retrying"
	case w.cfg.DisableDLQ:
		return "failed"
	}
	return "dead_lettered"
}

// report counts and logs one attempt's outcome.
func (w *Worker) report(ct *rdb.ClaimedTask, d *decision, outcome string, took time.Duration, log *slog.Logger) {
	var delay time.Duration
	switch outcome {
	case "succeeded":
		w.processed.Add(1)
		log.Info("task succeeded")
	case "cancelled":
		w.processed.Add(1)
		log.Info("task cancelled")
	case "retrying":
		delay = d.delay
		w.retried.Add(1)
		log.Info("task failed; retry scheduled", "error_class", d.class, "error", logErrorMessage(d.message), "retry_delay_ms", delay.Milliseconds())
	case "dead_lettered", "failed":
		w.failed.Add(1)
		w.processed.Add(1)
		log.Warn("task "+outcome, "error_class", d.class, "error", logErrorMessage(d.message))
	case "lease_lost":
		if d.op == opNone {
			log.Warn("task lease lost; result discarded")
		} else {
			log.Warn("task lease lost before finalize; nothing written")
		}
	}
	w.obs.TaskFinished(TaskEnd{Queue: ct.Queue, Type: ct.Type, Attempt: ct.Attempt, Outcome: outcome, Took: took,
		RetryDelay: delay, SinceCreated: time.Since(time.UnixMilli(ct.CreatedAt))})
}

// succeeder merges concurrent successes of one queue into one finalize
// script call.
func (w *Worker) succeeder(queue string) *groupCommit[rdb.Success, error] {
	if g, ok := w.succeeders.Load(queue); ok {
		return g.(*groupCommit[rdb.Success, error])
	}
	g, _ := w.succeeders.LoadOrStore(queue, &groupCommit[rdb.Success, error]{
		max: maxScriptTasks,
		// At a steady rate a success waits up to successLinger for others
		// (or until half the concurrency is waiting) to share their
		// finalize call: one script call per few tasks instead of each.
		linger: successLinger,
		gather: max(2, w.cfg.Concurrency/2),
		run: func(batch []rdb.Success) ([]error, error) {
			return w.rdb.FinishSucceeded(context.Background(), queue, &w.settings, w.cfg.Clock(), batch)
		},
	})
	return g.(*groupCommit[rdb.Success, error])
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
	if w.unrecorded.Load() {
		err := w.rdb.WorkerStart(ctx, w.cfg.WorkerID, w.started, 3*w.cfg.HeartbeatInterval, w.cfg.EventsMaxLen, w.record(w.status()))
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
	if err := w.rdb.WorkerBeat(ctx, w.cfg.WorkerID, w.instance, now, w.cfg.EventsMaxLen, false, w.record(w.status())); err != nil && ctx.Err() == nil {
		w.cfg.Logger.Warn("heartbeat failed", "worker_id", w.cfg.WorkerID, "err", err)
	}
}

// cancelListener cancels running handlers when a cancel request for their
// task is published on a served queue's cancel channel. On Redis Cluster the
// channels are sharded (SPUBLISH): one SSUBSCRIBE may only name channels of
// one hash slot, so each slot gets its own subscription, which go-redis
// sends to the slot's master and moves after a failover.
func (w *Worker) cancelListener(ctx context.Context) {
	bySlot := map[int][]string{}
	for _, q := range w.queues() {
		ch := w.rdb.Keys().CancelChannel(q)
		bySlot[rdb.HashSlot(ch)] = append(bySlot[rdb.HashSlot(ch)], ch)
	}
	var subs []*redis.PubSub
	if cc, ok := w.rdb.Client().(*redis.ClusterClient); ok {
		for _, chans := range bySlot {
			subs = append(subs, cc.SSubscribe(ctx, chans...))
		}
	} else {
		var all []string
		for _, chans := range bySlot {
			all = append(all, chans...)
		}
		subs = append(subs, w.rdb.Client().Subscribe(ctx, all...))
	}
	var wg sync.WaitGroup
	for _, ps := range subs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer ps.Close()
			w.listenCancels(ctx, ps.Channel())
		}()
	}
	wg.Wait()
}

func (w *Worker) listenCancels(ctx context.Context, ch <-chan *redis.Message) {
	for {
		select {
		case <-ctx.Done():
			return
		case m, ok := <-ch:
			if !ok {
				return
			}
			w.mu.Lock()
			for k, r := range w.inflight {
				if k.id == m.Payload {
					r.cancelRequested.Store(true)
					r.cancel(errCancelRequested)
				}
			}
			w.mu.Unlock()
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
