package dtq

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/internal/rdb"
)

// throughputWindow is how many recent minutes QueueInfo summarizes.
const throughputWindow = 5

// ListQueues returns every queue ever submitted to, by name. It reads every
// queue's full state, so its cost grows with the number of queues; the API
// pages with ListQueuePage instead.
func (i *Inspector) ListQueues(ctx context.Context) ([]*dtqtype.QueueInfo, error) {
	names, err := i.rdb.Queues(ctx)
	if err != nil {
		return nil, err
	}
	workers, err := i.ListWorkers(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]*dtqtype.QueueInfo, 0, len(names))
	for _, q := range names {
		qi, err := i.queueInfo(ctx, q, workers)
		if err != nil {
			return nil, err
		}
		out = append(out, qi)
	}
	return out, nil
}

// GetQueue returns one queue's state, or ErrQueueNotFound for a queue never
// submitted to.
func (i *Inspector) GetQueue(ctx context.Context, queue string) (*dtqtype.QueueInfo, error) {
	if !ValidQueueName(queue) {
		return nil, ErrQueueNotFound
	}
	ok, err := i.rdb.QueueExists(ctx, queue)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, ErrQueueNotFound
	}
	workers, err := i.ListWorkers(ctx)
	if err != nil {
		return nil, err
	}
	return i.queueInfo(ctx, queue, workers)
}

func (i *Inspector) queueInfo(ctx context.Context, q string, workers []*dtqtype.WorkerInfo) (*dtqtype.QueueInfo, error) {
	st, err := i.rdb.GetQueueStats(ctx, q, time.Now(), throughputWindow)
	if err != nil {
		return nil, err
	}
	qi := &dtqtype.QueueInfo{Name: q, Depth: st.Depth, Ready: map[string]int64{}, Running: st.Running,
		Pending: st.Pending, Scheduled: st.Scheduled, Paused: st.Paused, DLQ: st.DLQ, Retained: st.Retained}
	for b := rdb.NumBands - 1; b >= 0; b-- {
		qi.Ready["p"+strconv.Itoa(b)] = st.Ready[b]
		qi.ReadyTotal += st.Ready[b]
	}
	for _, w := range workers {
		if !w.Live {
			continue
		}
		for _, wq := range w.Queues {
			if name, _, _ := strings.Cut(wq, ":"); name == q {
				qi.LiveWorkers++
			}
		}
	}
	qi.Unserved = qi.LiveWorkers == 0
	tp := &qi.Throughput
	tp.WindowMinutes = throughputWindow
	for _, m := range st.Minutes {
		tp.Succeeded += m.Counts["succeeded"]
		tp.Failed += m.Counts["failed"] + m.Counts["dead_lettered"]
		tp.Retried += m.Counts["retried"]
	}
	tp.PerMinute = float64(tp.Succeeded+tp.Failed) / throughputWindow
	if !st.Limits.IsZero() {
		qi.Limits = limitsFromRDB(st.Limits) // read in the same pipeline as the stats
	}
	return qi, nil
}

// ListWorkers returns the workers that heartbeated in the last 24 hours,
// most recent first; Live is false once a worker missed three heartbeats.
func (i *Inspector) ListWorkers(ctx context.Context) ([]*dtqtype.WorkerInfo, error) {
	ws, err := i.rdb.ListWorkers(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]*dtqtype.WorkerInfo, 0, len(ws))
	for _, w := range ws {
		out = append(out, workerInfo(&w))
	}
	return out, nil
}

// GetWorker returns one worker, or ErrWorkerNotFound.
func (i *Inspector) GetWorker(ctx context.Context, id string) (*dtqtype.WorkerInfo, error) {
	w, err := i.rdb.GetWorker(ctx, id)
	if err != nil {
		return nil, mapNotFound(err, ErrWorkerNotFound)
	}
	return workerInfo(w), nil
}

