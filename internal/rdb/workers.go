package rdb

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"

	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/internal/cursor"
)

// Workers returns the workers seen in the last 24 hours, most recent
// heartbeat first; a worker is live at now while its heartbeat is less than
// three intervals old.
func (r *RDB) Workers(ctx context.Context, now time.Time) ([]*dtqtype.WorkerInfo, error) {
	ids, err := r.c.ZRevRangeWithScores(ctx, r.keys.Workers(), 0, -1).Result()
	if err != nil {
		return nil, err
	}
	pipe := r.c.Pipeline()
	cmds := make([]*redis.MapStringStringCmd, len(ids))
	for i, z := range ids {
		cmds[i] = pipe.HGetAll(ctx, r.keys.Worker(zMember(z)))
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	out := make([]*dtqtype.WorkerInfo, 0, len(ids))
	for i, z := range ids {
		if f := cmds[i].Val(); len(f) > 0 {
			out = append(out, decodeWorker(zMember(z), f, now))
		}
	}
	return out, nil
}

// ListWorkers returns a page of the workers seen in the last 24 hours in
// worker id order (p.Limit is the page size; the caller checks it). The
// cursor is the last id of the page. Id order, unlike heartbeat order, does
// not move while workers beat, so following the pages visits every worker
// indexed throughout once. A bad cursor is cursor.ErrInvalid.
func (r *RDB) ListWorkers(ctx context.Context, now time.Time, p *dtqtype.WorkerListParams) (*dtqtype.ListResult[*dtqtype.WorkerInfo], error) {
	after := ""
	if p.Cursor != "" {
		c := cursor.Read(p.Cursor, cursor.Workers)
		if after = c.String(validCursorWorkerID); c.Err() != nil {
			return nil, c.Err()
		}
	}
	ids, err := r.c.ZRangeByScore(ctx, r.keys.Workers(), &redis.ZRangeBy{
		Min: strconv.FormatInt(now.Add(-WorkerRetention).UnixMilli(), 10), Max: "+inf"}).Result()
	if err != nil {
		return nil, err
	}
	slices.Sort(ids)
	start, _ := slices.BinarySearch(ids, after)
	if start < len(ids) && after != "" && ids[start] == after {
		start++
	}
	ids = ids[start:]
	res := &dtqtype.ListResult[*dtqtype.WorkerInfo]{}
	if len(ids) > p.Limit {
		ids = ids[:p.Limit]
		res.NextCursor = cursor.Encode(cursor.Workers, ids[p.Limit-1])
	}
	pipe := r.c.Pipeline()
	cmds := make([]*redis.MapStringStringCmd, len(ids))
	for i, id := range ids {
		cmds[i] = pipe.HGetAll(ctx, r.keys.Worker(id))
	}
	if len(ids) > 0 {
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return nil, err
		}
	}
	res.Items = make([]*dtqtype.WorkerInfo, 0, len(ids))
	for i, id := range ids {
		if f := cmds[i].Val(); len(f) > 0 {
			res.Items = append(res.Items, decodeWorker(id, f, now))
		}
	}
	return res, nil
}

// validCursorWorkerID accepts what a worker id may be: a Go worker's id is
// any non-empty name.
func validCursorWorkerID(id string) bool { return id != "" && utf8.ValidString(id) }

// GetWorker returns one worker's record, or ErrNotFound.
func (r *RDB) GetWorker(ctx context.Context, id string, now time.Time) (*dtqtype.WorkerInfo, error) {
	f, err := r.c.HGetAll(ctx, r.keys.Worker(id)).Result()
	if err != nil {
		return nil, err
	}
	if len(f) == 0 {
		return nil, ErrNotFound
	}
	return decodeWorker(id, f, now), nil
}

