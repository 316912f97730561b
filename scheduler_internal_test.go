package dtq

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/internal/rdb"
	"github.com/dtq-io/dtq/internal/redistest"
)

// fakeClock is a clock tests move by hand.
type fakeClock struct{ ms atomic.Int64 }

func newFakeClock(t time.Time) *fakeClock {
	c := &fakeClock{}
	c.ms.Store(t.UnixMilli())
	return c
}

func (c *fakeClock) Now() time.Time          { return time.UnixMilli(c.ms.Load()) }
func (c *fakeClock) Add(d time.Duration)     { c.ms.Add(d.Milliseconds()) }
func (c *fakeClock) Set(t time.Time)         { c.ms.Store(t.UnixMilli()) }
func (c *fakeClock) At(t time.Time) func()   { return func() { c.Set(t) } }
func (c *fakeClock) clock() func() time.Time { return c.Now }

type schedBundle struct {
	ctx   context.Context
	srv   *redistest.Server
	rc    *redis.Client
	pfx   string
	clk   *fakeClock
	admin *Admin
	cc    *ClientConfig
}

// schedSetup returns an Admin and a way to make schedulers, all on one
// fake clock that starts at a whole minute.
func schedSetup(t *testing.T, mod func(*ClientConfig)) *schedBundle {
	t.Helper()
	s := redistest.New(t)
	redistest.CheckSlots(t, s.Client, rdb.HashSlot)
	clk := newFakeClock(time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC))
	cc := &ClientConfig{}
	if mod != nil {
		mod(cc)
	}
	d, err := Open(s.Client, &DeploymentConfig{KeyPrefix: s.Prefix, Clock: clk.clock()})
	require.NoError(t, err)
	c, err := d.NewClient(cc)
	require.NoError(t, err)
	a, err := d.NewAdmin(&AdminConfig{Client: c})
	require.NoError(t, err)
	return &schedBundle{ctx: context.Background(), srv: s.Server, rc: s.Client, pfx: s.Prefix, clk: clk, admin: a, cc: cc}
}

// scheduler returns a scheduler with its own Redis client, as another
// process would have.
func (b *schedBundle) scheduler(t *testing.T) *Scheduler {
	t.Helper()
	return b.schedulerWith(t, func(*ClientConfig) {})
}

// tasks returns the tasks of queue, oldest first.
func (b *schedBundle) tasks(t *testing.T, queue string) []*dtqtype.TaskInfo {
	t.Helper()
	d, err := Open(b.rc, &DeploymentConfig{KeyPrefix: b.pfx})
	require.NoError(t, err)
	in := d.Inspector()
	res, err := in.ListTasks(b.ctx, &TaskListParams{Queue: queue, Limit: 1000})
	require.NoError(t, err)
	items := res.Items
	for i, j := 0, len(items)-1; i < j; i, j = i+1, j-1 {
		items[i], items[j] = items[j], items[i]
	}
	return items
}

func scheduledFor(t *testing.T, ti *dtqtype.TaskInfo) string {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(ti.Metadata, &m))
	require.Equal(t, "every-minute", m["schedule"])
	s, _ := m["scheduled_for"].(string)
	return s
}

func (b *schedBundle) sysEvents(t *testing.T, typ string) int {
	t.Helper()
	msgs, err := b.rc.XRange(b.ctx, rdb.NewKeys(b.pfx).SysEvents(), "-", "+").Result()
	require.NoError(t, err)
	n := 0
	for _, m := range msgs {
		if m.Values["type"] == typ {
			n++
		}
	}
	return n
}

