package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/dtq-io/dtq/cmd/dtq/internal/config"
	"github.com/dtq-io/dtq/cmd/dtq/internal/devredis"
	"github.com/dtq-io/dtq/examples"
)

// exampleTaskTypes are the task types of the example handlers (README.md, examples/)
// that `dtq dev` runs; the API refuses any other with UNKNOWN_TASK_TYPE.
var exampleTaskTypes = examples.Types

// Values of dev's --redis flag.
const (
	redisAuto   = "auto"   // DTQ_REDIS_URL if set, else server if installed, else memory
	redisServer = "server" // a private redis-server in --data-dir
	redisMemory = "memory" // an in-process miniredis

	redisURL = "url" // not a flag value: auto with DTQ_REDIS_URL set
)

// backendStopTimeout bounds how long dev waits for its Redis to stop.
const backendStopTimeout = 15 * time.Second

func newDevCmd(e *env) *cobra.Command {
	var redisMode, dataDir string
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run the API, a worker and the dashboard in one process for local use",
		Long: "Run the API, a worker with the example handlers and the dashboard in one process.\n\n" +
			"With DTQ_REDIS_URL set it uses that Redis. Otherwise it starts a private\n" +
			"redis-server from PATH with its data and AOF in --data-dir (./.dtq), or, when\n" +
			"redis-server is not installed, an in-process Redis that keeps data in memory only.\n" +
			"It locks --data-dir first, so a second dev on the same directory is refused,\n" +
			"and prints the Redis URL it uses (set DTQ_REDIS_URL to it in your own code).\n\n" +
			exampleHelp,
		Args: cobra.NoArgs,
	}
	config.RegisterFlags(cmd.Flags())
	cmd.Flags().StringVar(&redisMode, "redis", redisAuto, "Redis backend: auto, server (private redis-server) or memory (in-process, nothing kept)")
	cmd.Flags().StringVar(&dataDir, "data-dir", ".dtq", "directory of the private redis-server's data and AOF")
	cmd.RunE = runE(func(cmd *cobra.Command, _ []string) error {
		cfg, err := loadConfig(cmd, e)
		if err != nil {
			return err
		}
		if !slices.Contains([]string{redisAuto, redisServer, redisMemory}, redisMode) {
			return usageError(fmt.Errorf("--redis=%q: must be auto, server or memory", redisMode))
		}
		cfg.TaskTypes = devTaskTypes(cfg.TaskTypes)
		return runDev(cmd.Context(), e, cfg, redisMode, dataDir)
	})
	return cmd
}

