package rdb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

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
}

// seconds is d in whole seconds, the unit the scripts take retentions in.
func seconds(d time.Duration) int64 { return int64(d / time.Second) }

// ErrLeaseLost is returned by a finalize whose fence refused it: the task is
// no longer running under this worker and attempt.
var ErrLeaseLost = errors.New("lease lost")

// ErrCancelWon is returned by FinishRetry and FinishDead when the task had
// a cancel request: it ended cancelled instead (a cancel wins over a retry).
var ErrCancelWon = errors.New("cancel requested: task ended cancelled")

// ClaimedTask is a task a worker now runs.
type ClaimedTask struct {
	Queue           string
	ID              string
	Attempt         int
	Type            string
	Payload         []byte
	TimeoutMS       int64
	MaxAttempts     int
	IdempotencyKey  string
	CreatedAt       int64
	CancelRequested bool
	Metadata        []byte
	Priority        int
}

// EnsureGroups creates the consumer group on every band stream of queue
// (creating the streams), ignoring groups that exist. Workers call it once
// per queue at start and again when a script reports a missing group.
func (r *RDB) EnsureGroups(ctx context.Context, queue string) error {
	for b := 0; b < NumBands; b++ {
		err := r.c.XGroupCreateMkStream(ctx, r.keys.Stream(queue, b), Group, "0").Err()
		if err != nil && !strings.Contains(err.Error(), "BUSYGROUP") {
			return fmt.Errorf("create group on %s: %w", r.keys.Stream(queue, b), err)
		}
	}
	return nil
}

func (r *RDB) bandStreams(queue string) []string {
	out := make([]string, NumBands)
	for b := range out {
		out[b] = r.keys.Stream(queue, b)
	}
	return out
}

func minuteOf(now time.Time) int64 { return now.Unix() / 60 }

// ClaimResult is what Claim found.
type ClaimResult struct {
	Tasks   []ClaimedTask
	Paused  bool
	NoGroup bool
	// LastIDs, set when the bands ran out before the slots did, are the
	// newest (already delivered) entry ids of bands p9..p0: WaitReady blocks
	// until an entry newer than them exists.
	LastIDs []string
	// Limited means a flow-control limit allowed no start (nothing was
	// read): Reason is "rate" or "concurrency", and Wait how long until the
	// next token, or -1 for "until a running task finishes" (WaitWake).
	Limited bool
	Reason  string
	Wait    time.Duration
	// Held counts tasks this call held back because their concurrency key
	// was at its limit.
	Held int
}

// Claim delivers up to max ready tasks of queue to the worker, highest
// priority first, moving each to running under a lease. nonce identifies the
// call: when an error leaves it unknown whether a claim ran, sending it
// again with the same now and nonce answers the tasks it started.
func (r *RDB) Claim(ctx context.Context, queue string, s *WorkerSettings, max int, now time.Time, nonce string) (*ClaimResult, error) {
	k := r.keys
	keys := append([]string{k.Lease(queue), k.Expiry(queue), k.Schedule(queue), k.Events(queue),
		k.Depth(queue), k.Paused(queue), k.Stats(queue, minuteOf(now))}, r.bandStreams(queue)...)
	keys = append(keys, k.Limits(queue), k.Rate(queue), k.KeyRunning(queue), k.Held(queue), k.Limited(queue), k.Retained(queue))
	v, err := r.run(ctx, "claim", keys, now.UnixMilli(), s.WorkerID, Group, max, s.Lease.Milliseconds(),
		k.TaskPrefix(queue), k.IdempotencyPrefix(queue), s.EventsMaxLen, seconds(s.FailedRetention), nonce,
		k.KeyWaitPrefix(queue)).Slice()
	if err != nil {
		return nil, err
	}
	if len(v) != 6 {
		return nil, fmt.Errorf("rdb: malformed claim reply")
	}
	state, _ := v[0].(string)
	res := &ClaimResult{Paused: state == "paused", NoGroup: state == "nogroup", Limited: state == "limited"}
	if w, _ := v[3].(int64); w != 0 {
		res.Wait = time.Duration(w) * time.Millisecond
		if w < 0 {
			res.Wait = -1
		}
	}
	res.Reason, _ = v[4].(string)
	held, _ := v[5].(int64)
	res.Held = int(held)
	res.Tasks = decodeClaimed(queue, v[1])
	for _, id := range asSlice(v[2]) {
		s, _ := id.(string)
		res.LastIDs = append(res.LastIDs, s)
	}
	return res, nil
}

func asSlice(v any) []any {
	s, _ := v.([]any)
	return s
}

