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
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/dtq-io/dtq/cmd/dtq/internal/config"
	"github.com/dtq-io/dtq/cmd/dtq/internal/devredis"
	"github.com/dtq-io/dtq/examples"
)

// exampleTaskTypes are the task types of the example handlers (README.md,
// examples/) that `dtq dev` and `dtq worker` run.
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
	var (
		redisMode, dataDir string
		redisPort          int
	)
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run the API, a worker and the dashboard in one process for local use",
		Long: "Run the API, a worker with the example handlers and the dashboard in one process.\n\n" +
			"With DTQ_REDIS_URL set it uses that Redis. Otherwise it starts a private\n" +
			"redis-server from PATH with its data and AOF in --data-dir (./.dtq), or, when\n" +
			"redis-server is not installed, an in-process Redis that keeps data in memory only.\n" +
			"It locks --data-dir first, so a second dev on the same directory is refused,\n" +
			"and prints the Redis URL it uses (set DTQ_REDIS_URL to it in your own code).\n" +
			"The private redis-server keeps its port across restarts on one --data-dir\n" +
			"(in <data-dir>/redis.port, while the port is free), or takes --redis-port.\n\n" +
			"The API accepts any task type, so that the handlers of your own worker\n" +
			"(Go, or any language over HTTP) can be tried against it; dev's worker serves\n" +
			"the queues of DTQ_QUEUES (default) with the example handlers, so give your\n" +
			"own task types a queue of their own. With DTQ_TASK_TYPES set, the API accepts\n" +
			"those and the example types only.\n\n" +
			"Ctrl-C drains dev's worker first (DTQ_DRAIN_TIMEOUT_S), with the API and the\n" +
			"dashboard still up to watch it, then stops the API; a second Ctrl-C quits at once.\n\n" +
			exampleHelp,
		Args: cobra.NoArgs,
	}
	config.RegisterFlags(cmd.Flags())
	cmd.Flags().StringVar(&redisMode, "redis", redisAuto, "Redis backend: auto, server (private redis-server) or memory (in-process, nothing kept)")
	cmd.Flags().StringVar(&dataDir, "data-dir", ".dtq", "directory of the private redis-server's data and AOF")
	cmd.Flags().IntVar(&redisPort, "redis-port", 0, "port of the private redis-server (default: the one it had last time on --data-dir, if free, else any free port)")
	cmd.RunE = runE(func(cmd *cobra.Command, _ []string) error {
		cfg, err := loadConfig(cmd, e)
		if err != nil {
			return err
		}
		if !slices.Contains([]string{redisAuto, redisServer, redisMemory}, redisMode) {
			return usageError(fmt.Errorf("--redis=%q: must be auto, server or memory", redisMode))
		}
		if redisPort < 0 || redisPort > 65535 {
			return usageError(fmt.Errorf("--redis-port=%d: must be a port, 1..65535 (0: keep the last one)", redisPort))
		}
		if redisPort != 0 && redisMode == redisMemory {
			return usageError(errors.New("--redis-port is for the private redis-server, not --redis=memory"))
		}
		cfg.TaskTypes = devTaskTypes(cfg.TaskTypes)
		return runDev(cmd.Context(), e, cfg, devOptions{redisMode: redisMode, dataDir: dataDir, redisPort: redisPort})
	})
	return cmd
}

// devTaskTypes is what dev's API accepts: any type (nil) unless the user
// configured a list, which then gets the example types too, since dev's own
// worker runs them.
func devTaskTypes(configured []string) []string {
	if len(configured) == 0 {
		return nil
	}
	out := slices.Clone(exampleTaskTypes)
	for _, t := range configured {
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}

// devOptions are dev's own flags.
type devOptions struct {
	redisMode string
	dataDir   string
	redisPort int // 0: the data directory's last port, or any
}

func runDev(ctx context.Context, e *env, cfg *config.Config, o devOptions) error {
	log := serverLogger(cfg, e)
	redisMode, dataDir := o.redisMode, o.dataDir
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
			return usageError(fmt.Errorf("%w; stop it first, or give this run its own directory and address: --data-dir %s --api-addr %s",
				err, suggestDataDir(dataDir), suggestAddr(ctx, cfg.APIAddr)))
		case errors.Is(err, devredis.ErrLockUnsupported):
			log.Warn("cannot lock the data directory on this system: do not run two dtq dev on one --data-dir", "data_dir", dataDir)
		case err != nil:
			return err
		default:
			// The system releases the lock when the process ends anyway.
			defer func() { _ = lock.Unlock() }()
		}
	}
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", cfg.APIAddr)
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("cannot listen on %s (DTQ_API_ADDR): the address is in use, by another dtq dev or another program; "+
			"give this one its own address: --api-addr %s", cfg.APIAddr, suggestAddr(ctx, cfg.APIAddr))
	}
	if err != nil {
		return fmt.Errorf("cannot listen on %s (DTQ_API_ADDR): %w; choose another address with --api-addr", cfg.APIAddr, err)
	}
	defer ln.Close()

	if o.redisPort != 0 && redisMode != redisServer {
		log.Warn("--redis-port is ignored: it is the private redis-server's port, and this dev uses " +
			map[string]string{redisURL: "DTQ_REDIS_URL", redisMemory: "the in-process Redis"}[redisMode])
	}
	url, describe := "", ""
	if redisMode == redisURL {
		url, describe = cfg.RedisURL, config.RedactURL(cfg.RedisURL)
	} else {
		backend, err := startDevRedis(ctx, redisMode, dataDir, o.redisPort, log)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		defer func() {
			stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), backendStopTimeout)
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
	api := func(ctx context.Context) error {
		return runAPI(ctx, e, &apiParams{cfg: cfg, log: log, redis: rc, redisName: describe, listener: ln,
			announce: func(base string) {
				_, _ = fmt.Fprintf(e.stdout, "dtq dev: API and dashboard at %s (redis: %s)\n", base, describe)
				_, _ = fmt.Fprintf(e.stdout, "dtq dev: Redis at %s; point your own clients and workers at it with DTQ_REDIS_URL=%s\n",
					config.RedactURL(url), config.RedactURL(url))
			}})
	}
	workers, err := devWorkers(d)
	if err != nil {
		return err
	}
	defer announceStop(ctx, log)()
	return runDrainFirst(ctx, log, api, workers...)
}

