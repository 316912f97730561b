package dtq

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/internal/cursor"
	"github.com/dtq-io/dtq/internal/rdb"
	"github.com/dtq-io/dtq/internal/schedule"
)

// Schedule describes a periodic task (docs/schedules.md): on every tick of Spec, in
// Timezone, one task of TaskType is submitted to Queue. Zero values select
// the defaults noted, as for a Submission.
type Schedule struct {
	// Name identifies the schedule: ^[a-z0-9][a-z0-9_.-]{0,127}$. Required.
	Name string
	// Spec is "@every <Go duration ≥ 1s>" (ticks on the multiples of the
	// duration since the Unix epoch), a five-field cron expression
	// ("minute hour day-of-month month day-of-week", e.g. "0 9 * * 1-5"), or
	// @hourly, @daily, @weekly, @monthly or @yearly. Required.
	Spec string
	// Timezone is the IANA timezone cron fields are read in. Default "UTC".
	Timezone string
	// Queue is the queue the tasks go to. Default "default".
	Queue string
	// TaskType is the type of the tasks. Required.
	TaskType string
	// Payload is every task's payload, a JSON object as for
	// Submission.Payload. nil means {}.
	Payload any
	// Priority is 0..9. nil means 5.
	Priority *int
	// MaxAttempts is 1..the configured cap. 0 means min(5, cap).
	MaxAttempts int
	// Timeout bounds one attempt, 1ms..1h. 0 means the configured default.
	Timeout time.Duration
	// Metadata is a JSON object added to every task's metadata, next to the
	// "schedule" and "scheduled_for" fields dtq sets (which win). The whole
	// must fit the 4 KiB metadata limit.
	Metadata any
}

// ErrScheduleNotFound is returned when no schedule has that name.
var ErrScheduleNotFound = errors.New("dtq: schedule not found")

// Bounds of a schedule's strings, in bytes, so that a definition stays
// small to store, list and show. A five-field cron expression with long
// lists stays well under MaxScheduleSpec; the longest IANA timezone name is
// about half MaxScheduleTimezone. Queue and task type have a submission's
// bounds (64 and 128).
const (
	MaxScheduleName     = 128 // the longest schedule name
	MaxScheduleSpec     = 256
	MaxScheduleTimezone = 64
)

// ValidScheduleName reports whether name is an acceptable schedule name:
// ^[a-z0-9][a-z0-9_.-]{0,127}$.
func ValidScheduleName(name string) bool {
	if len(name) == 0 || len(name) > MaxScheduleName {
		return false
	}
	for i := range len(name) {
		c := name[i]
		ok := c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || i > 0 && (c == '_' || c == '.' || c == '-')
		if !ok {
			return false
		}
	}
	return true
}

const scheduleNameRule = "must match ^[a-z0-9][a-z0-9_.-]{0,127}$ (lowercase letters, digits, '_', '.' and '-')"

// scheduleKey is the idempotency key of the task of schedule name's tick.
func scheduleKey(name string, tick time.Time) string {
	return "schedule:" + name + ":" + strconv.FormatInt(tick.Unix(), 10)
}

// Event types on the _sys stream.
const (
	// eventScheduleFired is appended once per task a schedule makes.
	eventScheduleFired = "SCHEDULE_FIRED"
)

// PutSchedule creates schedule s, or replaces the definition of the
// schedule of that name (its paused state and last run survive). The next
// tick is computed from now. It validates s as Submit validates a task, with
// the limits of AdminConfig.Client: errors are *ValidationError naming the
// field ("name", "spec", "timezone", "queue", "task_type", ...). It reports
// whether the schedule is new.
func (a *Admin) PutSchedule(ctx context.Context, s Schedule) (*dtqtype.ScheduleInfo, bool, error) {
	if !ValidScheduleName(s.Name) {
		return nil, false, invalid("name", scheduleNameRule)
	}
	// Checked before parsing, so that no message quotes an oversized value.
	if len(s.Spec) > MaxScheduleSpec {
		return nil, false, invalid("spec", "is %d bytes; the limit is %d bytes", len(s.Spec), MaxScheduleSpec)
	}
	if len(s.Timezone) > MaxScheduleTimezone {
		return nil, false, invalid("timezone", "is %d bytes; the limit is %d bytes (an IANA name like \"Europe/Paris\")", len(s.Timezone), MaxScheduleTimezone)
	}
	spec, err := schedule.Parse(s.Spec, s.Timezone)
	if err != nil {
		if se, ok := errors.AsType[*schedule.Error](err); ok {
			return nil, false, invalid(se.Field, "%s", se.Message)
		}
		return nil, false, err
	}
	tz := s.Timezone
	if tz == "" {
		tz = "UTC"
	}
	now := a.clock()
	sub := Submission{Queue: s.Queue, Type: s.TaskType, Payload: s.Payload, Priority: s.Priority,
		MaxAttempts: s.MaxAttempts, Timeout: s.Timeout, Metadata: s.Metadata}
	n, err := normalize(&sub, &a.client.lim, now)
	if err != nil {
		return nil, false, err
	}
	if meta, err := scheduleMetadata(n.metadata, s.Name, now, false); err != nil {
		return nil, false, err
	} else if len(meta) > MaxMetadataBytes {
		return nil, false, invalid("metadata", "is %d bytes with the schedule fields dtq adds; the limit is %d bytes", len(meta), MaxMetadataBytes)
	}
	def := []any{"spec", s.Spec, "timezone", tz, "queue", n.queue, "task_type", n.typ,
		"payload", n.payload, "priority", n.priority, "max_attempts", n.maxAttempts,
		"timeout_ms", n.timeoutMS, "metadata", n.metadata}
	created, _, _, err := a.rdb.PutSchedule(ctx, s.Name, now, spec.Next(now).UnixMilli(), def)
	if err != nil {
		return nil, false, err
	}
	info, err := a.GetSchedule(ctx, s.Name)
	return info, created, err
}

