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

// limitSet is the four keys a script that stops a running task needs to
// give back its concurrency-key slot and wake limited workers (limit_keys
// in lua/_limits.lua), and the slot release time it records (freed, the
// script's last key).
type limitSet struct {
	keyRunning, held, limited, wake string
	freed                           string
}

func (r *RDB) limitSet(queue string) limitSet {
	k := r.keys
	return limitSet{k.KeyRunning(queue), k.Held(queue), k.Limited(queue), k.Wake(queue), k.KeyFreed(queue)}
}

func (l limitSet) appendTo(keys []string) []string {
	return append(keys, l.keyRunning, l.held, l.limited, l.wake)
}

// claimCall is claim.lua's KEYS and ARGV.
type claimCall struct {
	lease, expiry, schedule, events, depth, paused, stats string
	bands                                                 []string // p0..p9
	limits, rate, keyRunning, held, limited, retained     string
	outbox                                                string
	fairState, fairKeys, fairDelay, keyRate, wake         string
	keyFreed                                              string

	now                      int64
	worker, group            string
	max                      int
	leaseMS                  int64
	taskPrefix, idemPrefix   string
	eventsMaxLen, failedRetS int64
	nonce, keyWaitPrefix     string
	fairActive, keyQueue     string // prefixes
}

func (r *RDB) claimCall(queue string, s *WorkerSettings, limit int, now time.Time, nonce string) *claimCall {
	k := r.keys
	return &claimCall{
		lease: k.Lease(queue), expiry: k.Expiry(queue), schedule: k.Schedule(queue), events: k.Events(queue),
		depth: k.Depth(queue), paused: k.Paused(queue), stats: k.Stats(queue, minuteOf(now)), bands: r.bandStreams(queue),
		limits: k.Limits(queue), rate: k.Rate(queue), keyRunning: k.KeyRunning(queue), held: k.Held(queue),
		limited: k.Limited(queue), retained: k.Retained(queue), outbox: k.WorkflowOutbox(queue),
		fairState: k.FairState(queue), fairKeys: k.FairKeys(queue), fairDelay: k.FairDelay(queue), keyRate: k.KeyRate(queue),
		wake: k.Wake(queue), keyFreed: k.KeyFreed(queue),

		now: now.UnixMilli(), worker: s.WorkerID, group: Group, max: limit, leaseMS: s.Lease.Milliseconds(),
		taskPrefix: k.TaskPrefix(queue), idemPrefix: k.IdempotencyPrefix(queue), eventsMaxLen: s.EventsMaxLen,
		failedRetS: seconds(s.FailedRetention), nonce: nonce, keyWaitPrefix: k.KeyWaitPrefix(queue),
		fairActive: k.FairActivePrefix(queue), keyQueue: k.KeyQueuePrefix(queue),
	}
}

func (c *claimCall) keys() []string {
	keys := make([]string, 0, 20+len(c.bands))
	keys = append(keys, c.lease, c.expiry, c.schedule, c.events, c.depth, c.paused, c.stats)
	keys = append(keys, c.bands...)
	return append(keys, c.limits, c.rate, c.keyRunning, c.held, c.limited, c.retained, c.outbox,
		c.fairState, c.fairKeys, c.fairDelay, c.keyRate, c.wake, c.keyFreed)
}

func (c *claimCall) args() []any {
	return []any{c.now, c.worker, c.group, c.max, c.leaseMS, c.taskPrefix, c.idemPrefix, c.eventsMaxLen,
		c.failedRetS, c.nonce, c.keyWaitPrefix, c.fairActive, c.keyQueue}
}

// reclaimCall is reclaim.lua's KEYS and ARGV.
type reclaimCall struct {
	lease, events, depth, dlq, stats string
	bands                            []string // p0..p9
	limit                            limitSet
	retained, outbox                 string

	now, leaseMS                          int64
	worker, group, taskPrefix, idemPrefix string
	room                                  int
	eventsMaxLen, failedRetS              int64
	attemptsCap                           int
	dlqEnabled                            string
	dlqMaxLen                             int64
	nonce, keyWaitPrefix                  string
	mine                                  []LeaseRef // pairs of task id, attempt
}

