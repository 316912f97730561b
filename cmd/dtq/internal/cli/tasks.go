package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/dtqtype"
)

// taskView is a task as the API answers it; DLQ entries add failed_at.
type taskView struct {
	dtqtype.TaskInfo
	FailedAt dtqtype.Time `json:"failed_at"`
}

// attempts is "attempt/max", e.g. "2/5".
func (t *taskView) attempts() string { return fmt.Sprintf("%d/%d", t.Attempt, t.MaxAttempts) }

// lastError is "Class: message", or "" when the last attempt did not fail.
func (t *taskView) lastError() string {
	x := t.Execution
	switch {
	case x.ErrorClass != "" && x.ErrorMessage != "":
		return x.ErrorClass + ": " + x.ErrorMessage
	case x.ErrorClass != "":
		return x.ErrorClass
	}
	return x.ErrorMessage
}

func (t *taskView) terminal() bool { return t.Status.Terminal() }

// progressText shows a task's progress: a number as a percentage ("40%"),
// an object as its compact JSON; "" when the handler reported none.
func progressText(v json.RawMessage) string {
	c := compactJSON(v)
	if _, err := strconv.ParseFloat(c, 64); err == nil {
		return c + "%"
	}
	return c
}

// times is a count of occurrences: "1 time", "2 times".
func times(n int) string {
	if n == 1 {
		return "1 time"
	}
	return strconv.Itoa(n) + " times"
}

// taskFields is the detail view of one task.
func taskFields(t *taskView) [][2]string {
	kv := [][2]string{
		{"task_id", t.ID},
		{"queue", t.Queue},
		{"task_type", t.Type},
		{"status", string(t.Status)},
		{"priority", strconv.Itoa(t.Priority)},
		{"attempt", t.attempts()},
	}
	if p := progressText(t.Progress); p != "" {
		kv = append(kv, [2]string{"progress", p})
		if t.ProgressAt != nil {
			kv = append(kv, [2]string{"progress_at", wireTime(*t.ProgressAt)})
		}
	}
	if t.PreviousAttempts > 0 {
		// previous_attempts counts DLQ requeues (rounds), not attempts: a
		// task that ran twice before one requeue has 1.
		kv = append(kv, [2]string{"requeued", times(t.PreviousAttempts)})
	}
	kv = append(kv, [][2]string{
		{"timeout_ms", itoa(t.TimeoutMS)},
		{"idempotency_key", optString(t.IdempotencyKey)},
	}...)
	if t.DedupKey != "" {
		kv = append(kv, [2]string{"dedup_key", t.DedupKey})
	}
	kv = append(kv, [][2]string{
		{"created_at", wireTime(t.CreatedAt)},
		{"available_at", wireTime(t.AvailableAt)},
		{"expires_at", wireTime(t.ExpiresAt)},
	}...)
	if !t.FailedAt.IsZero() {
		kv = append(kv, [2]string{"failed_at", wireTime(t.FailedAt)})
	}
	if t.CancelRequested {
		kv = append(kv, [2]string{"cancel_requested", "yes"})
	}
	kv = append(kv, [2]string{"payload", compactJSON(t.Payload)}, [2]string{"metadata", compactJSON(t.Metadata)})
	x := t.Execution
	if !x.StartedAt.IsZero() || x.WorkerID != "" {
		kv = append(kv,
			[2]string{"worker_id", x.WorkerID},
			[2]string{"started_at", wireTime(x.StartedAt)},
			[2]string{"finished_at", wireTime(x.FinishedAt)},
			[2]string{"duration_ms", optInt(x.DurationMS)})
	}
	if e := t.lastError(); e != "" {
		kv = append(kv, [2]string{"error", e})
	}
	if x.RetryDelayMS != nil {
		kv = append(kv, [2]string{"retry_delay_ms", optInt(x.RetryDelayMS)})
	}
	result := compactJSON(t.Result)
	switch {
	case t.ResultTruncated:
		result = "(too large: not stored)"
	case t.ResultExpired:
		result = "(expired)"
	}
	if result != "" || t.Status == dtqtype.StatusSucceeded {
		kv = append(kv, [2]string{"result", result})
	}
	return kv
}

