package dtq

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dtq-io/dtq/internal/groupcommit"
	"github.com/dtq-io/dtq/internal/maintenance"
	"github.com/dtq-io/dtq/internal/rdb"
	"github.com/dtq-io/dtq/internal/slots"
	"github.com/dtq-io/dtq/internal/workflow/engine"
)

// Version is dtq's version, reported in worker heartbeats.
const Version = "0.1.0-dev"

// ErrWorkerIDInUse is returned by Run when a live worker already uses the
// configured WorkerID.
var ErrWorkerIDInUse = errors.New("dtq: worker id already used by a live worker")

// WorkerConfig configures a Worker: its own settings (the settings it
// shares with every process are the Deployment's). The zero value of every
// field selects the default given in its comment.
type WorkerConfig struct {
	// Queues maps the queues served to their weights; under contention,
	// freed slots go to queues in proportion to weight. Default {"default": 1}.
	Queues map[string]int
	// StrictOrder, when set, serves queues in this order instead: a queue
	// gets slots only while no queue listed before it is waiting for one.
	StrictOrder []string
	// Concurrency bounds the handlers running at once. Default 16.
	Concurrency int
	// WorkerID names the worker (consumer name, heartbeat record). Default
	// hostname-pid-random. Run refuses an id a live worker already uses.
	WorkerID string
	// VisibilityTimeout is the lease length. Default 30s.
	VisibilityTimeout time.Duration
	// HeartbeatInterval is how often leases are renewed and the heartbeat
	// record refreshed; at most VisibilityTimeout/3. Default 5s.
	HeartbeatInterval time.Duration
	// RetryBaseDelay and RetryMaxDelay shape the backoff. Defaults 1s, 60s.
	RetryBaseDelay time.Duration
	RetryMaxDelay  time.Duration
	// RetryJitter spreads retries by ±jitter·delay, 0..1. Default 0.2;
	// negative means none.
	RetryJitter float64
	// ResultMaxBytes: a larger result is dropped and flagged truncated.
	// Default 8192.
	ResultMaxBytes int
	// DrainTimeout is how long Run waits for running handlers at shutdown
	// before handing their tasks back. Default 30s.
	DrainTimeout time.Duration
	// Logger receives one line per task outcome. Default slog.Default().
	Logger *slog.Logger
	// Observer is told what the worker does, for metrics: dtqprom.NewWorker
	// records them in Prometheus. Default nil: nothing is recorded.
	Observer Observer
	// DisableScheduler stops Run from running a Scheduler (docs/schedules.md).
	// Default false: every worker fires due schedules.
	DisableScheduler bool
	// SchedulerClient configures the Client the worker's Scheduler submits
	// schedules' tasks with (queue depth, payload and attempts limits, task
	// types), which its workflow nodes also add nodes (AddNodes) and submit
	// on_failure tasks with. Default: default limits.
	SchedulerClient *ClientConfig
	// TaskLogLines and TaskLogBytes cap what one attempt's task log keeps
	// (its newest lines; docs/progress.md). Defaults DefaultTaskLogLines,
	// DefaultTaskLogBytes; at most 100,000 lines and 16 MiB.
	TaskLogLines int
	TaskLogBytes int
}

// Default worker record bounds (DeploymentConfig.MaxWorkers,
// WorkerGatewayConfig.MaxWorkersPerKey).
const (
	DefaultMaxWorkers       = 10000
	DefaultMaxWorkersPerKey = 1000
)