func workerInfo(w *rdb.WorkerInfo) *dtqtype.WorkerInfo {
	f := w.Fields
	n := func(k string) int64 { v, _ := strconv.ParseInt(f[k], 10, 64); return v }
	wi := &dtqtype.WorkerInfo{
		ID: w.ID, Hostname: f["hostname"], PID: int(n("pid")), Version: f["version"],
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
	age := time.Since(w.LastHeartbeat)
	wi.Live = wi.Status != "stopped" && age <= 3*time.Duration(max(wi.HeartbeatIntervalMS, 1))*time.Millisecond
	return wi
}

// ListDLQ returns dead-letter entries newest first with payload and last
// error, and the cursor of the next page ("" at the end). A filtered page
// may be short while more remain.
func (i *Inspector) ListDLQ(ctx context.Context, f DLQFilter) ([]*dtqtype.DLQEntry, string, error) {
	if f.Limit == 0 {
		f.Limit = 50
	}
	if f.Limit < 1 || f.Limit > 1000 {
		return nil, "", invalid("limit", "must be between 1 and 1000")
	}
	if f.Queue != "" && !ValidQueueName(f.Queue) {
		return nil, "", invalid("queue", "must match ^[a-z0-9][a-z0-9_-]{0,63}$")
	}
	es, next, err := i.rdb.ListDLQ(ctx, rdb.DLQFilter{Queue: f.Queue, Type: f.Type, ErrorClass: f.ErrorClass, Limit: f.Limit, Cursor: f.Cursor})
	if errors.Is(err, rdb.ErrBadCursor) {
		return nil, "", ErrInvalidCursor
	}
	if err != nil {
		return nil, "", err
	}
	out := make([]*dtqtype.DLQEntry, len(es))
	for j, e := range es {
		out[j] = &dtqtype.DLQEntry{TaskInfo: e.Task, FailedAt: dtqtype.Time{Time: e.FailedAt.UTC()}}
	}
	return out, next, nil
}

// GetDLQEntry returns one dead-letter entry, or ErrDLQEntryNotFound.
func (i *Inspector) GetDLQEntry(ctx context.Context, id string) (*dtqtype.DLQEntry, error) {
	e, err := i.rdb.GetDLQEntry(ctx, id)
	if err != nil {
		return nil, mapNotFound(err, ErrDLQEntryNotFound)
	}
	return &dtqtype.DLQEntry{TaskInfo: e.Task, FailedAt: dtqtype.Time{Time: e.FailedAt.UTC()}}, nil
}

// ListAudit returns audit entries newest first and the next page's cursor.
func (i *Inspector) ListAudit(ctx context.Context, limit int, cursor string) ([]*dtqtype.AuditEntry, string, error) {
	if limit == 0 {
		limit = 50
	}
	if limit < 1 || limit > 1000 {
		return nil, "", invalid("limit", "must be between 1 and 1000")
	}
	es, next, err := i.rdb.ListAudit(ctx, limit, cursor)
	if errors.Is(err, rdb.ErrBadCursor) {
		return nil, "", ErrInvalidCursor
	}
	if err != nil {
		return nil, "", err
	}
	out := make([]*dtqtype.AuditEntry, len(es))
	for j, e := range es {
		f := e.Fields
		ts, _ := strconv.ParseInt(f["ts"], 10, 64)
		out[j] = &dtqtype.AuditEntry{ID: e.ID, TS: dtqtype.MillisTime(ts), Actor: f["actor"], Role: f["role"],
			Action: f["action"], Target: f["target"], RequestID: f["request_id"], Detail: f["detail"]}
	}
	return out, next, nil
}

// Stats returns per-minute counters for queue ("" = all queues summed) over
// the last window (1 minute .. 2 hours), oldest minute first. Over all
// queues it reads at most 50,000 per-minute records (queues × minutes): a
// longer window is a *ValidationError naming the longest that fits.
func (i *Inspector) Stats(ctx context.Context, queue string, window time.Duration) ([]*dtqtype.MinuteStats, error) {
	if window < time.Minute || window > 2*time.Hour {
		return nil, invalid("window", "must be between 1m and 2h")
	}
	queues := []string{queue}
	if queue == "" {
		var err error
		if queues, err = i.rdb.Queues(ctx); err != nil {
			return nil, err
		}
		if err := statsWindowCheck(len(queues), int(window/time.Minute)); err != nil {
			return nil, err
		}
	} else if !ValidQueueName(queue) {
		return nil, invalid("queue", "must match ^[a-z0-9][a-z0-9_-]{0,63}$")
	}
	to := time.Now().Unix() / 60
	from := to - int64(window/time.Minute) + 1
	out := make([]*dtqtype.MinuteStats, to-from+1)
	for j := range out {
		out[j] = &dtqtype.MinuteStats{Minute: dtqtype.MillisTime((from + int64(j)) * 60000),
			WaitBuckets: map[string]int64{}, RunBuckets: map[string]int64{}}
	}
	perQueue, err := i.rdb.MinuteRange(ctx, queues, from, to)
	if err != nil {
		return nil, err
	}
	for _, ms := range perQueue {
		for j, m := range ms {
			addMinute(out[j], m.Counts)
		}
	}
	return out, nil
}

func addMinute(dst *dtqtype.MinuteStats, c map[string]int64) {
	dst.Succeeded += c["succeeded"]
	dst.Failed += c["failed"]
	dst.DeadLettered += c["dead_lettered"]
	dst.Retried += c["retried"]
	dst.Cancelled += c["cancelled"]
	dst.Started += c["started"]
	dst.WaitMSSum += c["wait_ms_sum"]
	dst.RunMSSum += c["run_ms_sum"]
	for k, v := range c {
		for _, kind := range []struct {
			prefix string
			m      map[string]int64
		}{{"wait_b", dst.WaitBuckets}, {"run_b", dst.RunBuckets}} {
			if b, ok := strings.CutPrefix(k, kind.prefix); ok {
				kind.m[bucketLabel(b)] += v
			}
		}
	}
}

// bucketLabel turns a power-of-two bucket index into its upper bound label:
// bucket 0 holds 0ms, bucket k holds [2^(k-1), 2^k) ms.
func bucketLabel(b string) string {
	k, err := strconv.Atoi(b)
	if err != nil || k < 0 || k > 62 {
		return "other"
	}
	if k == 0 {
		return "lt_1ms"
	}
	return "lt_" + strconv.FormatInt(int64(1)<<k, 10) + "ms"
}
