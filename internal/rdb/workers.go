package rdb

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
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
