package config

import (
	"context"
	"io"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dtq-io/dtq"
)

// DeploymentConfig returns the dtq.DeploymentConfig the configuration
// describes: the settings every process of the deployment shares.
func (c *Config) DeploymentConfig() *dtq.DeploymentConfig {
	return &dtq.DeploymentConfig{
		KeyPrefix:          c.KeyPrefix,
		EventsMaxLen:       c.EventsMaxLen,
		DLQMaxLen:          c.DLQMaxLen,
		DisableDLQ:         !c.DLQEnabled,
		SucceededRetention: retentionOf(c.SucceededRetention),
		FailedRetention:    retentionOf(c.FailedRetention),
		ResultRetention:    c.ResultRetention,
		IdempotencyTTL:     c.IdempotencyTTL,
		MaxWorkers:         c.MaxWorkers,
		ReplicaAcks:        c.ReplicaAcks,
		ReplicaAckTimeout:  c.ReplicaAckTimeout,
	}
}

// Open opens the deployment the configuration describes in rc.
func (c *Config) Open(rc redis.UniversalClient) (*dtq.Deployment, error) {
	return dtq.Open(rc, c.DeploymentConfig())
}

// ClientConfig returns the dtq.ClientConfig the configuration describes,
// with TaskTypes from DTQ_TASK_TYPES (nil = any type).
func (c *Config) ClientConfig() *dtq.ClientConfig {
	return &dtq.ClientConfig{
		MaxQueueDepth:   c.MaxQueueDepth,
		MaxPayloadBytes: c.MaxPayloadBytes,
		MaxAttempts:     c.MaxAttempts,
		TaskTimeout:     c.TaskTimeout,
		TaskTypes:       append([]string(nil), c.TaskTypes...),

		MaxWorkflowNodes: int(c.WorkflowMaxNodes),
		SubmitLinger:     lingerOf(c.SubmitLinger),

		DeclaredQueuesOnly: c.QueuePolicy == QueuePolicyDeclared,
	}
}

// Level returns DTQ_LOG_LEVEL as a slog.Level.
func (c *Config) Level() slog.Level {
	switch c.LogLevel {
	case "debug":
		return slog.LevelDebug
	case "warn":
		return slog.LevelWarn
	case "error":
		return slog.LevelError
	}
	return slog.LevelInfo
}

// NewLogger returns a logger writing to w: text lines, or JSON lines when
// DTQ_LOG_JSON is set, at DTQ_LOG_LEVEL. Both handlers quote or escape
// control characters, so a logged value cannot forge a line.
func (c *Config) NewLogger(w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: c.Level()}
	if c.LogJSON {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// NewAccessLogger returns the logger of the API's request lines, writing
// to w as NewLogger does. Unless DTQ_LOG_REQUESTS is set, a request line the
// API writes at INFO for an answer below 400 (routine traffic) is lowered
// to DEBUG, so that the default level shows what went wrong rather than
// every request; 4xx lines stay at INFO and 5xx at WARN.
func (c *Config) NewAccessLogger(w io.Writer) *slog.Logger {
	l := c.NewLogger(w)
	if c.LogRequests {
		return l
	}
	return slog.New(routineAtDebug{l.Handler()})
}

// routineAtDebug lowers INFO records whose status attribute is below 400
// to DEBUG.
type routineAtDebug struct{ slog.Handler }

// Handle implements slog.Handler.
func (h routineAtDebug) Handle(ctx context.Context, r slog.Record) error {
	if r.Level == slog.LevelInfo && routineRequest(r) {
		if !h.Enabled(ctx, slog.LevelDebug) {
			return nil
		}
		r.Level = slog.LevelDebug
	}
	return h.Handler.Handle(ctx, r)
}

// WithAttrs implements slog.Handler.
func (h routineAtDebug) WithAttrs(attrs []slog.Attr) slog.Handler {
	return routineAtDebug{h.Handler.WithAttrs(attrs)}
}

// WithGroup implements slog.Handler.
func (h routineAtDebug) WithGroup(name string) slog.Handler {
	return routineAtDebug{h.Handler.WithGroup(name)}
}

func routineRequest(r slog.Record) bool {
	routine := false
	r.Attrs(func(a slog.Attr) bool {
		if a.Key != "status" {
			return true
		}
		v := a.Value.Resolve()
		routine = v.Kind() == slog.KindInt64 && v.Int64() < 400
		return false
	})
	return routine
}

// WorkerConfig returns the dtq.WorkerConfig the configuration describes;
// strict serves the queues in their listed order instead of by weight.
// WorkerGatewayConfig (below) derives the API's HTTP-worker settings from it.
func (c *Config) WorkerConfig(strict bool, log *slog.Logger) *dtq.WorkerConfig {
	wc := &dtq.WorkerConfig{
		Queues:            c.QueueWeights(),
		Concurrency:       c.WorkerConcurrency,
		WorkerID:          c.WorkerID,
		VisibilityTimeout: c.VisibilityTimeout,
		HeartbeatInterval: c.HeartbeatInterval,
		RetryBaseDelay:    c.RetryBaseDelay,
		RetryMaxDelay:     c.RetryMaxDelay,
		RetryJitter:       c.RetryJitter,
		ResultMaxBytes:    c.ResultMaxBytes,
		DrainTimeout:      c.DrainTimeout,
		Logger:            log,
	}
	if c.RetryJitter == 0 {
		wc.RetryJitter = -1 // an explicit 0 means no jitter
	}
	if strict {
		wc.StrictOrder = c.QueueNames()
	}
	return wc
}

// WorkerGatewayConfig is the configuration of the API's HTTP-worker service
// (dtq.Deployment.NewWorkerGateway): the worker settings it shares, with the id made up by
// the API so that it never collides with a Go worker's DTQ_WORKER_ID.
func (c *Config) WorkerGatewayConfig(log *slog.Logger) *dtq.WorkerGatewayConfig {
	wc := c.WorkerConfig(false, log)
	return &dtq.WorkerGatewayConfig{
		VisibilityTimeout: wc.VisibilityTimeout, HeartbeatInterval: wc.HeartbeatInterval,
		RetryBaseDelay: wc.RetryBaseDelay, RetryMaxDelay: wc.RetryMaxDelay, RetryJitter: wc.RetryJitter,
		ResultMaxBytes: wc.ResultMaxBytes, Logger: wc.Logger,
		LeaseSecret: c.LeaseSecret, MaxWorkersPerKey: c.MaxWorkersPerKey,
	}
}

// retentionOf is a configured retention as the library takes it: 0 (keep
// nothing) is dtq.NoRetention, since a zero field means "the default".
func retentionOf(d time.Duration) time.Duration {
	if d == 0 {
		return dtq.NoRetention
	}
	return d
}

// lingerOf maps DTQ_SUBMIT_LINGER to ClientConfig.SubmitLinger, where 0
// means the default and a negative value never waiting.
func lingerOf(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}
