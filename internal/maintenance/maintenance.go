// Package maintenance runs a worker's background services for each queue it
// serves: the promoter (due pending/retrying tasks into their streams), the
// expiry sweeper, the tidier (what finished tasks leave behind), and
// (through Run, from the worker) the reclaimer. All
// share one lifecycle: call a step, call again at once while the step was
// full, else sleep until it is next needed, and back off after errors. Any
// number of workers may run them at once without a leader, because every
// step is one atomic script call.
package maintenance

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/dtq-io/dtq/internal/rdb"
)

// Config is what the promoter and the sweeper need.
type Config struct {
	RDB      *rdb.RDB
	Settings *rdb.WorkerSettings
	Clock    func() time.Time
	Logger   *slog.Logger
	// MaxSleep bounds how long a service sleeps between calls. Default 1s.
	MaxSleep time.Duration
}

// Result is what one step did.
type Result struct {
	// Full means the step did as much as one call may: more work may be
	// waiting, so the next call follows at once.
	Full bool
	// Wait is how long until the step is next needed; 0 means MaxSleep.
	Wait time.Duration
}

// Service is one background loop.
type Service struct {
	Name, Queue string
	Logger      *slog.Logger
	// MaxSleep bounds the sleep between calls. Default 1s.
	MaxSleep time.Duration
	// Step does one call.
	Step func(ctx context.Context) (Result, error)
}

// Backoff after failed steps: doubling from errBackoffFloor up to errBackoffCeiling.
const (
	errBackoffFloor   = 100 * time.Millisecond
	errBackoffCeiling = 5 * time.Second
)

// Run calls s.Step until ctx ends: again at once after a full step, after
// the step's Wait (at most MaxSleep, ±10% so that many workers do not call
// in lockstep) otherwise, and after a doubling delay (100ms up to 5s) while
// steps fail. The first failure of a run of failures is logged at warn, the
// recovery at info.
func Run(ctx context.Context, s Service) {
	maxSleep := s.MaxSleep
	if maxSleep <= 0 {
		maxSleep = time.Second
	}
	errDelay, failing := errBackoffFloor, 0
	for {
		res, err := s.Step(ctx)
		var sleep time.Duration
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			if failing == 0 {
				s.Logger.Warn("maintenance call failed; retrying with backoff", "service", s.Name, "queue", s.Queue, "err", err)
			}
			failing++
			sleep = errDelay
			errDelay = min(errDelay*2, errBackoffCeiling)
		case res.Full:
			continue
		default:
			if failing > 0 {
				s.Logger.Info("maintenance call recovered", "service", s.Name, "queue", s.Queue, "failed_calls", failing)
			}
			errDelay, failing = errBackoffFloor, 0
			sleep = maxSleep
			if res.Wait > 0 {
				sleep = min(sleep, res.Wait)
			}
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

// RunPromoter promotes due tasks of queue until ctx ends: it loops at once
// while a call was full, else sleeps until the next due time (at most
// MaxSleep, jittered so that workers spread out).
func RunPromoter(ctx context.Context, cfg Config, queue string) {
	Run(ctx, cfg.service("promote", queue, cfg.RDB.Promote))
}

// RunSweeper expires overdue tasks of queue until ctx ends, like RunPromoter.
func RunSweeper(ctx context.Context, cfg Config, queue string) {
	Run(ctx, cfg.service("expiry sweep", queue, cfg.RDB.SweepExpired))
}

// Tidier pacing: one call of rdb.TidyBatch ids a second while walking the
// listing index, then a rest once the walk reached its end.
const (
	tidyStep = time.Second
	tidyRest = time.Minute
)

// RunTidier runs queue's tidy pass until ctx ends (see rdb.Tidy): it walks
// the listing index at a steady pace, dropping the ids of tasks whose
// retention ended, and prunes ended retained-count buckets.
func RunTidier(ctx context.Context, cfg Config, queue string) {
	Run(ctx, Service{Name: "tidy", Queue: queue, Logger: cfg.Logger, MaxSleep: tidyRest,
		Step: func(ctx context.Context) (Result, error) {
			s, now := cfg.Settings, cfg.Clock()
			res, err := cfg.RDB.Tidy(ctx, queue, now, now.Add(-min(s.SucceededRetention, s.FailedRetention)))
			if err != nil {
				return Result{}, err
			}
			if res.Wrapped {
				return Result{Wait: tidyRest}, nil
			}
			return Result{Wait: tidyStep}, nil
		}})
}

type step func(ctx context.Context, queue string, s *rdb.WorkerSettings, now time.Time) (rdb.Progress, error)

func (cfg Config) service(name, queue string, fn step) Service {
	return Service{Name: name, Queue: queue, Logger: cfg.Logger, MaxSleep: cfg.MaxSleep,
		Step: func(ctx context.Context) (Result, error) {
			now := cfg.Clock()
			p, err := fn(ctx, queue, cfg.Settings, now)
			if err != nil {
				return Result{}, err
			}
			res := Result{Full: p.Full}
			if !p.Next.IsZero() {
				res.Wait = max(p.Next.Sub(now), time.Millisecond)
			}
			return res, nil
		}}
}
