// Package httpapi serves dtq's HTTP API under /api/v1, plus /health and
// /ready. It goes through the public library (dtq.Client, dtq.Inspector,
// dtq.Admin) and never around it into storage.
//
// Every response carries X-Request-ID; every error is the JSON envelope
// {"code", "message", "details", "request_id"} with one of the codes docs/http-api.md lists. Routes
// live in one table (routes) that also drives authorization, so adding an
// endpoint is one line there plus its handler. Every destructive operator
// action is written to the audit log (see audit.go).
package httpapi

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/cmd/dtq/internal/access"
	"github.com/dtq-io/dtq/dtqtype"
)

// Config configures the HTTP API.
type Config struct {
	// Client submits tasks. Required.
	Client *dtq.Client
	// Inspector reads tasks, queues, workers, the dead-letter queue, stats
	// and the audit log, and checks readiness. Required.
	Inspector *dtq.Inspector
	// Admin performs operator actions (cancel, run-now, delete, queue and
	// dead-letter operations) and appends them to the audit log. Required.
	Admin *dtq.Admin
	// WorkerGateway serves HTTP workers: claims, heartbeats, completes and
	// fails (docs/http-workers.md). Required.
	WorkerGateway *dtq.WorkerGateway
	// Keys are the accepted API keys; empty = open mode (no auth).
	Keys []APIKey
	// MaxPayloadBytes is DTQ_MAX_PAYLOAD_BYTES; it bounds the size of a
	// submission body (2 × this + 64 KiB). It should equal the Client's
	// limit. Default 262144.
	MaxPayloadBytes int
	// Logger receives every unexpected error, and the request lines unless
	// AccessLog is set. Default: discard.
	Logger *slog.Logger
	// AccessLog receives the one line per request. Default: Logger. A server
	// gives it a buffered writer: a write per line is a system call per
	// request.
	AccessLog *slog.Logger
	// Events serves the event feed (GET /api/v1/events, /ws/events); nil
	// answers those routes with 503.
	Events EventFeed
	// AllowedHosts are the Host names an open-mode API answers besides
	// localhost and loopback addresses (DTQ_ALLOWED_HOSTS); "*" allows any.
	// Ignored when Keys are configured. Default none.
	AllowedHosts []string
	// ServedCacheTTL is how long the API reuses its reading of the queues
	// live workers serve when it warns about a submission to an unserved
	// queue (see servedQueues). Default DefaultServedCacheTTL.
	ServedCacheTTL time.Duration
	// Registry receives the API's Prometheus metrics, served at /metrics.
	// Default: a private registry with the Go and process collectors.
	Registry *prometheus.Registry
	// MetricsMaxQueues is DTQ_METRICS_MAX_QUEUES: /metrics carries per-queue
	// gauges for at most this many queues, the deepest (then those with the
	// most dead letters, then by name), and totals over all queues.
	// Default DefaultMetricsMaxQueues; negative = totals only.
	MetricsMaxQueues int
	// MaxBodyBytesInFlight is DTQ_MAX_BODY_BYTES_IN_FLIGHT: the request
	// body bytes the process holds at once, over all requests; a body that
	// does not fit is answered 503 SERVER_BUSY with Retry-After before
	// anything is written. At least the largest body a route takes (a 16
	// MiB batch, or a single submission at MaxPayloadBytes); New fails
	// otherwise. Default DefaultMaxBodyBytesInFlight.
	MaxBodyBytesInFlight int64
	// MaxWaits is DTQ_MAX_WAITS: the long-polls (GET /api/v1/tasks/{id}?wait=)
	// the process holds at once; more are 429 TOO_MANY_WAITS. Default
	// DefaultMaxWaits.
	MaxWaits int
	// MaxWaitsPerKey is DTQ_MAX_WAITS_PER_KEY: the same per API key (per
	// client address in open mode). Default DefaultMaxWaitsPerKey.
	MaxWaitsPerKey int
	// MaxQueueDepth is DTQ_MAX_QUEUE_DEPTH, exported as dtq_queue_max_depth
	// so that alerts compare depths with the limit in force. It should
	// equal the Client's limit. Default DefaultMaxQueueDepth.
	MaxQueueDepth int64
}