// printTask prints one task: its fields, then its past attempts.
func printTask(p *printer, t *taskView) error {
	if err := p.fields(taskFields(t)); err != nil {
		return err
	}
	if len(t.Attempts) == 0 {
		return nil
	}
	if err := p.textf("\nATTEMPTS"); err != nil {
		return err
	}
	rows := make([][]string, 0, len(t.Attempts))
	for _, a := range t.Attempts {
		e := a.ErrorClass
		if a.ErrorMessage != "" {
			e = strings.TrimPrefix(e+": "+a.ErrorMessage, ": ")
		}
		rows = append(rows, []string{strconv.Itoa(a.Attempt), a.Outcome, a.WorkerID, wireTime(a.StartedAt),
			itoa(a.DurationMS), truncate(e, 80)})
	}
	return p.table([]string{"ATTEMPT", "OUTCOME", "WORKER", "STARTED", "DURATION_MS", "ERROR"}, rows)
}

func taskPath(id string) string { return "/api/v1/tasks/" + pathID(id) }

// statusNames are the task statuses, for flag completion.
func statusNames() []string {
	out := make([]string, len(dtqtype.Statuses))
	for i, s := range dtqtype.Statuses {
		out[i] = string(s)
	}
	return out
}

func newTasksCmd(e *env) *cobra.Command {
	r := &remote{}
	cmd := groupCmd(e, "tasks", "Submit, read, list, cancel and follow tasks", r)
	cmd.AddCommand(newTasksSubmitCmd(r), newTasksGetCmd(r), newTasksListCmd(r), newTasksCancelCmd(r),
		newTasksRunNowCmd(r), newTasksDeleteCmd(r), newTasksWatchCmd(r), newTasksLogsCmd(r))
	return cmd
}

// submitFlags are the options of `dtq tasks submit`.
type submitFlags struct {
	payload, queue, runAt, expiresAt, metadata, key string
	priority, maxAttempts                           int
	timeoutMS                                       int64
	delay, ttl                                      string
	dedupKey, dedupMode                             string
	dedupTTL, dedupWindow, dedupMaxWait             string
	dedupBy                                         []string
}

func newTasksSubmitCmd(r *remote) *cobra.Command {
	var f submitFlags
	cmd := &cobra.Command{
		Use:   "submit <type>",
		Short: "Submit a task",
		Long: "Submit a task of the given type. Options left out take the API's defaults.\n" +
			"With --idempotency-key, submitting again returns the same task: \"duplicate\n" +
			"(replayed)\" once it finished, or IDEMPOTENCY_IN_PROGRESS while it runs.",
		Example: `  dtq tasks submit echo --payload '{"hello": "world"}'
  dtq tasks submit send_receipt --queue emails --payload @order.json --idempotency-key order-42
  dtq tasks submit sleep --payload '{"seconds": 5}' --delay 1m --ttl 1h`,
		Args: cobra.ExactArgs(1),
	}
	fs := cmd.Flags()
	fs.StringVar(&f.payload, "payload", "", "payload: a JSON object, or @file to read it from a file (default {})")
	fs.StringVarP(&f.queue, "queue", "q", "", "queue (default \"default\")")
	fs.IntVar(&f.priority, "priority", 5, "priority 0..9, 9 highest")
	fs.IntVar(&f.maxAttempts, "max-attempts", 0, "attempts before the task is dead-lettered (default: the server's, at most 5)")
	fs.Int64Var(&f.timeoutMS, "timeout-ms", 0, "time limit of one attempt, in milliseconds (default: DTQ_TASK_TIMEOUT_MS of the server)")
	fs.StringVar(&f.delay, "delay", "", "start no earlier than this from now (duration: 90s, 15m, or seconds)")
	fs.StringVar(&f.runAt, "run-at", "", "start no earlier than this time (RFC 3339); wins over --delay")
	fs.StringVar(&f.ttl, "ttl", "", "give up when not started this long after submission (duration, whole seconds)")
	fs.StringVar(&f.expiresAt, "expires-at", "", "give up when not started by this time (RFC 3339); wins over --ttl")
	fs.StringVar(&f.metadata, "metadata", "", "metadata: a JSON object, shown but never executed")
	fs.StringVar(&f.key, "idempotency-key", "", "idempotency key: a repeat submission with it returns the same task")
	fs.StringVar(&f.dedupKey, "dedup-key", "", "dedup key (docs/deduplication.md); needs --dedup-mode")
	fs.StringSliceVar(&f.dedupBy, "dedup-by", nil, "make the dedup key from these: task_type, payload.<path> (repeat or comma-separate)")
	fs.StringVar(&f.dedupMode, "dedup-mode", "", "what a submission of a key that has a task does: drop, throttle, debounce, replace, keep_last")
	fs.StringVar(&f.dedupTTL, "dedup-ttl", "", "throttle's period; for other modes the longest the key is held (duration: 10m)")
	fs.StringVar(&f.dedupWindow, "dedup-window", "", "debounce: how long the task waits for more submissions (duration: 5s)")
	fs.StringVar(&f.dedupMaxWait, "dedup-max-wait", "", "debounce: the latest start, counted from the first submission (duration: 1m)")
	cmd.RunE = runE(func(cmd *cobra.Command, args []string) error {
		body, err := f.body(cmd, args[0])
		if err != nil {
			return usageError(err)
		}
		var t taskView
		return r.call(cmd, request{method: http.MethodPost, path: "/api/v1/tasks", body: body}, &t, func(p *printer, res *apiResponse) error {
			var err error
			switch mode := res.header.Get("Dtq-Deduplicated"); {
			case res.status == http.StatusOK && mode != "":
				err = p.textf("deduplicated (%s): the dedup key's task is %s, which is %s; nothing was created", mode, t.ID, t.Status)
			case res.status == http.StatusOK:
				err = p.textf("duplicate (replayed): the idempotency key belongs to task %s, which is %s", t.ID, t.Status)
			default:
				err = p.textf("submitted task %s", t.ID)
			}
			if err != nil {
				return err
			}
			return printTask(p, &t)
		})
	})
	return cmd
}

