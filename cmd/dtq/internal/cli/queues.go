package cli

import (
	"github.com/dtq-io/dtq/dtqtype"
	"strings"

	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/spf13/cobra"
)

// queueView is the part of a queue answer the tables show.
// queueView is a queue as the API answers it.
type queueView struct{ dtqtype.QueueInfo }

func (q *queueView) state() string { return pausedState(q.Paused) }

func queuePath(q string) string { return "/api/v1/queues/" + pathID(q) }

func newQueuesCmd(e *env) *cobra.Command {
	r := &remote{}
	queues := pausable{group: "queues", noun: "queue", arg: "<queue>", example: "emails", path: queuePath, complete: r.completeQueues}
	cmd := groupCmd(e, "queues", "Inspect, create, delete, pause, resume and purge queues", r)
	cmd.AddCommand(newQueuesListCmd(r), newQueuesStatsCmd(r), newQueuesCreateCmd(r), newQueuesDeleteCmd(r),
		newPauseCmd(r, queues, "pause", "Stop delivering a queue's tasks (admin)",
			"Stop delivering a queue's tasks; submissions are still accepted. Any valid\nname may be paused, even one not used yet."),
		newPauseCmd(r, queues, "resume", "Deliver a paused queue's tasks again (admin)", ""),
		newQueuesPurgeCmd(r), newQueuesRecountCmd(r), newQueuesLimitsCmd(r), newQueuesScalingCmd(r))
	return cmd
}

func newQueuesListCmd(r *remote) *cobra.Command {
	return listCmd(r, &cobra.Command{
		Use:   "list",
		Short: "List queues with depth, ready, running, scheduled and DLQ sizes",
		Long: "List every queue, by name, reading the API's pages of 1000. DEPTH counts\n" +
			"live tasks (ready, running, delayed and retrying); SCHEDULED is delayed and\n" +
			"retrying tasks; PER_MIN is finished tasks per minute over the recent window.",
	}, listing[queueView]{
		path: "/api/v1/queues", query: url.Values{"limit": {"1000"}}, all: true,
		header: []string{"QUEUE", "STATE", "DEPTH", "READY", "RUNNING", "SCHEDULED", "DLQ", "WORKERS", "PER_MIN"},
		row: func(q queueView) []string {
			return []string{q.Name, q.state(), itoa(q.Depth), itoa(q.ReadyTotal), itoa(q.Running),
				itoa(q.Scheduled), itoa(q.DLQ), strconv.Itoa(q.LiveWorkers), perMinute(q.Throughput.PerMinute)}
		},
	})
}

func perMinute(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) }

func newQueuesStatsCmd(r *remote) *cobra.Command {
	cmd := &cobra.Command{
		Use:               "stats <queue>",
		Short:             "Show one queue: sizes, ready tasks per priority band, throughput",
		Example:           "  dtq queues stats emails",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: r.completeQueues,
	}
	cmd.RunE = showRun(r, queuePath, printQueue)
	return cmd
}

func printQueue(p *printer, q *queueView) error {
	var bands strings.Builder
	for b := 9; b >= 0; b-- {
		fmt.Fprintf(&bands, " p%d=%d", b, q.Ready[fmt.Sprintf("p%d", b)])
	}
	tp := q.Throughput
	fields := [][2]string{
		{"queue", q.Name},
		{"state", q.state()},
		{"depth", itoa(q.Depth)},
		{"ready", itoa(q.ReadyTotal) + " (" + bands.String()[1:] + ")"},
		{"running", itoa(q.Running)},
		{"pending", itoa(q.Pending) + " (delivered, not acknowledged)"},
		{"scheduled", itoa(q.Scheduled)},
		{"dlq", itoa(q.DLQ)},
		{"live_workers", strconv.Itoa(q.LiveWorkers)},
		{"throughput", fmt.Sprintf("last %d min: %d succeeded, %d failed, %d retried, %s/min",
			tp.WindowMinutes, tp.Succeeded, tp.Failed, tp.Retried, perMinute(tp.PerMinute))},
	}
	if len(q.Partitions) > 0 {
		// A partitioned queue (docs/partitions.md): the sizes above are
		// its partitions' sums; each partition's follow.
		fields = append(fields, [2]string{"partitions", strconv.Itoa(len(q.Partitions))})
		for _, pi := range q.Partitions {
			fields = append(fields, [2]string{fmt.Sprintf("  partition %d", pi.Partition),
				fmt.Sprintf("depth %d, ready %d, running %d, scheduled %d, dlq %d", pi.Depth, pi.ReadyTotal, pi.Running, pi.Scheduled, pi.DLQ)})
		}
	}
	return p.fields(fields)
}