// GetSchedule returns schedule name, or ErrScheduleNotFound.
func (a *Admin) GetSchedule(ctx context.Context, name string) (*dtqtype.ScheduleInfo, error) {
	if !ValidScheduleName(name) {
		return nil, invalid("name", scheduleNameRule)
	}
	m, err := a.rdb.GetSchedule(ctx, name)
	if err != nil {
		return nil, mapNotFound(err, ErrScheduleNotFound)
	}
	return decodeSchedule(m), nil
}

// ListSchedules returns a page of schedules in name order. With a Queue
// filter a page may be short, even empty, while more remain. A bad filter
// or Limit is a *ValidationError, a bad cursor ErrInvalidCursor.
func (a *Admin) ListSchedules(ctx context.Context, params *ScheduleListParams) (*dtqtype.ListResult[*dtqtype.ScheduleInfo], error) {
	p := listParams(params)
	if err := checkList(&p.Limit, 50, p.Queue); err != nil {
		return nil, err
	}
	after := ""
	if p.Cursor != "" {
		c := cursor.Read(p.Cursor, cursor.Schedules)
		if after = c.String(ValidScheduleName); c.Err() != nil {
			return nil, c.Err()
		}
	}
	ms, next, err := a.rdb.ListSchedules(ctx, after, p.Limit)
	if err != nil {
		return nil, err
	}
	res := &dtqtype.ListResult[*dtqtype.ScheduleInfo]{Items: make([]*dtqtype.ScheduleInfo, 0, len(ms))}
	for _, m := range ms {
		if info := decodeSchedule(m); p.Queue == "" || info.Queue == p.Queue {
			res.Items = append(res.Items, info)
		}
	}
	if next != "" {
		res.NextCursor = cursor.Encode(cursor.Schedules, next)
	}
	return res, nil
}

// DeleteSchedule removes schedule name; tasks it made are left alone. An
// unknown name is ErrScheduleNotFound.
func (a *Admin) DeleteSchedule(ctx context.Context, name string) error {
	if !ValidScheduleName(name) {
		return invalid("name", scheduleNameRule)
	}
	ok, err := a.rdb.DeleteSchedule(ctx, name)
	if err == nil && !ok {
		err = ErrScheduleNotFound
	}
	return err
}

// PauseSchedule stops schedule name from firing and reports whether it was
// running. Ticks that pass while it is paused are never fired.
func (a *Admin) PauseSchedule(ctx context.Context, name string) (bool, error) {
	if !ValidScheduleName(name) {
		return false, invalid("name", scheduleNameRule)
	}
	changed, err := a.rdb.SetSchedulePaused(ctx, name, true, a.clock(), 0)
	return changed, mapNotFound(err, ErrScheduleNotFound)
}

// ResumeSchedule lets schedule name fire again from its next tick after
// now, and reports whether it was paused.
func (a *Admin) ResumeSchedule(ctx context.Context, name string) (bool, error) {
	info, err := a.GetSchedule(ctx, name)
	if err != nil {
		return false, err
	}
	spec, err := schedule.Parse(info.Spec, info.Timezone)
	if err != nil {
		return false, fmt.Errorf("dtq: stored schedule %s: %w", name, err)
	}
	now := a.clock()
	changed, err := a.rdb.SetSchedulePaused(ctx, name, false, now, spec.Next(now).UnixMilli())
	return changed, mapNotFound(err, ErrScheduleNotFound)
}

