package cli

import (
	"strconv"
	"strings"

	"github.com/spf13/cobra"
)

// workerView is the part of a worker answer the tables show.
type workerView struct {
	ID                  string   `json:"worker_id"`
	Hostname            string   `json:"hostname"`
	PID                 int      `json:"pid"`
	Version             string   `json:"version"`
	Queues              []string `json:"queues"`
	Concurrency         int      `json:"concurrency"`
	HeartbeatIntervalMS int64    `json:"heartbeat_interval_ms"`
	StartedAt           string   `json:"started_at"`
	LastHeartbeat       string   `json:"last_heartbeat"`
	Status              string   `json:"status"`
	Live                bool     `json:"live"`
	InFlight            []string `json:"in_flight"`
	Processed           int64    `json:"processed"`
	Failed              int64    `json:"failed"`
	Retried             int64    `json:"retried"`
}

func (w *workerView) liveness() string {
	if w.Live {
		return "live"
	}
	return "stale"
}

func (w *workerView) inFlight() string {
	return strconv.Itoa(len(w.InFlight)) + "/" + strconv.Itoa(w.Concurrency)
}

func newWorkersCmd(e *env) *cobra.Command {
	r := &remote{}
	cmd := groupCmd(e, "workers", "Inspect workers", r)
	cmd.AddCommand(newWorkersListCmd(r), newWorkersGetCmd(r))
	return cmd
}

func newWorkersListCmd(r *remote) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the workers seen in the last 24 hours",
		Long: "List the workers that heartbeated in the last 24 hours, most recent first.\n" +
			"A worker is stale when it missed three heartbeats. IN_FLIGHT is running\n" +
			"tasks out of its concurrency.",
		Args: cobra.NoArgs,
	}
	cmd.RunE = runE(func(cmd *cobra.Command, _ []string) error {
		return printList(cmd, r, listing[workerView]{
			path: "/api/v1/workers", all: true,
			header: []string{"WORKER_ID", "LIVE", "STATUS", "QUEUES", "IN_FLIGHT", "PROCESSED", "FAILED", "LAST_HEARTBEAT"},
			row: func(w workerView) []string {
				return []string{w.ID, w.liveness(), w.Status, strings.Join(w.Queues, ","), w.inFlight(),
					itoa(w.Processed), itoa(w.Failed), w.LastHeartbeat}
			},
		})
	})
	return cmd
}

func newWorkersGetCmd(r *remote) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "get <worker-id>",
		Short: "Show one worker with its in-flight task ids",
		Args:  cobra.ExactArgs(1),
	}
	cmd.RunE = runE(func(cmd *cobra.Command, args []string) error {
		s, err := r.open(cmd)
		if err != nil {
			return err
		}
		defer s.close()
		var w workerView
		body, err := s.api.get(cmd.Context(), "/api/v1/workers/"+pathID(args[0]), nil, &w)
		if err != nil {
			return err
		}
		if s.out.json {
			return s.out.raw(body)
		}
		return s.out.fields([][2]string{
			{"worker_id", w.ID},
			{"live", w.liveness()},
			{"status", w.Status},
			{"hostname", w.Hostname},
			{"pid", strconv.Itoa(w.PID)},
			{"version", w.Version},
			{"queues", strings.Join(w.Queues, ",")},
			{"concurrency", strconv.Itoa(w.Concurrency)},
			{"heartbeat_interval_ms", itoa(w.HeartbeatIntervalMS)},
			{"started_at", w.StartedAt},
			{"last_heartbeat", w.LastHeartbeat},
			{"processed", itoa(w.Processed)},
			{"failed", itoa(w.Failed)},
			{"retried", itoa(w.Retried)},
			{"in_flight", strings.Join(w.InFlight, " ")},
		})
	})
	return cmd
}