// decodeWorker turns a worker record (written by worker_start, worker_beat
// and remote_beat) into a WorkerInfo.
func decodeWorker(id string, f map[string]string, now time.Time) *dtqtype.WorkerInfo {
	n := func(k string) int64 { return atoi64(f[k]) }
	wi := &dtqtype.WorkerInfo{
		ID: id, Hostname: f["hostname"], PID: int(n("pid")), Version: f["version"],
		Concurrency: int(n("concurrency")), HeartbeatIntervalMS: n("heartbeat_interval_ms"),
		StartedAt: dtqtype.MillisTime(n("started_at")), LastHeartbeat: dtqtype.MillisTime(n("last_heartbeat")),
		Status: f["status"], Processed: n("processed"), Failed: n("failed"), Retried: n("retried"),
		Queues: []string{}, InFlight: []string{}, Kind: cmp.Or(f["kind"], "go"),
	}
	if lc := n("last_claim"); lc > 0 {
		t := dtqtype.MillisTime(lc)
		wi.LastClaim = &t
	}
	_ = json.Unmarshal([]byte(f["queues"]), &wi.Queues)
	_ = json.Unmarshal([]byte(f["in_flight"]), &wi.InFlight)
	age := now.Sub(time.UnixMilli(n("last_heartbeat")))
	wi.Live = wi.Status != "stopped" && age <= 3*time.Duration(max(wi.HeartbeatIntervalMS, 1))*time.Millisecond
	return wi
}

// ErrDuplicateWorker is returned when a live worker already uses the id.
var ErrDuplicateWorker = errors.New("a live worker already uses this id")

// ErrWorkerReplaced is returned when another process took over the id.
var ErrWorkerReplaced = errors.New("worker id taken over by another process")

// WorkerStart registers the worker's heartbeat record (fields are pairs),
// then indexes it in the workers ZSET and emits WORKER_STARTED. The id is
// admitted to the index first (worker_admit), so that a deployment at its
// worker bound writes no record: a new id then fails with
// *TooManyWorkersError. The record script touches only the worker's hash
// (one Cluster slot); the event follows as a plain command.
func (r *RDB) WorkerStart(ctx context.Context, id string, now time.Time, staleAfter time.Duration, eventsMaxLen int64, fields []any) error {
	if err := r.admitWorker(ctx, id, "", now, true); err != nil {
		return err
	}
	v, err := r.callWorkerStart(ctx, &workerStartKeys{Worker: r.keys.Worker(id)},
		&workerStartArgs{Now: now.UnixMilli(), StaleAfterMS: staleAfter.Milliseconds(), Fields: fields})
	if err != nil {
		return err
	}
	if v == "duplicate" {
		return ErrDuplicateWorker
	}
	return r.workerEvent(ctx, id, now, eventsMaxLen, "WORKER_STARTED")
}

// WorkerBounds bound the worker ids the workers index holds (DTQ_MAX_WORKERS)
// and, of HTTP workers, those one API key registers (DTQ_MAX_WORKERS_PER_KEY);
// 0 = no bound.
type WorkerBounds struct {
	Max       int64
	MaxPerKey int64
}

// SetWorkerBounds sets the bounds worker registrations are held to. Call it
// before the RDB is used.
func (r *RDB) SetWorkerBounds(b WorkerBounds) { r.workerBounds = b }

// WorkerRetention is how long a worker's record and index entry outlive its
// last heartbeat.
const WorkerRetention = 24 * time.Hour

// WorkerEvictAfter is how long a worker must have been silent before a
// registration that finds the index full may evict it (and delete its
// record) to make room.
const WorkerEvictAfter = time.Hour

// TooManyWorkersError is returned when a new worker id would take the
// workers index, or its API key's share of it, past its bound.
type TooManyWorkersError struct {
	Scope      string // "total" (DTQ_MAX_WORKERS) or "key" (DTQ_MAX_WORKERS_PER_KEY)
	Count      int64
	Limit      int64
	RetryAfter time.Duration // until the oldest entry may be evicted
}

// Error names the bound reached.
func (e *TooManyWorkersError) Error() string {
	if e.Scope == "key" {
		return fmt.Sprintf("this API key has registered %d of its %d workers", e.Count, e.Limit)
	}
	return fmt.Sprintf("%d of %d workers are registered", e.Count, e.Limit)
}