func decodeClaimed(queue string, v any) []ClaimedTask {
	var out []ClaimedTask
	for _, item := range asSlice(v) {
		f := asSlice(item)
		if len(f) < 11 {
			continue
		}
		str := func(i int) string { s, _ := f[i].(string); return s }
		out = append(out, ClaimedTask{
			Queue: queue, ID: str(0), Attempt: int(atoi64(str(1))), Type: str(2),
			Payload: []byte(str(3)), TimeoutMS: atoi64(str(4)), MaxAttempts: int(atoi64(str(5))),
			IdempotencyKey: str(6), CreatedAt: atoi64(str(7)), CancelRequested: str(8) == "1",
			Metadata: []byte(str(9)), Priority: int(atoi64(str(10))),
		})
	}
	return out
}

// WaitReady blocks until an entry newer than lastIDs (bands p9..p0) exists
// in any band of queue, or block passes. It reads without a group, so it
// delivers nothing: the claim script that follows does the delivery.
func (r *RDB) WaitReady(ctx context.Context, queue string, lastIDs []string, block time.Duration) error {
	if len(lastIDs) != NumBands {
		return nil
	}
	streams := make([]string, 0, 2*NumBands)
	for b := NumBands - 1; b >= 0; b-- {
		streams = append(streams, r.keys.Stream(queue, b))
	}
	streams = append(streams, lastIDs...)
	err := r.c.XRead(ctx, &redis.XReadArgs{Streams: streams, Count: 1, Block: block}).Err()
	if errors.Is(err, redis.Nil) {
		return nil
	}
	return err
}

// FinishArgs identify the attempt a finalize applies to.
type FinishArgs struct {
	Queue    string
	ID       string
	Attempt  int
	Priority int
	Now      time.Time
}

func (r *RDB) finishKeys(a *FinishArgs) []string {
	k := r.keys
	return []string{k.Task(a.Queue, a.ID), k.Lease(a.Queue), k.Events(a.Queue),
		k.Stream(a.Queue, a.Priority), k.Depth(a.Queue), k.Stats(a.Queue, minuteOf(a.Now))}
}

// limitKeys are the keys a script that stops a running task needs to give
// back its concurrency-key slot and wake limited workers (see release_key
// and wake_limited in _lib.lua).
func (r *RDB) limitKeys(queue string) []string {
	k := r.keys
	return []string{k.KeyRunning(queue), k.Held(queue), k.Limited(queue), k.Wake(queue)}
}

func (r *RDB) finishArgs(a *FinishArgs, s *WorkerSettings) []any {
	return []any{a.Now.UnixMilli(), a.ID, a.Attempt, s.WorkerID, Group,
		r.keys.IdempotencyPrefix(a.Queue), s.EventsMaxLen, seconds(s.FailedRetention), AttemptsCap}
}

func fenced(v string, err error) error {
	if err != nil {
		return err
	}
	switch v {
	case "ok":
		return nil
	case "lease_lost":
		return ErrLeaseLost
	case "cancelled":
		return ErrCancelWon
	}
	return fmt.Errorf("rdb: unexpected finalize reply %q", v)
}

// Success is one attempt to finalize as succeeded.
type Success struct {
	ID        string
	Attempt   int
	Result    []byte // JSON, nil = none
	Truncated bool   // the result was too large to keep
}

// FinishSucceeded finalizes several succeeded attempts of one queue in one
// script call. It returns, per task, nil or ErrLeaseLost. A task whose
// success this worker already recorded (a call sent again after its reply
// was lost) answers nil.
func (r *RDB) FinishSucceeded(ctx context.Context, queue string, s *WorkerSettings, now time.Time, tasks []Success) ([]error, error) {
	k := r.keys
	keys := append([]string{k.Lease(queue), k.Events(queue), k.Depth(queue), k.Stats(queue, minuteOf(now))}, r.bandStreams(queue)...)
	keys = append(append(keys, r.limitKeys(queue)...), k.Retained(queue))
	args := []any{now.UnixMilli(), s.WorkerID, Group, k.IdempotencyPrefix(queue), s.EventsMaxLen,
		seconds(s.SucceededRetention), seconds(s.ResultRetention), len(tasks),
		k.KeyWaitPrefix(queue), k.TaskPrefix(queue)}
	for _, t := range tasks {
		keys = append(keys, k.Task(queue, t.ID), k.Result(queue, t.ID))
		args = append(args, t.ID, t.Attempt, t.Result, boolArg(t.Truncated))
	}
	v, err := r.run(ctx, "succeed", keys, args...).Int64Slice()
	if err != nil {
		return nil, err
	}
	if len(v) != len(tasks) {
		return nil, fmt.Errorf("rdb: succeed returned %d codes for %d tasks", len(v), len(tasks))
	}
	out := make([]error, len(v))
	for i, c := range v {
		if c == 0 {
			out[i] = ErrLeaseLost
		}
	}
	return out, nil
}

