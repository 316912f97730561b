package cli

import (
	"github.com/dtq-io/dtq/dtqtype"

	"strconv"
	"strings"

	"github.com/spf13/cobra"
)

// workerView is the part of a worker answer the tables show.
// workerView is a worker as the API answers it.
type workerView struct{ dtqtype.WorkerInfo }

func (w *workerView) liveness() string {
	if w.Live {
		return "live"
	}
	if w.Status == "stopped" {
		return "stopped" // shut down cleanly
	}
	return "stale"
}

func (w *workerView) inFlight() string {
	return strconv.Itoa(len(w.InFlight)) + "/" + strconv.Itoa(w.Concurrency)
}

func workerPath(id string) string { return "/api/v1/workers/" + pathID(id) }

func newWorkersCmd(e *env) *cobra.Command {
	r := &remote{}
	cmd := groupCmd(e, "workers", "Inspect workers", r)
	cmd.AddCommand(newWorkersListCmd(r), newWorkersGetCmd(r))
	return cmd
}

func newWorkersListCmd(r *remote) *cobra.Command {
	return listCmd(r, &cobra.Command{
		Use:   "list",
		Short: "List the workers seen in the last 24 hours",
		Long: "List the workers that heartbeated in the last 24 hours, in worker id order.\n" +
			"A worker is stopped when it shut down cleanly, stale when it missed three\n" +
			"heartbeats (it may have crashed). IN_FLIGHT is running\n" +
			"tasks out of its concurrency.",
	}, listing[workerView]{
		path: "/api/v1/workers", all: true,
		header: []string{"WORKER_ID", "LIVE", "STATUS", "QUEUES", "IN_FLIGHT", "PROCESSED", "FAILED", "LAST_HEARTBEAT"},
		row: func(w workerView) []string {
			return []string{w.ID, w.liveness(), w.Status, strings.Join(w.Queues, ","), w.inFlight(),
				itoa(w.Processed), itoa(w.Failed), wireTime(w.LastHeartbeat)}
		},
	})
}

func newWorkersGetCmd(r *remote) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "get <worker-id>",
		Short: "Show one worker with its in-flight task ids",
		Args:  cobra.ExactArgs(1),
	}
	cmd.RunE = showRun(r, workerPath, printWorker)
	return cmd
}

func printWorker(p *printer, w *workerView) error {
	return p.fields([][2]string{
		{"worker_id", w.ID},
		{"live", w.liveness()},
		{"status", w.Status},
		{"hostname", w.Hostname},
		{"pid", strconv.Itoa(w.PID)},
		{"version", w.Version},
		{"queues", strings.Join(w.Queues, ",")},
		{"concurrency", strconv.Itoa(w.Concurrency)},
		{"heartbeat_interval_ms", itoa(w.HeartbeatIntervalMS)},
		{"started_at", wireTime(w.StartedAt)},
		{"last_heartbeat", wireTime(w.LastHeartbeat)},
		{"processed", itoa(w.Processed)},
		{"failed", itoa(w.Failed)},
		{"retried", itoa(w.Retried)},
		{"in_flight", strings.Join(w.InFlight, " ")},
	})
}