func TestSchedulerOneTaskPerTickAcrossSchedulers(t *testing.T) {
	t.Parallel()
	b := schedSetup(t, nil)
	_, created, err := b.admin.PutSchedule(b.ctx, Schedule{Name: "every-minute", Spec: "@every 1m", Queue: "sched",
		TaskType: "report", Payload: map[string]any{"kind": "daily"}, Metadata: map[string]any{"team": "ops"}})
	require.NoError(t, err)
	require.True(t, created)

	scheds := make([]*Scheduler, 6)
	for i := range scheds {
		scheds[i] = b.scheduler(t)
	}
	fireAll := func() {
		var wg sync.WaitGroup
		for _, s := range scheds {
			wg.Go(func() {
				_, _, err := s.fireDue(b.ctx)
				require.NoError(t, err)
			})
		}
		wg.Wait()
	}
	fireAll() // 10:00:00 was before the schedule existed: not due
	require.Empty(t, b.tasks(t, "sched"))

	for i := 1; i <= 3; i++ {
		b.clk.Add(time.Minute)
		fireAll()
		fireAll() // again at the same instant: nothing new
	}
	ts := b.tasks(t, "sched")
	require.Len(t, ts, 3, "one task per tick, however many schedulers")
	for i, ti := range ts {
		want := time.Date(2024, 5, 1, 10, i+1, 0, 0, time.UTC)
		require.Equal(t, want.Format(dtqtype.TimeLayout), scheduledFor(t, ti))
		require.Equal(t, scheduleKey("every-minute", want), *ti.IdempotencyKey)
		require.JSONEq(t, `{"kind":"daily"}`, string(ti.Payload))
		var meta map[string]any
		require.NoError(t, json.Unmarshal(ti.Metadata, &meta))
		require.Equal(t, "ops", meta["team"])
	}
	require.Equal(t, 3, b.sysEvents(t, eventScheduleFired), "SCHEDULE_FIRED once per tick")

	info, err := b.admin.GetSchedule(b.ctx, "every-minute")
	require.NoError(t, err)
	require.Equal(t, ts[2].ID, *info.LastTaskID)
	require.True(t, info.LastRunAt.Equal(b.clk.Now()))
	require.True(t, info.LastScheduledFor.Equal(time.Date(2024, 5, 1, 10, 3, 0, 0, time.UTC)))
	require.True(t, info.NextRunAt.Equal(time.Date(2024, 5, 1, 10, 4, 0, 0, time.UTC)))
	require.Nil(t, info.LastError)
}

func TestSchedulerRunsOnlyTheLatestMissedTick(t *testing.T) {
	t.Parallel()
	b := schedSetup(t, nil)
	_, _, err := b.admin.PutSchedule(b.ctx, Schedule{Name: "every-minute", Spec: "* * * * *", Queue: "sched", TaskType: "report"})
	require.NoError(t, err)
	s := b.scheduler(t)

	b.clk.Add(3*time.Hour + 30*time.Second) // nothing ran for three hours
	_, _, err = s.fireDue(b.ctx)
	require.NoError(t, err)
	_, _, err = s.fireDue(b.ctx)
	require.NoError(t, err)
	ts := b.tasks(t, "sched")
	require.Len(t, ts, 1, "no catch-up storm")
	require.Equal(t, "2024-05-01T13:00:00.000Z", scheduledFor(t, ts[0]))

	// The next one follows on its own tick.
	b.clk.Add(30 * time.Second)
	wait, _, err := s.fireDue(b.ctx)
	require.NoError(t, err)
	require.Len(t, b.tasks(t, "sched"), 2)
	require.Equal(t, time.Minute, wait, "sleeps until the next tick")
}

