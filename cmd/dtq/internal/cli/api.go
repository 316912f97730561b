package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/cmd/dtq/internal/config"
	"github.com/dtq-io/dtq/cmd/dtq/internal/events"
	"github.com/dtq-io/dtq/cmd/dtq/internal/httpapi"
	"github.com/dtq-io/dtq/cmd/dtq/internal/web"
)

// Shutdown and start-up bounds; the HTTP server's own limits are
// httpapi.ServerLimits' defaults.
const (
	// shutdownGrace is how long in-flight requests may finish on their own
	// before their contexts are cancelled, which ends long-polls and streams.
	shutdownGrace = time.Second
	// shutdownTimeout bounds the whole HTTP shutdown.
	shutdownTimeout = 10 * time.Second
	// redisCheckTimeout bounds the start-up check that Redis answers.
	redisCheckTimeout = 5 * time.Second
)

func newAPICmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "api",
		Short: "Serve the HTTP API, the event feed and the dashboard",
		Long: "Serve the HTTP API under /api/v1 with /health, /ready and /metrics.\n" +
			"The API server is stateless and never runs handlers; run any number of them.\n" +
			"Without DTQ_API_KEYS or DTQ_API_KEY it runs in open mode (no authentication).",
		Args: cobra.NoArgs,
	}
	config.RegisterFlags(cmd.Flags())
	cmd.RunE = runE(func(cmd *cobra.Command, _ []string) error {
		cfg, err := loadConfig(cmd, e)
		if err != nil {
			return err
		}
		log := serverLogger(cfg, e)
		rc, err := config.NewRedisClient(cfg.RedisURL)
		if err != nil {
			return usageError(err)
		}
		defer rc.Close()
		return runAPI(cmd.Context(), e, &apiParams{cfg: cfg, log: log, redis: rc, redisName: config.RedactURL(cfg.RedisURL)})
	})
	return cmd
}

// apiParams is what runAPI serves with.
type apiParams struct {
	cfg       *config.Config
	log       *slog.Logger
	redis     redis.UniversalClient
	redisName string // for messages: a redacted URL or a description
	// announce, when set, is called with the API's base URL once it listens.
	announce func(url string)
	// listener, when set, is where the API serves; else it listens on
	// cfg.APIAddr once Redis has been checked.
	listener net.Listener
}

