package cli

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"

	"github.com/spf13/cobra"
)

// dlqFilterFlags select dead-letter entries, for list and the bulk actions.
type dlqFilterFlags struct {
	queue, typ, errorClass string
}

func (f *dlqFilterFlags) add(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVarP(&f.queue, "queue", "q", "", "only this queue")
	fs.StringVar(&f.typ, "type", "", "only this task type")
	fs.StringVar(&f.errorClass, "error-class", "", "only this error class (e.g. Timeout, UnknownTaskType, WorkerLost)")
}

func (f *dlqFilterFlags) any() bool { return f.queue != "" || f.typ != "" || f.errorClass != "" }

func newDLQCmd(e *env) *cobra.Command {
	r := &remote{}
	cmd := groupCmd(e, "dlq", "Inspect, requeue and discard dead-lettered tasks", r)
	cmd.AddCommand(newDLQListCmd(r), newDLQGetCmd(r), newDLQRequeueCmd(r), newDLQDiscardCmd(r), newDLQPurgeCmd(r))
	return cmd
}

func dlqPath(id string) string { return "/api/v1/dlq/" + pathID(id) }

func newDLQListCmd(r *remote) *cobra.Command {
	var (
		f      dlqFilterFlags
		limit  int
		cursor string
		all    bool
	)
	cmd := &cobra.Command{
		Use:     "list",
		Short:   "List dead-lettered tasks, newest first, with their last error",
		Example: "  dtq dlq list --queue emails --error-class Timeout",
		Args:    cobra.NoArgs,
	}
	f.add(cmd)
	cmd.Flags().IntVar(&limit, "limit", 0, "entries per page, 1..1000 (default 50)")
	cmd.Flags().StringVar(&cursor, "cursor", "", "continue from a previous page's cursor")
	cmd.Flags().BoolVar(&all, "all", false, "read every page")
	cmd.RunE = runE(func(cmd *cobra.Command, _ []string) error {
		q := filterQuery(map[string]string{"queue": f.queue, "type": f.typ, "error_class": f.errorClass, "cursor": cursor}, limit)
		return printList(cmd, r, listing[taskView]{
			path: "/api/v1/dlq", query: q, all: all, hint: "dtq dlq list",
			header: []string{"TASK_ID", "QUEUE", "TYPE", "ERROR_CLASS", "ATTEMPTS", "FAILED_AT", "ERROR"},
			row: func(t taskView) []string {
				return []string{t.ID, t.Queue, t.Type, t.Execution.ErrorClass, strconv.Itoa(t.Attempt),
					wireTime(t.FailedAt), truncate(cell(t.Execution.ErrorMessage), 60)}
			},
		})
	})
	return cmd
}

func newDLQGetCmd(r *remote) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "get <task-id>",
		Short:   "Show a dead-lettered task with its payload and last error",
		Example: "  dtq dlq get 0199d5e8a93c7d2a8f0e4b2c1d3e5f60",
		Args:    cobra.ExactArgs(1),
	}
	cmd.RunE = showRun(r, dlqPath, printTask)
	return cmd
}

func newDLQRequeueCmd(r *remote) *cobra.Command {
	var (
		f   dlqFilterFlags
		all bool
	)
	cmd := &cobra.Command{
		Use:   "requeue (<task-id> | --all [--queue q] [--type t] [--error-class c])",
		Short: "Put dead-lettered tasks back in their queue (admin)",
		Long: "Put a dead-lettered task back in its queue: it starts a new round at\n" +
			"attempt 1, and its idempotency key is in progress again. The task's\n" +
			"previous_attempts counts its requeues (rounds), not its attempts; the\n" +
			"attempt history of tasks get keeps the earlier rounds' attempts (up to 20\n" +
			"records). With --all, every entry matching the filters is requeued, in\n" +
			"batches, until none is left.",
		Example: "  dtq dlq requeue 0199d5e8a93c7d2a8f0e4b2c1d3e5f60\n  dtq dlq requeue --all --queue emails --error-class Timeout",
		Args:    cobra.MaximumNArgs(1),
	}
	f.add(cmd)
	cmd.Flags().BoolVar(&all, "all", false, "requeue every entry matching the filters")
	cmd.RunE = runE(func(cmd *cobra.Command, args []string) error {
		switch {
		case all && len(args) == 1:
			return usageError(errors.New("give a task id or --all, not both"))
		case !all && len(args) == 0:
			return usageError(errors.New("give a task id, or --all to requeue every matching entry"))
		case !all && f.any():
			return usageError(errors.New("--queue, --type and --error-class filter --all; a task id needs none"))
		}
		if all {
			return dlqBulk(cmd, r, "/api/v1/dlq/requeue", &f, "requeued")
		}
		return taskAction(cmd, r, dlqPath(args[0])+"/requeue", func(p *printer, t *taskView) error {
			// previous_attempts counts requeues, not attempts: the task
			// starts its round previous_attempts+1 at attempt 1.
			return p.textf("requeued task %s: %s, attempt %s of round %d (requeued %s)", t.ID, t.Status, t.attempts(),
				t.PreviousAttempts+1, times(t.PreviousAttempts))
		})
	})
	return cmd
}

