package dtq

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/internal/attempt"
	"github.com/dtq-io/dtq/internal/groupcommit"
	"github.com/dtq-io/dtq/internal/rdb"
	"github.com/dtq-io/dtq/internal/workflow"
	"github.com/dtq-io/dtq/internal/workflow/engine"
)

// ClientConfig configures a Client: its own limits (the settings it shares
// with every process are the Deployment's). The zero value of every field
// selects the default given in its comment (see docs/configuration.md).
type ClientConfig struct {
	// MaxQueueDepth is the live-task limit per queue. Default 10000.
	MaxQueueDepth int64
	// MaxPayloadBytes limits a payload's compact JSON. Default 262144.
	MaxPayloadBytes int
	// MaxAttempts caps a task's max_attempts. Default 10.
	MaxAttempts int
	// TaskTimeout is the default attempt timeout. Default 30s.
	TaskTimeout time.Duration
	// RecentMaxLen caps each queue's listing index. Default 100000.
	RecentMaxLen int64
	// TaskTypes, when set, is the list of accepted task types; others are
	// refused with ErrUnknownTaskType. Default: any type.
	TaskTypes []string
	// DeclaredQueuesOnly selects the declared queue policy (docs/security.md): a
	// submission to a queue the registry does not hold (one an admin did not
	// create) fails with ErrQueueNotFound instead of creating it. Default
	// false: the open policy, where the first submission creates a queue.
	DeclaredQueuesOnly bool
	// MaxWorkflowNodes bounds a workflow's nodes, and the nodes one
	// AddNodes call adds (DTQ_WORKFLOW_MAX_NODES). Default 10000.
	MaxWorkflowNodes int
	// SubmitLinger is how long a Submit may wait for other submissions to
	// the same queue to share its Redis call (DTQ_SUBMIT_LINGER): callers
	// submitting together, or independent callers at a steady rate (an
	// HTTP server's requests), wait up to this long for the few the rate
	// lets them expect; a caller submitting in a loop does not wait.
	// Default 2 ms; negative: never wait (each Submit that finds no call in
	// flight makes its own, which costs Redis more per task).
	SubmitLinger time.Duration
}

// withDefaults is c with the defaults of the Client's own limits applied.
func (c *ClientConfig) withDefaults() ClientConfig {
	var out ClientConfig
	if c != nil {
		out = *c
	}
	orDefault(&out.MaxQueueDepth, 10000)
	orDefault(&out.MaxPayloadBytes, DefaultMaxPayloadBytes)
	orDefault(&out.MaxAttempts, 10)
	orDefault(&out.TaskTimeout, 30*time.Second)
	orDefault(&out.RecentMaxLen, DefaultStreamMaxLen)
	orDefault(&out.MaxWorkflowNodes, workflow.DefaultMaxNodes)
	orDefault(&out.SubmitLinger, DefaultSubmitLinger)
	return out
}

// Client submits tasks. It is safe for concurrent use; concurrent Submit
// calls to one queue are merged into one Redis script call while an earlier
// call is in flight, and submissions at a steady rate wait up to
// ClientConfig.SubmitLinger to share one: fewer calls, less Redis CPU a
// task.
type Client struct {
	rdb *rdb.RDB
	cfg ClientConfig // its own limits, defaults applied
	dep deployment
	lim limits

	batchers groupcommit.PerKey[*pendingSubmit, submitOutcome] // one per partition
	wf       *engine.Engine                                    // submits and fans out workflows
	spread   atomic.Uint64                                     // round-robin of keyless tasks over partitions (route)
}

