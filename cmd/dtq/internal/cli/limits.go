package cli

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/dtq-io/dtq/dtqtype"
)

// newQueuesLimitsCmd is dtq queues limits get|set|delete.
func newQueuesLimitsCmd(r *remote) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "limits",
		Short: "Show or change a queue's rate, concurrency and fairness limits",
		Long: "Show or change a queue's flow-control limits: a rate (task starts per period,\n" +
			"across all workers), a concurrency (running tasks at once), a key\n" +
			"concurrency (running tasks at once per concurrency_key), fairness (starts\n" +
			"shared between keys by weight), a key rate (starts per period per key) and\n" +
			"key order fifo (each key's tasks start in submission order).",
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
	if f := l.Fairness; f != nil {
		p := fmt.Sprintf("fairness (default weight %d", max(1, f.DefaultWeight))
		keys := make([]string, 0, len(f.Weights))
		for k := range f.Weights {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		var b strings.Builder
		b.WriteString(p)
		for _, k := range keys {
			fmt.Fprintf(&b, ", %s %d", k, f.Weights[k])
		}
		parts = append(parts, b.String()+")")
	}
	if l.KeyRate != nil {
		p := fmt.Sprintf("key_rate %d/%s", l.KeyRate.Limit, time.Duration(l.KeyRate.Period))
		if l.KeyRate.Burst > 1 {
			p += fmt.Sprintf(" (burst %d)", l.KeyRate.Burst)
		}
		parts = append(parts, p)
	}
	if l.KeyOrder != "" {
		parts = append(parts, "key_order "+l.KeyOrder)
	}
	if l.Events != "" && l.Events != dtqtype.EventsFull {
		parts = append(parts, "events "+l.Events)
	}
	if len(parts) == 0 {
		return "no limits" // events "full" alone: the default
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
	var rate, keyRate, keyOrder, events string
	var burst, conc, keyConc, keyBurst, defaultWeight int
	var fair bool
	var weights []string
	cmd := &cobra.Command{
		Use:   "set <queue>",
		Short: "Replace a queue's limits (admin)",
		Long: "Replace a queue's limits: the ones not given are removed. --rate and\n" +
			"--key-rate are <limit>/<period>, e.g. 10/1s or 100/1m. --weight <key>=<n>\n" +
			"(repeatable) and --default-weight imply --fair.",
		Example: "  dtq queues limits set emails --rate 10/1s --concurrency 5\n  dtq queues limits set billing --key-concurrency 1\n" +
			"  dtq queues limits set tenants --fair --weight acme=5 --key-rate 2/1s\n" +
			"  dtq queues limits set ledger --key-order fifo --key-concurrency 1\n" +
			"  dtq queues limits set bulk --events outcomes",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: r.completeQueues,
	}
	cmd.Flags().StringVar(&rate, "rate", "", "task starts per period, <limit>/<period> (e.g. 10/1s)")
	cmd.Flags().IntVar(&burst, "burst", 0, "starts an idle queue may make at once (with --rate; default 1)")
	cmd.Flags().IntVar(&conc, "concurrency", 0, "running tasks at once, across all workers")
	cmd.Flags().IntVar(&keyConc, "key-concurrency", 0, "running tasks at once per concurrency key")
	cmd.Flags().BoolVar(&fair, "fair", false, "share starts between the keys with ready tasks (weight 1 each unless given)")
	cmd.Flags().IntVar(&defaultWeight, "default-weight", 0, "weight of keys without --weight, and of keyless tasks (default 1)")
	cmd.Flags().StringArrayVar(&weights, "weight", nil, "a key's weight, <key>=<n> (repeatable)")
	cmd.Flags().StringVar(&keyRate, "key-rate", "", "task starts per period per key, <limit>/<period> (e.g. 2/1s)")
	cmd.Flags().IntVar(&keyBurst, "key-burst", 0, "starts an idle key may make at once (with --key-rate; default 1)")
	cmd.Flags().StringVar(&keyOrder, "key-order", "", `"fifo": each key's tasks start in submission order`)
	cmd.Flags().StringVar(&events, "events", "", `event detail: "full" (default) or "outcomes" (no queued/started events)`)
	cmd.RunE = runE(func(cmd *cobra.Command, args []string) error {
		l := dtqtype.QueueLimits{Concurrency: conc, KeyConcurrency: keyConc, KeyOrder: keyOrder, Events: events}
		if err := parseRateFlag("rate", rate, burst, &l.Rate); err != nil {
			return err
		}
		if err := parseRateFlag("key-rate", keyRate, keyBurst, &l.KeyRate); err != nil {
			return err
		}
		if fair || defaultWeight != 0 || len(weights) > 0 {
			l.Fairness = &dtqtype.Fairness{DefaultWeight: defaultWeight}
			for _, kw := range weights {
				k, v, ok := strings.Cut(kw, "=")
				var w int
				if _, serr := fmt.Sscan(v, &w); !ok || k == "" || serr != nil {
					return usageError(fmt.Errorf("--weight %q: want <key>=<n>, e.g. acme=5", kw))
				}
				if l.Fairness.Weights == nil {
					l.Fairness.Weights = map[string]int{}
				}
				l.Fairness.Weights[k] = w
			}
		}
		if l.Rate == nil && conc == 0 && keyConc == 0 && l.Fairness == nil && l.KeyRate == nil && keyOrder == "" &&
			events == "" {
			return usageError(fmt.Errorf("give --rate, --concurrency, --key-concurrency, --fair, --key-rate, --key-order or --events " +
				"(dtq queues limits delete removes them)"))
		}
		var out limitsAnswer
		return r.call(cmd, request{method: http.MethodPut, path: limitsPath(args[0]), body: l}, &out,
			func(p *printer, _ *apiResponse) error { return printLimits(p, &out) })
	})
	return cmd
}

// parseRateFlag reads --<name> <limit>/<period> and its burst into *to;
// *to is left alone when the flag is not given.
func parseRateFlag(name, v string, burst int, to **dtqtype.RateLimit) error {
	if v == "" {
		if burst != 0 {
			return usageError(fmt.Errorf("--%s needs --%s", strings.TrimSuffix(name, "rate")+"burst", name))
		}
		return nil
	}
	n, p, ok := strings.Cut(v, "/")
	var limit int
	d, err := time.ParseDuration(p)
	if _, serr := fmt.Sscan(n, &limit); !ok || serr != nil || err != nil {
		return usageError(fmt.Errorf("--%s %q: want <limit>/<period>, e.g. 10/1s", name, v))
	}
	*to = &dtqtype.RateLimit{Limit: limit, Period: dtqtype.Duration(d), Burst: burst}
	return nil
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