// runAPI checks Redis, loads the scripts and serves the HTTP API on
// cfg.APIAddr until ctx ends, then shuts down gracefully.
func runAPI(ctx context.Context, e *env, p *apiParams) error {
	cfg, log := p.cfg, p.log
	checkCtx, cancel := context.WithTimeout(ctx, redisCheckTimeout)
	defer cancel()
	if err := p.redis.Ping(checkCtx).Err(); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("cannot reach Redis at %s: %w", p.redisName, err)
	}
	d, err := cfg.Open(p.redis)
	if err != nil {
		return err
	}
	inspector := d.Inspector()
	version, err := inspector.CheckRedis(checkCtx)
	if errors.Is(err, dtq.ErrRedisTooOld) {
		return fmt.Errorf("dtq needs Redis %s or later; the one at %s is %s", dtq.MinRedisVersion, p.redisName, version)
	}
	if err != nil {
		return fmt.Errorf("cannot check Redis at %s (its version, dtq's scripts): %w", p.redisName, err)
	}
	if version != "" {
		log.Info("Redis checked", "redis", p.redisName, "version", version)
	}

	client, err := d.NewClient(cfg.ClientConfig())
	if err != nil {
		return err
	}
	if err := inspector.Ready(checkCtx); err != nil {
		log.Warn("Redis is not ready for dtq; /ready will report it", "redis", p.redisName, "err", err)
	}
	for _, w := range client.DurabilityWarnings(checkCtx) {
		log.Warn(w, "redis", p.redisName)
	}
	// Schedules are validated and triggered with the API's limits.
	admin, err := d.NewAdmin(&dtq.AdminConfig{Client: client})
	if err != nil {
		return err
	}
	sched, err := d.NewScheduler(&dtq.SchedulerConfig{Client: client, Logger: log})
	if err != nil {
		return err
	}
	for _, q := range cfg.QueuesDeclared {
		created, err := admin.CreateQueue(checkCtx, q, nil)
		if err != nil {
			return fmt.Errorf("cannot create queue %s of DTQ_QUEUES_DECLARED: %w", q, err)
		}
		if created {
			log.Info("queue created from DTQ_QUEUES_DECLARED", "queue", q)
		}
	}
	if cfg.QueuePolicy == config.QueuePolicyDeclared {
		log.Info("queue policy declared: only created queues accept tasks")
	}
	// HTTP workers: claims go through the worker scripts; expired leases of
	// the queues claimed through this process come back here.
	gateway, err := d.NewWorkerGateway(cfg.WorkerGatewayConfig(log))
	if err != nil {
		return err
	}
	// Workflows progress with only this process and HTTP workers running:
	// the relay of every queue's workflow outbox and the sweep run here too.
	wfCfg := &dtq.WorkflowMaintenanceConfig{Client: client, Logger: log}
	hub, err := events.NewHub(p.redis, cfg.KeyPrefix, &events.Config{Logger: log, MaxSubscribers: cfg.MaxSubscribers})
	if err != nil {
		return err
	}
	// Request lines are batched (see logWriter); everything else is written
	// at once, so that warnings and start-up lines show up when they happen.
	access := newLogWriter(e.stderr)
	defer access.Close()
	api, err := httpapi.New(httpapi.Config{
		Client:          client,
		Inspector:       inspector,
		Admin:           admin,
		WorkerGateway:   gateway,
		Events:          hub,
		Keys:            cfg.Keys(),
		AllowedHosts:    cfg.AllowedHosts,
		MaxPayloadBytes: cfg.MaxPayloadBytes,
		// 0 in the variable means totals only; 0 in the Config, the default.
		MetricsMaxQueues:     cmp.Or(cfg.MetricsMaxQueues, -1),
		MaxQueueDepth:        cfg.MaxQueueDepth,
		MaxBodyBytesInFlight: cfg.MaxBodyBytesInFlight,
		MaxWaits:             cfg.MaxWaits,
		MaxWaitsPerKey:       cfg.MaxWaitsPerKey,
		Logger:               log,
		AccessLog:            cfg.NewAccessLogger(access),
	})
	if err != nil {
		return err
	}

	ln := p.listener
	if ln == nil {
		if ln, err = (&net.ListenConfig{}).Listen(ctx, "tcp", cfg.APIAddr); err != nil {
			return fmt.Errorf("cannot listen on %s (DTQ_API_ADDR): %w", cfg.APIAddr, err)
		}
	}
	addr := ln.Addr().String()
	if len(cfg.Keys()) == 0 {
		if isLoopback(ln.Addr()) {
			log.Warn("the API is unauthenticated (open mode): anyone who can reach " + addr + " may submit and cancel tasks; set DTQ_API_KEYS to require keys")
		} else {
			log.Warn("THE API IS UNAUTHENTICATED AND LISTENS ON A NON-LOOPBACK ADDRESS: anyone on the network may submit, cancel and delete tasks; set DTQ_API_KEYS, or bind 127.0.0.1 (requests must name localhost, a loopback address or a DTQ_ALLOWED_HOSTS entry in their Host)",
				"addr", addr)
		}
	}
	log.Info("API listening", "addr", addr, "redis", p.redisName, "key_prefix", cfg.KeyPrefix)
	if e.onListen != nil {
		e.onListen(addr)
	}
	if p.announce != nil {
		p.announce(baseURL(ln.Addr()))
	}
	// The hub stops with ctx, which also ends the open event streams so
	// the HTTP shutdown is not held up by them.
	hubCtx, stopHub := context.WithCancel(ctx)
	defer stopHub()
	hubDone := make(chan error, 1)
	go func() { hubDone <- hub.Run(hubCtx) }()
	schedDone := make(chan error, 1)
	go func() { schedDone <- sched.Run(hubCtx) }() // every API process fires due schedules too
	gatewayDone := make(chan error, 1)
	go func() { gatewayDone <- gateway.Run(hubCtx) }()
	wfDone := make(chan error, 1)
	go func() { wfDone <- dtq.RunWorkflowMaintenance(hubCtx, d, wfCfg) }()
	err = serveHTTP(ctx, ln, withDashboard(api), log)
	stopHub()
	gateway.Close()
	return errors.Join(err, <-hubDone, <-schedDone, <-gatewayDone, <-wfDone)
}

// serveHTTP serves h on ln until ctx ends, then shuts down: new connections
// are refused at once, in-flight requests get shutdownGrace to finish before
// their contexts are cancelled, and everything is closed after
// shutdownTimeout.
func serveHTTP(ctx context.Context, ln net.Listener, h http.Handler, log *slog.Logger) error {
	baseCtx, cancelRequests := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelRequests()
	srv := httpapi.NewHTTPServer(h, httpapi.ServerLimits{})
	srv.BaseContext = func(net.Listener) context.Context { return baseCtx }
	srv.ErrorLog = slog.NewLogLogger(log.Handler(), slog.LevelWarn)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("HTTP server: %w", err)
	case <-ctx.Done():
	}
	log.Info("API shutting down")
	grace := time.AfterFunc(shutdownGrace, cancelRequests)
	defer grace.Stop()
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	err := srv.Shutdown(shutdownCtx)
	if err != nil {
		err = errors.Join(fmt.Errorf("HTTP shutdown: %w", err), srv.Close())
	}
	if serr := <-served; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}

func isLoopback(a net.Addr) bool {
	ta, ok := a.(*net.TCPAddr)
	return ok && ta.IP.IsLoopback()
}

// baseURL is the http:// URL of a listener; an unspecified address
// (0.0.0.0, ::) is shown as 127.0.0.1, which reaches it from this machine.
func baseURL(a net.Addr) string {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return "http://" + a.String() + "/"
	}
	host := ta.IP.String()
	if ta.IP.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, fmt.Sprint(ta.Port)) + "/"
}

// withDashboard serves the dashboard at / next to the API: the API keeps
// every path it knows (/api/, /ws/, /health, /ready, /metrics), the
// dashboard gets the rest.
func withDashboard(api http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/", web.Handler())
	for _, p := range []string{"/api/", "/ws/", "/health", "/ready", "/metrics"} {
		mux.Handle(p, api)
	}
	return mux
}
