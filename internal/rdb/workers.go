package rdb

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dtq-io/dtq/dtqtype"
)

// ListWorkers returns the workers seen in the last 24 hours, most recent
// heartbeat first; a worker is live at now while its heartbeat is less than
// three intervals old.
func (r *RDB) ListWorkers(ctx context.Context, now time.Time) ([]*dtqtype.WorkerInfo, error) {
	ids, err := r.c.ZRevRangeWithScores(ctx, r.keys.Workers(), 0, -1).Result()
	if err != nil {
		return nil, err
	}
	pipe := r.c.Pipeline()
	cmds := make([]*redis.MapStringStringCmd, len(ids))
	for i, z := range ids {
		cmds[i] = pipe.HGetAll(ctx, r.keys.Worker(z.Member.(string)))
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	out := make([]*dtqtype.WorkerInfo, 0, len(ids))
	for i, z := range ids {
		if f := cmds[i].Val(); len(f) > 0 {
			out = append(out, decodeWorker(z.Member.(string), f, now))
		}
	}
	return out, nil
}

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