func (r *RDB) reclaimCall(queue string, s *WorkerSettings, room int, now time.Time, nonce string, mine []LeaseRef) *reclaimCall {
	k := r.keys
	return &reclaimCall{
		lease: k.Lease(queue), events: k.Events(queue), depth: k.Depth(queue), dlq: k.DLQ(queue),
		stats: k.Stats(queue, minuteOf(now)), bands: r.bandStreams(queue), limit: r.limitSet(queue), retained: k.Retained(queue),
		outbox: k.WorkflowOutbox(queue),

		now: now.UnixMilli(), leaseMS: s.Lease.Milliseconds(), worker: s.WorkerID, group: Group,
		taskPrefix: k.TaskPrefix(queue), idemPrefix: k.IdempotencyPrefix(queue), room: room,
		eventsMaxLen: s.EventsMaxLen, failedRetS: seconds(s.FailedRetention), attemptsCap: AttemptsCap,
		dlqEnabled: boolArg(s.DLQEnabled), dlqMaxLen: s.DLQMaxLen, nonce: nonce, keyWaitPrefix: k.KeyWaitPrefix(queue),
		mine: mine,
	}
}

func (c *reclaimCall) keys() []string {
	keys := make([]string, 0, 12+len(c.bands))
	keys = append(keys, c.lease, c.events, c.depth, c.dlq, c.stats)
	keys = append(keys, c.bands...)
	return append(c.limit.appendTo(keys), c.retained, c.outbox, c.limit.freed)
}

func (c *reclaimCall) args() []any {
	args := make([]any, 0, 15+2*len(c.mine))
	args = append(args, c.now, c.leaseMS, c.worker, c.group, c.taskPrefix, c.idemPrefix, c.room, c.eventsMaxLen,
		c.failedRetS, c.attemptsCap, c.dlqEnabled, c.dlqMaxLen, c.nonce, c.keyWaitPrefix, c.taskPrefix)
	for _, l := range c.mine {
		args = append(args, l.ID, l.Attempt)
	}
	return args
}

// finishHead is what finish_retry.lua and finish_dead.lua open with: KEYS
// 1-6 and ARGV 1-9.
type finishHead struct {
	task, lease, events, band, depth, stats string
	outbox                                  string // after the script's other keys

	now                      int64
	id                       string
	attempt                  int
	worker, group            string
	idemPrefix               string
	eventsMaxLen, failedRetS int64
	attemptsCap              int
}

func (r *RDB) finishHead(a *FinishArgs, s *WorkerSettings) finishHead {
	k := r.keys
	return finishHead{
		task: k.Task(a.Queue, a.ID), lease: k.Lease(a.Queue), events: k.Events(a.Queue),
		band: k.Stream(a.Queue, a.Priority), depth: k.Depth(a.Queue), stats: k.Stats(a.Queue, minuteOf(a.Now)),
		outbox: k.WorkflowOutbox(a.Queue),

		now: a.Now.UnixMilli(), id: a.ID, attempt: a.Attempt, worker: s.WorkerID, group: Group,
		idemPrefix: k.IdempotencyPrefix(a.Queue), eventsMaxLen: s.EventsMaxLen, failedRetS: seconds(s.FailedRetention),
		attemptsCap: AttemptsCap,
	}
}

func (h *finishHead) keys(n int) []string {
	return append(make([]string, 0, n), h.task, h.lease, h.events, h.band, h.depth, h.stats)
}

func (h *finishHead) args(n int) []any {
	return append(make([]any, 0, n), h.now, h.id, h.attempt, h.worker, h.group, h.idemPrefix, h.eventsMaxLen,
		h.failedRetS, h.attemptsCap)
}

// finishRetryCall is finish_retry.lua's KEYS and ARGV.
type finishRetryCall struct {
	finishHead
	schedule, expiry string
	limit            limitSet
	bands            []string // p0..p9
	retained         string

	delayMS                          int64
	class, msg                       string
	keyWaitPrefix, taskPrefix, claim string
	checkAttempts                    string
}

func (c *finishRetryCall) keys() []string {
	keys := append(c.finishHead.keys(15+len(c.bands)), c.schedule, c.expiry)
	keys = append(c.limit.appendTo(keys), c.bands...)
	return append(keys, c.retained, c.outbox, c.limit.freed)
}

func (c *finishRetryCall) args() []any {
	return append(c.finishHead.args(16), c.delayMS, c.class, c.msg, c.keyWaitPrefix, c.taskPrefix, c.claim, c.checkAttempts)
}