// The finalizers below answer nil, ErrLeaseLost, or (FinishRetry,
// FinishDead) ErrCancelWon. Each is idempotent: sent again after a lost
// reply, it answers what its first run did.

// FinishRetry schedules another attempt after delay.
func (r *RDB) FinishRetry(ctx context.Context, a *FinishArgs, s *WorkerSettings, delay time.Duration, class, msg string) error {
	keys := append(r.finishKeys(a), r.keys.Schedule(a.Queue), r.keys.Expiry(a.Queue))
	keys = append(append(append(keys, r.limitKeys(a.Queue)...), r.bandStreams(a.Queue)...), r.keys.Retained(a.Queue))
	args := append(r.finishArgs(a, s), delay.Milliseconds(), class, msg, r.keys.KeyWaitPrefix(a.Queue), r.keys.TaskPrefix(a.Queue))
	return fenced(r.run(ctx, "retry", keys, args...).Text())
}

// FinishDead ends the task for good: dead-lettered, or failed when the DLQ
// is off.
func (r *RDB) FinishDead(ctx context.Context, a *FinishArgs, s *WorkerSettings, class, msg string, retryable bool) error {
	keys := append(r.finishKeys(a), r.keys.DLQ(a.Queue))
	keys = append(append(append(keys, r.limitKeys(a.Queue)...), r.bandStreams(a.Queue)...), r.keys.Retained(a.Queue))
	args := append(r.finishArgs(a, s), class, msg, boolArg(s.DLQEnabled), s.DLQMaxLen,
		r.keys.TaskPrefix(a.Queue), boolArg(retryable), r.keys.KeyWaitPrefix(a.Queue), r.keys.TaskPrefix(a.Queue))
	return fenced(r.run(ctx, "dead", keys, args...).Text())
}

// HandBack returns a running task to its queue with the same attempt.
func (r *RDB) HandBack(ctx context.Context, a *FinishArgs, s *WorkerSettings) error {
	k := r.keys
	keys := []string{k.Task(a.Queue, a.ID), k.Lease(a.Queue), k.Events(a.Queue), k.Stream(a.Queue, a.Priority)}
	keys = append(append(keys, r.limitKeys(a.Queue)...), r.bandStreams(a.Queue)...)
	return fenced(r.run(ctx, "handback", keys, a.Now.UnixMilli(), a.ID, a.Attempt, s.WorkerID, Group,
		s.EventsMaxLen, AttemptsCap, k.KeyWaitPrefix(a.Queue), k.TaskPrefix(a.Queue)).Text())
}