// runDrainFirst runs the API and the workers until ctx ends or one of them
// fails (a failure stops them all). When ctx ends the workers drain first
// (each within DTQ_DRAIN_TIMEOUT_S) while the API and the dashboard still
// answer, so the drain can be watched; the API stops once they are done.
func runDrainFirst(ctx context.Context, log *slog.Logger, api service, workers ...service) error {
	apiCtx, stopAPI := context.WithCancel(context.WithoutCancel(ctx))
	defer stopAPI()
	workerCtx, stopWorkers := context.WithCancel(ctx)
	defer stopWorkers()
	var (
		mu       sync.Mutex
		firstErr error
		apiWG    sync.WaitGroup
		workerWG sync.WaitGroup
	)
	fail := func(err error) {
		mu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		mu.Unlock()
		stopWorkers()
		stopAPI()
	}
	failed := func() error {
		mu.Lock()
		defer mu.Unlock()
		return firstErr
	}
	apiWG.Go(func() {
		if err := api(apiCtx); err != nil {
			fail(err)
		}
	})
	for _, w := range workers {
		workerWG.Go(func() {
			if err := w(workerCtx); err != nil {
				fail(err)
			}
		})
	}
	workerWG.Wait()
	if ctx.Err() != nil && failed() == nil {
		log.Info("workers stopped; stopping the API")
	}
	stopAPI()
	apiWG.Wait()
	return failed()
}

// announceStop logs, once ctx ends, that the process is stopping and how to
// cut the drain short; the returned function cancels the notice.
func announceStop(ctx context.Context, log *slog.Logger) func() bool {
	return context.AfterFunc(ctx, func() {
		log.Info("stopping: running tasks get DTQ_DRAIN_TIMEOUT_S to finish; press Ctrl-C again to quit at once")
	})
}

// suggestAddr proposes an address for a second dev next to one on addr:
// the first free port after addr's on the same host (addr itself when
// nothing near is free, or addr is not host:port).
func suggestAddr(ctx context.Context, addr string) string {
	host, p, err := net.SplitHostPort(addr)
	port, perr := strconv.Atoi(p)
	if err != nil || perr != nil || port == 0 {
		return addr
	}
	for next := port + 1; next <= min(port+20, 65535); next++ {
		candidate := net.JoinHostPort(host, strconv.Itoa(next))
		if l, err := (&net.ListenConfig{}).Listen(ctx, "tcp", candidate); err == nil {
			_ = l.Close()
			return candidate
		}
	}
	return addr
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

func startDevRedis(ctx context.Context, mode, dataDir string, port int, log *slog.Logger) (devredis.Backend, error) {
	if mode == redisMemory {
		m, err := devredis.StartMemory()
		if err != nil {
			return nil, err
		}
		log.Warn("using an in-process Redis: data is kept in memory only and lost on exit; install redis-server to keep it")
		return m, nil
	}
	s, err := devredis.StartServer(ctx, dataDir, port)
	switch {
	case errors.Is(err, devredis.ErrNoRedisServer):
		return nil, fmt.Errorf("--redis=server: redis-server is not on PATH (install it, e.g. apt-get install redis-server, or use --redis=memory)")
	case errors.Is(err, devredis.ErrPortInUse):
		return nil, usageError(fmt.Errorf("--redis-port=%d: %w; choose another port, or leave --redis-port out for a free one", port, err))
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