func TestSchedulePauseResumeTrigger(t *testing.T) {
	t.Parallel()
	b := schedSetup(t, nil)
	_, _, err := b.admin.PutSchedule(b.ctx, Schedule{Name: "every-minute", Spec: "@every 1m", Queue: "sched", TaskType: "report"})
	require.NoError(t, err)
	s := b.scheduler(t)

	changed, err := b.admin.PauseSchedule(b.ctx, "every-minute")
	require.NoError(t, err)
	require.True(t, changed)
	changed, err = b.admin.PauseSchedule(b.ctx, "every-minute")
	require.NoError(t, err)
	require.False(t, changed)
	info, err := b.admin.GetSchedule(b.ctx, "every-minute")
	require.NoError(t, err)
	require.True(t, info.Paused)
	require.True(t, info.NextRunAt.IsZero())

	b.clk.Add(5 * time.Minute)
	_, _, err = s.fireDue(b.ctx)
	require.NoError(t, err)
	require.Empty(t, b.tasks(t, "sched"), "a paused schedule fires nothing")

	// A trigger fires at once, paused or not, and is the last run.
	res, err := b.admin.TriggerSchedule(b.ctx, "every-minute")
	require.NoError(t, err)
	require.False(t, res.Duplicate)
	require.Nil(t, res.Task.IdempotencyKey)
	var meta map[string]any
	require.NoError(t, json.Unmarshal(res.Task.Metadata, &meta))
	require.Equal(t, true, meta["triggered"])
	require.Equal(t, "every-minute", meta["schedule"])
	info, err = b.admin.GetSchedule(b.ctx, "every-minute")
	require.NoError(t, err)
	require.Equal(t, res.TaskID, *info.LastTaskID)
	require.Len(t, b.tasks(t, "sched"), 1)

	// Resuming does not fire the ticks missed while paused.
	b.clk.Add(30 * time.Second)
	changed, err = b.admin.ResumeSchedule(b.ctx, "every-minute")
	require.NoError(t, err)
	require.True(t, changed)
	_, _, err = s.fireDue(b.ctx)
	require.NoError(t, err)
	require.Len(t, b.tasks(t, "sched"), 1)
	b.clk.Add(30 * time.Second)
	_, _, err = s.fireDue(b.ctx)
	require.NoError(t, err)
	ts := b.tasks(t, "sched")
	require.Len(t, ts, 2)
	require.Equal(t, "2024-05-01T10:06:00.000Z", scheduledFor(t, ts[1]))
	require.Equal(t, 2, b.sysEvents(t, eventScheduleFired))

	require.NoError(t, b.admin.DeleteSchedule(b.ctx, "every-minute"))
	require.ErrorIs(t, b.admin.DeleteSchedule(b.ctx, "every-minute"), ErrScheduleNotFound)
	_, err = b.admin.TriggerSchedule(b.ctx, "every-minute")
	require.ErrorIs(t, err, ErrScheduleNotFound)
	_, err = b.admin.PauseSchedule(b.ctx, "every-minute")
	require.ErrorIs(t, err, ErrScheduleNotFound)
	_, err = b.admin.ResumeSchedule(b.ctx, "every-minute")
	require.ErrorIs(t, err, ErrScheduleNotFound)
	b.clk.Add(time.Hour)
	_, _, err = s.fireDue(b.ctx)
	require.NoError(t, err)
	require.Len(t, b.tasks(t, "sched"), 2, "a deleted schedule fires nothing")
}

// A tick the queue refuses is skipped and recorded as the schedule's last
// error; the next tick tries again.
func TestScheduleTickOnFullOrUndeclaredQueue(t *testing.T) {
	t.Parallel()
	b := schedSetup(t, func(c *ClientConfig) { c.MaxQueueDepth = 1 })
	_, _, err := b.admin.PutSchedule(b.ctx, Schedule{Name: "every-minute", Spec: "@every 1m", Queue: "sched", TaskType: "report"})
	require.NoError(t, err)
	s := b.scheduler(t)
	declared := b.scheduler(t)
	declared.client.cfg.DeclaredQueuesOnly = true

	b.clk.Add(time.Minute)
	_, _, err = s.fireDue(b.ctx)
	require.NoError(t, err)
	require.Len(t, b.tasks(t, "sched"), 1)
	b.clk.Add(time.Minute)
	_, _, err = s.fireDue(b.ctx)
	require.NoError(t, err)
	require.Len(t, b.tasks(t, "sched"), 1, "the full queue refused the second tick")
	info, err := b.admin.GetSchedule(b.ctx, "every-minute")
	require.NoError(t, err)
	require.NotNil(t, info.LastError)
	require.Contains(t, *info.LastError, "full")
	require.True(t, info.NextRunAt.Equal(time.Date(2024, 5, 1, 10, 3, 0, 0, time.UTC)), "the tick was skipped, not retried")

	// Under the declared policy a schedule's tasks need a declared queue.
	require.NoError(t, b.admin.DeleteSchedule(b.ctx, "every-minute"))
	_, _, err = b.admin.PutSchedule(b.ctx, Schedule{Name: "undeclared", Spec: "@every 1m", Queue: "nowhere", TaskType: "report"})
	require.NoError(t, err)
	b.clk.Add(time.Minute)
	_, _, err = declared.fireDue(b.ctx)
	require.NoError(t, err)
	info, err = b.admin.GetSchedule(b.ctx, "undeclared")
	require.NoError(t, err)
	require.NotNil(t, info.LastError)
	require.Contains(t, *info.LastError, "not a declared queue")
}

