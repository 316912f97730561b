package dtq

import (
	"context"
	"log/slog"
)

// WorkflowMaintenanceConfig configures RunWorkflowMaintenance. Zero values
// select the defaults noted.
type WorkflowMaintenanceConfig struct {
	// Client submits on_failure tasks, with its limits. It must use the
	// Deployment's KeyPrefix. Default: a Client with default limits.
	Client *Client
	// Logger receives warnings. Default: discarded.
	Logger *slog.Logger
}

// RunWorkflowMaintenance runs until ctx ends what a Worker runs for the
// workflows of its queues, for every registered queue of d (looked up every 2
// s): the relay of each queue's workflow outbox and the sweep of the
// attention index. A process that serves no queue (the API server) runs it
// so that the ends of nodes on queues only HTTP workers serve reach their
// workflows. Any number of processes may run it at once.
//
// The relays hold few connections whatever the number of queues: on a
// single Redis one connection of their own per 256 queues, blocked in one
// read that names their outboxes; on Redis Cluster none held, the
// outboxes polled every 200 ms with one pipeline per node (see
// docs/workflows-internals.md, "Relay").
// It fails at once when cfg.Client uses another key prefix.
func RunWorkflowMaintenance(ctx context.Context, d *Deployment, cfg *WorkflowMaintenanceConfig) error {
	var o WorkflowMaintenanceConfig
	if cfg != nil {
		o = *cfg
	}
	c, err := d.clientOr(o.Client, "WorkflowMaintenanceConfig")
	if err != nil {
		return err
	}
	c.newEngine(d.dep, o.Logger).RunMaintenance(ctx)
	return nil
}
