package dtq

import (
	"context"
	"errors"
	"log/slog"
	"time"
)

// WorkflowMaintenanceConfig configures RunWorkflowMaintenance. Zero values
// select the defaults noted.
type WorkflowMaintenanceConfig struct {
	// Client submits on_failure tasks and names the key prefix, events
	// cap and clock. Required.
	Client *Client
	// SucceededRetention and FailedRetention are the workers' settings: a
	// finished workflow is kept at least the longer of the two. Defaults
	// DefaultSucceededRetention and DefaultFailedRetention.
	SucceededRetention, FailedRetention time.Duration
	// Logger receives warnings. Default: discarded.
	Logger *slog.Logger
}

// RunWorkflowMaintenance runs until ctx ends what a Worker runs for the
// workflows of its queues, for every registered queue (looked up every 2
// s): the relay of each queue's workflow outbox and the sweep of the
// attention index. A process that serves no queue (the API server) runs it
// so that the ends of nodes on queues only HTTP workers serve reach their
// workflows. Any number of processes may run it at once.
//
// The relays hold few connections whatever the number of queues: on a
// single Redis one connection of their own per 256 queues, blocked in one
// read that names their outboxes; on Redis Cluster none held, the
// outboxes polled every 200 ms with one pipeline per node (see
// docs/workflows.md, "Relays").
func RunWorkflowMaintenance(ctx context.Context, cfg *WorkflowMaintenanceConfig) error {
	if cfg == nil || cfg.Client == nil {
		return errors.New("dtq: RunWorkflowMaintenance needs a Client")
	}
	c := cfg.Client
	dep := c.dep
	if cfg.SucceededRetention != 0 {
		dep.succeededRetention = cfg.SucceededRetention
	}
	if cfg.FailedRetention != 0 {
		dep.failedRetention = cfg.FailedRetention
	}
	c.newEngine(dep, cfg.Logger).RunMaintenance(ctx)
	return nil
}