// NewClient returns a Client that stores tasks in d, with the limits of cfg
// (nil selects every default). It fails when a limit is out of range.
func (d *Deployment) NewClient(cfg *ClientConfig) (*Client, error) {
	conf := cfg.withDefaults()
	if conf.MaxAttempts < 1 || conf.MaxPayloadBytes < 1 || conf.MaxQueueDepth < 1 {
		return nil, errors.New("dtq: ClientConfig limits must be positive")
	}
	if conf.SubmitLinger > MaxSubmitLinger {
		return nil, fmt.Errorf("dtq: ClientConfig.SubmitLinger %s is over %s: submissions would wait that long for company",
			conf.SubmitLinger, MaxSubmitLinger)
	}
	lim := limits{maxAttempts: conf.MaxAttempts, defaultTimeout: conf.TaskTimeout, maxPayloadBytes: conf.MaxPayloadBytes}
	if len(conf.TaskTypes) > 0 {
		lim.taskTypes = make(map[string]bool, len(conf.TaskTypes))
		for _, t := range conf.TaskTypes {
			lim.taskTypes[t] = true
		}
	}
	cl := &Client{rdb: d.storage(), cfg: conf, dep: d.dep, lim: lim}
	cl.wf = cl.newEngine(d.dep, nil)
	return cl, nil
}

// SubmitResult is the outcome of a successful submission.
type SubmitResult struct {
	// TaskID is the id of the task created, or of the task a duplicate
	// submission mapped to.
	TaskID string
	// Duplicate is true when the idempotency key replayed an earlier task.
	Duplicate bool
	// Task is the task as stored (nil for a throttled submission whose
	// key's task is already gone).
	Task *dtqtype.TaskInfo
	// Deduplicated is the mode that collapsed the submission into its
	// dedup key's task, TaskID (drop, throttle, debounce: nothing was
	// created); "" when the submission was not collapsed.
	Deduplicated DedupMode
	// Replaced is the queued task of the dedup key that a replace or
	// keep_last submission cancelled for this one; "" when none was.
	Replaced string
}

// Submit validates s and creates its task, atomically with its idempotency
// record, stream or schedule entry, indexes and TASK_QUEUED/TASK_PENDING
// event. Errors: *ValidationError (ErrInvalidTask, ErrUnknownTaskType,
// ErrPayloadTooLarge), *QueueFullError (ErrQueueFull),
// *IdempotencyConflictError (ErrIdempotencyInProgress,
// ErrIdempotencyKeyMismatch), or a Redis error.
func (c *Client) Submit(ctx context.Context, s Submission) (*SubmitResult, error) {
	return c.submit(ctx, s, &c.lim)
}

// submit is Submit with s validated against lim instead of the Client's
// limits (a schedule's tick is checked against the limits it was stored
// with; see Scheduler.fire).
func (c *Client) submit(ctx context.Context, s Submission, lim *limits) (*SubmitResult, error) {
	now := c.dep.clock()
	n, err := normalize(&s, lim, now)
	if err != nil {
		return nil, err
	}
	nt, err := c.newTask(ctx, n, now)
	if err != nil {
		return nil, err
	}
	// The batch's ingest call serves many callers, so it runs under none
	// of their contexts (see newSubmitBatcher); ctx bounds only the wait.
	o, err := c.batcher(n.storage).Do(ctx, &pendingSubmit{n: n, task: nt}) //nolint:contextcheck // see above
	if err != nil {
		return nil, unknownOutcome(err, n, &nt)
	}
	return o.res, o.err
}

// BatchItem is one entry of SubmitBatch's answer.
type BatchItem struct {
	Result *SubmitResult // set when Err is nil
	Err    error
}

// DefaultSubmitLinger is ClientConfig.SubmitLinger's default. At 2,000
// submissions a second from independent callers it makes 0.42 ingest calls
// a task instead of 0.91 (never waiting): 5 to 14 % less Redis CPU a task
// for 0.5 to 0.8 ms more submit-to-start latency (docs/benchmarks.md).
const DefaultSubmitLinger = 2 * time.Millisecond

// MaxSubmitLinger bounds ClientConfig.SubmitLinger.
const MaxSubmitLinger = 100 * time.Millisecond

// submitGather bounds the submissions a linger waits for.
const submitGather = 4

// maxScriptTasks bounds the tasks one ingest script call creates, so that no
// single call blocks Redis for long.
const maxScriptTasks = 256