// admitWorker indexes id (with the API key's index when key is not empty);
// fresh says the call registers the id, which the bounds apply to. It
// deletes the records of the ids the script evicted.
func (r *RDB) admitWorker(ctx context.Context, id, key string, now time.Time, fresh bool) error {
	keys := &workerAdmitKeys{Workers: r.keys.Workers()}
	perKey := int64(0)
	if key != "" {
		keys.OfKey = r.keys.WorkersOfKey(key)
		perKey = r.workerBounds.MaxPerKey
	}
	mode := "seen"
	if fresh {
		mode = "new"
	}
	staleBefore := now.Add(-WorkerEvictAfter).UnixMilli()
	v, err := r.callWorkerAdmit(ctx, keys, &workerAdmitArgs{
		Now: now.UnixMilli(), ID: id, KeepAfter: now.Add(-WorkerRetention).UnixMilli(), StaleBefore: staleBefore,
		Max: r.workerBounds.Max, MaxPerKey: perKey, Mode: mode,
	})
	if err != nil {
		return err
	}
	var full *TooManyWorkersError
	if v.State == "full" {
		oldest := time.UnixMilli(v.OldestMS)
		full = &TooManyWorkersError{Scope: v.Scope, Count: v.Count, Limit: v.Limit,
			RetryAfter: min(max(time.Second, oldest.Add(WorkerEvictAfter).Sub(now)), WorkerEvictAfter)}
	}
	for _, e := range v.Evicted {
		if _, err := r.callWorkerForget(ctx, &workerForgetKeys{Worker: r.keys.Worker(e)},
			&workerForgetArgs{StaleBefore: staleBefore}); err != nil {
			return err
		}
	}
	if full != nil {
		return full
	}
	return nil
}

func (r *RDB) workerEvent(ctx context.Context, id string, now time.Time, eventsMaxLen int64, event string) error {
	if event == "" {
		return nil
	}
	return r.c.XAdd(ctx, &redis.XAddArgs{Stream: r.keys.SysEvents(), MaxLen: eventsMaxLen, Approx: true,
		Values: []any{"type", event, "worker_id", id, "ts", now.UnixMilli()}}).Err()
}

// WorkerBeat refreshes the heartbeat record, fenced on instance, and the
// workers index; stopped emits WORKER_STOPPED.
func (r *RDB) WorkerBeat(ctx context.Context, id, instance string, now time.Time, eventsMaxLen int64, stopped bool, fields []any) error {
	v, err := r.callWorkerBeat(ctx, &workerBeatKeys{Worker: r.keys.Worker(id)},
		&workerBeatArgs{Now: now.UnixMilli(), Instance: instance, Fields: fields})
	if err != nil {
		return err
	}
	if v == "replaced" {
		return ErrWorkerReplaced
	}
	if err := r.admitWorker(ctx, id, "", now, false); err != nil {
		return err
	}
	event := ""
	if stopped {
		event = "WORKER_STOPPED"
	}
	return r.workerEvent(ctx, id, now, eventsMaxLen, event)
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
	// Key names the API key the call came with ("" = none): its workers
	// are bounded by WorkerBounds.MaxPerKey.
	Key string
}

// RemoteWorkerBeat indexes an HTTP worker in the workers ZSET and writes its
// heartbeat record. It fails with ErrDuplicateWorker when a live Go worker
// uses the id, and, for a claim, with *TooManyWorkersError when the id is
// new and the workers index or the key's share is at its bound (then
// nothing is written). Renewals and finalizes are never refused: the worker
// holds leases.
func (r *RDB) RemoteWorkerBeat(ctx context.Context, w *RemoteWorker, now time.Time) error {
	if err := r.admitWorker(ctx, w.ID, w.Key, now, w.Mode == RemoteClaim); err != nil {
		return err
	}
	queues := ""
	if w.Queues != nil {
		b, err := json.Marshal(w.Queues)
		if err != nil {
			return err
		}
		queues = string(b)
	}
	v, err := r.callRemoteBeat(ctx, &remoteBeatKeys{Worker: r.keys.Worker(w.ID)}, &remoteBeatArgs{
		Now: now.UnixMilli(), Mode: w.Mode, LeaseEnd: w.LeaseEnd.UnixMilli(), Queues: queues,
		IntervalMS: w.Interval.Milliseconds(), Version: w.Version, IDs: w.TaskIDs,
	})
	if err != nil {
		return err
	}
	if v == "duplicate" {
		return ErrDuplicateWorker
	}
	return nil
}
