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
	parts, err := a.rdb.PartitionsOf(ctx, queue)
	if err != nil {
		return err
	}
	if len(parts) == 1 {
		_, err = a.rdb.SetLimits(ctx, queue, &l)
		return err
	}
	// A partitioned queue's rate and concurrency are split between its
	// partitions, so that their sum is the queue's: never exceeded, and
	// approximate in that one partition's unused share does not go to
	// another (docs/partitions.md). Per-key limits hold as set: a key's
	// tasks are all in one partition.
	p := len(parts)
	if l.Concurrency > 0 && l.Concurrency < p {
		return invalid("concurrency", "is below the queue's %d partitions: each partition needs at least 1 (give %d or more)", p, p)
	}
	if l.Rate != nil && (l.Rate.Limit < p || (l.Rate.Burst > 0 && l.Rate.Burst < p)) {
		return invalid("rate", "limit and burst are split between the queue's %d partitions: each needs at least 1 (give %d or more)", p, p)
	}
	for k, part := range parts {
		pl := l
		pl.Concurrency = shareOf(l.Concurrency, p, k)
		if l.Rate != nil {
			r := *l.Rate
			r.Limit, r.Burst = shareOf(r.Limit, p, k), shareOf(r.Burst, p, k)
			pl.Rate = &r
		}
		if _, err := a.rdb.SetLimits(ctx, part, &pl); err != nil {
			return err
		}
	}
	return nil
}

// shareOf is partition k's share of n split between p partitions: the
// shares differ by at most 1 and sum to n.
func shareOf(n, p, k int) int {
	s := n / p
	if k < n%p {
		s++
	}
	return s
}

// DeleteLimits removes queue's limits; it reports whether there were any.
func (a *Admin) DeleteLimits(ctx context.Context, queue string) (bool, error) {
	if !ValidQueueName(queue) {
		return false, invalid("queue", "must match ^[a-z0-9][a-z0-9_-]{0,63}$")
	}
	parts, err := a.rdb.PartitionsOf(ctx, queue)
	if err != nil {
		return false, err
	}
	had := false
	for _, part := range parts {
		h, err := a.rdb.SetLimits(ctx, part, nil)
		if err != nil {
			return had, err
		}
		had = had || h
	}
	return had, nil
}

// GetLimits returns queue's limits, nil when none are set. A partitioned
// queue's rate and concurrency are the sums of its partitions' shares.
func (i *Inspector) GetLimits(ctx context.Context, queue string) (*dtqtype.QueueLimits, error) {
	if !ValidQueueName(queue) {
		return nil, ErrQueueNotFound
	}
	parts, err := i.rdb.PartitionsOf(ctx, queue)
	if err != nil {
		return nil, err
	}
	l, err := i.rdb.GetLimits(ctx, queue)
	if err != nil || l == nil || len(parts) == 1 {
		return l, err
	}
	for _, part := range parts[1:] {
		pl, err := i.rdb.GetLimits(ctx, part)
		if err != nil {
			return nil, err
		}
		if pl == nil {
			continue
		}
		l.Concurrency += pl.Concurrency
		if l.Rate != nil && pl.Rate != nil {
			l.Rate.Limit += pl.Rate.Limit
			l.Rate.Burst += pl.Rate.Burst
		}
	}
	return l, nil
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