// DefaultMaxQueueDepth is Config.MaxQueueDepth's default, the Client's.
const DefaultMaxQueueDepth = 10000

// DefaultMetricsMaxQueues is Config.MetricsMaxQueues's default.
const DefaultMetricsMaxQueues = 100

// DefaultMaxPayloadBytes is the payload limit used when
// Config.MaxPayloadBytes is zero (docs/configuration.md).
const DefaultMaxPayloadBytes = dtq.DefaultMaxPayloadBytes

// Body limits (docs/http-api.md): a single submission may carry its payload twice
// over (escaping) plus the other fields; a batch is capped at 16 MiB.
const (
	bodySlack         = 64 << 10
	maxBatchBodyBytes = 16 << 20
	maxBatchTasks     = 1000
)

// Server is the HTTP API handler. It is safe for concurrent use.
type Server struct {
	cfg     Config
	log     *slog.Logger
	access  *slog.Logger // request lines
	keys    []keyEntry
	maxBody int64
	routes  []route
	mux     *http.ServeMux
	xorigin *http.CrossOriginProtection
	metrics *apiMetrics

	allowedHosts map[string]struct{} // normalised Config.AllowedHosts
	served       *servedQueues
	bodies       *bodyBudget
	waits        *waitLimits
	watches      *sharedWaits[dtqtype.TaskInfo]
	wfWatches    *sharedWaits[dtqtype.WorkflowInfo]
}

// route is one endpoint: method and Go 1.22 ServeMux path pattern, the
// weakest role that may call it (0 = open to everyone) and its handler.
type route struct {
	method  string
	pattern string
	role    Role
	handler http.HandlerFunc
	scope   scope // how a scoped key's queues are checked
}

