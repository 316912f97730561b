// Package maintenance runs a worker's background services for each queue it
// serves: the promoter (due pending/retrying tasks into their streams) and
// the expiry sweeper. Both are plain loops around one script each; any number
// of workers may run them at once without a leader, because every script
// call is atomic.
package maintenance

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/dtq-io/dtq/internal/rdb"
)

// Config is what the services need.
type Config struct {
	RDB      *rdb.RDB
	Settings *rdb.WorkerSettings
	Clock    func() time.Time
	Logger   *slog.Logger
	// MaxSleep bounds how long a service sleeps between calls. Default 1s.
	MaxSleep time.Duration
}

type step func(ctx context.Context, queue string, s *rdb.WorkerSettings, now time.Time) (int, time.Time, error)

// RunPromoter promotes due tasks of queue until ctx ends: it loops at once
// while a call was full, else sleeps until the next due time (at most
// MaxSleep, jittered so that workers spread out).
func RunPromoter(ctx context.Context, cfg Config, queue string) {
	run(ctx, cfg, queue, "promote", cfg.RDB.Promote)
}

// RunSweeper expires overdue tasks of queue until ctx ends, like RunPromoter.
func RunSweeper(ctx context.Context, cfg Config, queue string) {
	run(ctx, cfg, queue, "expiry sweep", cfg.RDB.SweepExpired)
}

func run(ctx context.Context, cfg Config, queue, name string, fn step) {
	maxSleep := cfg.MaxSleep
	if maxSleep <= 0 {
		maxSleep = time.Second
	}
	errDelay := 100 * time.Millisecond
	for {
		now := cfg.Clock()
		n, next, err := fn(ctx, queue, cfg.Settings, now)
		var sleep time.Duration
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			cfg.Logger.Warn("maintenance call failed", "service", name, "queue", queue, "err", err)
			sleep = errDelay
			errDelay = min(errDelay*2, 5*time.Second)
		case n >= rdb.MaxPerCall:
			continue // more are due right now
		default:
			errDelay = 100 * time.Millisecond
			sleep = maxSleep
			if !next.IsZero() {
				sleep = min(sleep, max(next.Sub(now), time.Millisecond))
			}
			// ±10% so that many workers do not call in lockstep.
			sleep = time.Duration(float64(sleep) * (0.9 + 0.2*rand.Float64()))
		}
		t := time.NewTimer(sleep)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}
