package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq/cmd/dtq/internal/config"
)

var devRedisURLRe = regexp.MustCompile(`dtq dev: Redis at (redis://\S+);`)

// devRedisURL is the Redis URL a running dev printed (just after the API
// listens, which startCmd waits for).
func devRedisURL(t *testing.T, r *running) string {
	t.Helper()
	var m []string
	require.Eventually(t, func() bool {
		m = devRedisURLRe.FindStringSubmatch(r.stdout.String())
		return m != nil
	}, 30*time.Second, 5*time.Millisecond, "stdout: %s", r.stdout)
	return m[1]
}

// freeLoopbackPort is a port nothing listens on right now.
func freeLoopbackPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	return port
}

// TestDevKeepsRedisPort restarts dev on one data directory: the private
// redis-server comes back on the same port, so the URL given to the user's
// own programs stays valid; --redis-port pins another one, kept in turn.
func TestDevKeepsRedisPort(t *testing.T) {
	t.Parallel()
	dataDir := filepath.Join(t.TempDir(), ".dtq")
	args := []string{"dev", "--redis=server", "--api-addr=127.0.0.1:0", "--data-dir=" + dataDir, "--drain-timeout-s=1"}
	first := startCmd(t, nil, args...)
	url := devRedisURL(t, first)
	require.Equal(t, 0, first.stop(t), "stderr:\n%s", first.stderr)

	second := startCmd(t, nil, args...)
	require.Equal(t, url, devRedisURL(t, second), "the same port after a restart")
	require.Equal(t, 0, second.stop(t), "stderr:\n%s", second.stderr)

	port := freeLoopbackPort(t)
	pinned := startCmd(t, nil, append(args, fmt.Sprintf("--redis-port=%d", port))...)
	want := fmt.Sprintf("redis://127.0.0.1:%d/0", port)
	require.Equal(t, want, devRedisURL(t, pinned))

	// The pinned port is taken now: another dev asking for it is told so.
	code, _, stderr := runCmd(t, nil, "dev", "--redis=server", "--api-addr=127.0.0.1:0",
		"--data-dir="+filepath.Join(t.TempDir(), ".dtq"), fmt.Sprintf("--redis-port=%d", port))
	require.Equal(t, exitUsage, code, stderr)
	require.Contains(t, stderr, fmt.Sprintf("dtq: --redis-port=%d: devredis: port in use: 127.0.0.1:%d is taken", port, port))
	require.Equal(t, 0, pinned.stop(t), "stderr:\n%s", pinned.stderr)

	again := startCmd(t, nil, args...)
	require.Equal(t, want, devRedisURL(t, again), "a pinned port is kept too")
	require.Equal(t, 0, again.stop(t), "stderr:\n%s", again.stderr)
}

// TestDevSecondOnOtherDataDir runs a second dev with its own --data-dir but
// the first one's API address: it is told the address is taken and which
// --api-addr to pass, and that one works.
func TestDevSecondOnOtherDataDir(t *testing.T) {
	t.Parallel()
	first := startCmd(t, nil, "dev", "--redis=server", "--api-addr=127.0.0.1:0",
		"--data-dir="+filepath.Join(t.TempDir(), ".dtq"), "--drain-timeout-s=1")
	addr := strings.TrimPrefix(first.base, "http://")
	dir2 := filepath.Join(t.TempDir(), ".dtq-2")
	code, stdout, stderr := runCmd(t, nil, "dev", "--redis=server", "--api-addr="+addr, "--data-dir="+dir2)
	require.Equal(t, exitFailure, code, stderr)
	require.Empty(t, stdout)
	m := regexp.MustCompile(`^dtq: cannot listen on ` + regexp.QuoteMeta(addr) + ` \(DTQ_API_ADDR\): the address is in use, ` +
		`by another dtq dev or another program; give this one its own address: --api-addr (127\.0\.0\.1:\d+)\n$`).FindStringSubmatch(stderr)
	require.NotNil(t, m, "stderr: %q", stderr)
	second := startCmd(t, nil, "dev", "--redis=server", "--api-addr="+m[1], "--data-dir="+dir2, "--drain-timeout-s=1")
	require.Equal(t, "http://"+m[1], second.base)
	require.Equal(t, 0, second.stop(t), "stderr:\n%s", second.stderr)
	require.Equal(t, 0, first.stop(t), "stderr:\n%s", first.stderr)
}

