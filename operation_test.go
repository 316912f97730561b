package dtq_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/internal/faultproxy"
	"github.com/dtq-io/dtq/internal/rdb"
	"github.com/dtq-io/dtq/internal/redistest"
	"github.com/dtq-io/dtq/internal/workertest"
)

// receipt is a struct result, to check results round-trip through Redis.
type receipt struct {
	OrderID string    `json:"order_id"`
	Amount  float64   `json:"amount"`
	SentAt  time.Time `json:"sent_at"`
	Lines   []string  `json:"lines"`
}

// opBundle is what an IdempotentOperation test needs: outside a handler
// the operation keys live under the deployment's prefix, the test's own.
type opBundle struct {
	ctx    context.Context
	rc     *redis.Client
	prefix string
	d      *dtq.Deployment
}

func opSetup(t *testing.T) *opBundle {
	t.Helper()
	s := redistest.New(t)
	d, err := dtq.Open(s.Client, &dtq.DeploymentConfig{KeyPrefix: s.Prefix})
	require.NoError(t, err)
	return &opBundle{ctx: context.Background(), rc: s.Client, prefix: s.Prefix, d: d}
}

// key returns an operation key and the Redis key it is stored at.
func (b *opBundle) key(name string) (opKey, redisKey string) {
	return name, b.prefix + ":op:" + name
}

func TestIdempotentOperationConcurrentCallers(t *testing.T) {
	t.Parallel()
	b := opSetup(t)
	key, _ := b.key("receipt-1")
	want := receipt{OrderID: "o-1", Amount: 12.5, SentAt: time.Date(2025, 3, 4, 5, 6, 7, 8e6, time.UTC), Lines: []string{"a", "b"}}

	release := make(chan struct{})
	var runs atomic.Int32
	fn := func(context.Context) (receipt, error) {
		runs.Add(1)
		<-release // hold the operation open until every other caller answered
		return want, nil
	}
	type answer struct {
		executed bool
		res      receipt
		err      error
	}
	const callers = 50
	answers := make(chan answer, callers)
	for range callers {
		go func() {
			ex, res, err := dtq.IdempotentOperation(b.ctx, b.d, key, time.Hour, fn)
			answers <- answer{ex, res, err}
		}()
	}
	// While fn runs, every other caller is told to come back later.
	for range callers - 1 {
		a := <-answers
		require.ErrorIs(t, a.err, dtq.ErrOperationInProgress)
		require.False(t, a.executed)
	}
	close(release)
	a := <-answers
	require.NoError(t, a.err)
	require.True(t, a.executed)
	require.Equal(t, want, a.res)

	// Once it succeeded, callers get the stored result, never "in progress".
	var wg sync.WaitGroup
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ex, res, err := dtq.IdempotentOperation(b.ctx, b.d, key, time.Hour, fn)
			answers <- answer{ex, res, err}
		}()
	}
	wg.Wait()
	for range callers {
		a := <-answers
		require.NoError(t, a.err)
		require.False(t, a.executed)
		require.Equal(t, want, a.res)
	}
	require.EqualValues(t, 1, runs.Load())
}

func TestIdempotentOperationCallersRetryingUntilDone(t *testing.T) {
	t.Parallel()
	b := opSetup(t)
	key, _ := b.key("retrying")
	var runs atomic.Int32
	fn := func(context.Context) (int, error) { return int(runs.Add(1)) * 100, nil }

	const callers = 50
	executed := make([]bool, callers)
	results := make([]int, callers)
	errs := make([]error, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			deadline := time.Now().Add(10 * time.Second)
			for {
				executed[i], results[i], errs[i] = dtq.IdempotentOperation(b.ctx, b.d, key, time.Hour, fn)
				if !errors.Is(errs[i], dtq.ErrOperationInProgress) || time.Now().After(deadline) {
					return
				}
			}
		}()
	}
	wg.Wait()
	ran := 0
	for i := range callers {
		require.NoError(t, errs[i])
		require.Equal(t, 100, results[i], "every caller sees the one result")
		if executed[i] {
			ran++
		}
	}
	require.Equal(t, 1, ran)
	require.EqualValues(t, 1, runs.Load())
}

