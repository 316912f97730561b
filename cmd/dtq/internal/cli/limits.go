package cli

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/dtq-io/dtq/dtqtype"
)

// newQueuesLimitsCmd is dtq queues limits get|set|delete.
func newQueuesLimitsCmd(r *remote) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "limits",
		Short: "Show or change a queue's rate and concurrency limits",
		Long: "Show or change a queue's flow-control limits: a rate (task starts per period,\n" +
			"across all workers), a concurrency (running tasks at once) and a key\n" +
			"concurrency (running tasks at once per concurrency_key).",
	}
	cmd.AddCommand(newLimitsGetCmd(r), newLimitsSetCmd(r), newLimitsDeleteCmd(r))
	return cmd
}

func limitsPath(q string) string { return queuePath(q) + "/limits" }

type limitsAnswer struct {
	Queue  string               `json:"queue"`
	Limits *dtqtype.QueueLimits `json:"limits"`
}

func printLimits(p *printer, a *limitsAnswer) error {
	return p.textf("queue %s: %s", a.Queue, describeLimits(a.Limits))
}

// describeLimits is one line naming the limits, e.g.
// "rate 10/1s, concurrency 5, key_concurrency 1".
func describeLimits(l *dtqtype.QueueLimits) string {
	if l == nil {
		return "no limits"
	}
	var parts []string
	if l.Rate != nil {
		p := fmt.Sprintf("rate %d/%s", l.Rate.Limit, time.Duration(l.Rate.Period))
		if l.Rate.Burst > 1 {
			p += fmt.Sprintf(" (burst %d)", l.Rate.Burst)
		}
		parts = append(parts, p)
	}
	if l.Concurrency > 0 {
		parts = append(parts, fmt.Sprintf("concurrency %d", l.Concurrency))
	}
	if l.KeyConcurrency > 0 {
		parts = append(parts, fmt.Sprintf("key_concurrency %d", l.KeyConcurrency))
	}
	return strings.Join(parts, ", ")
}

func newLimitsGetCmd(r *remote) *cobra.Command {
	cmd := &cobra.Command{
		Use:               "get <queue>",
		Short:             "Show a queue's limits",
		Example:           "  dtq queues limits get emails",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: r.completeQueues,
	}
	cmd.RunE = showRun(r, limitsPath, printLimits)
	return cmd
}

func newLimitsSetCmd(r *remote) *cobra.Command {
	var rate string
	var burst, conc, keyConc int
	cmd := &cobra.Command{
		Use:   "set <queue>",
		Short: "Replace a queue's limits (admin)",
		Long: "Replace a queue's limits: the ones not given are removed. --rate is\n" +
			"<limit>/<period>, e.g. 10/1s or 100/1m.",
		Example:           "  dtq queues limits set emails --rate 10/1s --concurrency 5\n  dtq queues limits set billing --key-concurrency 1",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: r.completeQueues,
	}
	cmd.Flags().StringVar(&rate, "rate", "", "task starts per period, <limit>/<period> (e.g. 10/1s)")
	cmd.Flags().IntVar(&burst, "burst", 0, "starts an idle queue may make at once (with --rate; default 1)")
	cmd.Flags().IntVar(&conc, "concurrency", 0, "running tasks at once, across all workers")
	cmd.Flags().IntVar(&keyConc, "key-concurrency", 0, "running tasks at once per concurrency key")
	cmd.RunE = runE(func(cmd *cobra.Command, args []string) error {
		l := dtqtype.QueueLimits{Concurrency: conc, KeyConcurrency: keyConc}
		if rate != "" {
			n, p, ok := strings.Cut(rate, "/")
			var limit int
			d, err := time.ParseDuration(p)
			if _, serr := fmt.Sscan(n, &limit); !ok || serr != nil || err != nil {
				return usageError(fmt.Errorf("--rate %q: want <limit>/<period>, e.g. 10/1s", rate))
			}
			l.Rate = &dtqtype.RateLimit{Limit: limit, Period: dtqtype.Duration(d), Burst: burst}
		} else if burst != 0 {
			return usageError(fmt.Errorf("--burst needs --rate"))
		}
		if l.Rate == nil && conc == 0 && keyConc == 0 {
			return usageError(fmt.Errorf("give --rate, --concurrency or --key-concurrency (dtq queues limits delete removes them)"))
		}
		var out limitsAnswer
		return r.call(cmd, request{method: http.MethodPut, path: limitsPath(args[0]), body: l}, &out,
			func(p *printer, _ *apiResponse) error { return printLimits(p, &out) })
	})
	return cmd
}

func newLimitsDeleteCmd(r *remote) *cobra.Command {
	cmd := &cobra.Command{
		Use:               "delete <queue>",
		Short:             "Remove a queue's limits (admin)",
		Example:           "  dtq queues limits delete emails",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: r.completeQueues,
	}
	cmd.RunE = runE(func(cmd *cobra.Command, args []string) error {
		return r.call(cmd, request{method: http.MethodDelete, path: limitsPath(args[0])}, nil, func(p *printer, _ *apiResponse) error {
			return p.textf("queue %s: no limits", args[0])
		})
	})
	return cmd
}