// body builds the submission; only the options given are set, so that the
// API applies its own defaults. It is sent in the submission's JSON form,
// written by dtq.Submission's own codec, as every client of the API does.
func (f *submitFlags) body(cmd *cobra.Command, typ string) (dtq.Submission, error) {
	s := dtq.Submission{Type: typ, Queue: f.queue, IdempotencyKey: f.key}
	changed := cmd.Flags().Changed
	var err error
	if f.payload != "" {
		if s.Payload, err = jsonArg("--payload", f.payload); err != nil {
			return s, err
		}
	}
	if f.metadata != "" {
		if s.Metadata, err = jsonArg("--metadata", f.metadata); err != nil {
			return s, err
		}
	}
	if changed("priority") {
		s.Priority = &f.priority
	}
	if changed("max-attempts") {
		s.MaxAttempts = f.maxAttempts
	}
	if changed("timeout-ms") {
		s.Timeout = time.Duration(f.timeoutMS) * time.Millisecond
	}
	if s.RunAt, err = timeArg("--run-at", f.runAt); err != nil {
		return s, err
	}
	if s.ExpiresAt, err = timeArg("--expires-at", f.expiresAt); err != nil {
		return s, err
	}
	if f.delay != "" {
		d, err := parseDurationArg("--delay", f.delay)
		if err != nil {
			return s, err
		}
		s.Delay = d.Truncate(time.Millisecond) // delay_ms counts whole milliseconds
	}
	if f.ttl != "" {
		d, err := parseDurationArg("--ttl", f.ttl)
		if err != nil {
			return s, err
		}
		if d <= 0 || d%time.Second != 0 {
			return s, fmt.Errorf("--ttl=%q: must be a positive whole number of seconds", f.ttl)
		}
		s.TTL = d
	}
	if f.dedupKey != "" || len(f.dedupBy) > 0 || f.dedupMode != "" {
		if s.Dedup, err = f.dedup(); err != nil {
			return s, err
		}
	}
	// The codec refuses what the JSON form cannot hold (a payload that is
	// not an object) before anything is sent.
	if _, err := s.MarshalJSON(); err != nil {
		return s, err
	}
	return s, nil
}

// dedup builds the submission's dedup from the --dedup-* flags. The values
// are checked by the API, which names the field.
func (f *submitFlags) dedup() (*dtq.Dedup, error) {
	if f.dedupMode == "" {
		return nil, errors.New("--dedup-key and --dedup-by need --dedup-mode (drop, throttle, debounce, replace, keep_last)")
	}
	d := &dtq.Dedup{Key: f.dedupKey, By: f.dedupBy, Mode: dtq.DedupMode(f.dedupMode)}
	for _, x := range []struct {
		flag, v string
		to      *time.Duration
	}{{"--dedup-ttl", f.dedupTTL, &d.TTL}, {"--dedup-window", f.dedupWindow, &d.Window}, {"--dedup-max-wait", f.dedupMaxWait, &d.MaxWait}} {
		if x.v == "" {
			continue
		}
		v, err := time.ParseDuration(x.v)
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("%s=%q: must be a positive duration such as 500ms, 5s or 10m", x.flag, x.v)
		}
		*x.to = v
	}
	return d, nil
}

