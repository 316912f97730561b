package rdb

import (
	"strconv"
	"strings"
	"time"
)

// The structs below are the KEYS and ARGV of the hot and complex scripts by
// name. Each one's keys and args lay its fields out in the order of the
// script's header, the one place that order is written on the Go side
// (TestScriptCallsMatchHeaders checks the counts against the header).

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

// ingestCall is ingest.lua's KEYS and ARGV.
type ingestCall struct {
	depth, schedule, expiry, recent, events string
	queueNum                                string // after the tasks' keys
	fair                                    bool   // the queue was seen with key queues: pass their keys
	fairOn, fairState, fairKeys, wake       string // after queueNum, with fair

	now, maxDepth, eventsMaxLen, recentCap int64
	taskPrefix, resultPrefix, streamPrefix string
	settle                                 string // ARGV[9]: "1" settle, "o" outcome events only, else ""
	fairActive, keyQueue                   string // prefixes: ARGV[12], with fair
	dedup                                  string // ARGV[10]: the dedup settings, when a task has a spec
	tasks                                  []NewTask
	keyOf                                  Keys // builds each task's two keys
	queue                                  string
}

func (r *RDB) ingestCall(queue string, now time.Time, opt IngestOptions, tasks []NewTask, settle bool,
	f queueFlags) *ingestCall {
	k := r.keys
	mode := boolArg(settle)
	if !settle && f.outcomes {
		mode = "o"
	}
	fair := f.fair
	return &ingestCall{
		depth: k.Depth(queue), schedule: k.Schedule(queue), expiry: k.Expiry(queue), recent: k.Recent(queue),
		events: k.Events(queue), queueNum: k.QueueNum(queue),
		fair: fair, fairOn: k.FairOn(queue), fairState: k.FairState(queue), fairKeys: k.FairKeys(queue), wake: k.Wake(queue),

		now: now.UnixMilli(), maxDepth: opt.MaxDepth, eventsMaxLen: opt.EventsMaxLen, recentCap: opt.RecentCap,
		taskPrefix: k.TaskPrefix(queue), resultPrefix: k.ResultPrefix(queue), streamPrefix: k.StreamPrefix(queue),
		settle: mode, fairActive: k.FairActivePrefix(queue), keyQueue: k.KeyQueuePrefix(queue),
		tasks: tasks, keyOf: k, queue: queue, dedup: r.dedupSettings(queue, now, opt, tasks),
	}
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

func (c *ingestCall) keys() []string {
	keys := make([]string, 0, 10+len(c.tasks))
	keys = append(keys, c.depth, c.schedule, c.expiry, c.recent, c.events)
	for i := range c.tasks {
		// A task without an idempotency key is fenced by the marker its
		// deletion at once leaves, which the script names from this key.
		keys = append(keys, c.keyOf.Task(c.queue, c.tasks[i].ID))
	}
	keys = append(keys, c.queueNum)
	if c.fair {
		keys = append(keys, c.fairOn, c.fairState, c.fairKeys, c.wake)
	}
	return keys
}

func (c *ingestCall) args() []any {
	args := make([]any, 0, 12+10*len(c.tasks))
	var qnum, fair string
	if len(c.tasks) > 0 {
		num, _ := ParseTaskID(c.tasks[0].ID)
		qnum = strconv.Itoa(int(num))
	}
	if c.fair {
		fair = c.fairActive + "\t" + c.keyQueue
	}
	args = append(args, c.now, c.maxDepth, c.eventsMaxLen, c.recentCap, c.taskPrefix, c.resultPrefix,
		len(c.tasks), c.streamPrefix, c.settle, c.dedup, qnum, fair)
	for i := range c.tasks {
		args = c.appendTask(args, &c.tasks[i])
	}
	return args
}

// appendTask appends t's arguments: the ten every task has, then the
// values its optional fields announce, in the order of the letters (see
// ingest.lua's header). Most tasks have none, and pay for none.
func (c *ingestCall) appendTask(args []any, t *NewTask) []any {
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
		c.now-TaskIDTime(t.ID).UnixMilli(), claimFields(t, exp, c.now), string(x))
	if t.AvailableAt != t.CreatedAt {
		args = append(args, t.AvailableAt)
	}
	if t.IdempotencyKey != "" {
		args = append(args, t.IdempotencyKey, c.keyOf.Idempotency(c.queue, t.IdempotencyKey), t.Fingerprint, t.IdemTTL)
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
