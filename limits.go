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
	MaxWeight     = 1000 // largest fairness weight
	MaxWeights    = 1000 // most keys with their own fairness weight
)

// SetLimits replaces queue's flow-control limits (see docs/flow-control.md):
// at least one must be set; DeleteLimits removes them. An invalid value is a
// *ValidationError naming the field ("rate.limit", "rate.period",
// "rate.burst", "concurrency", "key_concurrency", "fairness.default_weight",
// "fairness.weights", "key_rate.limit", "key_rate.period", "key_rate.burst",
// "key_order", "events"). Limits apply from the next claim on every worker;
// events (dtqtype.EventsFull or EventsOutcomes) from the next claim, and
// within a second for submissions and promotions. Setting
// fairness, key_rate or key_order sorts the queue's ready tasks into key
// queues from the next claim on; limits without any of them move the key
// queues' tasks back into the band streams at once, in order.
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
	if l.Rate == nil && l.Concurrency == 0 && l.KeyConcurrency == 0 && l.Fairness == nil && l.KeyRate == nil &&
		l.KeyOrder == "" && l.Events == "" {
		return invalid("rate", "give at least one of rate, concurrency, key_concurrency, fairness, key_rate, key_order "+
			"and events (DELETE removes the limits)")
	}
	if l.Events != "" && l.Events != dtqtype.EventsFull && l.Events != dtqtype.EventsOutcomes {
		return invalid("events", `must be "full" or "outcomes"`)
	}
	if err := checkRate("rate", l.Rate); err != nil {
		return err
	}
	if err := checkRate("key_rate", l.KeyRate); err != nil {
		return err
	}
	if l.KeyOrder != "" && l.KeyOrder != "fifo" {
		return invalid("key_order", `must be "fifo" or left out`)
	}
	if f := l.Fairness; f != nil {
		if f.DefaultWeight < 0 || f.DefaultWeight > MaxWeight {
			return invalid("fairness.default_weight", "must be an integer between 1 and %d (default 1)", MaxWeight)
		}
		if len(f.Weights) > MaxWeights {
			return invalid("fairness.weights", "may name at most %d keys; others get default_weight", MaxWeights)
		}
		for key, w := range f.Weights {
			if !validConcurrencyKey(key) {
				return invalid("fairness.weights", "key %q must be a concurrency key: 1..%d printable ASCII characters "+
					"without spaces", key, MaxConcurrencyKey)
			}
			if w < 1 || w > MaxWeight {
				return invalid("fairness.weights", "the weight of %q must be an integer between 1 and %d", key, MaxWeight)
			}
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

// checkRate checks a rate limit named field (rate or key_rate), nil being
// none.
func checkRate(field string, r *dtqtype.RateLimit) error {
	if r == nil {
		return nil
	}
	p := time.Duration(r.Period)
	switch {
	case r.Limit < 1 || r.Limit > MaxLimit:
		return invalid(field+".limit", "must be an integer between 1 and %d", MaxLimit)
	case p < MinRatePeriod || p > MaxRatePeriod:
		return invalid(field+".period", "must be a duration between %v and %v, like \"1s\"", MinRatePeriod, MaxRatePeriod)
	case r.Burst < 0 || r.Burst > MaxLimit:
		return invalid(field+".burst", "must be an integer between 1 and %d (default 1)", MaxLimit)
	}
	return nil
}

// validConcurrencyKey reports whether key is a valid concurrency key:
// 1..MaxConcurrencyKey printable ASCII characters without spaces.
func validConcurrencyKey(key string) bool {
	if key == "" || len(key) > MaxConcurrencyKey {
		return false
	}
	for i := range len(key) {
		if c := key[i]; c < 0x21 || c > 0x7e {
			return false
		}
	}
	return true
}
