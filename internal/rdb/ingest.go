package rdb

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/dtq-io/dtq/dtqtype"
)

// NewTask is a validated task ready to be written by Ingest.
type NewTask struct {
	ID             string
	Type           string
	Payload        []byte // compact JSON object, stored as sent
	Priority       int
	MaxAttempts    int
	TimeoutMS      int64
	IdempotencyKey string     // "" = none
	AvailableAt    int64      // epoch ms; after now = pending
	ExpiresAt      int64      // epoch ms; 0 = none
	Metadata       []byte     // JSON object; nil = {}
	Fingerprint    string     // the SHA-256 of the work, its 32 bytes (what the task hash stores)
	IdemTTL        int64      // seconds the idempotency record lives
	CreatedAt      int64      // epoch ms
	ConcurrencyKey string     // "" = none
	Retention      int64      // seconds kept once finished; 0 = the workers' setting, -1 = none
	KeepPayload    bool       // keep payload and metadata once succeeded
	Dedup          *DedupSpec // nil = none
}

// DedupSpec is a task's deduplication (docs/deduplication.md), as the
// ingest script takes it: the key already made from dedup.by, durations
// in ms (0 = none).
type DedupSpec struct {
	Key     string // 1..256 printable characters
	Mode    string // drop, throttle, debounce, replace, keep_last
	TTL     int64
	Window  int64
	MaxWait int64
}

// arg is the spec as ingest.lua's per-task dedup argument.
func (d *DedupSpec) arg() string {
	if d == nil {
		return ""
	}
	ms := func(v int64) string {
		if v <= 0 {
			return ""
		}
		return strconv.FormatInt(v, 10)
	}
	return d.Mode + "\t" + ms(d.TTL) + "\t" + ms(d.Window) + "\t" + ms(d.MaxWait) + "\t" + d.Key
}

// storedFields are a task's metadata, retention (s; 0 = the workers'
// setting, -1 = none) and keep-payload flag as the ingest and workflow-node
// scripts take them: no metadata for {}, "" for the workers' retention and
// "0" for none, "1" to keep the payload.
func storedFields(metadata []byte, retention int64, keepPayload bool) (meta []byte, ret, keep string) {
	if string(metadata) != "{}" {
		meta = metadata
	}
	switch {
	case retention > 0:
		ret = strconv.FormatInt(retention, 10)
	case retention < 0:
		ret = "0"
	}
	if keepPayload {
		keep = "1"
	}
	return meta, ret, keep
}

// IngestOutcome says what Ingest did with one task.
type IngestOutcome int

// Ingest outcomes.
const (
	Created IngestOutcome = iota
	Duplicate
	InProgress
	Mismatch
	QueueFull
	// Absent (SettleIngest only): the task was not created, and the call
	// it settles can no longer create it.
	Absent
	// Deduplicated: the submission was collapsed into its dedup key's
	// task (drop, throttle, debounce); TaskID and Task are that task's.
	Deduplicated
)

// IngestResult is Ingest's answer for one task.
type IngestResult struct {
	Outcome IngestOutcome
	TaskID  string            // the new task, or the task the key belongs to
	Status  dtqtype.Status    // Created: pending or queued
	Depth   int64             // QueueFull: the depth that refused it
	Task    *dtqtype.TaskInfo // Duplicate, Deduplicated: the stored task (nil when it is gone)
	Mode    string            // Deduplicated: the mode that collapsed it
	// Replaced (Created, replace and keep_last): the task of the dedup key
	// that was cancelled for this one; "" when none was.
	Replaced string
	Err      error // Absent: set by the caller, why the call's replies were lost
}

// IngestOptions are the queue limits Ingest enforces.
type IngestOptions struct {
	MaxDepth     int64
	EventsMaxLen int64
	RecentCap    int64
	// CancelledRetention keeps a queued task a replace or keep_last
	// submission cancels (unless its own retention says otherwise).
	CancelledRetention time.Duration
}

// Ingest creates tasks of one queue with one script call. Each task is
// checked and written on its own: one task's refusal does not affect others.
// The call is safe to send again with the same arguments (go-redis does
// after a broken connection; so may the caller): a task it already created
// is answered Created again and nothing more is written.
func (r *RDB) Ingest(ctx context.Context, queue string, now time.Time, opt IngestOptions, tasks []NewTask) ([]IngestResult, error) {
	return r.ingest(ctx, queue, now, opt, tasks, false)
}

