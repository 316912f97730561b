package rdb

import (
	"context"
	"errors"
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

// Ingest creates tasks of one queue with one script call (several past
// ingestPerCall tasks). Each task is checked and written on its own: one
// task's refusal does not affect others. The call is safe to send again
// with the same arguments (go-redis does after a broken connection; so may
// the caller): a task it already created is answered Created again and
// nothing more is written.
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

// ingestPerCall is the most tasks one ingest call carries, so that no call
// sends more than MaxCallArgs arguments: EVALSHA, its hash and the key
// count, eleven keys and twelve values, then per task its key and at most
// 20 values (ten, and the values of every optional field). A longer batch
// goes in several calls; each task is atomic on its own either way.
const ingestPerCall = (MaxCallArgs - 3 - 11 - 12) / 21

func (r *RDB) ingest(ctx context.Context, queue string, now time.Time, opt IngestOptions, tasks []NewTask, settle bool) ([]IngestResult, error) {
	if len(tasks) <= ingestPerCall {
		return r.ingestCalled(ctx, queue, now, opt, tasks, settle)
	}
	// An error leaves the outcome of the whole batch unknown, as one
	// call's would: the calls before it wrote their tasks, and a resend
	// answers those Created.
	out := make([]IngestResult, 0, len(tasks))
	for len(tasks) > 0 {
		chunk := tasks[:min(len(tasks), ingestPerCall)]
		tasks = tasks[len(chunk):]
		res, err := r.ingestCalled(ctx, queue, now, opt, chunk, settle)
		if err != nil {
			return nil, err
		}
		out = append(out, res...)
	}
	return out, nil
}

// ingestCalled is ingest's one call, for at most ingestPerCall tasks.
func (r *RDB) ingestCalled(ctx context.Context, queue string, now time.Time, opt IngestOptions, tasks []NewTask, settle bool) ([]IngestResult, error) {
	flags := r.flags(ctx, queue)
	keys, args := r.ingestCall(queue, now, opt, tasks, settle, flags)
	reply, err := r.callIngest(ctx, keys, args)
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
		keys, args = r.ingestCall(queue, now, opt, tasks, settle, flags)
		reply, err = r.callIngest(ctx, keys, args)
	}
	if err != nil {
		return nil, err
	}
	return decodeIngest(queue, tasks, reply)
}

// decodeIngest reads the ingest script's reply for tasks (ingest.lua's
// header has its shapes). A reply of another shape is an error naming the
// script, never a panic or a zero answer.
func decodeIngest(queue string, tasks []NewTask, reply any) ([]IngestResult, error) {
	items := []any{reply} // a call of one task answers that task's reply alone
	if len(tasks) != 1 {
		var ok bool
		if items, ok = reply.([]any); !ok {
			return nil, fmt.Errorf("rdb: ingest script answered %T for %d tasks, not a list", reply, len(tasks))
		}
	}
	if len(items) != len(tasks) {
		return nil, fmt.Errorf("rdb: ingest script answered %d replies for %d tasks", len(items), len(tasks))
	}
	out := make([]IngestResult, len(tasks))
	for i, t := range tasks {
		r, err := decodeIngestItem(queue, t.ID, items[i])
		if err != nil {
			return nil, fmt.Errorf("rdb: ingest script reply %d of %d: %w", i+1, len(items), err)
		}
		out[i] = r
	}
	return out, nil
}

// ingestArity is how many elements each list reply of the ingest script
// has: at least min, at most max.
var ingestArity = map[string]struct{ min, max int }{
	"created": {3, 4}, "deduplicated": {5, 5}, "duplicate": {4, 4},
	"in_progress": {2, 2}, "mismatch": {2, 2}, "absent": {2, 2}, "full": {2, 2},
}