// SubmitBatch submits many tasks; each is validated and deduplicated on its
// own and the answers come back in order. Tasks of one queue are written with
// few script calls. The error is non-nil only when nothing could be tried.
func (c *Client) SubmitBatch(ctx context.Context, subs []Submission) ([]BatchItem, error) {
	now := c.dep.clock()
	items := make([]BatchItem, len(subs))
	byQueue := map[string][]int{}
	ns := make([]*normalized, len(subs))
	ts := make([]rdb.NewTask, len(subs))
	for i := range subs {
		n, err := normalize(&subs[i], &c.lim, now)
		if err != nil {
			items[i].Err = err
			continue
		}
		nt, err := c.newTask(ctx, n, now)
		if err != nil {
			items[i].Err = err
			continue
		}
		ns[i], ts[i] = n, nt
		byQueue[n.storage] = append(byQueue[n.storage], i)
	}
	for queue, idx := range byQueue {
		for start := 0; start < len(idx); start += maxScriptTasks {
			chunk := idx[start:min(start+maxScriptTasks, len(idx))]
			tasks := make([]rdb.NewTask, len(chunk))
			for j, i := range chunk {
				tasks[j] = ts[i]
			}
			res, err := c.ingestSure(context.WithoutCancel(ctx), queue, now, tasks)
			for j, i := range chunk {
				if err != nil {
					items[i].Err = unknownOutcome(err, ns[i], &tasks[j])
					continue
				}
				items[i].Result, items[i].Err = c.outcome(ctx, ns[i], &tasks[j], now, res[j])
			}
		}
	}
	return items, nil
}

// ingestResendWindow bounds how long an ingest call whose reply did not
// come is sent again before it is settled (see ingestSure).
const ingestResendWindow = 3 * time.Second

// ingestSure runs one ingest call and learns its outcome for sure when Redis
// lets it: the call is safe to send again (a task it already created is
// answered as created, nothing written twice), so a call that failed in a
// way that may have let it run is sent again until Redis answers or
// ingestResendWindow passes, and then settled (rdb.SettleIngest): a task
// the call did not create is then marked never to be created by it, so
// "not created" stays true. Only when settling fails too is the outcome
// unknown: *OutcomeUnknownError for every task. Out of memory on the first
// try is a refusal that wrote nothing, answered at once.
func (c *Client) ingestSure(ctx context.Context, queue string, now time.Time, tasks []rdb.NewTask) ([]rdb.IngestResult, error) {
	opt := c.ingestOptions()
	opt.MaxDepth = c.partitionShare(ctx, queue, opt.MaxDepth)
	res, err := c.rdb.Ingest(ctx, queue, now, opt, tasks)
	if err == nil || rdb.IsOOM(err) {
		return res, err
	}
	if res, err = attempt.Resend(ctx, ingestResendWindow, func() ([]rdb.IngestResult, error) {
		return c.rdb.Ingest(ctx, queue, now, opt, tasks)
	}); err == nil {
		return res, nil
	}
	res, serr := c.rdb.SettleIngest(ctx, queue, now, opt, tasks)
	if serr != nil {
		return nil, &ingestUnknownError{err: err}
	}
	for i := range res {
		if res[i].Outcome == rdb.Absent {
			res[i].Err = err
		}
	}
	return res, nil
}

// unknownOutcome is err as task t's answer: an *OutcomeUnknownError when
// the ingest call's outcome is unknown, else err.
func unknownOutcome(err error, n *normalized, t *rdb.NewTask) error {
	if u, ok := errors.AsType[*ingestUnknownError](err); ok {
		return &OutcomeUnknownError{Queue: n.queue, TaskID: t.ID, Key: n.key, Err: u.err}
	}
	return err
}

// ingestUnknownError is an ingest call whose outcome Redis would not tell; each
// task's answer becomes an *OutcomeUnknownError.
type ingestUnknownError struct{ err error }

func (e *ingestUnknownError) Error() string { return e.err.Error() }
func (e *ingestUnknownError) Unwrap() error { return e.err }

// DurabilityWarnings says, with ReplicaAcks set, what keeps the
// acknowledgements from protecting acknowledged tasks: a master without
// the append-only file, or with fewer connected replicas than ReplicaAcks.
// Whether a master keeps the file is reported as unknown when it refuses
// CONFIG GET and INFO persistence. None without ReplicaAcks.
func (c *Client) DurabilityWarnings(ctx context.Context) []string {
	return c.rdb.DurabilityWarnings(ctx)
}