// TriggerSchedule submits schedule name's task now, outside its ticks (also
// while the schedule is paused), and records it as the schedule's last run.
// The task carries metadata "triggered": true and no idempotency key: each
// call makes a task. Submission errors are Submit's (*QueueFullError, ...).
func (a *Admin) TriggerSchedule(ctx context.Context, name string) (*SubmitResult, error) {
	info, err := a.GetSchedule(ctx, name)
	if err != nil {
		return nil, err
	}
	now := a.clock()
	sub, err := scheduleSubmission(info, now, true)
	if err != nil {
		return nil, err
	}
	res, err := a.client.Submit(ctx, sub)
	if err != nil {
		return nil, err
	}
	if _, err := a.rdb.RecordSchedule(ctx, now, rdb.ScheduleRun{Name: name, TaskID: res.TaskID}); err != nil && !errors.Is(err, rdb.ErrNotFound) {
		return res, err
	}
	err = a.rdb.AppendSysEvent(ctx, a.settings.EventsMaxLen, scheduleFiredEvent(info, res.TaskID, now, now, true))
	return res, err
}

// scheduleSubmission is the submission of info's task for tick. A tick's
// task carries the idempotency key that makes every scheduler agree on it;
// a triggered one carries none.
func scheduleSubmission(info *dtqtype.ScheduleInfo, tick time.Time, triggered bool) (Submission, error) {
	meta, err := scheduleMetadata(info.Metadata, info.Name, tick, triggered)
	if err != nil {
		return Submission{}, err
	}
	sub := Submission{Queue: info.Queue, Type: info.TaskType, Payload: info.Payload, Priority: new(info.Priority),
		MaxAttempts: info.MaxAttempts, Timeout: time.Duration(info.TimeoutMS) * time.Millisecond, Metadata: json.RawMessage(meta)}
	if !triggered {
		sub.IdempotencyKey = scheduleKey(info.Name, tick)
	}
	return sub, nil
}

// scheduleMetadata adds the schedule fields to a schedule's metadata.
func scheduleMetadata(meta []byte, name string, tick time.Time, triggered bool) ([]byte, error) {
	m := map[string]json.RawMessage{}
	if len(bytes.TrimSpace(meta)) > 0 {
		if err := json.Unmarshal(meta, &m); err != nil {
			return nil, invalid("metadata", "must be a JSON object")
		}
	}
	m["schedule"] = mustJSON(name)
	m["scheduled_for"] = mustJSON(tick.UTC().Format(dtqtype.TimeLayout))
	if triggered {
		m["triggered"] = json.RawMessage("true")
	} else {
		delete(m, "triggered")
	}
	return json.Marshal(m)
}

func scheduleFiredEvent(info *dtqtype.ScheduleInfo, taskID string, tick, now time.Time, triggered bool) []any {
	meta := mustJSON(map[string]any{"schedule": info.Name, "queue": info.Queue,
		"scheduled_for": tick.UTC().Format(dtqtype.TimeLayout), "triggered": triggered})
	return []any{"type", eventScheduleFired, "task_id", taskID, "task_type", info.TaskType,
		"ts", now.UnixMilli(), "meta", string(meta)}
}

// decodeSchedule turns a schedule hash into its API form.
func decodeSchedule(m map[string]string) *dtqtype.ScheduleInfo {
	num := func(f string) int64 { n, _ := strconv.ParseInt(m[f], 10, 64); return n }
	opt := func(f string) *string {
		if v, ok := m[f]; ok && v != "" {
			return &v
		}
		return nil
	}
	raw := func(f string) json.RawMessage {
		if v := m[f]; v != "" {
			return json.RawMessage(v)
		}
		return json.RawMessage("{}")
	}
	info := &dtqtype.ScheduleInfo{
		Name: m["name"], Spec: m["spec"], Timezone: m["timezone"], Queue: m["queue"], TaskType: m["task_type"],
		Payload: raw("payload"), Priority: int(num("priority")), MaxAttempts: int(num("max_attempts")),
		TimeoutMS: num("timeout_ms"), Metadata: raw("metadata"), Paused: m["paused"] == "1",
		LastRunAt: dtqtype.MillisTime(num("last_run_at")), LastTaskID: opt("last_task_id"),
		LastScheduledFor: dtqtype.MillisTime(num("last_tick")),
		LastError:        opt("last_error"), LastErrorAt: dtqtype.MillisTime(num("last_error_at")),
		CreatedAt: dtqtype.MillisTime(num("created_at")), UpdatedAt: dtqtype.MillisTime(num("updated_at")),
		Version: num("version"),
	}
	if !info.Paused {
		info.NextRunAt = dtqtype.MillisTime(num("next_run_at"))
	}
	return info
}
