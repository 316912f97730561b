package partitionsuite_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/cmd/dtq/internal/config"
	"github.com/dtq-io/dtq/cmd/dtq/internal/httpapi"
	"github.com/dtq-io/dtq/internal/redistest"
)

// The environment of a child: this test binary run inside a host's
// namespace as a dtq API server or worker instead of the tests.
const (
	childEnv   = "DTQN_CHILD" // "api" or "worker"
	urlEnv     = "DTQN_REDIS_URL"
	prefixEnv  = "DTQN_PREFIX"
	acksEnv    = "DTQN_ACKS"
	listenEnv  = "DTQN_LISTEN"
	workerEnv  = "DTQN_WORKER_ID"
	eventsEnv  = "DTQN_EVENTS"
	visEnv     = "DTQN_VISIBILITY_MS"
	queue      = "pq"
	taskType   = "work"
	apiPort    = "8080"
	visibility = 3 * time.Second
)

type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}

func TestMain(m *testing.M) {
	redis.SetLogger(quietRedis{}) // partitions make go-redis log dial errors
	switch os.Getenv(childEnv) {
	case "":
	case "api":
		os.Exit(runAPI())
	case "worker":
		os.Exit(runWorker())
	default:
		fmt.Fprintln(os.Stderr, "unknown child", os.Getenv(childEnv))
		os.Exit(2)
	}
	// Its bridge and namespaces change the host's interfaces, which makes
	// the dashboard tests' browser abort its page loads.
	os.Exit(redistest.Main(m, redistest.HostNetwork(true)))
}

// openChild opens the deployment a child serves.
func openChild() (*dtq.Deployment, func(), error) {
	rc, err := config.NewRedisClient(os.Getenv(urlEnv))
	if err != nil {
		return nil, nil, err
	}
	acks, _ := strconv.Atoi(os.Getenv(acksEnv))
	d, err := dtq.Open(rc, &dtq.DeploymentConfig{KeyPrefix: os.Getenv(prefixEnv), ReplicaAcks: acks})
	if err != nil {
		rc.Close()
		return nil, nil, err
	}
	return d, func() { rc.Close() }, nil
}

// runAPI serves dtq's HTTP API on DTQN_LISTEN until SIGTERM.
func runAPI() int {
	d, closeRC, err := openChild()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer closeRC()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	c, err := d.NewClient(nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	adm, err := d.NewAdmin(nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	gw, err := d.NewWorkerGateway(&dtq.WorkerGatewayConfig{Logger: logger})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer gw.Close()
	api, err := httpapi.New(httpapi.Config{Client: c, Inspector: d.Inspector(), Admin: adm, WorkerGateway: gw,
		Logger: logger, AllowedHosts: []string{"*"}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	srv := &http.Server{Addr: os.Getenv(listenEnv), Handler: api, ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// workPayload is a task's payload: its idempotency key and how long its
// handler works.
type workPayload struct {
	Key string `json:"key"`
	MS  int    `json:"ms"`
}

// runWorker runs a dtq worker until SIGTERM. Its handler appends a line to
// DTQN_EVENTS when it starts and when it returns (the host clock is shared
// by every namespace): "start|end <task> <attempt> <unix ns> <cause>", so
// the test can check that no two handlers of a task ran at once.
func runWorker() int {
	d, closeRC, err := openChild()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer closeRC()
	ev, err := os.OpenFile(os.Getenv(eventsEnv), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer ev.Close()
	id := os.Getenv(workerEnv)
	vis, _ := strconv.Atoi(os.Getenv(visEnv))
	w, err := d.NewWorker(&dtq.WorkerConfig{Queues: map[string]int{queue: 1}, Concurrency: 8, WorkerID: id,
		VisibilityTimeout: time.Duration(vis) * time.Millisecond, HeartbeatInterval: time.Duration(vis) * time.Millisecond / 3,
		RetryBaseDelay: 50 * time.Millisecond, RetryMaxDelay: 500 * time.Millisecond, DrainTimeout: 2 * time.Second,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	record := func(kind string, t *dtq.Task, cause string) {
		// One write per line on an O_APPEND file: a kill loses no line
		// already written.
		_, _ = fmt.Fprintf(ev, "%s %s %d %d %s\n", kind, t.ID, t.Attempt, time.Now().UnixNano(), cause)
	}
	w.HandleFunc(taskType, func(ctx context.Context, t *dtq.Task) (any, error) {
		record("start", t, "-")
		var p workPayload
		_ = json.Unmarshal(t.Payload, &p)
		timer := time.NewTimer(time.Duration(p.MS) * time.Millisecond)
		defer timer.Stop()
		select {
		case <-timer.C:
			record("end", t, "ok")
			return map[string]any{"worker": id, "attempt": t.Attempt}, nil
		case <-ctx.Done():
			cause := "cancelled"
			if errors.Is(context.Cause(ctx), dtq.ErrLeaseLost) {
				cause = "lease_lost"
			}
			record("end", t, cause)
			return nil, context.Cause(ctx)
		}
	})
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := w.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// dtqProc starts this test binary on h as a child of kind with env.
func dtqProc(t *testing.T, h *host, dir, kind, name string, env ...string) *proc {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{name: name, h: h, bin: self, args: []string{"-test.run=^$"},
		env: append([]string{childEnv + "=" + kind}, env...), log: filepath.Join(dir, name+".log")}
	p.start(t)
	t.Cleanup(func() { p.stop(5 * time.Second) })
	return p
}