func (c *Client) ingestOptions() rdb.IngestOptions {
	return rdb.IngestOptions{MaxDepth: c.cfg.MaxQueueDepth, EventsMaxLen: c.dep.eventsMaxLen, RecentCap: c.cfg.RecentMaxLen,
		CancelledRetention: scriptRetention(c.dep.failedRetention)}
}

func (c *Client) newTask(ctx context.Context, n *normalized, now time.Time) (rdb.NewTask, error) {
	lookup := c.rdb.QueueNumber
	if c.cfg.DeclaredQueuesOnly {
		lookup = c.rdb.DeclaredQueueNumber
	}
	parts, err := c.rdb.Partitions(ctx, n.queue, !c.cfg.DeclaredQueuesOnly)
	var num uint16
	if err == nil {
		n.storage = c.route(n, parts)
		num, err = lookup(ctx, n.storage)
	}
	if errors.Is(err, rdb.ErrQueueNotRegistered) {
		return rdb.NewTask{}, fmt.Errorf("%w: %q is not a declared queue; an admin creates it with PUT /api/v1/queues/%s", ErrQueueNotFound, n.queue, n.queue)
	}
	if errors.Is(err, rdb.ErrQueueRegistryFull) {
		return rdb.NewTask{}, invalid("queue", "is a new queue, but all 65535 queue numbers are in use")
	}
	if err != nil {
		return rdb.NewTask{}, fmt.Errorf("dtq: register queue %q: %w", n.queue, err)
	}
	ttl := int64(c.dep.idempotencyTTL / time.Second)
	if wait := n.availableAt - now.UnixMilli(); wait > 0 {
		ttl += (wait + 999) / 1000 // a delayed task keeps its record until it has run
	}
	return rdb.NewTask{
		ID: rdb.NewTaskID(num, now), Type: n.typ, Payload: n.payload, Priority: n.priority,
		MaxAttempts: n.maxAttempts, TimeoutMS: n.timeoutMS, IdempotencyKey: n.key,
		AvailableAt: n.availableAt, ExpiresAt: n.expiresAt, Metadata: n.metadata,
		Fingerprint: n.fingerprint, IdemTTL: ttl, CreatedAt: now.UnixMilli(), ConcurrencyKey: n.concurrencyKey,
		Retention: n.retention, KeepPayload: n.keepPayload, Dedup: n.dedup,
	}, nil
}

// outcome turns one ingest reply into the caller's answer.
func (c *Client) outcome(ctx context.Context, n *normalized, t *rdb.NewTask, now time.Time, r rdb.IngestResult) (*SubmitResult, error) {
	switch r.Outcome {
	case rdb.Created:
		return &SubmitResult{TaskID: t.ID, Task: createdInfo(n, t, r.Status), Replaced: r.Replaced}, nil
	case rdb.Deduplicated:
		return &SubmitResult{TaskID: r.TaskID, Task: r.Task, Deduplicated: DedupMode(r.Mode)}, nil
	case rdb.Duplicate:
		return &SubmitResult{TaskID: r.TaskID, Duplicate: true, Task: r.Task}, nil
	case rdb.InProgress:
		return nil, &IdempotencyConflictError{Queue: n.queue, Key: n.key, TaskID: r.TaskID, err: ErrIdempotencyInProgress}
	case rdb.Mismatch:
		return nil, &IdempotencyConflictError{Queue: n.queue, Key: n.key, TaskID: r.TaskID, err: ErrIdempotencyKeyMismatch}
	case rdb.Absent:
		return nil, fmt.Errorf("dtq: task %s was not created (Redis did not answer in time, nothing was written): %w", t.ID, r.Err)
	case rdb.QueueFull:
		return nil, c.queueFull(ctx, n.storage, r.Depth, c.partitionShare(ctx, n.storage, c.cfg.MaxQueueDepth), now)
	}
	return nil, fmt.Errorf("dtq: unexpected ingest outcome %d", r.Outcome)
}