// TestDevDrainsBeforeTheAPIStops stops dev while a task runs: the API keeps
// answering until the worker has drained it, so a wait on the task (or the
// dashboard) sees it finish.
func TestDevDrainsBeforeTheAPIStops(t *testing.T) {
	t.Parallel()
	r := startCmd(t, nil, "dev", "--redis=memory", "--api-addr=127.0.0.1:0", "--drain-timeout-s=60")
	r.waitHealthy(t)
	status, _, created := r.do(t, http.MethodPost, "/api/v1/tasks", nil, `{"task_type": "sleep", "payload": {"seconds": 2}}`)
	require.Equal(t, http.StatusAccepted, status, "%v", created)
	id := created["task_id"].(string)
	require.Eventually(t, func() bool {
		_, _, got := r.do(t, http.MethodGet, "/api/v1/tasks/"+id, nil, "")
		return got["status"] == "running"
	}, 30*time.Second, 10*time.Millisecond, "the task never ran")

	r.cancel() // Ctrl-C
	status, _, got := r.do(t, http.MethodGet, "/api/v1/tasks/"+id+"?wait=30s", nil, "")
	require.Equal(t, http.StatusOK, status, "the API answers during the drain: %v", got)
	require.Equal(t, "succeeded", got["status"], "%v", got)
	require.Equal(t, 0, r.stop(t), "stderr:\n%s", r.stderr)
	log := r.stderr.String()
	drained, stopping := strings.Index(log, "workers stopped; stopping the API"), strings.Index(log, "API shutting down")
	require.True(t, drained >= 0 && stopping > drained, "the API stops after the workers:\n%s", log)
}

// TestDevTaskTypesConfigured: with DTQ_TASK_TYPES set, dev accepts those
// and the example types, and refuses others naming the variable.
func TestDevTaskTypesConfigured(t *testing.T) {
	t.Parallel()
	r := startCmd(t, map[string]string{"DTQ_TASK_TYPES": "resize"}, "dev", "--redis=memory", "--api-addr=127.0.0.1:0", "--drain-timeout-s=1")
	for typ, want := range map[string]int{"resize": http.StatusAccepted, "echo": http.StatusAccepted, "report": http.StatusBadRequest} {
		status, _, got := r.do(t, http.MethodPost, "/api/v1/tasks", nil, `{"task_type": "`+typ+`", "queue": "images"}`)
		require.Equal(t, want, status, "%s: %v", typ, got)
		if want == http.StatusBadRequest {
			require.Equal(t, "UNKNOWN_TASK_TYPE", got["code"])
			require.Equal(t, `task_type: "report" is not a registered task type; this server accepts only the task types listed in its DTQ_TASK_TYPES (unset, it accepts any)`,
				got["message"])
		}
	}
	require.Equal(t, 0, r.stop(t), "stderr:\n%s", r.stderr)
}

// TestWorkerMetricsAddrTaken: the default address taken gives way to a free
// port, logged; an address set on purpose that is taken fails, naming the
// variable and the flag.
func TestWorkerMetricsAddrTaken(t *testing.T) {
	t.Parallel()
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer busy.Close()
	cfg := config.Default()
	cfg.RedisURL = "redis://127.0.0.1:1/0" // never reached: only the listener is exercised
	rc, err := config.NewRedisClient(cfg.RedisURL)
	require.NoError(t, err)
	defer rc.Close()
	var logBuf syncBuffer
	log := slog.New(slog.NewTextHandler(&logBuf, nil))
	w, err := newExampleWorker(cfg, rc, false, log)
	require.NoError(t, err)

	err = serveWorkerMetrics(context.Background(), busy.Addr().String(), true, w, log)
	require.EqualError(t, err, fmt.Sprintf("worker metrics listener on %s (DTQ_WORKER_METRICS_ADDR, --worker-metrics-addr): "+
		"listen tcp %s: bind: address already in use; choose another address, :0 for any free port, or off", busy.Addr(), busy.Addr()))
	var ee *exitError
	require.ErrorAs(t, err, &ee)
	require.Equal(t, exitUsage, ee.code)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serveWorkerMetrics(ctx, busy.Addr().String(), false, w, log) }()
	addrRe := regexp.MustCompile(`msg="worker metrics listening" addr=(127\.0\.0\.1:\d+)`)
	require.Eventually(t, func() bool { return addrRe.MatchString(logBuf.String()) }, 10*time.Second, 10*time.Millisecond, "log: %s", &logBuf)
	require.Contains(t, logBuf.String(), "the default worker metrics address is in use")
	addr := addrRe.FindStringSubmatch(logBuf.String())[1]
	require.NotEqual(t, busy.Addr().String(), addr)
	res, err := httpClient.Get("http://" + addr + "/health")
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	cancel()
	require.NoError(t, <-done)
}

