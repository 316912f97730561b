package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/dtq-io/dtq/dtqtype"
)

// workflowView is a workflow as GET /api/v1/workflows/{id} answers it.
type workflowView = dtqtype.WorkflowInfo

// maxWorkflowFile bounds what submit reads from standard input: the API's
// cap on a workflow body.
const maxWorkflowFile = 16 << 20

func workflowPath(id string) string { return "/api/v1/workflows/" + pathID(id) }

// workflowStatusNames are the workflow statuses, for flag checks and
// completion.
func workflowStatusNames() []string {
	out := make([]string, len(dtqtype.WorkflowStatuses))
	for i, s := range dtqtype.WorkflowStatuses {
		out[i] = string(s)
	}
	return out
}

func newWorkflowsCmd(e *env) *cobra.Command {
	r := &remote{}
	cmd := groupCmd(e, "workflows", "Submit, read, list and cancel workflows (DAGs of tasks)", r)
	cmd.AddCommand(newWorkflowsSubmitCmd(r), newWorkflowsGetCmd(r), newWorkflowsListCmd(r), newWorkflowsCancelCmd(r))
	return cmd
}

// printWorkflow prints a workflow: a status line, its fields, its graph
// (see graphLines) and, with nodes, a table of every node.
func printWorkflow(p *printer, w *workflowView, nodes bool) error {
	if err := p.textf("%s", workflowStatusLine(w)); err != nil {
		return err
	}
	kv := [][2]string{{"workflow_id", w.ID}, {"name", w.Name}, {"status", string(w.Status)},
		{"counts", countsText(w.Counts)}, {"created_at", wireTime(w.CreatedAt)}, {"finished_at", wireTime(w.FinishedAt)}}
	if w.CancelRequested {
		kv = append(kv, [2]string{"cancel_requested", "yes"})
	}
	if w.OnFailureTaskID != "" {
		kv = append(kv, [2]string{"on_failure_task_id", w.OnFailureTaskID})
	}
	if err := p.fields(kv); err != nil {
		return err
	}
	if err := p.textf("\n%s", strings.Join(graphLines(w.Nodes), "\n")); err != nil {
		return err
	}
	if !nodes {
		return nil
	}
	if err := p.textf("\nNODES"); err != nil {
		return err
	}
	rows := make([][]string, 0, len(w.Nodes))
	for _, n := range w.Nodes {
		rows = append(rows, []string{n.Ref, n.TaskID, n.Queue, string(n.Status), strings.Join(n.Deps, ","), n.ErrorClass})
	}
	return p.table([]string{"REF", "TASK_ID", "QUEUE", "STATUS", "DEPS", "ERROR_CLASS"}, rows)
}

// workflowStatusLine is "workflow <id> is running: 1 of 3 nodes ended" (or
// "succeeded: …" once it ended).
func workflowStatusLine(w *workflowView) string {
	done := 0
	for st, n := range w.Counts {
		if st.Terminal() {
			done += n
		}
	}
	state := "is " + string(w.Status) // submitting, running
	if w.Status.Terminal() {
		state = string(w.Status)
	}
	return fmt.Sprintf("workflow %s %s: %d of %d nodes ended", w.ID, state, done, len(w.Nodes))
}

// countsText is "queued=1 succeeded=2", statuses in their documented order.
func countsText(c map[dtqtype.Status]int) string {
	var parts []string
	for _, st := range dtqtype.Statuses {
		if n := c[st]; n > 0 {
			parts = append(parts, string(st)+"="+strconv.Itoa(n))
		}
	}
	return strings.Join(parts, " ")
}

