package dtq

import (
	"context"
	"time"

	"github.com/dtq-io/dtq/dtqtype"
)

// Bounds of flow-control limits.
const (
	MaxLimit      = 1_000_000 // largest rate limit, concurrency and key_concurrency
	MinRatePeriod = time.Millisecond
	MaxRatePeriod = 24 * time.Hour
)

// SetLimits replaces queue's flow-control limits (see docs/flow-control.md):
// at least one must be set; DeleteLimits removes them. An invalid value is a
// *ValidationError naming the field ("rate.limit", "rate.period",
// "rate.burst", "concurrency", "key_concurrency"). Limits apply from the
// next claim on every worker.
func (a *Admin) SetLimits(ctx context.Context, queue string, l dtqtype.QueueLimits) error {
	if !ValidQueueName(queue) {
		return invalid("queue", "must match ^[a-z0-9][a-z0-9_-]{0,63}$")
	}
	if err := checkLimits(l); err != nil {
		return err
	}
	_, err := a.rdb.SetLimits(ctx, queue, &l)
	return err
}

// DeleteLimits removes queue's limits; it reports whether there were any.
func (a *Admin) DeleteLimits(ctx context.Context, queue string) (bool, error) {
	if !ValidQueueName(queue) {
		return false, invalid("queue", "must match ^[a-z0-9][a-z0-9_-]{0,63}$")
	}
	return a.rdb.SetLimits(ctx, queue, nil)
}

// GetLimits returns queue's limits, nil when none are set.
func (i *Inspector) GetLimits(ctx context.Context, queue string) (*dtqtype.QueueLimits, error) {
	if !ValidQueueName(queue) {
		return nil, ErrQueueNotFound
	}
	return i.rdb.GetLimits(ctx, queue)
}

// checkLimits refuses limits that set nothing or a value out of range.
func checkLimits(l dtqtype.QueueLimits) error {
	if l.Rate == nil && l.Concurrency == 0 && l.KeyConcurrency == 0 {
		return invalid("rate", "give at least one of rate, concurrency and key_concurrency (DELETE removes the limits)")
	}
	if r := l.Rate; r != nil {
		p := time.Duration(r.Period)
		switch {
		case r.Limit < 1 || r.Limit > MaxLimit:
			return invalid("rate.limit", "must be an integer between 1 and %d", MaxLimit)
		case p < MinRatePeriod || p > MaxRatePeriod:
			return invalid("rate.period", "must be a duration between %v and %v, like \"1s\"", MinRatePeriod, MaxRatePeriod)
		case r.Burst < 0 || r.Burst > MaxLimit:
			return invalid("rate.burst", "must be an integer between 1 and %d (default 1)", MaxLimit)
		}
	}
	if l.Concurrency < 0 || l.Concurrency > MaxLimit {
		return invalid("concurrency", "must be an integer between 1 and %d", MaxLimit)
	}
	if l.KeyConcurrency < 0 || l.KeyConcurrency > MaxLimit {
		return invalid("key_concurrency", "must be an integer between 1 and %d", MaxLimit)
	}
	return nil
}
