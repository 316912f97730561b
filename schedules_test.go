package dtq_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/internal/workertest"
)

// childSchedulerEnv makes the test binary run one Scheduler until its
// stdin closes (see TestFourSchedulerProcesses). childTaskTypesEnv, when
// set, is its Client's task type list (comma-separated), as DTQ_TASK_TYPES
// sets it for dtq api and dtq dev.
const (
	childSchedulerEnv = "DTQ_TEST_CHILD_SCHEDULER"
	childTaskTypesEnv = "DTQ_TEST_CHILD_TASK_TYPES"
)

func runChildScheduler() int {
	rc := redis.NewClient(&redis.Options{Addr: os.Getenv("DTQ_TEST_REDIS_ADDR")})
	defer rc.Close()
	cc := &dtq.ClientConfig{}
	if types := os.Getenv(childTaskTypesEnv); types != "" {
		cc.TaskTypes = strings.Split(types, ",")
	}
	d, err := dtq.Open(rc, &dtq.DeploymentConfig{KeyPrefix: os.Getenv("DTQ_TEST_PREFIX")})
	var c *dtq.Client
	if err == nil {
		c, err = d.NewClient(cc)
	}
	if err == nil {
		var s *dtq.Scheduler
		if s, err = d.NewScheduler(&dtq.SchedulerConfig{Client: c, Logger: slog.New(slog.DiscardHandler)}); err == nil {
			ctx, cancel := context.WithCancel(context.Background())
			go func() { _, _ = io.Copy(io.Discard, os.Stdin); cancel() }()
			fmt.Println("ready")
			err = s.Run(ctx)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

func TestPutScheduleValidation(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	a := b.admin(t)
	ok := dtq.Schedule{Name: "nightly", Spec: "0 3 * * *", TaskType: "report"}
	big := map[string]any{"x": string(make([]byte, 4000))}
	cases := []struct {
		name  string
		mod   func(*dtq.Schedule)
		field string
	}{
		{"no name", func(s *dtq.Schedule) { s.Name = "" }, "name"},
		{"uppercase name", func(s *dtq.Schedule) { s.Name = "Nightly" }, "name"},
		{"name starting with a dot", func(s *dtq.Schedule) { s.Name = ".x" }, "name"},
		{"name too long", func(s *dtq.Schedule) { s.Name = string(make([]byte, 129)) }, "name"},
		{"no spec", func(s *dtq.Schedule) { s.Spec = "" }, "spec"},
		{"bad cron", func(s *dtq.Schedule) { s.Spec = "0 25 * * *" }, "spec"},
		{"every too short", func(s *dtq.Schedule) { s.Spec = "@every 10ms" }, "spec"},
		{"bad timezone", func(s *dtq.Schedule) { s.Timezone = "Europe/Nowhere" }, "timezone"},
		{"bad queue", func(s *dtq.Schedule) { s.Queue = "Bad Queue" }, "queue"},
		{"no task type", func(s *dtq.Schedule) { s.TaskType = "" }, "task_type"},
		{"payload not an object", func(s *dtq.Schedule) { s.Payload = json.RawMessage(`[1]`) }, "payload"},
		{"priority", func(s *dtq.Schedule) { s.Priority = new(10) }, "priority"},
		{"max attempts", func(s *dtq.Schedule) { s.MaxAttempts = 99 }, "max_attempts"},
		{"timeout", func(s *dtq.Schedule) { s.Timeout = 2 * time.Hour }, "timeout_ms"},
		{"metadata too big with the schedule fields", func(s *dtq.Schedule) { s.Metadata = big }, "metadata"},
		{"spec too long", func(s *dtq.Schedule) { s.Spec = longCron(20 << 10) }, "spec"},
		{"spec one byte too long", func(s *dtq.Schedule) { s.Spec = longCron(dtq.MaxScheduleSpec + 1) }, "spec"},
		{"spec padded too long", func(s *dtq.Schedule) { s.Spec = "@daily" + strings.Repeat(" ", dtq.MaxScheduleSpec) }, "spec"},
		{"timezone too long", func(s *dtq.Schedule) { s.Timezone = "Europe/" + strings.Repeat("x", dtq.MaxScheduleTimezone) }, "timezone"},
	}
	for _, c := range cases {
		s := ok
		c.mod(&s)
		_, _, err := a.PutSchedule(b.ctx, s)
		var ve *dtq.ValidationError
		require.ErrorAs(t, err, &ve, c.name)
		require.Equal(t, c.field, ve.Field, c.name)
		if c.field != "name" && strings.HasSuffix(c.name, "too long") {
			require.Contains(t, ve.Message, "the limit is", c.name)
			require.Less(t, len(ve.Message), 200, "%s: the message does not quote the value", c.name)
		}
	}
	require.Zero(t, b.keyCount(t), "nothing was written")

	// At the limit is accepted.
	_, _, err := a.PutSchedule(b.ctx, dtq.Schedule{Name: "long-spec", Spec: longCron(dtq.MaxScheduleSpec), TaskType: "report"})
	require.NoError(t, err)
	require.NoError(t, a.DeleteSchedule(b.ctx, "long-spec"))

	info, created, err := a.PutSchedule(b.ctx, ok)
	require.NoError(t, err)
	require.True(t, created)
	require.Equal(t, "UTC", info.Timezone)
	require.Equal(t, "default", info.Queue)
	require.Equal(t, 5, info.Priority)
	require.Equal(t, int64(1), info.Version)
	require.False(t, info.NextRunAt.IsZero())
	require.Nil(t, info.LastTaskID)
	_, created, err = a.PutSchedule(b.ctx, ok)
	require.NoError(t, err)
	require.False(t, created)
}

func TestListSchedulesPages(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	a := b.admin(t)
	for _, n := range []string{"c", "a", "e", "b", "d"} {
		q := "one"
		if n == "b" || n == "d" {
			q = "two"
		}
		_, _, err := a.PutSchedule(b.ctx, dtq.Schedule{Name: n, Spec: "@every 1h", Queue: q, TaskType: "t"})
		require.NoError(t, err)
	}
	var names []string
	cursor := ""
	for range 10 {
		res, err := a.ListSchedules(b.ctx, &dtq.ScheduleListParams{Limit: 2, Cursor: cursor})
		require.NoError(t, err)
		for _, it := range res.Items {
			names = append(names, it.Name)
		}
		if res.NextCursor == "" {
			break
		}
		cursor = res.NextCursor
	}
	require.Equal(t, []string{"a", "b", "c", "d", "e"}, names)
	res, err := a.ListSchedules(b.ctx, &dtq.ScheduleListParams{Queue: "two"})
	require.NoError(t, err)
	require.Len(t, res.Items, 2)
	_, err = a.ListSchedules(b.ctx, &dtq.ScheduleListParams{Cursor: "!!"})
	require.ErrorIs(t, err, dtq.ErrInvalidCursor)
	_, err = a.ListSchedules(b.ctx, &dtq.ScheduleListParams{Limit: 5000})
	require.Error(t, err)
	_, err = a.GetSchedule(b.ctx, "zzz")
	require.ErrorIs(t, err, dtq.ErrScheduleNotFound)
}

// TestFourSchedulerProcesses runs four schedulers in four processes (this
// test binary re-run as children, each with its own Redis connection) on
// one "@every 1s" schedule for ten seconds: every tick must make exactly
// one task. Two of the processes accept only other task types (as dtq dev
// does): no tick may be refused for it. It prints the counts.
func TestFourSchedulerProcesses(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	a := b.admin(t)
	const procs = 4
	var children []*exec.Cmd
	var stdins []io.WriteCloser
	for i := range procs {
		child := exec.Command(os.Args[0], "-test.run=^$")
		child.Env = append(os.Environ(), childSchedulerEnv+"=1",
			"DTQ_TEST_REDIS_ADDR="+b.rc.Options().Addr, "DTQ_TEST_PREFIX="+b.prefix)
		if i%2 == 1 {
			child.Env = append(child.Env, childTaskTypesEnv+"=echo,sleep")
		}
		child.Stderr = os.Stderr
		in, err := child.StdinPipe()
		require.NoError(t, err)
		out, err := child.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, child.Start())
		line, err := bufio.NewReader(out).ReadString('\n')
		require.NoError(t, err)
		require.Equal(t, "ready\n", line)
		children, stdins = append(children, child), append(stdins, in)
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		for i, c := range children {
			_ = stdins[i].Close()
			require.NoError(t, c.Wait())
		}
	}
	t.Cleanup(stop)

	_, _, err := a.PutSchedule(b.ctx, dtq.Schedule{Name: "every-second", Spec: "@every 1s", Queue: "ticks", TaskType: "tick"})
	require.NoError(t, err)
	start := time.Now()
	// Run for ten seconds' worth of ticks, seen through the schedule's own
	// record, with a generous deadline for a loaded machine.
	first := time.Time{}
	refused := "" // a last_error seen while polling
	require.Eventually(t, func() bool {
		info, err := a.GetSchedule(b.ctx, "every-second")
		if err != nil || info.LastScheduledFor.IsZero() {
			return false
		}
		if info.LastError != nil && refused == "" {
			refused = *info.LastError
		}
		if first.IsZero() {
			first = info.LastScheduledFor.Time
		}
		return info.LastScheduledFor.Sub(first) >= 10*time.Second
	}, 60*time.Second, 20*time.Millisecond)

	// Pause: once the pause is in, no scheduler makes another task (but one
	// that had read the schedule before may still finish its tick).
	count := func() int {
		res, err := b.insp.ListTasks(b.ctx, &dtq.TaskListParams{Queue: "ticks", Limit: 1000})
		require.NoError(t, err)
		return len(res.Items)
	}
	_, err = a.PauseSchedule(b.ctx, "every-second")
	require.NoError(t, err)
	atPause := count()
	require.Never(t, func() bool { return count() > atPause+1 }, 3*time.Second, 100*time.Millisecond,
		"a paused schedule kept firing")
	stop() // the children finish what they were doing and exit
	elapsed := time.Since(start)

	listed, err := b.insp.ListTasks(b.ctx, &dtq.TaskListParams{Queue: "ticks", Limit: 1000})
	require.NoError(t, err)
	perTick := map[string]int{}
	for _, ti := range listed.Items {
		var m map[string]string
		require.NoError(t, json.Unmarshal(ti.Metadata, &m))
		require.Equal(t, "every-second", m["schedule"])
		perTick[m["scheduled_for"]]++
		require.Equal(t, "schedule:every-second:"+fmt.Sprint(mustTime(t, m["scheduled_for"]).Unix()), *ti.IdempotencyKey)
	}
	ticks := make([]string, 0, len(perTick))
	duplicates := 0
	for tick, n := range perTick {
		ticks = append(ticks, tick)
		duplicates += n - 1
	}
	sort.Strings(ticks)
	missed := 0
	for i := 1; i < len(ticks); i++ {
		gap := mustTime(t, ticks[i]).Sub(mustTime(t, ticks[i-1]))
		missed += int(gap/time.Second) - 1
	}
	fired := sysEventCount(t, b, "SCHEDULE_FIRED")
	fmt.Printf("schedules: %d scheduler processes (%d accepting only other task types), @every 1s for %v: %d tasks for %d ticks, %d duplicates, %d ticks missed, %d SCHEDULE_FIRED events\n",
		procs, procs/2, elapsed.Round(100*time.Millisecond), len(listed.Items), len(ticks), duplicates, missed, fired)
	require.Empty(t, refused, "a tick was recorded as refused")
	info, err := a.GetSchedule(b.ctx, "every-second")
	require.NoError(t, err)
	require.Nil(t, info.LastError)
	require.NotNil(t, info.LastTaskID)
	require.Zero(t, duplicates, "one task per tick")
	require.GreaterOrEqual(t, len(ticks), 11)
	require.Equal(t, len(listed.Items), fired, "SCHEDULE_FIRED once per task")

	// Trigger fires at once, while paused.
	res, err := a.TriggerSchedule(b.ctx, "every-second")
	require.NoError(t, err)
	ti, err := b.insp.GetTask(b.ctx, res.TaskID)
	require.NoError(t, err)
	require.Equal(t, dtqtype.StatusQueued, ti.Status)
}

// longCron is a valid five-field cron expression of n bytes (n ≥ 9): a
// minute list of zeros.
func longCron(n int) string {
	tail := " * * * *"
	minute := "0" + strings.Repeat(",0", (n-len(tail)-1)/2)
	if (n-len(tail))%2 == 0 {
		minute = "00" + minute[1:]
	}
	return minute + tail
}

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339Nano, s)
	require.NoError(t, err)
	return v
}

