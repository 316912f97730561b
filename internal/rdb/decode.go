package rdb

import (
	"cmp"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/dtq-io/dtq/dtqtype"
)

func atoi64(s string) int64 {
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}

// decodeTask turns a task hash (see docs/redis-keys.md) into a TaskInfo.
// result is the result key's value, nil when absent.
func decodeTask(storage, id string, h map[string]string, result *string) *dtqtype.TaskInfo {
	queue, _ := PartitionOf(storage) // a partition's tasks are its queue's
	done := unpackDone(id, h)
	t := &dtqtype.TaskInfo{
		ID:               id,
		Queue:            queue,
		Type:             h["type"],
		Payload:          json.RawMessage(orDefault(h["payload"], "{}")),
		Priority:         int(atoi64(h["priority"])),
		MaxAttempts:      int(atoi64(h["max_attempts"])),
		Attempt:          int(atoi64(h["attempt"])),
		TimeoutMS:        atoi64(h["timeout_ms"]),
		Status:           dtqtype.Status(h["status"]),
		CreatedAt:        dtqtype.MillisTime(atoi64(h["created_at"])),
		AvailableAt:      dtqtype.MillisTime(atoi64(orDefault(h["available_at"], h["created_at"]))),
		ExpiresAt:        dtqtype.MillisTime(atoi64(h["expires_at"])),
		Metadata:         json.RawMessage(orDefault(h["metadata"], "{}")),
		CancelRequested:  h["cancel_requested"] == "1",
		ResultTruncated:  h["result_truncated"] == "1",
		PreviousAttempts: int(atoi64(h["previous_attempts"])),
		Attempts:         []dtqtype.AttemptRecord{},
	}
	t.ConcurrencyKey = h["ckey"]
	if dk := h["dk"]; dk != "" {
		t.DedupKey = dedupKeyOf(queue, dk)
	}
	if k, ok := h["idem_key"]; ok {
		t.IdempotencyKey = &k
	}
	e := &t.Execution
	e.StartedAt = dtqtype.MillisTime(atoi64(h["started_at"]))
	e.FinishedAt = dtqtype.MillisTime(atoi64(h["finished_at"]))
	if !e.StartedAt.IsZero() && !e.FinishedAt.IsZero() {
		d := e.FinishedAt.Sub(e.StartedAt.Time).Milliseconds()
		e.DurationMS = &d
	}
	e.WorkerID = h["worker_id"]
	e.ErrorClass = h["error_class"]
	e.ErrorMessage = h["error_message"]
	if v, ok := h["retryable"]; ok {
		b := v == "1"
		e.Retryable = &b
	}
	if v, ok := h["retry_delay_ms"]; ok {
		d := atoi64(v)
		e.RetryDelayMS = &d
	}
	t.Attempts = decodeHistory(h)
	if done {
		// The compact record folds the attempt that succeeded into done.
		t.Attempts = append(t.Attempts, dtqtype.AttemptRecord{Attempt: t.Attempt, WorkerID: e.WorkerID,
			StartedAt: e.StartedAt, FinishedAt: e.FinishedAt, DurationMS: *e.DurationMS, Outcome: "succeeded"})
		if h["keep"] != "1" {
			t.Payload, t.PayloadDropped = nil, true
		}
	}
	if v, ok := h["ret"]; ok {
		n := atoi64(v)
		t.RetentionSeconds = &n
	}
	t.KeepPayload = h["keep"] == "1"
	t.WorkflowID, t.Ref, _ = strings.Cut(h["wf"], ":")
	if v, ok := h["progress"]; ok {
		t.Progress = json.RawMessage(v)
		at := dtqtype.MillisTime(atoi64(h["progress_at"]))
		t.ProgressAt = &at
	}
	t.LogAttempts = int(atoi64(h["lg"]))
	switch {
	case result != nil:
		t.Result = json.RawMessage(*result)
	case h["has_result"] == "1":
		t.ResultExpired = true
	}
	return t
}

// unpackDone spreads a succeeded task's packed field (see finish_succeeded.lua),
// "attempt,priority,max_attempts,timeout_ms,created-id,started-created,
// finished-started[,worker id]" (times as ms offsets; id is the time in the
// task id), into the fields it replaced. It reports whether h had one.
func unpackDone(id string, h map[string]string) bool {
	v, ok := h["done"]
	if !ok {
		return false
	}
	p := strings.SplitN(v, ",", 8)
	if len(p) < 7 {
		return false
	}
	created := TaskIDTime(id).UnixMilli() + atoi64(p[4])
	started := created + atoi64(p[5])
	h["attempt"], h["priority"], h["max_attempts"], h["timeout_ms"] = p[0], p[1], p[2], p[3]
	h["created_at"] = strconv.FormatInt(created, 10)
	h["started_at"] = strconv.FormatInt(started, 10)
	h["finished_at"] = strconv.FormatInt(started+atoi64(p[6]), 10)
	if len(p) == 8 {
		h["worker_id"] = p[7]
	}
	return true
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// decodeHistory collects the attempt records in the order they happened:
// fields h:<requeues>:<attempt> (an attempt's end) and
// h:<requeues>:<attempt>:<ms> (a hand-back of that attempt, before its end).
func decodeHistory(h map[string]string) []dtqtype.AttemptRecord {
	type keyed struct {
		prev, attempt, sub int64
		raw                string
	}
	var recs []keyed
	for f, v := range h {
		rest, ok := strings.CutPrefix(f, "h:")
		if !ok {
			continue
		}
		p, a, ok := strings.Cut(rest, ":")
		if !ok {
			continue
		}
		sub := int64(math.MaxInt64)
		if a2, ms, ok := strings.Cut(a, ":"); ok {
			a, sub = a2, atoi64(ms)
		}
		recs = append(recs, keyed{atoi64(p), atoi64(a), sub, v})
	}
	slices.SortFunc(recs, func(x, y keyed) int {
		return cmp.Or(cmp.Compare(x.prev, y.prev), cmp.Compare(x.attempt, y.attempt), cmp.Compare(x.sub, y.sub))
	})
	out := make([]dtqtype.AttemptRecord, 0, len(recs))
	for _, r := range recs {
		var a struct {
			Attempt      int    `json:"attempt"`
			WorkerID     string `json:"worker_id"`
			StartedAt    int64  `json:"started_at"`
			FinishedAt   int64  `json:"finished_at"`
			DurationMS   int64  `json:"duration_ms"`
			Outcome      string `json:"outcome"`
			ErrorClass   string `json:"error_class"`
			ErrorMessage string `json:"error_message"`
		}
		if json.Unmarshal([]byte(r.raw), &a) != nil {
			continue
		}
		out = append(out, dtqtype.AttemptRecord{
			Attempt: a.Attempt, WorkerID: a.WorkerID, StartedAt: dtqtype.MillisTime(a.StartedAt),
			FinishedAt: dtqtype.MillisTime(a.FinishedAt), DurationMS: a.DurationMS, Outcome: a.Outcome,
			ErrorClass: a.ErrorClass, ErrorMessage: a.ErrorMessage,
		})
	}
	return out
}

// dedupKeyOf is the deduplication key that record key dk (Keys.Dedup of
// queue) names: what follows the queue's tag.
func dedupKeyOf(queue, dk string) string {
	tag := ":dedup:{" + queue + "}:"
	if _, key, ok := strings.Cut(dk, tag); ok {
		return key
	}
	return dk
}