func newWorkflowsSubmitCmd(r *remote) *cobra.Command {
	var file, key string
	cmd := &cobra.Command{
		Use:   "submit -f <file.json>",
		Short: "Submit a workflow from a JSON file",
		Long: "Submit a workflow: the file holds the body of POST /api/v1/workflows,\n" +
			"{\"name\", \"nodes\": [{\"ref\", \"task_type\", \"queue\", \"payload\", \"deps\", ...}],\n" +
			"\"on_failure\"} (\"-\" reads standard input). With --idempotency-key, submitting\n" +
			"again returns the same workflow: \"duplicate (replayed)\" once it ended, or\n" +
			"IDEMPOTENCY_IN_PROGRESS while it runs.",
		Example: "  dtq workflows submit -f order.json\n  dtq workflows submit -f order.json --idempotency-key order-42 -o json",
		Args:    cobra.NoArgs,
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "the workflow as JSON (required; - for standard input)")
	cmd.Flags().StringVar(&key, "idempotency-key", "", "idempotency key: a repeat submission with it returns the same workflow")
	cmd.RunE = runE(func(cmd *cobra.Command, _ []string) error {
		body, err := workflowBody(cmd, file, key)
		if err != nil {
			return usageError(err)
		}
		var res struct {
			WorkflowID string `json:"workflow_id"`
			Status     string `json:"status"`
			Nodes      []struct {
				Ref    string `json:"ref"`
				TaskID string `json:"task_id"`
				Status string `json:"status"`
			} `json:"nodes"`
		}
		req := request{method: http.MethodPost, path: "/api/v1/workflows", body: body}
		return r.call(cmd, req, &res, func(p *printer, ans *apiResponse) error {
			var err error
			if ans.status == http.StatusOK {
				err = p.textf("duplicate (replayed): the idempotency key belongs to workflow %s, which is %s", res.WorkflowID, res.Status)
			} else {
				err = p.textf("submitted workflow %s (%s)", res.WorkflowID, res.Status)
			}
			if err != nil {
				return err
			}
			rows := make([][]string, 0, len(res.Nodes))
			for _, n := range res.Nodes {
				rows = append(rows, []string{n.Ref, n.TaskID, n.Status})
			}
			return p.table([]string{"REF", "TASK_ID", "STATUS"}, rows)
		})
	})
	return cmd
}

// workflowBody reads the workflow file and sets the idempotency key in it.
func workflowBody(cmd *cobra.Command, file, key string) (map[string]json.RawMessage, error) {
	if file == "" {
		return nil, fmt.Errorf("-f/--file is required: the workflow as JSON")
	}
	var raw []byte
	var err error
	if file == "-" {
		raw, err = io.ReadAll(io.LimitReader(cmd.InOrStdin(), maxWorkflowFile))
	} else {
		raw, err = os.ReadFile(filepath.Clean(file))
	}
	if err != nil {
		return nil, fmt.Errorf("--file: %w", err)
	}
	var body map[string]json.RawMessage
	if err := json.Unmarshal(raw, &body); err != nil || body == nil {
		return nil, fmt.Errorf("--file %s: not a JSON object like {\"nodes\": [{\"ref\": \"a\", \"task_type\": \"echo\"}]}", file)
	}
	if key != "" {
		k, err := json.Marshal(key)
		if err != nil {
			return nil, fmt.Errorf("--idempotency-key: %w", err)
		}
		body["idempotency_key"] = k
	}
	return body, nil
}

func newWorkflowsGetCmd(r *remote) *cobra.Command {
	var (
		wait, interval time.Duration
		watch, nodes   bool
	)
	cmd := &cobra.Command{
		Use:   "get <workflow-id>",
		Short: "Show a workflow: its status and its graph of nodes",
		Long: "Show a workflow: its status, counts and its graph: the nodes in layers by\n" +
			"dependency depth (layer 0 has no deps), each as \"ref [status]\" with its deps;\n" +
			"a layer of more than 50 nodes shows its counts by status. --nodes adds a table\n" +
			"of every node with its task id.\n" +
			"With --wait, wait up to that long (at most 60s) for the workflow to end;\n" +
			"check its status to tell whether it did. With --watch, follow it until it\n" +
			"ends: on a terminal the view is redrawn at each change, else each change is\n" +
			"printed as a line (time, what changed); with -o json each change is a line of\n" +
			"the workflow's JSON. The watch long-polls the API, so the end is seen at\n" +
			"once and other changes within --interval.",
		Example: "  dtq workflows get 0199d5e8a93c7d2a8f0e4b2c1d3e5f60\n  dtq workflows get 0199d5e8a93c7d2a8f0e4b2c1d3e5f60 --wait 30s -o json\n" +
			"  dtq workflows get 0199d5e8a93c7d2a8f0e4b2c1d3e5f60 --watch",
		Args: cobra.ExactArgs(1),
	}
	fs := cmd.Flags()
	fs.DurationVar(&wait, "wait", 0, "wait up to this long (at most 60s) for the workflow to end")
	fs.BoolVar(&watch, "watch", false, "follow the workflow until it ends, showing each change")
	fs.DurationVar(&interval, "interval", time.Second, "with --watch, the longest time between two looks at the workflow (100ms..60s)")
	fs.BoolVar(&nodes, "nodes", false, "also print a table of every node: task id, queue, status, deps, error class")
	cmd.RunE = runE(func(cmd *cobra.Command, args []string) error {
		if wait < 0 {
			return usageError(fmt.Errorf("--wait=%s: must not be negative", wait))
		}
		if watch && wait > 0 {
			return usageError(errors.New("--wait and --watch do not go together: --watch already follows the workflow to its end"))
		}
		if interval < minWatchInterval || interval > maxWatchInterval {
			return usageError(fmt.Errorf("--interval=%s: must be between %s and %s", interval, minWatchInterval, maxWatchInterval))
		}
		if watch {
			s, err := r.open(cmd)
			if err != nil {
				return err
			}
			defer s.close()
			v := &workflowWatch{s: s, id: args[0], interval: interval, nodes: nodes, redraw: isTerminal(r.e)}
			if err := v.run(cmd.Context()); !errors.Is(err, errInterrupted) {
				return err
			}
			return nil
		}
		req := workflowRequest(args[0], wait)
		var w workflowView
		return r.call(cmd, req, &w, func(p *printer, _ *apiResponse) error { return printWorkflow(p, &w, nodes) })
	})
	return cmd
}