// New returns the API handler. It fails when Client, Inspector, Admin or WorkerGateway
// is missing, MaxPayloadBytes is negative, or a key is invalid (unknown role,
// empty name or secret, a secret used twice).
func New(cfg Config) (*Server, error) {
	if cfg.Client == nil || cfg.Inspector == nil || cfg.Admin == nil || cfg.WorkerGateway == nil {
		return nil, errors.New("httpapi: Config needs a Client, an Inspector, an Admin and a WorkerGateway")
	}
	if cfg.MaxPayloadBytes < 0 {
		return nil, fmt.Errorf("httpapi: MaxPayloadBytes must not be negative, got %d", cfg.MaxPayloadBytes)
	}
	if cfg.MaxPayloadBytes == 0 {
		cfg.MaxPayloadBytes = DefaultMaxPayloadBytes
	}
	if err := access.ValidateKeys(cfg.Keys); err != nil {
		return nil, fmt.Errorf("httpapi: %w", err)
	}
	allowed := make(map[string]struct{}, len(cfg.AllowedHosts))
	for _, h := range cfg.AllowedHosts {
		if err := access.ValidateAllowedHost(h); err != nil {
			return nil, fmt.Errorf("httpapi: AllowedHosts: %w", err)
		}
		allowed[normalHost(h)] = struct{}{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.AccessLog == nil {
		cfg.AccessLog = cfg.Logger
	}
	if cfg.MaxBodyBytesInFlight < 0 {
		return nil, fmt.Errorf("httpapi: MaxBodyBytesInFlight must not be negative, got %d", cfg.MaxBodyBytesInFlight)
	}
	if cfg.MaxBodyBytesInFlight == 0 {
		cfg.MaxBodyBytesInFlight = DefaultMaxBodyBytesInFlight
	}
	// A body the whole budget cannot hold would be refused forever.
	if largest := max(int64(maxBatchBodyBytes), 2*int64(cfg.MaxPayloadBytes)+bodySlack); cfg.MaxBodyBytesInFlight < largest {
		return nil, fmt.Errorf("httpapi: MaxBodyBytesInFlight must hold the largest body, %d bytes; got %d", largest, cfg.MaxBodyBytesInFlight)
	}
	if cfg.MaxWaits <= 0 {
		cfg.MaxWaits = DefaultMaxWaits
	}
	if cfg.MaxWaitsPerKey <= 0 {
		cfg.MaxWaitsPerKey = DefaultMaxWaitsPerKey
	}
	if cfg.MaxQueueDepth <= 0 {
		cfg.MaxQueueDepth = DefaultMaxQueueDepth
	}
	switch {
	case cfg.MetricsMaxQueues == 0:
		cfg.MetricsMaxQueues = DefaultMetricsMaxQueues
	case cfg.MetricsMaxQueues < 0:
		cfg.MetricsMaxQueues = 0
	}
	s := &Server{
		cfg:     cfg,
		log:     cfg.Logger,
		access:  cfg.AccessLog,
		keys:    hashKeys(cfg.Keys),
		maxBody: 2*int64(cfg.MaxPayloadBytes) + bodySlack,
		mux:     http.NewServeMux(),
		xorigin: http.NewCrossOriginProtection(),
		metrics: newAPIMetrics(cfg.Registry, cfg.Inspector, cfg.Events, cfg.MetricsMaxQueues, cfg.MaxQueueDepth),

		allowedHosts: allowed,
		bodies:       &bodyBudget{limit: cfg.MaxBodyBytesInFlight},
		waits:        &waitLimits{total: cfg.MaxWaits, perKey: cfg.MaxWaitsPerKey},
		watches: &sharedWaits[dtqtype.TaskInfo]{wait: cfg.Inspector.WaitTask, get: cfg.Inspector.GetTask,
			ended: func(t *dtqtype.TaskInfo) bool { return t.Status.Terminal() }},
		wfWatches: &sharedWaits[dtqtype.WorkflowInfo]{wait: cfg.Inspector.WaitWorkflow, get: cfg.Inspector.GetWorkflow,
			ended: func(w *dtqtype.WorkflowInfo) bool { return w.Status.Terminal() }},
	}
	if cfg.ServedCacheTTL <= 0 {
		cfg.ServedCacheTTL = DefaultServedCacheTTL
	}
	s.served = &servedQueues{ttl: cfg.ServedCacheTTL, read: s.liveQueues}
	s.routes = s.routeTable()
	for _, rt := range s.routes {
		s.mux.Handle(rt.method+" "+rt.pattern, s.authorize(rt.role, rt.scope, rt.handler))
	}
	return s, nil
}

// routeTable lists every endpoint. The OpenAPI document must describe each
// one (a test checks it).
func (s *Server) routeTable() []route {
	return []route{
		{http.MethodGet, "/health", 0, s.health, scopeOpen},
		{http.MethodGet, "/ready", 0, s.ready, scopeOpen},
		{http.MethodGet, "/api/v1/openapi.json", 0, s.openAPI, scopeOpen},
		{http.MethodGet, "/metrics", RoleReader, s.metricsPage, scopeGlobal},

		{http.MethodPost, "/api/v1/tasks", RoleProducer, s.submitTask, scopeInHandler},
		{http.MethodPost, "/api/v1/tasks/batch", RoleProducer, s.submitBatch, scopeInHandler},
		{http.MethodGet, "/api/v1/tasks", RoleReader, s.listTasks, scopeQuery},
		{http.MethodGet, "/api/v1/tasks/{id}", RoleReader, s.getTask, scopeTaskID},
		{http.MethodPost, "/api/v1/tasks/{id}/cancel", RoleAdmin, s.cancelTask, scopeTaskID},
		{http.MethodPost, "/api/v1/tasks/{id}/run-now", RoleAdmin, s.runNow, scopeTaskID},
		{http.MethodDelete, "/api/v1/tasks/{id}", RoleAdmin, s.deleteTask, scopeTaskID},

		{http.MethodPost, "/api/v1/workflows", RoleProducer, s.submitWorkflow, scopeInHandler},
		{http.MethodGet, "/api/v1/workflows", RoleReader, s.listWorkflows, scopeGlobal},
		{http.MethodGet, "/api/v1/workflows/{id}", RoleReader, s.getWorkflow, scopeInHandler},
		{http.MethodPost, "/api/v1/workflows/{id}/cancel", RoleProducer, s.cancelWorkflow, scopeInHandler},

		{http.MethodPost, "/api/v1/claims", RoleWorker, s.claim, scopeInHandler},
		{http.MethodPost, "/api/v1/tasks/{id}/nodes", RoleWorker, s.addNodes, scopeTaskID},
		{http.MethodPost, "/api/v1/tasks/{id}/heartbeat", RoleWorker, s.heartbeat, scopeTaskID},
		{http.MethodPost, "/api/v1/tasks/{id}/complete", RoleWorker, s.complete, scopeTaskID},
		{http.MethodPost, "/api/v1/tasks/{id}/fail", RoleWorker, s.fail, scopeTaskID},
		{http.MethodPost, "/api/v1/tasks/{id}/progress", RoleWorker, s.progress, scopeTaskID},
		{http.MethodGet, "/api/v1/tasks/{id}/logs", RoleReader, s.taskLogs, scopeTaskID},

		{http.MethodGet, "/api/v1/queues", RoleReader, s.listQueues, scopeInHandler},
		{http.MethodGet, "/api/v1/queues/{queue}", RoleReader, s.getQueue, scopePath},
		{http.MethodPut, "/api/v1/queues/{queue}", RoleAdmin, s.createQueue, scopePath},
		{http.MethodDelete, "/api/v1/queues/{queue}", RoleAdmin, s.deleteQueue, scopePath},
		{http.MethodPost, "/api/v1/queues/{queue}/pause", RoleAdmin, s.pauseQueue, scopePath},
		{http.MethodPost, "/api/v1/queues/{queue}/resume", RoleAdmin, s.resumeQueue, scopePath},
		{http.MethodPost, "/api/v1/queues/{queue}/purge", RoleAdmin, s.purgeQueue, scopePath},
		{http.MethodPost, "/api/v1/queues/{queue}/recount", RoleAdmin, s.recountQueue, scopePath},
		{http.MethodGet, "/api/v1/queues/{queue}/limits", RoleReader, s.getLimits, scopePath},
		{http.MethodPut, "/api/v1/queues/{queue}/limits", RoleAdmin, s.putLimits, scopePath},
		{http.MethodDelete, "/api/v1/queues/{queue}/limits", RoleAdmin, s.deleteLimits, scopePath},
		{http.MethodGet, "/api/v1/queues/{queue}/scaling", RoleReader, s.queueScaling, scopePath},
		{http.MethodGet, "/api/v1/scaling", RoleReader, s.scaling, scopeQueueList},

		{http.MethodGet, "/api/v1/dlq", RoleReader, s.listDLQ, scopeQuery},
		{http.MethodGet, "/api/v1/dlq/{task_id}", RoleReader, s.getDLQEntry, scopeTaskID},
		{http.MethodPost, "/api/v1/dlq/{task_id}/requeue", RoleAdmin, s.requeueDLQ, scopeTaskID},
		{http.MethodPost, "/api/v1/dlq/{task_id}/discard", RoleAdmin, s.discardDLQ, scopeTaskID},
		{http.MethodPost, "/api/v1/dlq/requeue", RoleAdmin, s.requeueDLQBulk, scopeInHandler},
		{http.MethodPost, "/api/v1/dlq/purge", RoleAdmin, s.purgeDLQBulk, scopeInHandler},

		{http.MethodGet, "/api/v1/schedules", RoleReader, s.listSchedules, scopeInHandler},
		{http.MethodGet, "/api/v1/schedules/{name}", RoleReader, s.getSchedule, scopeInHandler},
		{http.MethodPut, "/api/v1/schedules/{name}", RoleAdmin, s.putSchedule, scopeInHandler},
		{http.MethodDelete, "/api/v1/schedules/{name}", RoleAdmin, s.deleteSchedule, scopeInHandler},
		{http.MethodPost, "/api/v1/schedules/{name}/pause", RoleAdmin, s.pauseSchedule, scopeInHandler},
		{http.MethodPost, "/api/v1/schedules/{name}/resume", RoleAdmin, s.resumeSchedule, scopeInHandler},
		{http.MethodPost, "/api/v1/schedules/{name}/trigger", RoleAdmin, s.triggerSchedule, scopeInHandler},

		{http.MethodGet, "/api/v1/workers", RoleReader, s.listWorkers, scopeGlobal},
		{http.MethodGet, "/api/v1/workers/{id}", RoleReader, s.getWorker, scopeGlobal},
		{http.MethodGet, "/api/v1/stats", RoleReader, s.stats, scopeQuery},
		{http.MethodGet, "/api/v1/audit", RoleAdmin, s.listAudit, scopeGlobal},

		{http.MethodGet, "/api/v1/events", RoleReader, s.eventsSSE, scopeQueueList},
		{http.MethodGet, "/ws/events", RoleReader, s.eventsWS, scopeQueueList},
	}
}

// OpenMode reports whether the server runs without API keys, so that the
// caller can warn about it at start.
func (s *Server) OpenMode() bool { return len(s.keys) == 0 }

// ServeHTTP implements http.Handler: request id, panic recovery and the
// request log line around the route's handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.serve(w, r) }

// dispatch hands r to its route, answering unknown paths (404) and wrong
// methods (405, with Allow) with the error envelope instead of the mux's
// plain text.
func (s *Server) dispatch(w http.ResponseWriter, r *http.Request) {
	if !s.checkHost(w, r) {
		return
	}
	h, pattern := s.mux.Handler(r)
	if pattern != "" {
		// A web page must not make a visitor's browser change state here:
		// in open mode nothing else would stop a bodyless cross-site POST.
		if err := s.xorigin.Check(r); err != nil {
			s.writeAPIError(w, r, &apiError{status: http.StatusForbidden, code: codeForbidden,
				message: "cross-origin browser requests may not change state; call the API from its own origin or from a non-browser client"})
			return
		}
		s.mux.ServeHTTP(w, r)
		return
	}
	// The mux's own fallback tells 404 from 405 and computes Allow.
	probe := &headerProbe{header: http.Header{}}
	h.ServeHTTP(probe, r)
	if probe.status == http.StatusMethodNotAllowed {
		w.Header().Set("Allow", probe.header.Get("Allow"))
		s.writeAPIError(w, r, &apiError{status: http.StatusMethodNotAllowed, code: codeInvalidRequest,
			message: fmt.Sprintf("method %s is not allowed here; allowed: %s", r.Method, probe.header.Get("Allow"))})
		return
	}
	s.writeAPIError(w, r, &apiError{status: http.StatusNotFound, code: codeNotFound,
		message: "no such endpoint; see /api/v1/openapi.json"})
}

// headerProbe records what the mux's fallback handler would answer.
type headerProbe struct {
	header http.Header
	status int
}

func (p *headerProbe) Header() http.Header { return p.header }

func (p *headerProbe) Write(b []byte) (int, error) { return len(b), nil }

func (p *headerProbe) WriteHeader(code int) {
	if p.status == 0 {
		p.status = code
	}
}