func TestIdempotentOperationErrorReleases(t *testing.T) {
	t.Parallel()
	b := opSetup(t)
	key, rkey := b.key("flaky")
	errSend := errors.New("smtp down")
	calls := 0
	fn := func(context.Context) (string, error) {
		calls++
		if calls == 1 {
			return "", errSend
		}
		return fmt.Sprintf("sent on call %d", calls), nil
	}

	ex, _, err := dtq.IdempotentOperation(b.ctx, b.d, key, time.Hour, fn)
	require.ErrorIs(t, err, errSend)
	require.True(t, ex, "fn ran (and may have partly acted)")
	require.Zero(t, b.rc.Exists(b.ctx, rkey).Val(), "a failed run releases the key")

	ex, res, err := dtq.IdempotentOperation(b.ctx, b.d, key, time.Hour, fn)
	require.NoError(t, err)
	require.True(t, ex)
	require.Equal(t, "sent on call 2", res)

	ex, res, err = dtq.IdempotentOperation(b.ctx, b.d, key, time.Hour, fn)
	require.NoError(t, err)
	require.False(t, ex)
	require.Equal(t, "sent on call 2", res)
	require.Equal(t, 2, calls)
	ttl := b.rc.TTL(b.ctx, rkey).Val()
	require.Greater(t, ttl, 59*time.Minute)
	require.LessOrEqual(t, ttl, time.Hour)
}

func TestIdempotentOperationUnencodableResultReleases(t *testing.T) {
	t.Parallel()
	b := opSetup(t)
	key, rkey := b.key("chan")
	ex, _, err := dtq.IdempotentOperation(b.ctx, b.d, key, time.Hour, func(context.Context) (chan int, error) {
		return make(chan int), nil
	})
	require.Error(t, err)
	require.True(t, ex)
	require.Zero(t, b.rc.Exists(b.ctx, rkey).Val())
}

func TestIdempotentOperationRunsAgainAfterTTL(t *testing.T) {
	t.Parallel()
	b := opSetup(t)
	key, rkey := b.key("short")
	var runs atomic.Int32
	fn := func(context.Context) (int32, error) { return runs.Add(1), nil }

	ex, res, err := dtq.IdempotentOperation(b.ctx, b.d, key, time.Second, fn)
	require.NoError(t, err)
	require.True(t, ex)
	require.EqualValues(t, 1, res)
	ex, res, err = dtq.IdempotentOperation(b.ctx, b.d, key, time.Second, fn)
	require.NoError(t, err)
	require.False(t, ex)
	require.EqualValues(t, 1, res)

	require.Eventually(t, func() bool { return b.rc.Exists(b.ctx, rkey).Val() == 0 },
		10*time.Second, 20*time.Millisecond, "the record expires with its ttl")
	ex, res, err = dtq.IdempotentOperation(b.ctx, b.d, key, time.Second, fn)
	require.NoError(t, err)
	require.True(t, ex, "a new window runs fn again")
	require.EqualValues(t, 2, res)
}

func TestIdempotentOperationRejectsBadArguments(t *testing.T) {
	t.Parallel()
	b := opSetup(t)
	key, _ := b.key("args")
	fn := func(context.Context) (int, error) {
		t.Error("fn must not run")
		return 0, nil
	}
	for _, c := range []struct {
		key string
		ttl time.Duration
	}{{"", time.Hour}, {key, 0}, {key, -time.Second}} {
		ex, _, err := dtq.IdempotentOperation(b.ctx, b.d, c.key, c.ttl, fn)
		require.Error(t, err)
		require.False(t, ex)
	}
}

func TestIdempotentOperationPanicReleases(t *testing.T) {
	t.Parallel()
	b := opSetup(t)
	key, rkey := b.key("panics")
	require.Panics(t, func() {
		_, _, _ = dtq.IdempotentOperation(b.ctx, b.d, key, time.Hour, func(context.Context) (int, error) { panic("boom") })
	})
	require.Zero(t, b.rc.Exists(b.ctx, rkey).Val(), "a panicking fn releases the key like an error")
	ex, res, err := dtq.IdempotentOperation(b.ctx, b.d, key, time.Hour, func(context.Context) (int, error) { return 7, nil })
	require.NoError(t, err)
	require.True(t, ex)
	require.Equal(t, 7, res)
}