// decodeIngestItem reads one task's reply; id is the id the task was sent
// with (a created task's status alone names no id).
func decodeIngestItem(queue, id string, item any) (IngestResult, error) {
	if st, ok := item.(string); ok {
		if st == "" {
			return IngestResult{}, errors.New("empty status")
		}
		return IngestResult{Outcome: Created, TaskID: id, Status: dtqtype.Status(st)}, nil
	}
	parts, ok := item.([]any)
	if !ok || len(parts) == 0 {
		return IngestResult{}, fmt.Errorf("malformed reply %v (%T)", item, item)
	}
	code, ok := parts[0].(string)
	if !ok {
		return IngestResult{}, fmt.Errorf("reply code %v is %T, not text", parts[0], parts[0])
	}
	n, known := ingestArity[code]
	if !known {
		return IngestResult{}, fmt.Errorf("unknown reply %q", code)
	}
	if len(parts) < n.min || len(parts) > n.max {
		return IngestResult{}, fmt.Errorf("reply %q has %d elements, not %d..%d", code, len(parts), n.min, n.max)
	}
	text := func(j int) (string, error) {
		s, ok := parts[j].(string)
		if !ok {
			return "", fmt.Errorf("reply %q element %d is %T, not text", code, j+1, parts[j])
		}
		return s, nil
	}
	// result is a result key's value: text, or nil (false in Lua) when absent.
	result := func(j int) (res *string, err error) {
		switch v := parts[j].(type) {
		case nil: // no result
		case string:
			res = &v
		default:
			err = fmt.Errorf("reply %q element %d is %T, not a result or nil", code, j+1, parts[j])
		}
		return res, err
	}
	val, err := text(1)
	if err != nil {
		return IngestResult{}, err
	}
	switch code {
	case "created":
		st, err := text(2)
		if err != nil {
			return IngestResult{}, err
		}
		r := IngestResult{Outcome: Created, TaskID: val, Status: dtqtype.Status(st)}
		if len(parts) == 4 {
			if r.Replaced, err = text(3); err != nil {
				return IngestResult{}, err
			}
		}
		return r, nil
	case "deduplicated":
		mode, err := text(2)
		if err != nil {
			return IngestResult{}, err
		}
		h, err := flatHash(parts[3])
		if err != nil {
			return IngestResult{}, fmt.Errorf("reply %q task hash: %w", code, err)
		}
		res, err := result(4)
		if err != nil {
			return IngestResult{}, err
		}
		r := IngestResult{Outcome: Deduplicated, TaskID: val, Mode: mode}
		if len(h) > 0 {
			r.Task = decodeTask(queue, val, h, res)
		}
		return r, nil
	case "duplicate":
		h, err := flatHash(parts[2])
		if err != nil {
			return IngestResult{}, fmt.Errorf("reply %q task hash: %w", code, err)
		}
		res, err := result(3)
		if err != nil {
			return IngestResult{}, err
		}
		return IngestResult{Outcome: Duplicate, TaskID: val, Task: decodeTask(queue, val, h, res)}, nil
	case "in_progress":
		return IngestResult{Outcome: InProgress, TaskID: val}, nil
	case "mismatch":
		return IngestResult{Outcome: Mismatch, TaskID: val}, nil
	case "absent":
		return IngestResult{Outcome: Absent, TaskID: val}, nil
	default: // full
		d, err := strconv.ParseInt(val, 10, 64)
		if err != nil {
			return IngestResult{}, fmt.Errorf("reply %q depth %q is not a number", code, val)
		}
		return IngestResult{Outcome: QueueFull, Depth: d}, nil
	}
}

// flatHash reads an HGETALL answered from a script: a flat list of field,
// value pairs, every one text.
func flatHash(v any) (map[string]string, error) {
	arr, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("%T, not a list", v)
	}
	if len(arr)%2 != 0 {
		return nil, fmt.Errorf("%d elements, not field, value pairs", len(arr))
	}
	m := make(map[string]string, len(arr)/2)
	for i := 0; i < len(arr); i += 2 {
		k, ok1 := arr[i].(string)
		s, ok2 := arr[i+1].(string)
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("pair %d is %T, %T, not text", i/2+1, arr[i], arr[i+1])
		}
		m[k] = s
	}
	return m, nil
}

// isQnumError reports whether ingest refused its ids' queue number.
func isQnumError(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "QNUM_MISSING") || strings.Contains(err.Error(), "QNUM_MISMATCH"))
}