func newDLQDiscardCmd(r *remote) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "discard <task-id>",
		Short: "Remove a task from the dead-letter queue (admin)",
		Long: "Remove a task from the dead-letter queue. The task stays dead_lettered,\n" +
			"marked discarded in its metadata, and is deleted when its retention ends.",
		Example: "  dtq dlq discard 0199d5e8a93c7d2a8f0e4b2c1d3e5f60",
		Args:    cobra.ExactArgs(1),
	}
	cmd.RunE = runE(func(cmd *cobra.Command, args []string) error {
		return taskAction(cmd, r, dlqPath(args[0])+"/discard", func(p *printer, t *taskView) error {
			return p.textf("discarded task %s from the dead-letter queue", t.ID)
		})
	})
	return cmd
}

func newDLQPurgeCmd(r *remote) *cobra.Command {
	var (
		f   dlqFilterFlags
		yes bool
	)
	cmd := &cobra.Command{
		Use:   "purge [--queue q] [--type t] [--error-class c] --yes",
		Short: "Discard every dead-letter entry matching the filters (admin)",
		Long: "Discard every dead-letter entry matching the filters (all of them when none\n" +
			"is given), as dtq dlq discard does one by one. It needs --yes.",
		Example: "  dtq dlq purge --queue emails --type send_receipt --yes",
		Args:    cobra.NoArgs,
	}
	f.add(cmd)
	cmd.Flags().BoolVar(&yes, "yes", false, "really discard the matching entries")
	cmd.RunE = runE(func(cmd *cobra.Command, _ []string) error {
		what := "discard every dead-letter entry"
		if f.any() {
			what = "discard the matching dead-letter entries"
		}
		if err := requireYes(yes, what); err != nil {
			return err
		}
		return dlqBulk(cmd, r, "/api/v1/dlq/purge", &f, "discarded")
	})
	return cmd
}

// bulkAnswer is the answer of a bulk DLQ action.
type bulkAnswer struct {
	Matched    int64   `json:"matched"`
	Processed  int64   `json:"processed"`
	NextCursor *string `json:"next_cursor"`
}

// dlqBulk runs a bulk action until the API has no cursor left and prints
// the totals (with -o json: the API's answer shape, totals summed, the
// cursor null).
func dlqBulk(cmd *cobra.Command, r *remote, path string, f *dlqFilterFlags, verb string) error {
	s, err := r.open(cmd)
	if err != nil {
		return err
	}
	defer s.close()
	total, err := runBulk(cmd.Context(), s.api, path, f)
	if err != nil {
		if total.Processed > 0 {
			notef(r.e.stderr, "stopped after %s %d entries", verb, total.Processed)
		}
		return err
	}
	if s.out.json {
		b, err := json.Marshal(total)
		if err != nil {
			return err
		}
		return s.out.raw(b)
	}
	return s.out.textf("%s %d of %d matching dead-letter entries", verb, total.Processed, total.Matched)
}

func runBulk(ctx context.Context, api *apiClient, path string, f *dlqFilterFlags) (bulkAnswer, error) {
	var total bulkAnswer
	cursor := ""
	for {
		body := map[string]string{}
		for k, v := range map[string]string{"queue": f.queue, "type": f.typ, "error_class": f.errorClass, "cursor": cursor} {
			if v != "" {
				body[k] = v
			}
		}
		var page bulkAnswer
		if _, err := api.post(ctx, path, body, &page); err != nil {
			return total, err
		}
		total.Matched += page.Matched
		total.Processed += page.Processed
		if page.NextCursor == nil || *page.NextCursor == "" {
			return total, nil
		}
		if *page.NextCursor == cursor {
			return total, errors.New("the API returned the same cursor twice; stopping")
		}
		cursor = *page.NextCursor
	}
}
