package cli

import (
	"net/http"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/dtq-io/dtq/dtqtype"
)

// scheduleView is a schedule as the API answers it.
type scheduleView struct{ dtqtype.ScheduleInfo }

func (s *scheduleView) state() string { return pausedState(s.Paused) }

func schedulePath(name string) string { return "/api/v1/schedules/" + pathID(name) }

func newSchedulesCmd(e *env) *cobra.Command {
	r := &remote{}
	schedules := pausable{group: "schedules", noun: "schedule", arg: "<name>", example: "nightly-report", path: schedulePath}
	cmd := groupCmd(e, "schedules", "Create, inspect, pause, resume and trigger periodic tasks", r)
	cmd.AddCommand(newSchedulesListCmd(r), newSchedulesGetCmd(r), newSchedulesPutCmd(r), newSchedulesDeleteCmd(r),
		newPauseCmd(r, schedules, "pause", "Stop a schedule from firing (admin)",
			"Stop a schedule from firing. Ticks that pass while it is paused are never\nfired; a trigger still works."),
		newPauseCmd(r, schedules, "resume", "Let a paused schedule fire again (admin)",
			"Let a paused schedule fire again, from its next tick after now."),
		newSchedulesTriggerCmd(r))
	return cmd
}

func newSchedulesListCmd(r *remote) *cobra.Command {
	var queue string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List schedules with their next and last run",
		Long:  "List every schedule in name order. Times are UTC.",
		Args:  cobra.NoArgs,
	}
	cmd.Flags().StringVar(&queue, "queue", "", "only schedules of this queue")
	cmd.RunE = runE(func(cmd *cobra.Command, _ []string) error {
		l := listing[scheduleView]{
			path: "/api/v1/schedules", all: true,
			header: []string{"NAME", "SPEC", "TIMEZONE", "QUEUE", "TASK_TYPE", "STATE", "NEXT_RUN", "LAST_RUN", "LAST_TASK"},
			row: func(s scheduleView) []string {
				return []string{s.Name, s.Spec, s.Timezone, s.Queue, s.TaskType, s.state(),
					wireTime(s.NextRunAt), wireTime(s.LastRunAt), optString(s.LastTaskID)}
			},
		}
		if queue != "" {
			l.query = map[string][]string{"queue": {queue}}
		}
		return printList(cmd, r, l)
	})
	return cmd
}

func newSchedulesGetCmd(r *remote) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "get <name>",
		Short:   "Show one schedule",
		Example: "  dtq schedules get nightly-report",
		Args:    cobra.ExactArgs(1),
	}
	cmd.RunE = showRun(r, schedulePath, printSchedule)
	return cmd
}

func printSchedule(p *printer, v *scheduleView) error {
	return p.fields([][2]string{
		{"name", v.Name},
		{"spec", v.Spec},
		{"timezone", v.Timezone},
		{"state", v.state()},
		{"queue", v.Queue},
		{"task_type", v.TaskType},
		{"payload", compactJSON(v.Payload)},
		{"priority", strconv.Itoa(v.Priority)},
		{"max_attempts", strconv.Itoa(v.MaxAttempts)},
		{"timeout_ms", itoa(v.TimeoutMS)},
		{"metadata", compactJSON(v.Metadata)},
		{"next_run_at", wireTime(v.NextRunAt)},
		{"last_run_at", wireTime(v.LastRunAt)},
		{"last_task_id", optString(v.LastTaskID)},
		{"last_scheduled_for", wireTime(v.LastScheduledFor)},
		{"last_error", optString(v.LastError)},
		{"version", itoa(v.Version)},
	})
}

// scheduleFlags are the options of `dtq schedules put`.
type scheduleFlags struct {
	spec, timezone, queue, taskType, payload, metadata string
	priority, maxAttempts                              int
	timeoutMS                                          int64
}

