package rdb

import (
	"strconv"
	"strings"
	"time"
)

// Helpers that fill the generated KEYS and ARGV structs of scripts_gen.go
// where several scripts share a part, or the layout takes work (ingest).

// limitKeys are the keys a script that stops a running task needs to give
// back its concurrency-key slot and wake limited workers (limit_keys in
// lua/_limits.lua), and the slot release time it records (freed).
type limitKeys struct {
	keyRunning, held, limited, wake string
	freed                           string
}

func (r *RDB) limitKeys(queue string) limitKeys {
	k := r.keys
	return limitKeys{k.KeyRunning(queue), k.Held(queue), k.Limited(queue), k.Wake(queue), k.KeyFreed(queue)}
}

// ingestCall builds ingest.lua's KEYS and ARGV for tasks; ingest builds
// them again when it stamped another queue number into the ids.
func (r *RDB) ingestCall(queue string, now time.Time, opt IngestOptions, tasks []NewTask, settle bool,
	f queueFlags) (*ingestKeys, *ingestArgs) {
	k := r.keys
	mode := boolArg(settle)
	if !settle && f.outcomes {
		mode = "o"
	}
	keys := &ingestKeys{
		Depth: k.Depth(queue), Schedule: k.Schedule(queue), Expiry: k.Expiry(queue), Recent: k.Recent(queue),
		Events: k.Events(queue), Tasks: make([]string, len(tasks)), Number: k.QueueNum(queue), Stats: k.Stats(queue, now.Unix()/60),
	}
	args := &ingestArgs{
		Now: now.UnixMilli(), MaxDepth: opt.MaxDepth, EventsMaxLen: opt.EventsMaxLen, RecentCap: opt.RecentCap,
		TaskPrefix: k.TaskPrefix(queue), ResultPrefix: k.ResultPrefix(queue), Count: len(tasks),
		StreamPrefix: k.StreamPrefix(queue), Settle: mode, Dedup: r.dedupSettings(queue, now, opt, tasks),
		Tasks: make([]any, 0, 10*len(tasks)),
	}
	for i := range tasks {
		// A task without an idempotency key is fenced by the marker its
		// deletion at once leaves, which the script names from this key.
		keys.Tasks[i] = k.Task(queue, tasks[i].ID)
		args.Tasks = appendTask(args.Tasks, k, queue, args.Now, &tasks[i])
	}
	if len(tasks) > 0 {
		num, _ := ParseTaskID(tasks[0].ID)
		args.Number = strconv.Itoa(int(num))
	}
	if f.fair {
		keys.FairOn, keys.FairState, keys.FairKeys, keys.Wake = k.FairOn(queue), k.FairState(queue), k.FairKeys(queue), k.Wake(queue)
		args.Fair = k.FairActivePrefix(queue) + "\t" + k.KeyQueuePrefix(queue)
	}
	return keys, args
}

// dedupSettings is ingest.lua's ARGV[10] for tasks: "" unless one of them
// carries a dedup spec.
func (r *RDB) dedupSettings(queue string, now time.Time, opt IngestOptions, tasks []NewTask) string {
	for i := range tasks {
		if tasks[i].Dedup != nil {
			k := r.keys
			return strings.Join([]string{k.DedupPrefix(queue), k.IdempotencyPrefix(queue), k.Retained(queue),
				k.Stats(queue, now.Unix()/60), k.Waiting(queue), strconv.FormatInt(seconds(opt.CancelledRetention), 10),
				k.DedupCounts(queue)}, "\t")
		}
	}
	return ""
}

// appendTask appends t's arguments: the ten every task has, then the
// values its optional fields announce, in the order of the letters (see
// ingest.lua's header). Most tasks have none, and pay for none.
func appendTask(args []any, keyOf Keys, queue string, now int64, t *NewTask) []any {
	exp := ""
	if t.ExpiresAt > 0 {
		exp = strconv.FormatInt(t.ExpiresAt, 10)
	}
	meta, ret, keep := storedFields(t.Metadata, t.Retention, t.KeepPayload)
	var opt [8]byte
	x := opt[:0]
	if t.AvailableAt != t.CreatedAt {
		x = append(x, 'a')
	}
	if t.IdempotencyKey != "" {
		x = append(x, 'k')
	}
	if exp != "" {
		x = append(x, 'e')
	}
	if len(meta) > 0 {
		x = append(x, 'm')
	}
	if t.ConcurrencyKey != "" {
		x = append(x, 'c')
	}
	if ret != "" {
		x = append(x, 'r')
	}
	if keep != "" {
		x = append(x, 'p')
	}
	if t.Dedup != nil {
		x = append(x, 'd')
	}
	args = append(args, t.ID, t.Type, t.Payload, t.Priority, t.MaxAttempts, t.TimeoutMS, t.CreatedAt,
		now-TaskIDTime(t.ID).UnixMilli(), claimFields(t, exp, now), string(x))
	if t.AvailableAt != t.CreatedAt {
		args = append(args, t.AvailableAt)
	}
	if t.IdempotencyKey != "" {
		args = append(args, t.IdempotencyKey, keyOf.Idempotency(queue, t.IdempotencyKey), t.Fingerprint, t.IdemTTL)
	}
	if exp != "" {
		args = append(args, exp)
	}
	if len(meta) > 0 {
		args = append(args, meta)
	}
	if t.ConcurrencyKey != "" {
		args = append(args, t.ConcurrencyKey)
	}
	if ret != "" {
		args = append(args, ret)
	}
	if t.Dedup != nil {
		args = append(args, t.Dedup.arg())
	}
	return args
}

// claimFields is the field c of the band entry ingest.lua adds for t (see
// its header): what the claim hands the worker and decides by,
// tab-separated, so that it reads no hash. created_at is left empty when it
// is the time in the id (the claim takes it from there), as it nearly always
// is. "" (no field: the claim reads the hash) for a task not due at now,
// which gets no entry; for one with an idempotency key, which would be held
// twice (up to 255 bytes more per queued task); and for one whose type or
// concurrency key holds a tab, which the fields could not be told apart by.
func claimFields(t *NewTask, exp string, now int64) string {
	if t.AvailableAt > now || t.IdempotencyKey != "" || strings.ContainsRune(t.ConcurrencyKey, '\t') ||
		strings.ContainsRune(t.Type, '\t') {
		return ""
	}
	b := make([]byte, 0, 40+len(t.Type)+len(t.ConcurrencyKey))
	b = append(b, t.Type...)
	b = append(b, '\t')
	b = strconv.AppendInt(b, t.TimeoutMS, 10)
	b = append(b, '\t')
	b = strconv.AppendInt(b, int64(t.MaxAttempts), 10)
	b = append(b, '\t')
	if t.CreatedAt != TaskIDTime(t.ID).UnixMilli() {
		b = strconv.AppendInt(b, t.CreatedAt, 10)
	}
	b = append(b, '\t')
	b = append(b, exp...)
	b = append(b, '\t')
	b = append(b, t.ConcurrencyKey...)
	return string(b)
}
