package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/cmd/dtq/internal/config"
	"github.com/dtq-io/dtq/cmd/dtq/internal/httpapi"
	"github.com/dtq-io/dtq/dtqprom"
	"github.com/dtq-io/dtq/examples"
)

func newWorkerCmd(e *env) *cobra.Command {
	var strict bool
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "Run a worker with the example handlers",
		Long: "Run a worker that executes tasks with the example handlers. Your own handlers\n" +
			"run in your own binary with dtq.Deployment.NewWorker. SIGTERM/SIGINT drain the worker:\n" +
			"running tasks get DTQ_DRAIN_TIMEOUT_S to finish, the rest are handed back.\n" +
			"Only workers serving a queue run or promote its tasks: an unserved queue waits.\n\n" +
			exampleHelp,
		Args: cobra.NoArgs,
	}
	config.RegisterFlags(cmd.Flags())
	cmd.Flags().BoolVar(&strict, "strict-queues", false, "serve queues in the listed order instead of sharing slots by weight")
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
		w, err := newExampleWorker(cfg, rc, strict, log)
		if err != nil {
			return usageError(err)
		}
		defer announceStop(cmd.Context(), log)()
		return runServices(cmd.Context(),
			func(ctx context.Context) error { return runWorker(ctx, w.Worker) },
			func(ctx context.Context) error {
				return serveWorkerMetrics(ctx, cfg.WorkerMetricsAddr, cfg.IsSet("WORKER_METRICS_ADDR"), w, log)
			})
	})
	return cmd
}

// exampleHelp lists the example handlers with their payloads, for --help.
const exampleHelp = `Example task types and their payloads (a payload that lacks a field or holds
an out-of-range value fails permanently, error class InvalidPayload):
  echo          any object                returns the payload
  sleep         {"seconds": 10}           0..3600, fractions allowed; returns {seconds}
  fibonacci     {"n": 50}                 0..90; returns {n, fib}
  flaky         {"fail_times": 2}         fails retryably while attempt <= fail_times
  always_fail   any, e.g. {}              always fails retryably, ends dead-lettered
  counter_task  {"counter": "visits"}     plain INCR (not idempotent); returns {counter, value}
  send_receipt  {"order_id": 42}          at most once per order in 24 h (IdempotentOperation)`

// exampleWorker is a worker with the example handlers, and its metrics.
type exampleWorker struct {
	*dtq.Worker
	metrics http.Handler // the worker's Prometheus metrics (/metrics)
}

// newExampleWorker builds a worker with the example handlers registered,
// recording its metrics in a registry of its own (with the Go runtime's and
// the process's).
func newExampleWorker(cfg *config.Config, rc redis.UniversalClient, strict bool, log *slog.Logger) (*exampleWorker, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	wc := cfg.WorkerConfig(strict, log)
	wc.SchedulerClient = cfg.ClientConfig() // schedules' tasks get the same limits as the API's
	wc.Observer = dtqprom.NewWorker(reg)
	d, err := cfg.Open(rc)
	if err != nil {
		return nil, err
	}
	w, err := d.NewWorker(wc)
	if err != nil {
		return nil, err
	}
	examples.Register(w.ServeMux, d, rc)
	return &exampleWorker{Worker: w, metrics: promhttp.HandlerFor(reg, promhttp.HandlerOpts{})}, nil
}

func runWorker(ctx context.Context, w *dtq.Worker) error {
	if err := w.Run(ctx); err != nil {
		if errors.Is(err, dtq.ErrWorkerIDInUse) {
			return usageError(fmt.Errorf("%w (set DTQ_WORKER_ID to another id, or stop the other worker)", err))
		}
		return err
	}
	return nil
}

// serveWorkerMetrics serves the worker's /metrics, /health and /ready on
// addr until ctx ends; an empty addr or "off" disables it. The default
// address (explicit false) taken, by a second worker on the machine say,
// gives way to a free port on the same host, logged at start: a listener
// for metrics never keeps a worker from starting. An address set on
// purpose that is taken fails.
func serveWorkerMetrics(ctx context.Context, addr string, explicit bool, w *exampleWorker, log *slog.Logger) error {
	if addr == "" || addr == "off" {
		<-ctx.Done()
		return nil
	}
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
	if err != nil && !explicit && errors.Is(err, syscall.EADDRINUSE) {
		host, _, _ := net.SplitHostPort(addr)
		if ln, err = (&net.ListenConfig{}).Listen(ctx, "tcp", net.JoinHostPort(host, "0")); err == nil {
			log.Warn("the default worker metrics address is in use (another worker on this machine?): serving on a free port instead; set DTQ_WORKER_METRICS_ADDR (--worker-metrics-addr) to choose one",
				"default", addr, "addr", ln.Addr().String())
		}
	}
	if err != nil {
		return usageError(fmt.Errorf("worker metrics listener on %s (DTQ_WORKER_METRICS_ADDR, --worker-metrics-addr): %w; "+
			"choose another address, :0 for any free port, or off", addr, err))
	}
	srv := &http.Server{Handler: workerProbeMux(w, log), ReadHeaderTimeout: httpapi.DefaultReadHeaderTimeout}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	log.Info("worker metrics listening", "addr", ln.Addr().String())
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// workerReadyTimeout bounds the worker's /ready, so a probe gets an answer
// even when Redis hangs.
const workerReadyTimeout = 3 * time.Second

// workerProbeMux routes the worker's HTTP endpoints: /metrics; /health,
// which touches nothing (the process is up); and /ready, 200 while the
// worker takes tasks and 503 naming the failed check otherwise (see
// dtq.Worker.Ready).
func workerProbeMux(w *exampleWorker, log *slog.Logger) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", w.metrics)
	mux.HandleFunc("GET /health", func(rw http.ResponseWriter, _ *http.Request) {
		writeProbe(rw, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /ready", func(rw http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), workerReadyTimeout)
		defer cancel()
		err := w.Ready(ctx)
		if err == nil {
			writeProbe(rw, http.StatusOK, map[string]string{"status": "ready"})
			return
		}
		check, msg := httpapi.ReadinessMessage(err)
		if check != dtq.CheckRegistered && check != dtq.CheckDraining {
			log.Warn("not ready", "check", check, "err", oneLine(err.Error())) // the cause stays in the log
		}
		writeProbe(rw, http.StatusServiceUnavailable, map[string]string{"status": "not_ready", "check": check, "message": msg})
	})
	return mux
}

// writeProbe writes a probe's JSON answer.
func writeProbe(rw http.ResponseWriter, status int, body map[string]string) {
	b, err := json.Marshal(body)
	if err != nil { // strings only: cannot happen
		http.Error(rw, err.Error(), http.StatusInternalServerError)
		return
	}
	rw.Header().Set("Content-Type", "application/json")
	rw.Header().Set("Cache-Control", "no-store")
	rw.WriteHeader(status)
	_, _ = rw.Write(append(b, '\n'))
}