// A definition replaced while a scheduler fires the old one keeps the
// next run the replacement computed.
func TestScheduleRecordOnlyMovesForward(t *testing.T) {
	t.Parallel()
	b := schedSetup(t, nil)
	_, _, err := b.admin.PutSchedule(b.ctx, Schedule{Name: "every-minute", Spec: "@every 1m", Queue: "sched", TaskType: "report"})
	require.NoError(t, err)
	r := b.admin.rdb
	now := b.clk.Now()
	tick := func(ms int64, version, task string) string {
		out, err := r.RecordSchedule(b.ctx, now, rdb.ScheduleRun{Name: "every-minute", Tick: ms, NextRun: ms + 60000, Version: version, TaskID: task})
		require.NoError(t, err)
		return out
	}
	t0 := now.Add(time.Minute).UnixMilli()
	require.Equal(t, rdb.ScheduleRecorded, tick(t0, "1", "a"))
	require.Equal(t, rdb.ScheduleStale, tick(t0, "1", "b"), "the same tick again")
	require.Equal(t, rdb.ScheduleStale, tick(t0-60000, "1", "c"), "an older tick")
	info, err := b.admin.GetSchedule(b.ctx, "every-minute")
	require.NoError(t, err)
	require.Equal(t, "a", *info.LastTaskID)

	_, _, err = b.admin.PutSchedule(b.ctx, Schedule{Name: "every-minute", Spec: "@every 1h", Queue: "sched", TaskType: "report"})
	require.NoError(t, err)
	require.Equal(t, rdb.ScheduleRecorded, tick(t0+60000, "1", "d"), "an old version's tick is recorded")
	info, err = b.admin.GetSchedule(b.ctx, "every-minute")
	require.NoError(t, err)
	require.Equal(t, int64(2), info.Version)
	require.Equal(t, "d", *info.LastTaskID)
	require.True(t, info.NextRunAt.Equal(time.Date(2024, 5, 1, 11, 0, 0, 0, time.UTC)), "but does not move the new version's next run")
}