// workflowRequest is GET /api/v1/workflows/{id}, long-polling up to wait
// for the workflow to end when wait > 0.
func workflowRequest(id string, wait time.Duration) request {
	req := request{method: http.MethodGet, path: workflowPath(id)}
	if wait > 0 {
		req.query = url.Values{"wait": {wait.String()}}
		req.extra = wait
	}
	return req
}

func newWorkflowsListCmd(r *remote) *cobra.Command {
	var (
		status, name, cursor string
		limit                int
		all                  bool
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List workflows, newest first",
		Long: "List workflows, newest first. With a filter a page may hold fewer than\n" +
			"--limit workflows while more remain; --all reads every page.",
		Example: "  dtq workflows list --status failed\n  dtq workflows list --name order-42 -o json",
		Args:    cobra.NoArgs,
	}
	fs := cmd.Flags()
	fs.StringVar(&status, "status", "", "only this status: "+strings.Join(workflowStatusNames(), ", "))
	fs.StringVar(&name, "name", "", "only workflows with exactly this name")
	fs.IntVar(&limit, "limit", 0, "workflows per page, 1..1000 (default 50)")
	fs.StringVar(&cursor, "cursor", "", "continue from a previous page's cursor")
	fs.BoolVar(&all, "all", false, "read every page")
	_ = cmd.RegisterFlagCompletionFunc("status", cobra.FixedCompletions(workflowStatusNames(), cobra.ShellCompDirectiveNoFileComp))
	cmd.RunE = runE(func(cmd *cobra.Command, _ []string) error {
		if status != "" && !slices.Contains(workflowStatusNames(), status) {
			return usageError(fmt.Errorf("--status=%q: must be one of %s", status, strings.Join(workflowStatusNames(), ", ")))
		}
		q := filterQuery(map[string]string{"status": status, "name": name, "cursor": cursor}, limit)
		return printList(cmd, r, listing[dtqtype.WorkflowSummary]{
			path: "/api/v1/workflows", query: q, all: all, hint: "dtq workflows list",
			header: []string{"WORKFLOW_ID", "NAME", "STATUS", "ENDED"},
			row: func(w dtqtype.WorkflowSummary) []string {
				return []string{w.ID, w.Name, string(w.Status), strconv.Itoa(w.Ended) + "/" + strconv.Itoa(w.Nodes)}
			},
		})
	})
	return cmd
}

func newWorkflowsCancelCmd(r *remote) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cancel <workflow-id>",
		Short: "Cancel a workflow (producer)",
		Long: "Cancel a workflow: every node not ended is cancelled (running ones get a\n" +
			"cancel request) and no node starts any more; the workflow ends cancelled\n" +
			"once its last node has.",
		Example: "  dtq workflows cancel 0199d5e8a93c7d2a8f0e4b2c1d3e5f60",
		Args:    cobra.ExactArgs(1),
	}
	cmd.RunE = runE(func(cmd *cobra.Command, args []string) error {
		var out struct {
			Workflow workflowView `json:"workflow"`
		}
		req := request{method: http.MethodPost, path: workflowPath(args[0]) + "/cancel"}
		return r.call(cmd, req, &out, func(p *printer, _ *apiResponse) error {
			var err error
			if out.Workflow.Status == dtqtype.WorkflowCancelled {
				err = p.textf("workflow %s cancelled", out.Workflow.ID)
			} else {
				err = p.textf("cancel requested: workflow %s ends cancelled once its nodes' ends are recorded (dtq workflows get %[1]s --wait 30s)", out.Workflow.ID)
			}
			if err != nil {
				return err
			}
			return printWorkflow(p, &out.Workflow, false)
		})
	})
	return cmd
}
