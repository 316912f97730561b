package dtq_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/internal/workertest"
)

// The crash tests run a worker in a child process (this test binary, re-run
// with childModeEnv set) and kill it with SIGKILL at a chosen point.
const childModeEnv = "DTQ_TEST_CHILD_WORKER"

// runChildWorker is the child's main: it runs a worker whose "crashy"
// handler does its side effect, marks that it got there, then hangs until
// it is killed.
func runChildWorker(mode string) int {
	addr, prefix := os.Getenv("DTQ_TEST_REDIS_ADDR"), os.Getenv("DTQ_TEST_PREFIX")
	rc := redis.NewClient(&redis.Options{Addr: addr})
	d, err := dtq.Open(rc, &dtq.DeploymentConfig{KeyPrefix: prefix})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	w, err := d.NewWorker(&dtq.WorkerConfig{Concurrency: 1, WorkerID: "child",
		VisibilityTimeout: 30 * time.Second, HeartbeatInterval: 10 * time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	w.HandleFunc("crashy", func(ctx context.Context, t *dtq.Task) (any, error) {
		if _, err := crashySideEffect(ctx, d, rc, prefix, mode, t); err != nil {
			return nil, err
		}
		rc.Set(ctx, prefix+":test:reached", "1", 0)
		select {} // wait for SIGKILL
	})
	if err := w.Run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// crashySideEffect is the handler's work: a plain INCR, or the same INCR
// guarded by IdempotentOperation.
func crashySideEffect(ctx context.Context, d *dtq.Deployment, rc redis.UniversalClient, prefix, mode string, t *dtq.Task) (any, error) {
	sideEffect := func(ctx context.Context) (int64, error) {
		return rc.Incr(ctx, prefix+":test:effects").Result()
	}
	if mode == "plain" {
		n, err := sideEffect(ctx)
		return map[string]int64{"effects": n}, err
	}
	executed, n, err := dtq.IdempotentOperation(ctx, d, "receipt:"+t.IdempotencyKey, time.Hour, sideEffect)
	if err != nil {
		return nil, err
	}
	if !executed {
		return map[string]any{"deduped": true}, nil
	}
	return map[string]int64{"effects": n}, nil
}

func TestCrashAfterSideEffectIsReclaimedAndCompleted(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"plain", "operation"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			b := setup(t, nil)
			res, err := b.client.Submit(b.ctx, dtq.Submission{Type: "crashy", IdempotencyKey: "order-7", MaxAttempts: 3})
			require.NoError(t, err)

			child := exec.Command(os.Args[0], "-test.run=^$")
			child.Env = append(os.Environ(), childModeEnv+"="+mode,
				"DTQ_TEST_REDIS_ADDR="+b.rc.Options().Addr, "DTQ_TEST_PREFIX="+b.prefix)
			child.Stderr = os.Stderr
			require.NoError(t, child.Start())
			require.Eventually(t, func() bool { return b.rc.Exists(b.ctx, b.prefix+":test:reached").Val() == 1 },
				30*time.Second, 10*time.Millisecond, "child never ran the handler")
			require.NoError(t, child.Process.Kill()) // SIGKILL: no drain, no finalize
			_ = child.Wait()

			ti, err := b.insp.GetTask(b.ctx, res.TaskID)
			require.NoError(t, err)
			require.Equal(t, dtqtype.StatusRunning, ti.Status)
			require.Equal(t, "child", ti.Execution.WorkerID)

			// A peer whose clock is past the dead worker's lease takes over.
			late := b.open(t, lateClock)
			peer := b.workerOf(t, late, func(c *dtq.WorkerConfig) { c.WorkerID = "peer" })
			peer.HandleFunc("crashy", func(ctx context.Context, task *dtq.Task) (any, error) {
				return crashySideEffect(ctx, late, b.rc, b.prefix, mode, task)
			})
			workertest.Run(t, peer)
			ti = b.waitStatus(t, res.TaskID, dtqtype.StatusSucceeded)
			require.Equal(t, 2, ti.Attempt)
			require.Equal(t, "peer", ti.Execution.WorkerID)
			require.Equal(t, "lease_lost", ti.Attempts[0].Outcome)

			effects := b.rc.Get(b.ctx, b.prefix+":test:effects").Val()
			if mode == "plain" {
				require.Equal(t, "2", effects, "at-least-once: the plain handler ran again")
			} else {
				require.Equal(t, "1", effects, "IdempotentOperation kept the side effect to one")
				require.JSONEq(t, `{"deduped":true}`, string(ti.Result))
			}
			// The peer runs the task itself, or, with no slot free at that
			// moment, puts it back in its queue and claims it from there.
			evs := b.events(t, "default", res.TaskID)
			if len(evs) == 5 {
				require.Equal(t, []string{"TASK_QUEUED", "TASK_STARTED", "TASK_LEASE_LOST", "TASK_STARTED", "TASK_SUCCEEDED"}, evs)
			} else {
				require.Equal(t, []string{"TASK_QUEUED", "TASK_STARTED", "TASK_LEASE_LOST", "TASK_SUCCEEDED"}, evs)
			}
			require.Equal(t, res.TaskID, b.rc.Get(b.ctx, b.keys.Idempotency("default", "order-7")).Val())
		})
	}
}