// withDefaults is c with the defaults of the worker's own settings applied
// and checked.
func (c *WorkerConfig) withDefaults() (WorkerConfig, error) {
	var o WorkerConfig
	if c != nil {
		o = *c
	}
	if len(o.Queues) == 0 {
		o.Queues = map[string]int{DefaultQueue: 1}
		if len(o.StrictOrder) > 0 {
			o.Queues = map[string]int{}
			for _, q := range o.StrictOrder {
				o.Queues[q] = 1
			}
		}
	}
	for q, wt := range o.Queues {
		if !ValidQueueName(q) {
			return o, fmt.Errorf("dtq: invalid queue name %q", q)
		}
		if wt < 0 {
			return o, fmt.Errorf("dtq: queue %q has a negative weight", q)
		}
	}
	for _, q := range o.StrictOrder {
		if _, ok := o.Queues[q]; !ok {
			return o, fmt.Errorf("dtq: StrictOrder names queue %q that Queues does not", q)
		}
	}
	orDefault(&o.Concurrency, 16)
	if o.Concurrency < 1 {
		return o, errors.New("dtq: Concurrency must be positive")
	}
	if o.WorkerID == "" {
		host, _ := os.Hostname()
		var b [3]byte
		_, _ = rand.Read(b[:])
		o.WorkerID = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
	}
	orDefault(&o.VisibilityTimeout, 30*time.Second)
	orDefault(&o.HeartbeatInterval, 5*time.Second)
	if o.HeartbeatInterval > o.VisibilityTimeout/3 {
		return o, fmt.Errorf("dtq: HeartbeatInterval %v must be at most VisibilityTimeout/3 (%v)", o.HeartbeatInterval, o.VisibilityTimeout/3)
	}
	orDefault(&o.RetryBaseDelay, time.Second)
	orDefault(&o.RetryMaxDelay, 60*time.Second)
	if o.RetryMaxDelay < o.RetryBaseDelay {
		return o, errors.New("dtq: RetryMaxDelay must be at least RetryBaseDelay")
	}
	switch {
	case o.RetryJitter == 0:
		o.RetryJitter = 0.2
	case o.RetryJitter < 0:
		o.RetryJitter = 0
	case o.RetryJitter > 1:
		return o, errors.New("dtq: RetryJitter must be between 0 and 1")
	}
	orDefault(&o.ResultMaxBytes, 8192)
	orDefault(&o.DrainTimeout, 30*time.Second)
	orDefault(&o.TaskLogLines, DefaultTaskLogLines)
	orDefault(&o.TaskLogBytes, DefaultTaskLogBytes)
	if o.TaskLogLines < 1 || o.TaskLogLines > 100000 || o.TaskLogBytes < MaxLogLineBytes || o.TaskLogBytes > 16<<20 {
		return o, errors.New("dtq: TaskLogLines must be 1..100000 and TaskLogBytes 1 KiB..16 MiB")
	}
	if o.Observer == nil {
		o.Observer = noObserver{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o, nil
}

// Worker fetches and executes tasks. Register handlers with Handle,
// HandleFunc or Use before calling Run.
type Worker struct {
	*ServeMux

	rdb          *rdb.RDB
	cfg          WorkerConfig // its own settings, defaults applied
	dep          deployment
	settings     rdb.WorkerSettings // the scripts', from dep
	slots        *slots.Pool
	obs          Observer
	instance     string
	sched        *Scheduler     // nil with DisableScheduler
	wf           *engine.Engine // relay and sweep of workflow nodes
	nodes        *Client        // AddNodes of workflow nodes (its engine is wf)
	identity     []any          // the heartbeat record's fixed fields
	redisVersion string
	started      time.Time
	atStart      []string // the queues' partitions when Run started (resolvePartitions)
	// waiter serves the idle fetch loops' blocking reads on connections
	// of its own, one per loop blocked (a loop per partition): Run makes it.
	waiter *rdb.Waiter

	succeeders groupcommit.PerKey[rdb.Success, error] // per queue: batched success finalizes

	mu       sync.Mutex
	inflight map[runKey]*running
	handlers sync.WaitGroup
	draining atomic.Bool
	// registered is set once register has succeeded (see Ready).
	registered atomic.Bool
	// unrecorded is set while the heartbeat record could not be written
	// (Redis at maxmemory, or the worker records at MaxWorkers): heartbeats
	// retry the start registration instead of beating.
	unrecorded atomic.Bool

	processed, failed, retried atomic.Int64
}

// running is one handler in flight.
type running struct {
	task   *Task
	ct     rdb.ClaimedTask
	cancel context.CancelCauseFunc
	// cancelRequested is set when a cancel request arrived for the task.
	cancelRequested atomic.Bool
	// returned is set once the handler returned: the task is only being
	// finalized, so the drain must not hand it back.
	returned atomic.Bool
	// log buffers the attempt's progress and log lines (progress.go).
	log *taskLog
	// lease cancels the handler when its lease runs out unrenewed.
	lease *leaseWatch
}

// Causes with which a handler's context is cancelled.
var (
	errTimeout         = errors.New("dtq: task timed out")
	errCancelRequested = errors.New("dtq: task cancel requested")
	errShutdown        = errors.New("dtq: worker shut down before the task finished")
)

// NewWorker returns a Worker of d's queues with the settings of cfg (nil
// selects every default). It fails when a setting is out of range.
//
// An idle queue holds one of the Redis client's connections in a blocking read (for up to a
// second at a time); the workflow relays of all its queues hold one
// connection of their own per 256 queues (none on Redis Cluster, where they
// poll; see docs/workflows-internals.md), and the cancel listener holds one more (on Redis
// Cluster, one per hash slot of the queues served, since sharded channels
// of different slots cannot share a subscription): the client's pool must be
// larger than the number of queues served plus the concurrency it needs for
// claims and finalizes (go-redis's default of 10 per CPU suits a few queues).
func (d *Deployment) NewWorker(cfg *WorkerConfig) (*Worker, error) {
	conf, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	order := conf.StrictOrder
	if len(order) == 0 {
		for q := range conf.Queues {
			order = append(order, q)
		}
		sort.Strings(order)
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	w := &Worker{
		ServeMux: NewServeMux(),
		rdb:      d.storage(),
		cfg:      conf,
		dep:      d.dep,
		slots:    slots.NewPool(conf.Concurrency, conf.Queues, order, len(conf.StrictOrder) > 0),
		obs:      conf.Observer,
		instance: hex.EncodeToString(b[:]),
		inflight: map[runKey]*running{},
	}
	w.rdb.SetWorkerBounds(rdb.WorkerBounds{Max: d.dep.maxWorkers})
	w.identity = w.identityFields()
	w.settings = d.dep.workerSettings(conf.WorkerID, conf.VisibilityTimeout)
	// One Client serves the scheduler and the workflow nodes.
	c, err := d.NewClient(conf.SchedulerClient)
	if err != nil {
		return nil, fmt.Errorf("dtq: WorkerConfig.SchedulerClient: %w", err)
	}
	w.newWorkflows(c)
	if !conf.DisableScheduler {
		w.sched = newScheduler(c, &SchedulerConfig{Logger: conf.Logger})
	}
	return w, nil
}

// register prepares Redis for the worker (version check, scripts, consumer
// groups) and records the worker as starting.
func (w *Worker) register(ctx context.Context) error {
	if v, err := w.rdb.CheckVersion(ctx); err != nil {
		return fmt.Errorf("dtq: check Redis version: %w", err) // names the version found
	} else if v != "" {
		w.redisVersion = v
	}
	if err := w.rdb.LoadScripts(ctx); err != nil {
		return fmt.Errorf("dtq: load scripts: %w", err)
	}
	parts, err := w.resolvePartitions(ctx)
	if err != nil {
		return fmt.Errorf("dtq: read the queues' partitions: %w", err)
	}
	w.atStart = parts
	for _, q := range parts {
		// At maxmemory a missing group cannot be made, but a worker that
		// starts anyway drains the queues it can (claims and acks free
		// memory); the fetch loop creates the group once memory frees.
		if err := w.rdb.EnsureGroups(ctx, q); err != nil {
			if !rdb.IsOOM(err) {
				return fmt.Errorf("dtq: %w", err)
			}
			w.cfg.Logger.Warn("Redis is at maxmemory: consumer groups missing, created once memory frees", "queue", q, "err", err)
		}
	}
	w.started = w.dep.clock()
	// Not cancellable: a Stop during the write could leave the record
	// written but Run returning as if it never started, so the worker would
	// show as starting until its heartbeat expired. Once written, Run goes
	// through the normal stop, which records the worker as stopped.
	err = w.rdb.WorkerStart(context.WithoutCancel(ctx), w.cfg.WorkerID, w.started, 3*w.cfg.HeartbeatInterval, w.dep.eventsMaxLen, w.heartbeatRecord("starting"))
	if errors.Is(err, rdb.ErrDuplicateWorker) {
		return fmt.Errorf("%w: %s", ErrWorkerIDInUse, w.cfg.WorkerID)
	}
	if unrecordable(err) {
		// Without a record the worker still runs tasks: a worker that
		// crash-looped here would leave the backlog that fills Redis in
		// place. Each heartbeat tries the record again.
		w.unrecorded.Store(true)
		w.cfg.Logger.Warn("worker record not written; running without it, retried at each heartbeat",
			"worker_id", w.cfg.WorkerID, "err", tooManyWorkers(err))
	} else if err != nil {
		return fmt.Errorf("dtq: register worker: %w", err)
	}
	w.obs.Serving(w.queues(), w.Types())
	w.registered.Store(true)
	return nil
}

// unrecordable reports whether err keeps the worker's record from being
// written without being a reason not to run: Redis is at maxmemory, or the
// worker records are at their bound.
func unrecordable(err error) bool {
	var tm *rdb.TooManyWorkersError
	return err != nil && (rdb.IsOOM(err) || errors.As(err, &tm))
}

// ID returns the worker id.
func (w *Worker) ID() string { return w.cfg.WorkerID }

func (w *Worker) queues() []string {
	out := make([]string, 0, len(w.cfg.Queues))
	for q := range w.cfg.Queues {
		out = append(out, q)
	}
	sort.Strings(out)
	return out
}

// Run executes tasks until ctx is cancelled, then drains: it stops fetching,
// waits up to DrainTimeout for running handlers, then cancels the rest and
// hands their tasks back to their queues (same attempt) so peers start them
// at once. It returns shortly after the drain deadline in any case. It fails
// at start with ErrWorkerIDInUse when a live worker uses the same id, and
// when Redis is older than 7.0 (the error names the version found).
func (w *Worker) Run(ctx context.Context) error {
	bg := context.WithoutCancel(ctx)
	if err := w.register(ctx); err != nil {
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			return nil // stopped while starting: nothing ran, nothing to drain
		}
		return err
	}

	// hardCtx ends handlers at the drain deadline; loopCtx ends the loops
	// that keep running through the drain (heartbeats, cancel listener).
	hardCtx, hardStop := context.WithCancel(bg)
	defer hardStop()
	loopCtx, loopStop := context.WithCancel(bg)
	var loops sync.WaitGroup
	spawn := func(c context.Context, f func(context.Context)) {
		loops.Go(func() { f(c) })
	}
	mcfg := maintenance.Config{RDB: w.rdb, Settings: &w.settings, Clock: w.dep.clock, Logger: w.cfg.Logger}
	w.waiter = w.rdb.NewWaiter()
	defer func() { _ = w.waiter.Close() }()
	var fetchers sync.WaitGroup
	// Each partition of a served queue is served as a queue is: a fetch
	// loop and its maintenance (docs/partitions.md).
	serve := func(q string) {
		fetchers.Go(func() { w.fetchLoop(ctx, hardCtx, q) })
		// Reclaim starts tasks too, so it must be done before the drain
		// counts running handlers.
		fetchers.Go(func() {
			maintenance.Run(ctx, maintenance.Service{Name: "reclaim", Queue: q, Logger: w.cfg.Logger,
				MaxSleep: w.cfg.HeartbeatInterval, Step: w.reclaimStep(hardCtx, q)})
		})
		spawn(ctx, func(c context.Context) { maintenance.RunPromoter(c, mcfg, q) })
		spawn(ctx, func(c context.Context) { maintenance.RunSweeper(c, mcfg, q) })
		spawn(ctx, func(c context.Context) { maintenance.RunTidier(c, mcfg, q) })
	}
	served := map[string]bool{}
	for _, q := range w.atStart {
		served[q] = true
		serve(q)
	}
	// A queue created with partitions after the worker started (it served
	// the queue's name alone until then) gains its other partitions here.
	fetchers.Go(func() { w.watchPartitions(ctx, served, serve) })
	spawn(ctx, func(c context.Context) {
		w.wf.RunRelays(c, func(context.Context) []string { return w.queues() }, 0)
	})
	spawn(ctx, w.wf.RunSweep)
	spawn(loopCtx, w.heartbeatLoop)
	spawn(loopCtx, w.cancelListener)
	spawn(loopCtx, w.progressLoop)
	if w.sched != nil {
		spawn(ctx, func(c context.Context) { _ = w.sched.Run(c) })
	}
	w.cfg.Logger.Info("worker started", "worker_id", w.cfg.WorkerID, "queues", w.queues(), "concurrency", w.cfg.Concurrency,
		"redis_version", w.redisVersion)

	<-ctx.Done()
	w.draining.Store(true)
	fetchers.Wait()
	w.drain(bg, hardStop)
	loopStop()
	loops.Wait()
	_ = w.rdb.WorkerBeat(bg, w.cfg.WorkerID, w.instance, w.dep.clock(), w.dep.eventsMaxLen, true, w.heartbeatRecord("stopped"))
	w.cfg.Logger.Info("worker stopped", "worker_id", w.cfg.WorkerID)
	return nil
}

// drainingMessage says what a stopping worker waits for, e.g. "draining 1
// running task, up to 30 s".
func drainingMessage(n int, timeout time.Duration) string {
	tasks := "tasks"
	if n == 1 {
		tasks = "task"
	}
	limit := timeout.String()
	if timeout%time.Second == 0 {
		limit = fmt.Sprintf("%d s", timeout/time.Second)
	}
	return fmt.Sprintf("draining %d running %s, up to %s", n, tasks, limit)
}

// drainGrace is how long Run waits for cancelled handlers after the drain
// deadline before returning anyway.
const drainGrace = 2 * time.Second

func (w *Worker) drain(ctx context.Context, hardStop context.CancelFunc) {
	w.mu.Lock()
	n := len(w.inflight)
	w.mu.Unlock()
	if n > 0 {
		w.cfg.Logger.Info(drainingMessage(n, w.cfg.DrainTimeout), "worker_id", w.cfg.WorkerID)
	}
	done := make(chan struct{})
	go func() { w.handlers.Wait(); close(done) }()
	t := time.NewTimer(w.cfg.DrainTimeout)
	defer t.Stop()
	select {
	case <-done:
		return
	case <-t.C:
	}
	// Deadline: hand every unfinished task back so peers start it now, then
	// cancel its handler. The handler's own finalize is fenced out.
	w.mu.Lock()
	left := make([]*running, 0, len(w.inflight))
	for _, r := range w.inflight {
		if !r.returned.Load() {
			left = append(left, r)
		}
	}
	w.mu.Unlock()
	for _, r := range left {
		err := w.rdb.HandBack(ctx, w.finishArgs(r), &w.settings)
		if err != nil && !errors.Is(err, rdb.ErrLeaseLost) {
			w.cfg.Logger.Error("hand back failed", "task_id", r.ct.ID, "queue", r.ct.Queue, "err", err)
		} else if err == nil {
			w.cfg.Logger.Info("task handed back at drain deadline", "task_id", r.ct.ID, "queue", r.ct.Queue, "attempt", r.ct.Attempt)
		}
		r.cancel(errShutdown)
	}
	hardStop()
	g := time.NewTimer(drainGrace)
	defer g.Stop()
	select {
	case <-done:
	case <-g.C:
		w.cfg.Logger.Warn("handlers still running after the drain grace; returning anyway", "count", len(left))
	}
}

func (w *Worker) finishArgs(r *running) *rdb.FinishArgs {
	return &rdb.FinishArgs{Queue: r.ct.Queue, ID: r.ct.ID, Attempt: r.ct.Attempt, Priority: r.ct.Priority, Now: w.dep.clock()}
}

// heartbeatRecord is the worker's heartbeat record as field/value pairs.
func (w *Worker) heartbeatRecord(status string) []any {
	w.mu.Lock()
	ids := make([]string, 0, len(w.inflight))
	for k := range w.inflight {
		ids = append(ids, k.id)
	}
	w.mu.Unlock()
	sort.Strings(ids)
	ids = slices.Compact(ids)
	return append(slices.Clone(w.identity),
		"started_at", w.started.UnixMilli(), "status", status, "in_flight", toJSON(ids),
		"processed", w.processed.Load(), "failed", w.failed.Load(), "retried", w.retried.Load())
}

// identityFields are the heartbeat record's fields that never change.
func (w *Worker) identityFields() []any {
	host, _ := os.Hostname()
	queues := make([]string, 0, len(w.cfg.Queues))
	for _, q := range w.queues() {
		queues = append(queues, fmt.Sprintf("%s:%d", q, w.cfg.Queues[q]))
	}
	return []any{
		"id", w.cfg.WorkerID, "instance", w.instance, "hostname", host, "pid", os.Getpid(),
		"version", Version, "queues", toJSON(queues), "concurrency", w.cfg.Concurrency,
		"heartbeat_interval_ms", w.cfg.HeartbeatInterval.Milliseconds(),
	}
}

func (w *Worker) status() string {
	switch {
	case w.draining.Load():
		return "draining"
	case w.inflightCount() > 0:
		return "busy"
	}
	return "ready"
}

func (w *Worker) inflightCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.inflight)
}