// TestIdempotentOperationInHandlerUsesWorkerPrefix: inside a handler the
// keys live under the worker's prefix, whatever the Deployment given.
func TestIdempotentOperationInHandlerUsesWorkerPrefix(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	other, err := dtq.Open(b.rc, &dtq.DeploymentConfig{KeyPrefix: b.prefix + "-other"})
	require.NoError(t, err)
	w := b.worker(t, nil)
	var sends atomic.Int32
	w.HandleFunc("send", func(ctx context.Context, task *dtq.Task) (any, error) {
		ex, res, err := dtq.IdempotentOperation(ctx, other, "mail:order-9", time.Hour, func(context.Context) (string, error) {
			sends.Add(1)
			return "sent by " + task.ID, nil
		})
		return map[string]any{"executed": ex, "result": res}, err
	})
	workertest.Run(t, w)

	first, err := b.client.Submit(b.ctx, dtq.Submission{Type: "send"})
	require.NoError(t, err)
	ti := b.waitStatus(t, first.TaskID, dtqtype.StatusSucceeded)
	require.JSONEq(t, fmt.Sprintf(`{"executed":true,"result":"sent by %s"}`, first.TaskID), string(ti.Result))

	second, err := b.client.Submit(b.ctx, dtq.Submission{Type: "send"})
	require.NoError(t, err)
	ti = b.waitStatus(t, second.TaskID, dtqtype.StatusSucceeded)
	require.JSONEq(t, fmt.Sprintf(`{"executed":false,"result":"sent by %s"}`, first.TaskID), string(ti.Result))
	require.EqualValues(t, 1, sends.Load())

	require.EqualValues(t, 1, b.rc.Exists(b.ctx, b.prefix+":op:mail:order-9").Val())
	require.Zero(t, b.rc.Exists(b.ctx, b.prefix+"-other:op:mail:order-9").Val(), "nothing under the given Deployment's prefix")
}

// TestIdempotentOperationLostClaimCancelsFn: when the claim is taken from
// under a running fn (its lease lapsed and another caller took the key), fn's
// context is cancelled with ErrOperationLost, and nothing is stored.
func TestIdempotentOperationLostClaimCancelsFn(t *testing.T) {
	t.Parallel()
	b := opSetup(t)
	key, rkey := b.key("lost")
	started := make(chan struct{})
	done := make(chan error, 1)
	var cause error
	go func() {
		_, _, err := dtq.IdempotentOperation(b.ctx, b.d, key, 1500*time.Millisecond, func(ctx context.Context) (int, error) {
			close(started)
			<-ctx.Done()
			cause = context.Cause(ctx)
			return 1, nil
		})
		done <- err
	}()
	<-started
	require.NoError(t, b.rc.HSet(b.ctx, rkey, "token", "another caller").Err())
	select {
	case err := <-done:
		require.ErrorIs(t, err, dtq.ErrOperationLost)
		require.ErrorIs(t, cause, dtq.ErrOperationLost, "fn's context names the cause")
	case <-time.After(20 * time.Second):
		t.Fatal("fn was not told its claim was lost")
	}
	require.Equal(t, "another caller", b.rc.HGet(b.ctx, rkey, "token").Val(), "the other caller's claim is untouched")
}

// TestIdempotentOperationStoresThroughAnError: the write that records fn's
// success fails once (its connection is cut before it reaches Redis); it is
// sent again, so fn counts as done and is not run a second time.
func TestIdempotentOperationStoresThroughAnError(t *testing.T) {
	t.Parallel()
	b := opSetup(t)
	p, err := faultproxy.Start(b.rc.Options().Addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	via := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1})
	t.Cleanup(func() { via.Close() })
	d, err := dtq.Open(via, &dtq.DeploymentConfig{KeyPrefix: b.prefix})
	require.NoError(t, err)
	key, _ := b.key("store")
	runs := 0
	fn := func(ctx context.Context) (int, error) {
		runs++
		p.CutBefore([]byte(rdb.ScriptHash("op_finish")), 1) // the "done" write fails once
		return 42, nil
	}
	executed, v, err := dtq.IdempotentOperation(b.ctx, d, key, time.Hour, fn)
	require.NoError(t, err)
	require.True(t, executed)
	require.Equal(t, 42, v)
	require.EqualValues(t, 1, p.Cuts())
	executed, v, err = dtq.IdempotentOperation(b.ctx, d, key, time.Hour, fn)
	require.NoError(t, err)
	require.False(t, executed)
	require.Equal(t, 42, v)
	require.Equal(t, 1, runs)
}