// timeArg reads an RFC 3339 time flag; "" is the zero time (not given).
func timeArg(flag, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, fmt.Errorf("%s=%q: must be an RFC 3339 time such as 2026-01-02T15:04:05Z", flag, v)
	}
	return t, nil
}

// jsonArg reads a JSON flag value, or a file's content for "@file".
func jsonArg(flag, v string) (json.RawMessage, error) {
	raw := []byte(v)
	if name, ok := strings.CutPrefix(v, "@"); ok {
		b, err := os.ReadFile(filepath.Clean(name))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", flag, err)
		}
		raw = b
	}
	if !json.Valid(raw) {
		return nil, fmt.Errorf("%s: not valid JSON", flag)
	}
	return json.RawMessage(raw), nil
}

// parseDurationArg reads a Go duration ("1m30s") or bare seconds ("90",
// "1.5"), not negative.
func parseDurationArg(flag, v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil {
		f, ferr := strconv.ParseFloat(v, 64)
		if ferr != nil || math.IsNaN(f) || math.Abs(f) > float64(math.MaxInt64/int64(time.Second)) {
			return 0, fmt.Errorf("%s=%q: must be a duration such as 90s or 15m, or a number of seconds", flag, v)
		}
		d = time.Duration(f * float64(time.Second))
	}
	if d < 0 {
		return 0, fmt.Errorf("%s=%q: must not be negative", flag, v)
	}
	return d, nil
}

func newTasksGetCmd(r *remote) *cobra.Command {
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "get <task-id>",
		Short: "Show a task with its progress, result and attempts",
		Long: "Show a task with its progress, result and attempts. With --wait, wait up to\n" +
			"that long (at most 60s) for the task to finish; check its status to tell\n" +
			"whether it did.",
		Example: "  dtq tasks get 0199d5e8a93c7d2a8f0e4b2c1d3e5f60\n  dtq tasks get 0199d5e8a93c7d2a8f0e4b2c1d3e5f60 --wait 30s -o json",
		Args:    cobra.ExactArgs(1),
	}
	cmd.Flags().DurationVar(&wait, "wait", 0, "wait up to this long (at most 60s) for the task to finish")
	cmd.RunE = runE(func(cmd *cobra.Command, args []string) error {
		if wait < 0 {
			return usageError(fmt.Errorf("--wait=%s: must not be negative", wait))
		}
		var t taskView
		return r.call(cmd, taskRequest(args[0], wait), &t, func(p *printer, _ *apiResponse) error { return printTask(p, &t) })
	})
	return cmd
}

// taskRequest reads a task, long-polling up to wait for it to finish.
func taskRequest(id string, wait time.Duration) request {
	req := request{method: http.MethodGet, path: taskPath(id)}
	if wait > 0 {
		req.query = url.Values{"wait": {wait.String()}}
		req.extra = wait
	}
	return req
}

// getTask reads a task (see taskRequest).
func getTask(ctx context.Context, api *apiClient, id string, wait time.Duration) (*taskView, []byte, error) {
	res, err := api.do(ctx, taskRequest(id, wait))
	if err != nil {
		return nil, nil, err
	}
	var t taskView
	if err := decodeAnswer(res.body, &t); err != nil {
		return nil, nil, err
	}
	return &t, res.body, nil
}

