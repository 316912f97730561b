package cli

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"

	"github.com/dtq-io/dtq/cmd/dtq/internal/config"
	"github.com/dtq-io/dtq/cmd/dtq/internal/httpapi"
	"github.com/dtq-io/dtq/dtqoutbox"
)

// newOutboxCmd is `dtq outbox`: the Postgres outbox's table and relay
// (docs/outbox.md).
func newOutboxCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "outbox",
		Short: "Create the Postgres outbox table, or relay its rows as tasks",
		Long: "Tasks written with dtqoutbox.Insert inside a database transaction exist once the\n" +
			"transaction commits: the relay submits each committed row exactly once.\n" +
			"See docs/outbox.md.",
	}
	cmd.AddCommand(newOutboxMigrateCmd(e), newOutboxRelayCmd(e))
	return cmd
}

// openPostgres opens and pings the database at url with the pgx driver.
func openPostgres(ctx context.Context, url string) (*sql.DB, error) {
	if url == "" {
		return nil, usageError(errors.New("--postgres-url is required (e.g. postgres://user:pass@127.0.0.1:5432/app)"))
	}
	db, err := sql.Open("pgx", url)
	if err != nil {
		return nil, usageError(fmt.Errorf("--postgres-url: %w", err))
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := db.PingContext(pctx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	return db, nil
}

func newOutboxMigrateCmd(e *env) *cobra.Command {
	var url string
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Create the dtq_outbox table, its indexes and notify trigger (safe to run again)",
		Args:  cobra.NoArgs,
	}
	cmd.Flags().StringVar(&url, "postgres-url", "", "the database to create the table in (its search_path decides the schema)")
	cmd.RunE = runE(func(cmd *cobra.Command, _ []string) error {
		db, err := openPostgres(cmd.Context(), url)
		if err != nil {
			return err
		}
		defer db.Close()
		if err := dtqoutbox.Migrate(cmd.Context(), db); err != nil {
			return err
		}
		_, _ = fmt.Fprintln(e.stdout, "dtq_outbox is ready")
		return nil
	})
	return cmd
}

func newOutboxRelayCmd(e *env) *cobra.Command {
	var (
		url, keyPrefix, metricsAddr string
		batch, concurrency          int
		poll, retention             time.Duration
	)
	cmd := &cobra.Command{
		Use:   "relay",
		Short: "Submit committed outbox rows as tasks until stopped",
		Long: "Submit committed rows of dtq_outbox through Redis (DTQ_REDIS_URL, as a worker)\n" +
			"with the idempotency key <idempotency-prefix>:<row id>:<row's key_nonce> (or the row's own key), then mark\n" +
			"them sent. Several relays may run at once. Woken by LISTEN/NOTIFY, and polling.",
		Args: cobra.NoArgs,
	}
	config.RegisterFlags(cmd.Flags())
	f := cmd.Flags()
	f.StringVar(&url, "postgres-url", "", "the database holding dtq_outbox")
	f.IntVar(&batch, "batch-size", 100, "rows per pass, 1..1000")
	f.IntVar(&concurrency, "concurrency", 1, "passes at once")
	f.DurationVar(&poll, "poll-interval", time.Second, "how often to look for rows without a notification")
	f.DurationVar(&retention, "retention", 24*time.Hour, "how long sent rows are kept (-1ns keeps them)")
	f.StringVar(&keyPrefix, "idempotency-prefix", "outbox", "idempotency key prefix of rows without their own key (<prefix>:<row id>:<key_nonce>); one per database feeding a deployment")
	f.StringVar(&metricsAddr, "metrics-addr", "", "serve /metrics on this address (e.g. 127.0.0.1:9465); empty: none")
	cmd.RunE = runE(func(cmd *cobra.Command, _ []string) error {
		cfg, err := loadConfig(cmd, e)
		if err != nil {
			return err
		}
		log := serverLogger(cfg, e)
		db, err := openPostgres(cmd.Context(), url)
		if err != nil {
			return err
		}
		defer db.Close()
		rc, err := config.NewRedisClient(cfg.RedisURL)
		if err != nil {
			return usageError(err)
		}
		defer rc.Close()
		d, err := cfg.Open(rc)
		if err != nil {
			return usageError(err)
		}
		client, err := d.NewClient(cfg.ClientConfig())
		if err != nil {
			return usageError(err)
		}
		reg := prometheus.NewRegistry()
		m, err := dtqoutbox.NewMetrics(reg)
		if err != nil {
			return err
		}
		relay, err := dtqoutbox.NewRelay(&dtqoutbox.RelayConfig{DB: db, Client: client, BatchSize: batch, Concurrency: concurrency,
			PollInterval: poll, Retention: retention, KeyPrefix: keyPrefix, IdempotencyTTL: cfg.IdempotencyTTL, Logger: log, Metrics: m,
			MaxRowBytes: 2*cfg.MaxPayloadBytes + 64<<10}) // as the API bounds a submission's body
		if err != nil {
			return usageError(err)
		}
		log.Info("outbox relay started", "batch_size", batch, "concurrency", concurrency, "idempotency_prefix", keyPrefix)
		defer announceStop(cmd.Context(), log)()
		return runServices(cmd.Context(), relay.Run, func(ctx context.Context) error {
			return serveRegistry(ctx, metricsAddr, reg, log)
		})
	})
	return cmd
}

// serveRegistry serves reg's /metrics on addr until ctx ends ("" serves
// nothing).
func serveRegistry(ctx context.Context, addr string, reg *prometheus.Registry, log interface{ Info(string, ...any) }) error {
	if addr == "" {
		<-ctx.Done()
		return nil
	}
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("metrics listener on %s (--metrics-addr): %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: httpapi.DefaultReadHeaderTimeout}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	log.Info("metrics listening", "addr", ln.Addr().String())
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