// SettleIngest is the last word on an Ingest call whose every reply was
// lost (same arguments): it answers as Ingest sent again would, except that
// a task not created yet is answered Absent and marked so that the lost call,
// should it still reach Redis, creates nothing. Its answer is then true for
// good. It creates nothing.
func (r *RDB) SettleIngest(ctx context.Context, queue string, now time.Time, opt IngestOptions, tasks []NewTask) ([]IngestResult, error) {
	return r.ingest(ctx, queue, now, opt, tasks, true)
}

func (r *RDB) ingest(ctx context.Context, queue string, now time.Time, opt IngestOptions, tasks []NewTask, settle bool) ([]IngestResult, error) {
	c := r.ingestCall(queue, now, opt, tasks, settle, r.flags(ctx, queue))
	reply, err := r.run(ctx, scriptIngest, c.keys(), c.args()...).Result()
	if len(tasks) > 0 && isQnumError(err) {
		// The ids carry a number that is not the queue's (a stale cache,
		// a lost registry): nothing was written. Ask the registry, stamp its
		// number into the ids and send again, once.
		r.forgetQueue(queue)
		num, _, rerr := r.RegisterQueue(ctx, queue, true)
		if rerr != nil {
			return nil, rerr
		}
		for i := range tasks {
			tasks[i].ID = WithQueueNumber(tasks[i].ID, num)
		}
		reply, err = r.run(ctx, scriptIngest, c.keys(), c.args()...).Result()
	}
	if err != nil {
		return nil, err
	}
	// A call of one task answers that task's reply alone.
	items, _ := reply.([]any)
	if len(tasks) == 1 {
		items = []any{reply}
	}
	if len(items) != len(tasks) {
		return nil, fmt.Errorf("rdb: ingest returned %d replies for %d tasks", len(items), len(tasks))
	}
	out := make([]IngestResult, len(tasks))
	for i, item := range items {
		if st, ok := item.(string); ok {
			// created: the status alone
			out[i] = IngestResult{Outcome: Created, TaskID: tasks[i].ID, Status: dtqtype.Status(st)}
			continue
		}
		parts, _ := item.([]any)
		if len(parts) < 2 {
			return nil, fmt.Errorf("rdb: malformed ingest reply %v", item)
		}
		code, _ := parts[0].(string)
		val, _ := parts[1].(string)
		switch code {
		case "created":
			st, _ := parts[2].(string)
			out[i] = IngestResult{Outcome: Created, TaskID: val, Status: dtqtype.Status(st)}
			if len(parts) > 3 {
				out[i].Replaced, _ = parts[3].(string)
			}
		case "deduplicated":
			mode, _ := parts[2].(string)
			var res *string
			if s, ok := parts[4].(string); ok {
				res = &s
			}
			out[i] = IngestResult{Outcome: Deduplicated, TaskID: val, Mode: mode}
			if h := flatToMap(parts[3]); len(h) > 0 {
				out[i].Task = decodeTask(queue, val, h, res)
			}
		case "duplicate":
			var res *string
			if s, ok := parts[3].(string); ok {
				res = &s
			}
			info := decodeTask(queue, val, flatToMap(parts[2]), res)
			out[i] = IngestResult{Outcome: Duplicate, TaskID: val, Task: info}
		case "in_progress":
			out[i] = IngestResult{Outcome: InProgress, TaskID: val}
		case "mismatch":
			out[i] = IngestResult{Outcome: Mismatch, TaskID: val}
		case "absent":
			out[i] = IngestResult{Outcome: Absent, TaskID: val}
		case "full":
			d, _ := strconv.ParseInt(val, 10, 64)
			out[i] = IngestResult{Outcome: QueueFull, Depth: d}
		default:
			return nil, fmt.Errorf("rdb: unknown ingest reply %q", code)
		}
	}
	return out, nil
}

func flatToMap(v any) map[string]string {
	arr, _ := v.([]any)
	m := make(map[string]string, len(arr)/2)
	for i := 0; i+1 < len(arr); i += 2 {
		k, _ := arr[i].(string)
		s, _ := arr[i+1].(string)
		m[k] = s
	}
	return m
}

// isQnumError reports whether ingest refused its ids' queue number.
func isQnumError(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "QNUM_MISSING") || strings.Contains(err.Error(), "QNUM_MISMATCH"))
}
