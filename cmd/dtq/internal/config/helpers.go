package config

import (
	"context"
	"io"
	"log/slog"
	"time"

	"github.com/dtq-io/dtq"
)

// ClientConfig returns the dtq.ClientConfig the configuration describes,
// with TaskTypes from DTQ_TASK_TYPES (nil = any type).
func (c *Config) ClientConfig() *dtq.ClientConfig {
	return &dtq.ClientConfig{
		KeyPrefix:       c.KeyPrefix,
		MaxQueueDepth:   c.MaxQueueDepth,
		MaxPayloadBytes: c.MaxPayloadBytes,
		MaxAttempts:     c.MaxAttempts,
		TaskTimeout:     c.TaskTimeout,
		IdempotencyTTL:  c.IdempotencyTTL,
		EventsMaxLen:    c.EventsMaxLen,
		TaskTypes:       append([]string(nil), c.TaskTypes...),
		FailedRetention: retentionOf(c.FailedRetention),

		MaxWorkflowNodes: int(c.WorkflowMaxNodes),
		SubmitLinger:     lingerOf(c.SubmitLinger),

		ReplicaAcks:       c.ReplicaAcks,
		ReplicaAckTimeout: c.ReplicaAckTimeout,

		DeclaredQueuesOnly: c.QueuePolicy == QueuePolicyDeclared,
	}
}

// InspectorConfig returns the dtq.InspectorConfig the configuration describes.
func (c *Config) InspectorConfig() *dtq.InspectorConfig {
	return &dtq.InspectorConfig{KeyPrefix: c.KeyPrefix}
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
		KeyPrefix:          c.KeyPrefix,
		Queues:             c.QueueWeights(),
		Concurrency:        c.WorkerConcurrency,
		WorkerID:           c.WorkerID,
		VisibilityTimeout:  c.VisibilityTimeout,
		HeartbeatInterval:  c.HeartbeatInterval,
		RetryBaseDelay:     c.RetryBaseDelay,
		RetryMaxDelay:      c.RetryMaxDelay,
		RetryJitter:        c.RetryJitter,
		SucceededRetention: retentionOf(c.SucceededRetention),
		FailedRetention:    retentionOf(c.FailedRetention),
		ResultRetention:    c.ResultRetention,
		ResultMaxBytes:     c.ResultMaxBytes,
		DisableDLQ:         !c.DLQEnabled,
		DLQMaxLen:          c.DLQMaxLen,
		EventsMaxLen:       c.EventsMaxLen,
		DrainTimeout:       c.DrainTimeout,
		ReplicaAcks:        c.ReplicaAcks,
		ReplicaAckTimeout:  c.ReplicaAckTimeout,
		MaxWorkers:         c.MaxWorkers,
		Logger:             log,
	}
	if c.RetryJitter == 0 {
		wc.RetryJitter = -1 // an explicit 0 means no jitter
	}
	if strict {
		wc.StrictOrder = c.QueueNames()
	}
	return wc
}

// AdminConfig returns the dtq.AdminConfig the configuration describes.
func (c *Config) AdminConfig() *dtq.AdminConfig {
	return &dtq.AdminConfig{
		KeyPrefix:       c.KeyPrefix,
		EventsMaxLen:    c.EventsMaxLen,
		FailedRetention: retentionOf(c.FailedRetention),
		IdempotencyTTL:  c.IdempotencyTTL,
		DisableDLQ:      !c.DLQEnabled,

		ReplicaAcks:       c.ReplicaAcks,
		ReplicaAckTimeout: c.ReplicaAckTimeout,
	}
}

// WorkerGatewayConfig is the configuration of the API's HTTP-worker service
// (dtq.NewWorkerGateway): the worker settings it shares, with the id made up by
// the API so that it never collides with a Go worker's DTQ_WORKER_ID.
func (c *Config) WorkerGatewayConfig(log *slog.Logger) *dtq.WorkerGatewayConfig {
	wc := c.WorkerConfig(false, log)
	return &dtq.WorkerGatewayConfig{
		KeyPrefix: wc.KeyPrefix, VisibilityTimeout: wc.VisibilityTimeout, HeartbeatInterval: wc.HeartbeatInterval,
		RetryBaseDelay: wc.RetryBaseDelay, RetryMaxDelay: wc.RetryMaxDelay, RetryJitter: wc.RetryJitter,
		SucceededRetention: wc.SucceededRetention, FailedRetention: wc.FailedRetention, ResultRetention: wc.ResultRetention,
		ResultMaxBytes: wc.ResultMaxBytes, DisableDLQ: wc.DisableDLQ, DLQMaxLen: wc.DLQMaxLen, EventsMaxLen: wc.EventsMaxLen,
		Logger: wc.Logger, ReplicaAcks: wc.ReplicaAcks, ReplicaAckTimeout: wc.ReplicaAckTimeout, Clock: wc.Clock,
		LeaseSecret: c.LeaseSecret, MaxWorkers: wc.MaxWorkers, MaxWorkersPerKey: c.MaxWorkersPerKey,
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