// queueFull is the answer for a queue, or a partition of one (storage),
// at its depth limit.
func (c *Client) queueFull(ctx context.Context, storage string, depth, limit int64, now time.Time) *QueueFullError {
	queue, k := rdb.PartitionOf(storage)
	e := &QueueFullError{Queue: queue, Depth: depth, Limit: limit, RetryAfter: c.retryAfter(ctx, storage, depth, limit, now)}
	if limit != c.cfg.MaxQueueDepth {
		e.Partition = &k
	}
	return e
}

// retryAfter estimates when a full queue (a partition of one) will have
// room, from the tasks it finished in the last minute; 1s..60s.
func (c *Client) retryAfter(ctx context.Context, storage string, depth, limit int64, now time.Time) time.Duration {
	perMin, err := c.rdb.RecentCompletions(ctx, storage, now)
	if err != nil || perMin <= 0 {
		return 60 * time.Second
	}
	over := float64(depth-limit+1) / (float64(perMin) / 60)
	secs := math.Ceil(over)
	return time.Duration(min(60, max(1, secs))) * time.Second
}

func createdInfo(n *normalized, t *rdb.NewTask, st dtqtype.Status) *dtqtype.TaskInfo {
	info := &dtqtype.TaskInfo{
		ID: t.ID, Queue: n.queue, Type: n.typ, Payload: n.payload, Priority: n.priority,
		MaxAttempts: n.maxAttempts, Attempt: 1, TimeoutMS: n.timeoutMS, Status: st,
		CreatedAt:   dtqtype.MillisTime(t.CreatedAt),
		AvailableAt: dtqtype.MillisTime(n.availableAt),
		ExpiresAt:   dtqtype.MillisTime(n.expiresAt),
		Metadata:    n.metadata,
		Attempts:    []dtqtype.AttemptRecord{},
	}
	if n.key != "" {
		k := n.key
		info.IdempotencyKey = &k
	}
	if n.retention != 0 {
		r := max(n.retention, 0) // -1: kept for 0 s
		info.RetentionSeconds = &r
	}
	info.KeepPayload = n.keepPayload
	if n.dedup != nil {
		info.DedupKey = n.dedup.Key
	}
	return info
}

func (c *Client) batcher(queue string) *groupcommit.Group[*pendingSubmit, submitOutcome] {
	return c.batchers.Get(queue, func() *groupcommit.Group[*pendingSubmit, submitOutcome] { return c.newSubmitBatcher(queue) })
}

// pendingSubmit is one validated submission waiting for its ingest call.
type pendingSubmit struct {
	n    *normalized
	task rdb.NewTask
}

// submitOutcome is one submission's answer.
type submitOutcome struct {
	res *SubmitResult
	err error
}

// newSubmitBatcher merges concurrent Submit calls for one queue into one
// ingest script call.
func (c *Client) newSubmitBatcher(queue string) *groupcommit.Group[*pendingSubmit, submitOutcome] {
	return &groupcommit.Group[*pendingSubmit, submitOutcome]{
		Max:      maxScriptTasks,
		Flushers: 2,
		// Independent submitters at a steady, moderate rate (an HTTP
		// server's requests) rarely overlap a call; waiting up to
		// SubmitLinger for a few to share one ingest call costs Redis far
		// less than a call each (a lone call's fixed cost is most of it).
		// A caller submitting in a loop does not wait (see
		// groupcommit.Group's ByRate).
		Linger: max(c.cfg.SubmitLinger, 0),
		Gather: submitGather,
		ByRate: true,
		Run: func(batch []*pendingSubmit) ([]submitOutcome, error) {
			ctx := context.Background() // callers may give up; the write must not be cut in half
			now := c.dep.clock()
			tasks := make([]rdb.NewTask, len(batch))
			for i, p := range batch {
				tasks[i] = p.task
			}
			res, err := c.ingestSure(ctx, queue, now, tasks)
			if err != nil {
				return nil, err
			}
			out := make([]submitOutcome, len(batch))
			for i, p := range batch {
				r, e := c.outcome(ctx, p.n, &tasks[i], now, res[i])
				out[i] = submitOutcome{res: r, err: e}
			}
			return out, nil
		},
	}
}
