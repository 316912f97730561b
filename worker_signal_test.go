package dtq_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/dtqtype"
)

// The signal tests run a worker with RunUntilSignal in a child process
// (this test binary, re-run with childSignalEnv set) and signal it: a real
// process signal, as `kill` sends it.
const childSignalEnv = "DTQ_TEST_CHILD_SIGNAL_WORKER"

// runChildSignalWorker is the child's main: a worker whose "block" handler
// logs that it started, then returns only when its stdin ends. Its log goes
// to stderr, for the parent to follow.
func runChildSignalWorker() int {
	rc := redis.NewClient(&redis.Options{Addr: os.Getenv("DTQ_TEST_REDIS_ADDR")})
	d, err := dtq.Open(rc, &dtq.DeploymentConfig{KeyPrefix: os.Getenv("DTQ_TEST_PREFIX")})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	// The drain timeout is far beyond the test: the handler ends because the
	// parent lets it, never because the drain gave up on it.
	w, err := d.NewWorker(&dtq.WorkerConfig{Concurrency: 1, WorkerID: "signalled", DrainTimeout: time.Hour, Logger: log})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	w.HandleFunc("block", func(context.Context, *dtq.Task) (any, error) {
		log.Info("handler started")
		_, err := io.Copy(io.Discard, os.Stdin)
		return map[string]string{"finished": "after the signal"}, err
	})
	if err := w.RunUntilSignal(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// lineWaiter follows a child's log lines.
type lineWaiter struct {
	lines chan string
	seen  strings.Builder
}

func newLineWaiter(r io.Reader) *lineWaiter {
	lw := &lineWaiter{lines: make(chan string)}
	go func() {
		defer close(lw.lines)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			lw.lines <- sc.Text()
		}
	}()
	return lw
}

// waitFor reads lines until one contains want; it fails when the child's
// output ends first (the child died) or nothing comes within a generous
// bound.
func (lw *lineWaiter) waitFor(t *testing.T, want string) {
	t.Helper()
	bound := time.NewTimer(30 * time.Second)
	defer bound.Stop()
	for {
		select {
		case l, ok := <-lw.lines:
			require.True(t, ok, "the child's log ended before %q:\n%s", want, lw.seen.String())
			lw.seen.WriteString(l + "\n")
			if strings.Contains(l, want) {
				return
			}
		case <-bound.C:
			require.Failf(t, "no log line", "%q never came:\n%s", want, lw.seen.String())
		}
	}
}

// drain discards the rest of the child's log, so it never blocks writing.
func (lw *lineWaiter) drain() {
	go func() {
		for range lw.lines {
			// discarded
		}
	}()
}

// waitExit waits for the child to exit, failing when it does not within a
// generous bound (it would hang, for instance, had the second signal no
// effect).
func waitExit(t *testing.T, child *exec.Cmd) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- child.Wait() }()
	bound := time.NewTimer(30 * time.Second)
	defer bound.Stop()
	select {
	case err := <-done:
		return err
	case <-bound.C:
		require.FailNow(t, "the child did not exit")
		return nil
	}
}

func TestRunUntilSignalDrains(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		first  syscall.Signal
		second bool // a second SIGTERM during the drain
	}{
		{"SIGTERM drains the running task", syscall.SIGTERM, false},
		{"SIGINT drains the running task", syscall.SIGINT, false},
		{"a second signal quits at once", syscall.SIGINT, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, nil)
			res, err := b.client.Submit(b.ctx, dtq.Submission{Type: "block"})
			require.NoError(t, err)

			child := exec.Command(os.Args[0], "-test.run=^$")
			child.Env = append(os.Environ(), childSignalEnv+"=1",
				"DTQ_TEST_REDIS_ADDR="+b.rc.Options().Addr, "DTQ_TEST_PREFIX="+b.prefix)
			stdin, err := child.StdinPipe()
			require.NoError(t, err)
			stderr, err := child.StderrPipe()
			require.NoError(t, err)
			require.NoError(t, child.Start())
			t.Cleanup(func() { _ = child.Process.Kill() })
			log := newLineWaiter(stderr)
			log.waitFor(t, "handler started")

			require.NoError(t, child.Process.Signal(tc.first))
			// Unhandled, the signal ends the child before it says this.
			log.waitFor(t, "draining 1 running task")
			log.drain()
			if !tc.second {
				require.NoError(t, stdin.Close()) // the handler returns
				require.NoError(t, waitExit(t, child), "the child exits 0 after the drain:\n%s", log.seen.String())
				ti := b.waitStatus(t, res.TaskID, dtqtype.StatusSucceeded)
				require.JSONEq(t, `{"finished":"after the signal"}`, string(ti.Result))
				return
			}
			require.NoError(t, child.Process.Signal(syscall.SIGTERM))
			err = waitExit(t, child)
			var exit *exec.ExitError
			require.True(t, errors.As(err, &exit), "the child was ended by the second signal: %v", err)
			ws, ok := exit.Sys().(syscall.WaitStatus)
			require.True(t, ok)
			require.True(t, ws.Signaled(), "the second signal ended the child: %v", err)
			require.Equal(t, syscall.SIGTERM, ws.Signal())
			ti, err := b.insp.GetTask(b.ctx, res.TaskID)
			require.NoError(t, err)
			require.Equal(t, dtqtype.StatusRunning, ti.Status, "no drain finished the task")
		})
	}
}