// TestErrorPrefixNotDoubled: a library error ("dtq: check Redis version:
// ...") is printed with one "dtq: ", not two.
func TestErrorPrefixNotDoubled(t *testing.T) {
	t.Parallel()
	code, _, stderr := runCmd(t, map[string]string{"DTQ_REDIS_URL": "redis://127.0.0.1:1/0", "DTQ_WORKER_METRICS_ADDR": "off"}, "worker")
	require.Equal(t, exitFailure, code, stderr)
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	require.Regexp(t, `^dtq: check Redis version: dial tcp 127\.0\.0\.1:1: `, lines[len(lines)-1])
	require.NotContains(t, stderr, "dtq: dtq:")
	require.Equal(t, "x: y", stripDtqPrefix("dtq: dtq: x: y"))
}

// TestWorkersNextToDev follows docs/operations.md "Locally": workers
// started with DTQ_REDIS_URL=<the URL dev printed> next to dev all start,
// though they share the default metrics address, and run dev's tasks.
func TestWorkersNextToDev(t *testing.T) {
	t.Parallel()
	r := startCmd(t, nil, "dev", "--redis=memory", "--api-addr=127.0.0.1:0", "--drain-timeout-s=1")
	url := devRedisURL(t, r)
	type worker struct {
		stderr *syncBuffer
		cancel context.CancelFunc
		done   chan int
	}
	var workers []worker
	for i := range 2 {
		ctx, cancel := context.WithCancel(context.Background())
		w := worker{stderr: &syncBuffer{}, cancel: cancel, done: make(chan int, 1)}
		// One process holds them all here, so each gets its own id (two
		// processes get theirs from their pids).
		vars := map[string]string{"DTQ_REDIS_URL": url, "DTQ_WORKER_ID": fmt.Sprintf("next-to-dev-%d", i), "DTQ_DRAIN_TIMEOUT_S": "1"}
		go func() {
			w.done <- execute(ctx, []string{"worker"}, &env{stdout: &syncBuffer{}, stderr: w.stderr, lookupEnv: mapEnv(vars)})
		}()
		t.Cleanup(cancel)
		workers = append(workers, w)
	}
	for i, w := range workers {
		require.Eventually(t, func() bool {
			select {
			case code := <-w.done:
				t.Fatalf("worker %d exited with %d:\n%s", i, code, w.stderr)
			default:
			}
			return strings.Contains(w.stderr.String(), "worker metrics listening") && strings.Contains(w.stderr.String(), "worker started")
		}, 30*time.Second, 10*time.Millisecond, "worker %d: %s", i, w.stderr)
	}
	status, _, list := r.do(t, http.MethodGet, "/api/v1/workers", nil, "")
	require.Equal(t, http.StatusOK, status, "%v", list)
	var live []string
	for _, it := range list["items"].([]any) {
		live = append(live, it.(map[string]any)["worker_id"].(string))
	}
	require.Subset(t, live, []string{"next-to-dev-0", "next-to-dev-1"})
	for i, w := range workers {
		w.cancel()
		require.Equal(t, 0, <-w.done, "worker %d:\n%s", i, w.stderr)
	}
	require.Equal(t, 0, r.stop(t), "stderr:\n%s", r.stderr)
}

// TestDevHelp: dev's --help says what dev accepts, keeps and does at Ctrl-C.
func TestDevHelp(t *testing.T) {
	t.Parallel()
	code, help, stderr := runCmd(t, nil, "dev", "--help")
	require.Equal(t, 0, code, stderr)
	for _, want := range []string{
		"The API accepts any task type",
		"With DTQ_TASK_TYPES set, the API accepts\nthose and the example types only.",
		"keeps its port across restarts on one --data-dir",
		"--redis-port int",
		"Ctrl-C drains dev's worker first",
		"--log-requests",
	} {
		require.Contains(t, help, want)
	}
}

// TestRunDrainFirst: when ctx ends, the API's context ends only once every
// worker has returned; a failure of either side stops the other and is
// returned.
func TestRunDrainFirst(t *testing.T) {
	t.Parallel()
	log := slog.New(slog.DiscardHandler)
	ctx, cancel := context.WithCancel(context.Background())
	workerDone := make(chan struct{})
	apiSaw := make(chan bool, 1)
	api := func(ctx context.Context) error {
		<-ctx.Done()
		select {
		case <-workerDone:
			apiSaw <- true
		default:
			apiSaw <- false
		}
		return nil
	}
	worker := func(ctx context.Context) error {
		<-ctx.Done()
		close(workerDone)
		return nil
	}
	cancel()
	require.NoError(t, runDrainFirst(ctx, log, api, worker))
	require.True(t, <-apiSaw, "the API stopped before the worker had drained")

	boom := errors.New("boom")
	waitStop := func(ctx context.Context) error {
		<-ctx.Done()
		return nil
	}
	fails := func(context.Context) error { return boom }
	require.ErrorIs(t, runDrainFirst(context.Background(), log, fails, waitStop), boom, "the API failed")
	require.ErrorIs(t, runDrainFirst(context.Background(), log, waitStop, waitStop, fails), boom, "a worker failed")
}