func sysEventCount(t *testing.T, b *bundle, typ string) int {
	t.Helper()
	msgs, err := b.rc.XRange(b.ctx, b.keys.SysEvents(), "-", "+").Result()
	require.NoError(t, err)
	n := 0
	for _, m := range msgs {
		if m.Values["type"] == typ {
			n++
		}
	}
	return n
}

// A worker runs a scheduler (one with DisableScheduler does not, but runs
// its tasks); the handler gets the schedule's metadata.
func TestWorkerRunsTheScheduler(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	a := b.admin(t)
	got := make(chan map[string]any, 10)
	for _, disabled := range []bool{true, false} {
		w := b.worker(t, func(c *dtq.WorkerConfig) { c.DisableScheduler = disabled; c.Queues = map[string]int{"ticks": 1} })
		w.HandleFunc("tick", func(ctx context.Context, task *dtq.Task) (any, error) {
			var m map[string]any
			_ = json.Unmarshal(task.Metadata, &m)
			got <- m
			return nil, nil
		})
		workertest.Run(t, w)
	}
	_, _, err := a.PutSchedule(b.ctx, dtq.Schedule{Name: "every-second", Spec: "@every 1s", Queue: "ticks", TaskType: "tick"})
	require.NoError(t, err)
	select {
	case m := <-got:
		require.Equal(t, "every-second", m["schedule"])
		require.NotEmpty(t, m["scheduled_for"])
	case <-time.After(30 * time.Second):
		t.Fatal("no scheduled task ran")
	}
	_, err = a.PauseSchedule(b.ctx, "every-second")
	require.NoError(t, err)
}
