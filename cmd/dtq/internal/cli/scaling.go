package cli

import (
	"net/url"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/dtq-io/dtq/dtqtype"
)

// newQueuesScalingCmd is dtq queues scaling <queue>: the autoscaling
// signal (docs/autoscaling.md).
func newQueuesScalingCmd(r *remote) *cobra.Command {
	var drain, idle string
	var concurrency int
	cmd := &cobra.Command{
		Use:   "scaling <queue>",
		Short: "Show the workers a queue wants and what that comes from",
		Long: "Show a queue's autoscaling signal (GET /api/v1/queues/{queue}/scaling): the\n" +
			"workers it wants, ⌈(arrival rate × service time + ready × service time / drain)\n" +
			"/ slots a worker⌉, at least 1 while a task is ready, held, running or due within\n" +
			"a minute, 0 only once the queue was idle for --idle.",
		Example:           "  dtq queues scaling emails\n  dtq queues scaling emails --drain 5m --concurrency 8",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: r.completeQueues,
	}
	f := cmd.Flags()
	f.StringVar(&drain, "drain", "", "how soon the ready backlog should be worked off, 1s..24h (default 60s)")
	f.StringVar(&idle, "idle", "", "how long the queue must be idle before it wants 0 workers, 0s..1h (default 300s)")
	f.IntVar(&concurrency, "concurrency", 0, "slots a worker has when no live worker of the queue says (default 16)")
	path := func(q string) string {
		v := url.Values{}
		if drain != "" {
			v.Set("drain", drain)
		}
		if idle != "" {
			v.Set("idle", idle)
		}
		if concurrency != 0 {
			v.Set("concurrency", strconv.Itoa(concurrency))
		}
		p := queuePath(q) + "/scaling"
		if len(v) > 0 {
			p += "?" + v.Encode()
		}
		return p
	}
	cmd.RunE = showRun(r, path, printScaling)
	return cmd
}

func printScaling(p *printer, s *dtqtype.QueueScaling) error {
	return p.fields([][2]string{
		{"queue", s.Queue},
		{"desired_workers", itoa(s.DesiredWorkers)},
		{"ready", itoa(s.Ready)},
		{"held", itoa(s.Held)},
		{"running", itoa(s.Running)},
		{"due_soon", itoa(s.DueSoon) + " (due within a minute)"},
		{"arrival_rate", strconv.FormatFloat(s.ArrivalRate, 'f', -1, 64) + "/s"},
		{"service_time", strconv.FormatFloat(s.ServiceTimeMeanMS, 'f', -1, 64) + " ms (mean)"},
		{"oldest_ready", itoa(s.OldestReadyAgeMS) + " ms"},
		{"concurrency", strconv.Itoa(s.PerWorkerConcurrency) + " a worker"},
	})
}