// finishDeadCall is finish_dead.lua's KEYS and ARGV.
type finishDeadCall struct {
	finishHead
	dlq      string
	limit    limitSet
	bands    []string // p0..p9
	retained string

	class, msg                string
	dlqEnabled                string
	dlqMaxLen                 int64
	taskPrefix, retryable     string
	keyWaitPrefix, claimNonce string
}

func (c *finishDeadCall) keys() []string {
	keys := append(c.finishHead.keys(14+len(c.bands)), c.dlq)
	keys = append(c.limit.appendTo(keys), c.bands...)
	return append(keys, c.retained, c.outbox, c.limit.freed)
}

func (c *finishDeadCall) args() []any {
	// The task key prefix comes twice: once for the script, once where the
	// limit helpers read it (limit_keys(8, 12, 16)).
	return append(c.finishHead.args(18), c.class, c.msg, c.dlqEnabled, c.dlqMaxLen, c.taskPrefix, c.retryable,
		c.keyWaitPrefix, c.taskPrefix, c.claimNonce)
}

// handBackCall is finish_handback.lua's KEYS and ARGV.
type handBackCall struct {
	task, lease, events, band string
	limit                     limitSet
	bands                     []string // p0..p9

	now                       int64
	id                        string
	attempt                   int
	worker, group             string
	eventsMaxLen              int64
	attemptsCap               int
	keyWaitPrefix, taskPrefix string
}

func (c *handBackCall) keys() []string {
	keys := append(make([]string, 0, 9+len(c.bands)), c.task, c.lease, c.events, c.band)
	return append(append(c.limit.appendTo(keys), c.bands...), c.limit.freed)
}

func (c *handBackCall) args() []any {
	return []any{c.now, c.id, c.attempt, c.worker, c.group, c.eventsMaxLen, c.attemptsCap, c.keyWaitPrefix, c.taskPrefix}
}

// finishSucceededCall is finish_succeeded.lua's KEYS and ARGV.
type finishSucceededCall struct {
	lease, events, depth, stats string
	bands                       []string // p0..p9
	limit                       limitSet
	retained, outbox            string
	taskKeys, resultKeys        []string // per task

	now                              int64
	worker, group, idemPrefix        string
	eventsMaxLen                     int64
	succeededRetS, resultRetS        int64
	keyWaitPrefix, taskPrefix, claim string
	tasks                            []Success
}

func (r *RDB) finishSucceededCall(queue string, s *WorkerSettings, now time.Time, tasks []Success) *finishSucceededCall {
	k := r.keys
	c := &finishSucceededCall{
		lease: k.Lease(queue), events: k.Events(queue), depth: k.Depth(queue), stats: k.Stats(queue, minuteOf(now)),
		bands: r.bandStreams(queue), limit: r.limitSet(queue), retained: k.Retained(queue), outbox: k.WorkflowOutbox(queue),
		taskKeys: make([]string, len(tasks)), resultKeys: make([]string, len(tasks)),

		now: now.UnixMilli(), worker: s.WorkerID, group: Group, idemPrefix: k.IdempotencyPrefix(queue),
		eventsMaxLen: s.EventsMaxLen, succeededRetS: seconds(s.SucceededRetention), resultRetS: seconds(s.ResultRetention),
		keyWaitPrefix: k.KeyWaitPrefix(queue), taskPrefix: k.TaskPrefix(queue), claim: s.Claim, tasks: tasks,
	}
	for i, t := range tasks {
		c.taskKeys[i], c.resultKeys[i] = k.Task(queue, t.ID), k.Result(queue, t.ID)
	}
	return c
}

func (c *finishSucceededCall) keys() []string {
	keys := make([]string, 0, 11+len(c.bands)+2*len(c.tasks))
	keys = append(keys, c.lease, c.events, c.depth, c.stats)
	keys = append(c.limit.appendTo(append(keys, c.bands...)), c.retained)
	for i := range c.tasks {
		keys = append(keys, c.taskKeys[i], c.resultKeys[i])
	}
	return append(keys, c.outbox, c.limit.freed)
}

func (c *finishSucceededCall) args() []any {
	args := make([]any, 0, 11+4*len(c.tasks))
	args = append(args, c.now, c.worker, c.group, c.idemPrefix, c.eventsMaxLen, c.succeededRetS, c.resultRetS,
		len(c.tasks), c.keyWaitPrefix, c.taskPrefix, c.claim)
	for _, t := range c.tasks {
		args = append(args, t.ID, t.Attempt, t.Result, boolArg(t.Truncated))
	}
	return args
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
