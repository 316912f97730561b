package dtq

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/internal/maintenance"
	"github.com/dtq-io/dtq/internal/rdb"
	"github.com/dtq-io/dtq/internal/schedule"
)

// SchedulerConfig configures a Scheduler. Zero values select the defaults
// noted.
type SchedulerConfig struct {
	// Client submits the schedules' tasks, with its limits. It must use the
	// Deployment's KeyPrefix. Default: a Client with default limits.
	Client *Client
	// Logger receives a line for every tick that made no task, and Redis
	// errors. Default slog.Default().
	Logger *slog.Logger
	// MaxSleep bounds the time between two reads of the due schedules, so
	// that new and changed schedules are seen. Default 1s.
	MaxSleep time.Duration
}

// Scheduler fires the schedules stored in Redis (see Admin.PutSchedule):
// for each due schedule it submits the task of the latest due tick through
// its Client with the idempotency key scheduleKey(name, tick), so any
// number of Schedulers, in any number of processes, make exactly one task
// per tick without a leader. Workers (Worker.Run) and the API server (dtq
// api) run one each. It is safe for concurrent use.
type Scheduler struct {
	client       *Client
	rdb          *rdb.RDB
	log          *slog.Logger
	clock        func() time.Time
	maxSleep     time.Duration
	eventsMaxLen int64 // of the _sys event stream
}

// dueBatch bounds the schedules fired per read of the due index.
const dueBatch = 100

// NewScheduler returns a Scheduler of d's schedules configured by cfg (nil
// selects every default). It fails when cfg.Client uses another key prefix.
func (d *Deployment) NewScheduler(cfg *SchedulerConfig) (*Scheduler, error) {
	var o SchedulerConfig
	if cfg != nil {
		o = *cfg
	}
	c, err := d.clientOr(o.Client, "SchedulerConfig")
	if err != nil {
		return nil, err
	}
	o.Client = c
	return newScheduler(c, &o), nil
}

// newScheduler is NewScheduler with the Client given: it submits through c
// and reads and writes with c's settings.
func newScheduler(c *Client, cfg *SchedulerConfig) *Scheduler {
	log, maxSleep := cfg.Logger, cfg.MaxSleep
	if log == nil {
		log = slog.Default()
	}
	if maxSleep <= 0 {
		maxSleep = time.Second
	}
	return &Scheduler{client: c, rdb: c.rdb, log: log, clock: c.dep.clock, maxSleep: maxSleep, eventsMaxLen: c.dep.eventsMaxLen}
}

// Run fires due schedules until ctx ends: it sleeps until the next tick of
// any schedule, at most MaxSleep, and backs off while Redis fails. It
// returns nil when ctx ends.
func (s *Scheduler) Run(ctx context.Context) error {
	maintenance.Run(ctx, maintenance.Service{Name: "scheduler", Logger: s.log, MaxSleep: s.maxSleep,
		Step: func(ctx context.Context) (maintenance.Result, error) {
			wait, full, err := s.fireDue(ctx)
			return maintenance.Result{Full: full, Wait: wait}, err
		}})
	return nil
}

// fireDue fires every schedule due now (at most dueBatch) and returns how
// long until the next one is due (0 = unknown) and whether more may be due.
func (s *Scheduler) fireDue(ctx context.Context) (time.Duration, bool, error) {
	now := s.clock()
	due, next, err := s.rdb.DueSchedules(ctx, now, dueBatch)
	if err != nil {
		return 0, false, err
	}
	var errs []error
	for _, m := range due {
		n, err := s.fire(ctx, decodeSchedule(m), m["version"], now)
		if err != nil {
			errs = append(errs, err)
		}
		if n > 0 && (next == 0 || n < next) {
			next = n
		}
	}
	var wait time.Duration
	if next > 0 {
		wait = max(time.UnixMilli(next).Sub(now), time.Millisecond)
	}
	return wait, len(due) == dueBatch, errors.Join(errs...)
}

// fire submits the task of info's latest due tick and records the run. A
// tick whose task exists already (another scheduler made it) is recorded
// like one made here; a tick the queue refuses is recorded with the error
// and skipped, unless a scheduler records the tick's task (see
// schedule_record.lua: a tick's task wins over a refusal of that tick, in
// either order). Only Redis errors are returned: the tick stays due. It
// returns the schedule's next tick (epoch ms) when it recorded one.
func (s *Scheduler) fire(ctx context.Context, info *dtqtype.ScheduleInfo, version string, now time.Time) (int64, error) {
	spec, err := schedule.Parse(info.Spec, info.Timezone)
	if err != nil {
		s.log.Error("stored schedule does not parse; it is skipped", "schedule", info.Name, "err", err)
		return 0, nil
	}
	notBefore := time.Time{}
	if !info.LastScheduledFor.IsZero() {
		notBefore = info.LastScheduledFor.Add(time.Millisecond)
	}
	tick, ok := spec.Latest(now, notBefore)
	if !ok {
		return 0, nil // recorded already by a scheduler whose clock is ahead
	}
	run := rdb.ScheduleRun{Name: info.Name, Tick: tick.UnixMilli(), NextRun: spec.Next(tick).UnixMilli(), Version: version}
	sub, err := scheduleSubmission(info, tick, false)
	created := false
	if err == nil {
		var res *SubmitResult
		lim := tickLimits(s.client.lim, info)
		res, err = s.client.submit(ctx, sub, &lim)
		if err == nil {
			run.TaskID, created = res.TaskID, !res.Duplicate
		}
	}
	var ic *IdempotencyConflictError
	switch {
	case err == nil:
	case errors.As(err, &ic):
		run.TaskID = ic.TaskID // another scheduler's task for this tick
	case refusedTick(err):
		run.Error = err.Error()
		s.log.Warn("schedule tick made no task", "schedule", info.Name, "queue", info.Queue,
			"scheduled_for", tick.UTC().Format(dtqtype.TimeLayout), "err", err)
	default:
		return 0, err
	}
	if created {
		// Only the scheduler whose submission created the task announces
		// it, before recording: a failed record is retried, and the retry
		// finds the task made already.
		if err := s.rdb.AppendSysEvent(ctx, s.eventsMaxLen, scheduleFiredEvent(info, run.TaskID, tick, now, false)); err != nil {
			s.log.Warn("SCHEDULE_FIRED event not written", "schedule", info.Name, "task_id", run.TaskID, "err", err)
		}
	}
	if _, err := s.rdb.RecordSchedule(ctx, now, run); err != nil && !errors.Is(err, rdb.ErrNotFound) {
		return 0, err
	}
	return run.NextRun, nil
}

// tickLimits are the limits a tick's task is checked against: this
// process's, without its task type list and raised to the definition's
// max_attempts and payload size. The definition was checked when it was
// stored; checking it again against one process's own settings
// (DTQ_TASK_TYPES, DTQ_MAX_ATTEMPTS, DTQ_MAX_PAYLOAD_BYTES) would make the
// outcome of a tick depend on which process fired it first.
func tickLimits(base limits, info *dtqtype.ScheduleInfo) limits {
	base.taskTypes = nil
	base.maxAttempts = max(base.maxAttempts, info.MaxAttempts)
	base.maxPayloadBytes = max(base.maxPayloadBytes, len(info.Payload))
	return base
}

// refusedTick reports whether err is the queue or the validation refusing a
// tick's task, as opposed to Redis failing: such a tick is skipped.
func refusedTick(err error) bool {
	var ve *ValidationError
	return errors.Is(err, ErrQueueFull) || errors.Is(err, ErrQueueNotFound) || errors.As(err, &ve)
}