func newTasksListCmd(r *remote) *cobra.Command {
	var (
		queue, status, typ, cursor string
		limit                      int
		all                        bool
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List tasks, newest first",
		Long: "List tasks, newest first. With a --status or --type filter a page may hold\n" +
			"fewer than --limit tasks while more remain; --all reads every page.",
		Example: "  dtq tasks list --queue emails --status dead_lettered\n  dtq tasks list --status queued --all -o json",
		Args:    cobra.NoArgs,
	}
	fs := cmd.Flags()
	fs.StringVarP(&queue, "queue", "q", "", "only this queue")
	fs.StringVar(&status, "status", "", "only this status: "+strings.Join(statusNames(), ", "))
	fs.StringVar(&typ, "type", "", "only this task type")
	fs.IntVar(&limit, "limit", 0, "tasks per page, 1..1000 (default 50)")
	fs.StringVar(&cursor, "cursor", "", "continue from a previous page's cursor")
	fs.BoolVar(&all, "all", false, "read every page")
	_ = cmd.RegisterFlagCompletionFunc("status", cobra.FixedCompletions(statusNames(), cobra.ShellCompDirectiveNoFileComp))
	cmd.RunE = runE(func(cmd *cobra.Command, _ []string) error {
		if status != "" && !slices.Contains(statusNames(), status) {
			return usageError(fmt.Errorf("--status=%q: must be one of %s", status, strings.Join(statusNames(), ", ")))
		}
		q := filterQuery(map[string]string{"queue": queue, "status": status, "type": typ, "cursor": cursor}, limit)
		return printList(cmd, r, listing[taskView]{
			path: "/api/v1/tasks", query: q, all: all, hint: "dtq tasks list",
			header: []string{"TASK_ID", "QUEUE", "TYPE", "STATUS", "PRIORITY", "ATTEMPT", "CREATED_AT"},
			row: func(t taskView) []string {
				return []string{t.ID, t.Queue, t.Type, string(t.Status), strconv.Itoa(t.Priority), t.attempts(), wireTime(t.CreatedAt)}
			},
		})
	})
	return cmd
}

// filterQuery is a list's query string: the non-empty values, and limit
// when set.
func filterQuery(vals map[string]string, limit int) url.Values {
	q := url.Values{}
	for k, v := range vals {
		if v != "" {
			q.Set(k, v)
		}
	}
	if limit != 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	return q
}

func newTasksCancelCmd(r *remote) *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:   "cancel <task-id>",
		Short: "Cancel a task (admin)",
		Long: "Cancel a task. A pending, queued or retrying task is cancelled at once; a\n" +
			"running one gets a cancel request: its handler's context is cancelled and\n" +
			"the task ends cancelled if the handler returns an error.",
		Example: "  dtq tasks cancel 0199d5e8a93c7d2a8f0e4b2c1d3e5f60 --reason \"ordered twice\"",
		Args:    cobra.ExactArgs(1),
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why, for the event and the audit log (one line, at most 200 characters)")
	cmd.RunE = runE(func(cmd *cobra.Command, args []string) error {
		var body any
		if reason != "" {
			body = map[string]string{"reason": reason}
		}
		var out struct {
			Task            taskView `json:"task"`
			CancelRequested bool     `json:"cancel_requested"`
		}
		req := request{method: http.MethodPost, path: taskPath(args[0]) + "/cancel", body: body}
		return r.call(cmd, req, &out, func(p *printer, _ *apiResponse) error {
			if out.CancelRequested && out.Task.Status == dtqtype.StatusRunning {
				return p.textf("cancel requested for task %s: it is running; its handler is told to stop", out.Task.ID)
			}
			return p.textf("task %s is %s", out.Task.ID, out.Task.Status)
		})
	})
	return cmd
}

func newTasksRunNowCmd(r *remote) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "run-now <task-id>",
		Short:   "Make a pending or retrying task due now (admin)",
		Example: "  dtq tasks run-now 0199d5e8a93c7d2a8f0e4b2c1d3e5f60",
		Args:    cobra.ExactArgs(1),
	}
	cmd.RunE = runE(func(cmd *cobra.Command, args []string) error {
		return taskAction(cmd, r, taskPath(args[0])+"/run-now", func(p *printer, t *taskView) error {
			return p.textf("task %s is due now (%s)", t.ID, t.Status)
		})
	})
	return cmd
}

// taskAction posts an action answered with {"task": ...} and prints the
// answer.
func taskAction(cmd *cobra.Command, r *remote, path string, text func(*printer, *taskView) error) error {
	var out struct {
		Task taskView `json:"task"`
	}
	return r.call(cmd, request{method: http.MethodPost, path: path}, &out, func(p *printer, _ *apiResponse) error {
		return text(p, &out.Task)
	})
}

func newTasksDeleteCmd(r *remote) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "delete <task-id>",
		Short: "Delete a finished task and its result (admin)",
		Long: "Delete a finished task and its result. A task that has not finished is\n" +
			"refused (TASK_CONFLICT): cancel it first. The API answers 204 with no body;\n" +
			"with -o json this prints {\"task_id\": ..., \"deleted\": true}.",
		Example: "  dtq tasks delete 0199d5e8a93c7d2a8f0e4b2c1d3e5f60",
		Args:    cobra.ExactArgs(1),
	}
	cmd.RunE = runE(func(cmd *cobra.Command, args []string) error {
		s, err := r.open(cmd)
		if err != nil {
			return err
		}
		defer s.close()
		if _, err := s.api.do(cmd.Context(), request{method: http.MethodDelete, path: taskPath(args[0])}); err != nil {
			return err
		}
		if s.out.json {
			b, _ := json.Marshal(map[string]any{"task_id": args[0], "deleted": true})
			return s.out.raw(b)
		}
		return s.out.textf("deleted task %s", args[0])
	})
	return cmd
}

