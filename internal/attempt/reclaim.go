package attempt

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"time"

	"github.com/dtq-io/dtq/internal/maintenance"
	"github.com/dtq-io/dtq/internal/rdb"
)

// Resend runs call, and after an error runs it again with the same
// arguments until it answers, ctx ends or window passes. Claim, reclaim and
// ingest calls need this: after an error it is unknown whether the script
// ran, and only the same call (same time and nonce) answers what a run
// whose reply was lost did. Past the window a claimed task's lease is near
// its end and reclaim takes it back instead.
func Resend[T any](ctx context.Context, window time.Duration, call func() (T, error)) (T, error) {
	deadline := time.Now().Add(window)
	delay := 50 * time.Millisecond
	for {
		v, err := call()
		if err == nil || time.Now().Add(delay).After(deadline) || !Sleep(ctx, delay) {
			return v, err
		}
		delay = min(delay*2, time.Second)
	}
}

// NewNonce names one claim or reclaim call (see Resend).
func NewNonce() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Runner is a process that runs the tasks a reclaim takes over.
type Runner interface {
	// Acquire takes the free slots there are now, up to all, and returns
	// how many.
	Acquire() int
	// Release frees n slots.
	Release(n int)
	// Running lists the attempts of queue the process runs now (their
	// leases are not expired, only late to be renewed).
	Running(queue string) []rdb.LeaseRef
	// Start starts the tasks under ctx (their handlers end when it does)
	// and returns how many it started (each holds one slot).
	Start(ctx context.Context, tasks []rdb.ClaimedTask) int
}

// Idle consumers (stopped or replaced workers) are removed from the group
// once they have nothing pending and have not read for consumerIdleLimit.
const (
	consumerPruneEvery = 5 * time.Minute
	consumerIdleLimit  = time.Hour
)

// Reclaim configures the reclaim step of one queue.
type Reclaim struct {
	RDB      *rdb.RDB
	Queue    string
	Settings *rdb.WorkerSettings
	Clock    func() time.Time
	Logger   *slog.Logger
	// Every is how often the step runs (the heartbeat interval).
	Every time.Duration
	// Window bounds the resending of a call whose reply was lost (half the
	// lease).
	Window time.Duration
	// Runner, when set, takes expired tasks over as its free slots allow,
	// and the step now and then prunes the group's idle consumers. Without
	// one, expired leases go back to their band stream and the next claim,
	// of any worker, delivers them with attempt +1.
	Runner Runner
}

// Step returns the maintenance step (see maintenance.Run); its reclaim
// calls run under the step's context.
func (c Reclaim) Step() func(context.Context) (maintenance.Result, error) {
	return c.step(func(ctx context.Context) (context.Context, context.Context) { return ctx, ctx })
}

// StepUnder is Step for a Runner: the reclaim call runs under base without
// its cancel (a call that takes tasks over must answer them even at
// shutdown), and the Runner starts the tasks under base.
func (c Reclaim) StepUnder(base context.Context) func(context.Context) (maintenance.Result, error) {
	return c.step(func(context.Context) (context.Context, context.Context) {
		return context.WithoutCancel(base), base
	})
}

// step is the step; contexts gives the reclaim call's and the tasks'
// contexts for the step's ctx.
func (c Reclaim) step(contexts func(context.Context) (call, tasks context.Context)) func(context.Context) (maintenance.Result, error) {
	lastPrune := time.Now()
	return func(ctx context.Context) (maintenance.Result, error) {
		next := maintenance.Result{Wait: c.Every}
		callCtx, taskCtx := contexts(ctx)
		room := 0
		var mine []rdb.LeaseRef
		if c.Runner != nil {
			room, mine = c.Runner.Acquire(), c.Runner.Running(c.Queue)
		}
		now, nonce := c.Clock(), NewNonce()
		tasks, err := Resend(ctx, c.Window, func() ([]rdb.ClaimedTask, error) {
			return c.RDB.Reclaim(callCtx, c.Queue, c.Settings, room, now, nonce, mine)
		})
		if c.Runner == nil {
			return next, err
		}
		if err != nil {
			c.Runner.Release(room)
			return next, err
		}
		for _, ct := range tasks {
			c.Logger.Info("took over task with expired lease", "task_id", ct.ID, "queue", c.Queue, "task_type", ct.Type, "attempt", ct.Attempt)
		}
		c.Runner.Release(room - c.Runner.Start(taskCtx, tasks))
		if time.Since(lastPrune) > consumerPruneEvery {
			lastPrune = time.Now()
			if _, err := c.RDB.PruneConsumers(ctx, c.Queue, consumerIdleLimit); err != nil && ctx.Err() == nil {
				c.Logger.Warn("pruning idle consumers failed", "queue", c.Queue, "err", err)
			}
		}
		return next, nil
	}
}