func newQueuesPurgeCmd(r *remote) *cobra.Command {
	var yes bool
	cmd := &cobra.Command{
		Use:   "purge <queue> --yes",
		Short: "Cancel every ready task of a queue (admin)",
		Long: "Cancel every ready (queued) task of a queue. Delayed, retrying and running\n" +
			"tasks are left alone. It needs --yes.",
		Example:           "  dtq queues purge emails --yes",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: r.completeQueues,
	}
	cmd.Flags().BoolVar(&yes, "yes", false, "really cancel the queue's ready tasks")
	cmd.RunE = runE(func(cmd *cobra.Command, args []string) error {
		if err := requireYes(yes, "cancel every ready task of queue "+args[0]); err != nil {
			return err
		}
		var out struct {
			Queue     string `json:"queue"`
			Cancelled int64  `json:"cancelled"`
		}
		return r.call(cmd, request{method: http.MethodPost, path: queuePath(args[0]) + "/purge"}, &out,
			func(p *printer, _ *apiResponse) error {
				return p.textf("cancelled %d ready tasks of queue %s", out.Cancelled, out.Queue)
			})
	})
	return cmd
}

func newQueuesRecountCmd(r *remote) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "recount <queue>",
		Short: "Recompute a queue's depth counter (admin)",
		Long: "Recompute a queue's depth counter from its streams, schedule and leases.\n" +
			"Use it after editing Redis by hand; dtq keeps the counter exact otherwise.",
		Example:           "  dtq queues recount emails",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: r.completeQueues,
	}
	cmd.RunE = runE(func(cmd *cobra.Command, args []string) error {
		var out struct {
			Queue    string `json:"queue"`
			OldDepth int64  `json:"old_depth"`
			Depth    int64  `json:"depth"`
		}
		return r.call(cmd, request{method: http.MethodPost, path: queuePath(args[0]) + "/recount"}, &out,
			func(p *printer, _ *apiResponse) error {
				if out.OldDepth == out.Depth {
					return p.textf("queue %s depth %d (unchanged)", out.Queue, out.Depth)
				}
				return p.textf("queue %s depth %d -> %d", out.Queue, out.OldDepth, out.Depth)
			})
	})
	return cmd
}

// completionTimeout bounds the API call that completes a queue name.
const completionTimeout = 2 * time.Second

// completeQueues completes a queue name from the API's queue list; when the
// API cannot be asked it offers nothing.
func (r *remote) completeQueues(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	s, err := r.open(cmd)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	defer s.close()
	s.api.timeout = completionTimeout
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	items, _, err := s.api.listPages(ctx, "/api/v1/queues", nil, false)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	names := make([]string, 0, len(items))
	for _, raw := range items {
		var q queueView
		if json.Unmarshal(raw, &q) == nil {
			names = append(names, q.Name)
		}
	}
	return names, cobra.ShellCompDirectiveNoFileComp
}

func newQueuesCreateCmd(r *remote) *cobra.Command {
	var partitions int
	cmd := &cobra.Command{
		Use:   "create <queue> [--partitions n]",
		Short: "Add a queue to the registry (admin)",
		Long: "Add a queue to the registry. Under DTQ_QUEUE_POLICY=declared only such queues\n" +
			"accept tasks; under the open policy a queue is also created by its first task.\n" +
			"Creating a queue that exists changes nothing. --partitions spreads a new queue\n" +
			"over n partitions (1..256), each on its own hash slot, so that one hot queue\n" +
			"uses every master of a Redis Cluster (docs/partitions.md); partitions are fixed\n" +
			"when the queue is created.",
		Example: "  dtq queues create emails\n  dtq queues create events --partitions 8",
		Args:    cobra.ExactArgs(1),
	}
	cmd.Flags().IntVar(&partitions, "partitions", 0, "create the queue with this many partitions (1..256; default: 1, or as it is)")
	cmd.RunE = runE(func(cmd *cobra.Command, args []string) error {
		var out struct {
			Queue      string `json:"queue"`
			Created    bool   `json:"created"`
			Partitions int    `json:"partitions"`
		}
		req := request{method: http.MethodPut, path: queuePath(args[0])}
		if cmd.Flags().Changed("partitions") {
			req.body = map[string]int{"partitions": partitions}
		}
		return r.call(cmd, req, &out, func(p *printer, _ *apiResponse) error {
			parts := ""
			if out.Partitions > 1 {
				parts = fmt.Sprintf(" (%d partitions)", out.Partitions)
			}
			if !out.Created {
				return p.textf("queue %s already existed%s", out.Queue, parts)
			}
			return p.textf("created queue %s%s", out.Queue, parts)
		})
	})
	return cmd
}

func newQueuesDeleteCmd(r *remote) *cobra.Command {
	var yes bool
	cmd := &cobra.Command{
		Use:   "delete <queue> --yes",
		Short: "Remove an empty queue from the registry (admin)",
		Long: "Remove a queue that holds no task (none live, none dead-lettered) from the\n" +
			"registry, freeing its number. A queue that still holds tasks is refused with\n" +
			"QUEUE_NOT_EMPTY, naming what it holds. It needs --yes.",
		Example:           "  dtq queues delete emails --yes",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: r.completeQueues,
	}
	cmd.Flags().BoolVar(&yes, "yes", false, "really delete the queue")
	cmd.RunE = runE(func(cmd *cobra.Command, args []string) error {
		if err := requireYes(yes, "delete queue "+args[0]); err != nil {
			return err
		}
		return r.call(cmd, request{method: http.MethodDelete, path: queuePath(args[0])}, nil, func(p *printer, _ *apiResponse) error {
			return p.textf("deleted queue %s", args[0])
		})
	})
	return cmd
}