func newSchedulesPutCmd(r *remote) *cobra.Command {
	f := &scheduleFlags{}
	cmd := &cobra.Command{
		Use:   "put <name> --spec <spec> --type <task type>",
		Short: "Create or replace a schedule (admin)",
		Long: "Create a schedule, or replace the definition of the schedule of that name\n" +
			"(its paused state and last run stay). --spec is \"@every <duration>\" (at\n" +
			"least 1s; ticks on multiples of it since the Unix epoch), five cron fields\n" +
			"\"minute hour day-of-month month day-of-week\" read in --timezone, or\n" +
			"@hourly, @daily, @weekly, @monthly, @yearly. Every tick submits one task.",
		Example: `  dtq schedules put heartbeat --spec "@every 1m" --type echo
  dtq schedules put weekday-report --spec "0 9 * * 1-5" --timezone Europe/Paris \
      --type report --queue reports --payload '{"kind": "daily"}'`,
		Args: cobra.ExactArgs(1),
	}
	fs := cmd.Flags()
	fs.StringVar(&f.spec, "spec", "", `when to fire: "@every 1m", "*/5 * * * *", "0 9 * * 1-5", @daily ... (required)`)
	fs.StringVar(&f.timezone, "timezone", "", "IANA timezone the cron fields are read in (default UTC)")
	fs.StringVar(&f.taskType, "type", "", "task type of the tasks (required)")
	fs.StringVar(&f.queue, "queue", "", "queue of the tasks (default default)")
	fs.StringVar(&f.payload, "payload", "", "payload: a JSON object, or @file to read it from a file (default {})")
	fs.StringVar(&f.metadata, "metadata", "", "metadata added to every task: a JSON object, or @file")
	fs.IntVar(&f.priority, "priority", 5, "priority 0..9, 9 highest")
	fs.IntVar(&f.maxAttempts, "max-attempts", 0, "attempts per task (default the API's)")
	fs.Int64Var(&f.timeoutMS, "timeout-ms", 0, "attempt timeout in milliseconds (default the API's)")
	cmd.RunE = runE(func(cmd *cobra.Command, args []string) error {
		body := map[string]any{"spec": f.spec, "task_type": f.taskType}
		changed := cmd.Flags().Changed
		for name, v := range map[string]string{"timezone": f.timezone, "queue": f.queue} {
			if v != "" {
				body[name] = v
			}
		}
		for name, v := range map[string]string{"payload": f.payload, "metadata": f.metadata} {
			if v != "" {
				raw, err := jsonArg("--"+name, v)
				if err != nil {
					return usageError(err)
				}
				body[name] = raw
			}
		}
		if changed("priority") {
			body["priority"] = f.priority
		}
		if changed("max-attempts") {
			body["max_attempts"] = f.maxAttempts
		}
		if changed("timeout-ms") {
			body["timeout_ms"] = f.timeoutMS
		}
		var v scheduleView
		req := request{method: http.MethodPut, path: schedulePath(args[0]), body: body}
		return r.call(cmd, req, &v, func(p *printer, res *apiResponse) error {
			verb := "replaced"
			if res.status == http.StatusCreated {
				verb = "created"
			}
			next := "none (paused)"
			if !v.NextRunAt.IsZero() {
				next = wireTime(v.NextRunAt)
			}
			return p.textf("schedule %s %s; next run %s", v.Name, verb, next)
		})
	})
	return cmd
}

func newSchedulesDeleteCmd(r *remote) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "delete <name>",
		Short:   "Delete a schedule; the tasks it made stay (admin)",
		Example: "  dtq schedules delete nightly-report",
		Args:    cobra.ExactArgs(1),
	}
	cmd.RunE = runE(func(cmd *cobra.Command, args []string) error {
		return r.call(cmd, request{method: http.MethodDelete, path: schedulePath(args[0])}, nil, func(p *printer, _ *apiResponse) error {
			return p.textf("deleted schedule %s", args[0])
		})
	})
	return cmd
}

func newSchedulesTriggerCmd(r *remote) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "trigger <name>",
		Short: "Submit a schedule's task now (admin)",
		Long: "Submit a schedule's task now, outside its ticks, also while it is paused.\n" +
			"Each call makes a task (metadata triggered: true).",
		Example: "  dtq schedules trigger nightly-report",
		Args:    cobra.ExactArgs(1),
	}
	cmd.RunE = runE(func(cmd *cobra.Command, args []string) error {
		var t dtqtype.TaskInfo
		return r.call(cmd, request{method: http.MethodPost, path: schedulePath(args[0]) + "/trigger"}, &t,
			func(p *printer, _ *apiResponse) error {
				return p.textf("schedule %s triggered: task %s queued on %s", args[0], t.ID, t.Queue)
			})
	})
	return cmd
}