// devTaskTypes is the example types plus any the user configured (for
// handlers of their own, run by their own worker on the same Redis).
func devTaskTypes(configured []string) []string {
	out := slices.Clone(exampleTaskTypes)
	for _, t := range configured {
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}

func runDev(ctx context.Context, e *env, cfg *config.Config, redisMode, dataDir string) error {
	log := serverLogger(cfg, e)
	if redisMode == redisAuto {
		redisMode = redisMemory
		switch {
		case cfg.IsSet("REDIS_URL"):
			redisMode = redisURL
		case redisServerInstalled():
			redisMode = redisServer
		}
	}

	// The data directory and the API port are claimed before any Redis
	// starts, so that a second `dtq dev` fails at once and never opens the
	// first one's AOF.
	if redisMode == redisServer {
		lock, err := devredis.LockDir(dataDir)
		var le *devredis.LockedError
		switch {
		case errors.As(err, &le):
			return usageError(fmt.Errorf("%w; stop it first, or give this run its own directory with --data-dir (e.g. --data-dir %s)",
				err, suggestDataDir(dataDir)))
		case errors.Is(err, devredis.ErrLockUnsupported):
			log.Warn("cannot lock the data directory on this system: do not run two dtq dev on one --data-dir", "data_dir", dataDir)
		case err != nil:
			return err
		default:
			// The system releases the lock when the process ends anyway.
			defer func() { _ = lock.Unlock() }()
		}
	}
	ln, err := net.Listen("tcp", cfg.APIAddr)
	if err != nil {
		return fmt.Errorf("cannot listen on %s (DTQ_API_ADDR): %w; is another dtq dev running? Choose another address with --api-addr", cfg.APIAddr, err)
	}
	defer ln.Close()

	url, describe := "", ""
	if redisMode == redisURL {
		url, describe = cfg.RedisURL, config.RedactURL(cfg.RedisURL)
	} else {
		backend, err := startDevRedis(ctx, redisMode, dataDir, log)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		defer func() {
			stopCtx, cancel := context.WithTimeout(context.Background(), backendStopTimeout)
			defer cancel()
			if err := backend.Stop(stopCtx); err != nil {
				log.Error("stopping the development Redis", "err", err)
			}
		}()
		url, describe = backend.URL(), backend.Describe()
	}
	opts, err := config.ParseRedisURL(url)
	if err != nil {
		return usageError(err)
	}
	rc := opts.NewClient()
	defer rc.Close()

	d := &devRuntime{cfg: cfg, log: log, redis: rc}
	services := []service{
		func(ctx context.Context) error {
			return runAPI(ctx, e, &apiParams{cfg: cfg, log: log, redis: rc, redisName: describe, listener: ln,
				announce: func(base string) {
					_, _ = fmt.Fprintf(e.stdout, "dtq dev: API and dashboard at %s (redis: %s)\n", base, describe)
					_, _ = fmt.Fprintf(e.stdout, "dtq dev: Redis at %s; point your own clients and workers at it with DTQ_REDIS_URL=%s\n",
						config.RedactURL(url), config.RedactURL(url))
				}})
		},
	}
	workers, err := devWorkers(d)
	if err != nil {
		return err
	}
	services = append(services, workers...)
	defer announceStop(ctx, log)()
	return runServices(ctx, services...)
}

// announceStop logs, once ctx ends, that the process is stopping and how to
// cut the drain short; the returned function cancels the notice.
func announceStop(ctx context.Context, log *slog.Logger) func() bool {
	return context.AfterFunc(ctx, func() {
		log.Info("stopping: running tasks get DTQ_DRAIN_TIMEOUT_S to finish; press Ctrl-C again to quit at once")
	})
}

// suggestDataDir proposes a sibling of dir for a second dev run.
func suggestDataDir(dir string) string {
	clean := filepath.Clean(dir)
	if clean == ".dtq" {
		return ".dtq-2"
	}
	return clean + "-2"
}

func redisServerInstalled() bool {
	_, err := exec.LookPath("redis-server")
	return err == nil
}

// devRuntime is what dev's services share.
type devRuntime struct {
	cfg   *config.Config
	log   *slog.Logger
	redis redis.UniversalClient
}

// devWorkers returns the services dev runs next to the API: one worker with
// the example handlers, configured like `dtq worker` (its metrics are not
// served separately in dev).
func devWorkers(d *devRuntime) ([]service, error) {
	w, err := newExampleWorker(d.cfg, d.redis, false, d.log)
	if err != nil {
		return nil, usageError(err)
	}
	return []service{func(ctx context.Context) error { return runWorker(ctx, w.Worker) }}, nil
}

func startDevRedis(ctx context.Context, mode, dataDir string, log *slog.Logger) (devredis.Backend, error) {
	if mode == redisMemory {
		m, err := devredis.StartMemory()
		if err != nil {
			return nil, err
		}
		log.Warn("using an in-process Redis: data is kept in memory only and lost on exit; install redis-server to keep it")
		return m, nil
	}
	s, err := devredis.StartServer(ctx, dataDir)
	if errors.Is(err, devredis.ErrNoRedisServer) {
		return nil, fmt.Errorf("--redis=server: redis-server is not on PATH (install it, e.g. apt-get install redis-server, or use --redis=memory)")
	}
	return s, err
}

// service is a part of a process that runs until ctx ends.
type service func(ctx context.Context) error

// runServices runs every service until ctx ends or one of them fails; a
// failure stops the others. It returns when all have returned, with the
// first failure.
func runServices(ctx context.Context, services ...service) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg       sync.WaitGroup
		once     sync.Once
		firstErr error
	)
	for _, s := range services {
		wg.Go(func() {
			if err := s(ctx); err != nil {
				once.Do(func() { firstErr = err })
				cancel()
			}
		})
	}
	wg.Wait()
	return firstErr
}
