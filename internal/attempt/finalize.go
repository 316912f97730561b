package attempt

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/dtq-io/dtq/internal/rdb"
)

func isLeaseLost(err error) bool { return errors.Is(err, rdb.ErrLeaseLost) }
func isCancelWon(err error) bool { return errors.Is(err, rdb.ErrCancelWon) }

// WriteFailure runs the finalize script of d, a Retry or Dead decision:
// for a, under s. Every finalize script is safe to send again: a call whose
// first run landed answers as that run did.
func WriteFailure(ctx context.Context, db *rdb.RDB, a *rdb.FinishArgs, s *rdb.WorkerSettings, d *Decision) error {
	switch d.Op {
	case Retry:
		return db.FinishRetry(ctx, a, s, d.Delay, d.Class, d.Message)
	case Dead:
		return db.FinishDead(ctx, a, s, d.Class, d.Message, d.Retryable)
	case None, Succeed: // not a failure: nothing to write here
	}
	return nil
}

// Finalize writes that fail (Redis unreachable, refusing writes, failing
// over) are tried again with a doubling delay between these bounds.
const (
	RetryFirst = 50 * time.Millisecond
	RetryLast  = 2 * time.Second
)

// Persist runs write until it lands, with a context that is never
// cancelled (a write is never cut in half). It stops at a fencing refusal
// (rdb.ErrLeaseLost: the lease is really lost), at rdb.ErrCancelWon, and
// when hardCtx ends: then the lease runs out and the task is reclaimed
// (at-least-once). retried, when set, is told of every failed try. The
// caller keeps the task in flight meanwhile, so its lease is renewed.
func Persist(hardCtx context.Context, write func(context.Context) error, retried func(), log *slog.Logger) error {
	ctx := context.WithoutCancel(hardCtx)
	delay := RetryFirst
	for tries := 0; ; tries++ {
		err := write(ctx)
		if err == nil || isLeaseLost(err) || isCancelWon(err) {
			if tries > 0 {
				log.Info("finalize landed after retries", "tries", tries+1)
			}
			return err
		}
		switch {
		case tries == 0:
			log.Warn("finalize failed; retrying while the lease is renewed", "err", err)
		case tries%30 == 0: // about once a minute at the 2 s cap: a fault that does not pass shows
			log.Error("finalize still failing; the task stays in flight with its lease renewed", "tries", tries, "err", err)
		}
		if retried != nil {
			retried()
		}
		if !Sleep(hardCtx, delay) {
			log.Error("finalize abandoned at shutdown; the task will be reclaimed when its lease expires", "err", err)
			return err
		}
		delay = min(delay*2, RetryLast)
	}
}

// Sleep sleeps for d or until ctx ends; it reports whether it slept fully.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