// schedulerWith returns a scheduler of another process whose Client is
// configured by mod.
func (b *schedBundle) schedulerWith(t *testing.T, mod func(*ClientConfig)) *Scheduler {
	t.Helper()
	cc := *b.cc
	mod(&cc)
	d, err := Open(b.srv.Client(t), &DeploymentConfig{KeyPrefix: b.pfx, Clock: b.clk.clock()})
	require.NoError(t, err)
	c, err := d.NewClient(&cc)
	require.NoError(t, err)
	s, err := d.NewScheduler(&SchedulerConfig{Client: c, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	return s
}

// Two processes over one Redis, one of which accepts only other task types
// (as dtq dev does) and has lower caps, fire one schedule in every order:
// each tick makes exactly one task and is recorded as made, never as
// refused.
func TestSchedulerTickIgnoresTheProcessTypeList(t *testing.T) {
	t.Parallel()
	b := schedSetup(t, nil)
	_, _, err := b.admin.PutSchedule(b.ctx, Schedule{Name: "every-minute", Spec: "@every 30s", Queue: "sched",
		TaskType: "report", MaxAttempts: 8, Payload: map[string]any{"kind": "daily"}})
	require.NoError(t, err)
	worker := b.scheduler(t)
	dev := b.schedulerWith(t, func(c *ClientConfig) {
		c.TaskTypes = []string{"echo", "sleep"}
		c.MaxAttempts = 3
		c.MaxPayloadBytes = 4
	})
	fire := func(s *Scheduler) {
		_, _, err := s.fireDue(b.ctx)
		require.NoError(t, err)
	}
	both := func() {
		var wg sync.WaitGroup
		wg.Go(func() { fire(worker) })
		wg.Go(func() { fire(dev) })
		wg.Wait()
	}
	orders := []struct {
		name string
		run  func()
	}{
		{"the refusing process first", func() { fire(dev); fire(worker) }},
		{"the accepting process first", func() { fire(worker); fire(dev) }},
		{"both at once", both},
		{"both at once again", both},
		{"the refusing process alone", func() { fire(dev) }},
	}
	for i, o := range orders {
		b.clk.Add(30 * time.Second)
		o.run()
		ts := b.tasks(t, "sched")
		require.Len(t, ts, i+1, "%s: one task per tick", o.name)
		tick := time.Date(2024, 5, 1, 10, 0, 30*(i+1), 0, time.UTC)
		require.Equal(t, tick.Format(dtqtype.TimeLayout), scheduledFor(t, ts[i]), o.name)
		require.Equal(t, 8, ts[i].MaxAttempts, o.name)
		info, err := b.admin.GetSchedule(b.ctx, "every-minute")
		require.NoError(t, err)
		require.Nil(t, info.LastError, "%s: %v", o.name, info.LastError)
		require.NotNil(t, info.LastTaskID, o.name)
		require.Equal(t, ts[i].ID, *info.LastTaskID, o.name)
		require.True(t, info.LastRunAt.Equal(b.clk.Now()), o.name)
		require.True(t, info.LastScheduledFor.Equal(tick), o.name)
	}
	require.Equal(t, len(orders), b.sysEvents(t, eventScheduleFired))
}

// The record of a tick keeps the tick's task whichever scheduler answers
// first: a refusal never hides a task of that tick, a task replaces a
// refusal of that tick, and a call sent twice answers the same both times.
func TestScheduleRecordTaskWinsOverRefusal(t *testing.T) {
	t.Parallel()
	b := schedSetup(t, nil)
	_, _, err := b.admin.PutSchedule(b.ctx, Schedule{Name: "every-minute", Spec: "@every 1m", Queue: "sched", TaskType: "report"})
	require.NoError(t, err)
	r := b.admin.rdb
	now := b.clk.Now()
	record := func(ms int64, task, refusal string) string {
		out, err := r.RecordSchedule(b.ctx, now, rdb.ScheduleRun{Name: "every-minute", Tick: ms, NextRun: ms + 60000,
			Version: "1", TaskID: task, Error: refusal})
		require.NoError(t, err)
		return out
	}
	state := func() *dtqtype.ScheduleInfo {
		info, err := b.admin.GetSchedule(b.ctx, "every-minute")
		require.NoError(t, err)
		return info
	}
	t1 := now.Add(time.Minute).UnixMilli()
	cases := []struct {
		name       string
		tick       int64
		task, err  string
		want       string
		lastTask   string // "" = none
		lastErr    bool
		lastTickMS int64
	}{
		{"a refusal first", t1, "", "refused", rdb.ScheduleRecorded, "", true, t1},
		{"the same refusal sent again", t1, "", "refused", rdb.ScheduleRecorded, "", true, t1},
		{"the tick's task replaces the refusal", t1, "a", "", rdb.ScheduleRecorded, "a", false, t1},
		{"the task sent again", t1, "a", "", rdb.ScheduleRecorded, "a", false, t1},
		{"a refusal after the task", t1, "", "refused", rdb.ScheduleStale, "a", false, t1},
		{"another task for the tick", t1, "b", "", rdb.ScheduleStale, "a", false, t1},
		{"the next tick's task first", t1 + 60000, "c", "", rdb.ScheduleRecorded, "c", false, t1 + 60000},
		{"then its refusal", t1 + 60000, "", "refused", rdb.ScheduleStale, "c", false, t1 + 60000},
		{"an older tick's refusal", t1, "", "refused", rdb.ScheduleStale, "c", false, t1 + 60000},
		{"a refused tick after a task", t1 + 120000, "", "full", rdb.ScheduleRecorded, "c", true, t1 + 120000},
		{"an older tick's task", t1 + 60000, "d", "", rdb.ScheduleStale, "c", true, t1 + 120000},
	}
	for _, c := range cases {
		require.Equal(t, c.want, record(c.tick, c.task, c.err), c.name)
		info := state()
		if c.lastTask == "" {
			require.Nil(t, info.LastTaskID, c.name)
		} else {
			require.NotNil(t, info.LastTaskID, c.name)
			require.Equal(t, c.lastTask, *info.LastTaskID, c.name)
		}
		require.Equal(t, c.lastErr, info.LastError != nil, c.name)
		require.Equal(t, c.lastErr, !info.LastErrorAt.IsZero(), c.name)
		require.Equal(t, c.lastTickMS, info.LastScheduledFor.UnixMilli(), c.name)
		require.Equal(t, c.lastTickMS+60000, info.NextRunAt.UnixMilli(), c.name)
	}
}