// Bounds of `dtq tasks watch --interval`: the API's long-poll takes at
// most 60s.
const (
	minWatchInterval = 100 * time.Millisecond
	maxWatchInterval = 60 * time.Second
)

func newTasksWatchCmd(r *remote) *cobra.Command {
	var (
		interval   time.Duration
		exitStatus bool
	)
	cmd := &cobra.Command{
		Use:   "watch <task-id>",
		Short: "Follow a task until it finishes, printing each status change",
		Long: "Follow a task until it finishes, printing a line whenever its status,\n" +
			"attempt or progress changes: the time the change was seen, status, attempt,\n" +
			"worker, progress and last error. It long-polls the task, so a finish is seen\n" +
			"at once and other changes within --interval. With -o json each line is the\n" +
			"task's JSON.",
		Example: "  dtq tasks watch 0199d5e8a93c7d2a8f0e4b2c1d3e5f60\n  dtq tasks watch 0199d5e8a93c7d2a8f0e4b2c1d3e5f60 --exit-status && echo done",
		Args:    cobra.ExactArgs(1),
	}
	cmd.Flags().DurationVar(&interval, "interval", time.Second, "longest time between two looks at the task (100ms..60s)")
	cmd.Flags().BoolVar(&exitStatus, "exit-status", false, "exit 1 unless the task succeeded")
	cmd.RunE = runE(func(cmd *cobra.Command, args []string) error {
		if interval < minWatchInterval || interval > maxWatchInterval {
			return usageError(fmt.Errorf("--interval=%s: must be between %s and %s", interval, minWatchInterval, maxWatchInterval))
		}
		s, err := r.open(cmd)
		if err != nil {
			return err
		}
		defer s.close()
		t, err := watchTask(cmd.Context(), s, args[0], interval)
		if errors.Is(err, errInterrupted) {
			return nil
		}
		if err != nil {
			return err
		}
		if exitStatus && t.Status != dtqtype.StatusSucceeded {
			return &exitError{code: exitFailure, err: fmt.Errorf("task %s ended %s", t.ID, t.Status)}
		}
		return nil
	})
	return cmd
}

// watchTask long-polls the task until it is terminal, printing each change
// of status or attempt, and returns the final task.
func watchTask(ctx context.Context, s *session, id string, interval time.Duration) (*taskView, error) {
	var last *taskView
	for {
		wait := interval
		if last == nil {
			wait = 0 // show where the task stands at once
		}
		t, body, err := getTask(ctx, s.api, id, wait)
		if err != nil {
			if ctx.Err() != nil {
				return last, errInterrupted
			}
			return last, err
		}
		if last == nil || t.Status != last.Status || t.Attempt != last.Attempt || t.CancelRequested != last.CancelRequested ||
			progressText(t.Progress) != progressText(last.Progress) {
			if err := printWatchLine(s.out, t, body); err != nil {
				return t, err
			}
		}
		last = t
		if t.terminal() {
			return t, nil
		}
	}
}

// printWatchLine prints one change seen by `tasks watch`.
func printWatchLine(p *printer, t *taskView, body []byte) error {
	if p.json {
		return p.line(body)
	}
	status := t.Status
	if t.CancelRequested && !t.terminal() {
		status += " (cancel requested)"
	}
	parts := []string{time.Now().UTC().Format(dtqtype.TimeLayout), fmt.Sprintf("%-13s", status), "attempt " + t.attempts()}
	if w := t.Execution.WorkerID; w != "" {
		parts = append(parts, "worker "+visible(w))
	}
	if pr := progressText(t.Progress); pr != "" {
		parts = append(parts, "progress "+truncate(cell(pr), 60))
	}
	if d := t.Execution.DurationMS; d != nil && t.terminal() {
		parts = append(parts, itoa(*d)+"ms")
	}
	if e := t.lastError(); e != "" && t.Status != dtqtype.StatusSucceeded {
		parts = append(parts, truncate(cell(e), 120))
	}
	return p.textf("%s", strings.Join(parts, "  "))
}