func boolArg(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// LeaseRef names one held lease.
type LeaseRef struct {
	ID      string
	Attempt int
}

// RenewStatus is the outcome of renewing one lease.
type RenewStatus int

// Renewal outcomes.
const (
	Renewed RenewStatus = iota
	LeaseLost
	CancelRequested
)

// RenewLeases extends the worker's leases on queue, fenced per task.
func (r *RDB) RenewLeases(ctx context.Context, queue string, s *WorkerSettings, now time.Time, refs []LeaseRef) ([]RenewStatus, error) {
	if len(refs) == 0 {
		return nil, nil
	}
	args := []any{now.UnixMilli(), s.Lease.Milliseconds(), s.WorkerID, r.keys.TaskPrefix(queue)}
	for _, l := range refs {
		args = append(args, l.ID, l.Attempt)
	}
	v, err := r.run(ctx, "renew", []string{r.keys.Lease(queue)}, args...).Int64Slice()
	if err != nil {
		return nil, err
	}
	out := make([]RenewStatus, len(v))
	for i, c := range v {
		out[i] = RenewStatus(c)
	}
	return out, nil
}

// Reclaim takes over up to room tasks of queue whose lease expired, and
// dead-letters those with no attempts left. mine lists the attempts the
// calling process runs now: their leases are renewed, never taken over.
// nonce identifies the call as for Claim.
func (r *RDB) Reclaim(ctx context.Context, queue string, s *WorkerSettings, room int, now time.Time, nonce string, mine []LeaseRef) ([]ClaimedTask, error) {
	k := r.keys
	keys := append([]string{k.Lease(queue), k.Events(queue), k.Depth(queue), k.DLQ(queue),
		k.Stats(queue, minuteOf(now))}, r.bandStreams(queue)...)
	keys = append(append(keys, r.limitKeys(queue)...), k.Retained(queue))
	args := []any{now.UnixMilli(), s.Lease.Milliseconds(), s.WorkerID, Group,
		k.TaskPrefix(queue), k.IdempotencyPrefix(queue), room, s.EventsMaxLen,
		seconds(s.FailedRetention), AttemptsCap, boolArg(s.DLQEnabled), s.DLQMaxLen, nonce,
		k.KeyWaitPrefix(queue), k.TaskPrefix(queue)}
	for _, l := range mine {
		args = append(args, l.ID, l.Attempt)
	}
	v, err := r.run(ctx, "reclaim", keys, args...).Slice()
	if err != nil {
		return nil, err
	}
	return decodeClaimed(queue, v), nil
}

// MaxPerCall bounds the tasks promotion and the expiry sweep handle per call.
const MaxPerCall = 500

// Progress is what one maintenance call did.
type Progress struct {
	Done int       // tasks moved (promotion) or expired (sweep)
	Next time.Time // the next due time or deadline; zero when none
	Full bool      // the call examined MaxPerCall entries: more may be due now
}

// Promote moves due pending/retrying tasks of queue to their streams.
func (r *RDB) Promote(ctx context.Context, queue string, s *WorkerSettings, now time.Time) (Progress, error) {
	k := r.keys
	keys := append([]string{k.Schedule(queue), k.Expiry(queue), k.Events(queue), k.Depth(queue)}, r.bandStreams(queue)...)
	return r.countAndNext(r.run(ctx, "promote", append(keys, k.Retained(queue)), now.UnixMilli(), k.TaskPrefix(queue),
		k.IdempotencyPrefix(queue), MaxPerCall, s.EventsMaxLen, seconds(s.FailedRetention)))
}

// SweepExpired expires overdue pending/queued/retrying tasks of queue.
func (r *RDB) SweepExpired(ctx context.Context, queue string, s *WorkerSettings, now time.Time) (Progress, error) {
	k := r.keys
	keys := append([]string{k.Expiry(queue), k.Schedule(queue), k.Events(queue), k.Depth(queue)}, r.bandStreams(queue)...)
	return r.countAndNext(r.run(ctx, "sweep_expired", append(keys, k.Retained(queue)), now.UnixMilli(), k.TaskPrefix(queue),
		k.IdempotencyPrefix(queue), MaxPerCall, s.EventsMaxLen, seconds(s.FailedRetention)))
}

func (r *RDB) countAndNext(cmd *redis.Cmd) (Progress, error) {
	v, err := cmd.Int64Slice()
	if err != nil {
		return Progress{}, err
	}
	if len(v) != 3 {
		return Progress{}, fmt.Errorf("rdb: malformed reply %v", v)
	}
	p := Progress{Done: int(v[0]), Full: v[2] >= MaxPerCall}
	if v[1] >= 0 {
		p.Next = time.UnixMilli(v[1])
	}
	return p, nil
}

// ErrDuplicateWorker is returned when a live worker already uses the id.
var ErrDuplicateWorker = errors.New("a live worker already uses this id")

// ErrWorkerReplaced is returned when another process took over the id.
var ErrWorkerReplaced = errors.New("worker id taken over by another process")

// WorkerStart registers the worker's heartbeat record (fields are pairs),
// then indexes it in the workers ZSET and emits WORKER_STARTED. The record
// script touches only the worker's hash (one Cluster slot); the index and the
// event follow as plain commands.
func (r *RDB) WorkerStart(ctx context.Context, id string, now time.Time, staleAfter time.Duration, eventsMaxLen int64, fields []any) error {
	args := append([]any{now.UnixMilli(), staleAfter.Milliseconds()}, fields...)
	v, err := r.run(ctx, "worker_start", []string{r.keys.Worker(id)}, args...).Text()
	if err != nil {
		return err
	}
	if v == "duplicate" {
		return ErrDuplicateWorker
	}
	return r.indexWorker(ctx, id, now, eventsMaxLen, "WORKER_STARTED")
}

func (r *RDB) indexWorker(ctx context.Context, id string, now time.Time, eventsMaxLen int64, event string) error {
	k := r.keys
	pipe := r.c.Pipeline()
	pipe.ZAdd(ctx, k.Workers(), redis.Z{Score: float64(now.UnixMilli()), Member: id})
	pipe.ZRemRangeByScore(ctx, k.Workers(), "-inf", strconv.FormatInt(now.Add(-24*time.Hour).UnixMilli(), 10))
	if event != "" {
		pipe.XAdd(ctx, &redis.XAddArgs{Stream: k.SysEvents(), MaxLen: eventsMaxLen, Approx: true,
			Values: []any{"type", event, "worker_id", id, "ts", now.UnixMilli()}})
	}
	_, err := pipe.Exec(ctx)
	return err
}

// WorkerBeat refreshes the heartbeat record, fenced on instance, and the
// workers index; stopped emits WORKER_STOPPED.
func (r *RDB) WorkerBeat(ctx context.Context, id, instance string, now time.Time, eventsMaxLen int64, stopped bool, fields []any) error {
	args := append([]any{now.UnixMilli(), instance}, fields...)
	v, err := r.run(ctx, "worker_beat", []string{r.keys.Worker(id)}, args...).Text()
	if err != nil {
		return err
	}
	if v == "replaced" {
		return ErrWorkerReplaced
	}
	event := ""
	if stopped {
		event = "WORKER_STOPPED"
	}
	return r.indexWorker(ctx, id, now, eventsMaxLen, event)
}

// OpClaim starts an IdempotentOperation: done (with the stored result),
// busy, or claimed for lease.
func (r *RDB) OpClaim(ctx context.Context, key, token string, lease time.Duration) (state string, result string, err error) {
	v, err := r.run(ctx, "op_claim", []string{r.keys.Operation(key)}, token, lease.Milliseconds()).Slice()
	if err != nil {
		return "", "", err
	}
	state, _ = v[0].(string)
	if len(v) > 1 {
		result, _ = v[1].(string)
	}
	return state, result, nil
}

// OpFinish ends or extends an operation claim: mode done|extend|release.
func (r *RDB) OpFinish(ctx context.Context, key, token, mode string, ttl time.Duration, result []byte) (bool, error) {
	n, err := r.run(ctx, "op_finish", []string{r.keys.Operation(key)}, token, mode, ttl.Milliseconds(), result).Int64()
	return n == 1, err
}

// PruneConsumers removes the group's consumers on queue's streams that have
// nothing pending and were idle for at least idle.
func (r *RDB) PruneConsumers(ctx context.Context, queue string, idle time.Duration) (int64, error) {
	return r.run(ctx, "prune_consumers", r.bandStreams(queue), Group, idle.Milliseconds()).Int64()
}

// WaitWake blocks until the wake stream of queue has an entry after after
// (a releasing finalize writes one when a concurrency limit stopped a
// claim), or block passes. It returns the newest entry id seen, to pass as
// after next time; start with "0-0".
func (r *RDB) WaitWake(ctx context.Context, queue, after string, block time.Duration) (string, error) {
	res, err := r.c.XRead(ctx, &redis.XReadArgs{Streams: []string{r.keys.Wake(queue), after}, Count: 1, Block: block}).Result()
	if errors.Is(err, redis.Nil) {
		return after, nil
	}
	if err != nil {
		return after, err
	}
	if len(res) > 0 && len(res[0].Messages) > 0 {
		return res[0].Messages[len(res[0].Messages)-1].ID, nil
	}
	return after, nil
}

// RemoteBeat modes: what the HTTP worker just did.
const (
	RemoteClaim = "claim" // claimed tasks (ids) or asked for some
	RemoteBeat  = "beat"  // renewed the leases of ids
	RemoteDone  = "done"  // finished ids
)

// RemoteWorker is the record update of an HTTP worker's call.
type RemoteWorker struct {
	ID        string
	Mode      string    // RemoteClaim, RemoteBeat or RemoteDone
	LeaseEnd  time.Time // end of the leases of IDs (claim, beat)
	Queues    []string  // nil = keep the recorded ones
	Interval  time.Duration
	Version   string
	TaskIDs   []string
	EventsMax int64
}

// RemoteWorkerBeat writes the heartbeat record of an HTTP worker and
// indexes it in the workers ZSET. It fails with ErrDuplicateWorker when a
// live Go worker uses the id.
func (r *RDB) RemoteWorkerBeat(ctx context.Context, w *RemoteWorker, now time.Time) error {
	queues := ""
	if w.Queues != nil {
		b, _ := json.Marshal(w.Queues)
		queues = string(b)
	}
	args := []any{now.UnixMilli(), w.Mode, w.LeaseEnd.UnixMilli(), queues, w.Interval.Milliseconds(), w.Version}
	for _, id := range w.TaskIDs {
		args = append(args, id)
	}
	v, err := r.run(ctx, "remote_beat", []string{r.keys.Worker(w.ID)}, args...).Text()
	if err != nil {
		return err
	}
	if v == "duplicate" {
		return ErrDuplicateWorker
	}
	return r.indexWorker(ctx, w.ID, now, w.EventsMax, "")
}
