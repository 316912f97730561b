package dtq

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/internal/rdb"
)

// The autoscaling signal (docs/autoscaling.md): how many workers a queue
// wants, from what arrives, what waits and how long a task takes.

// Defaults and bounds of ScalingOptions.
const (
	DefaultScalingDrain       = time.Minute
	DefaultScalingIdle        = 5 * time.Minute
	DefaultScalingConcurrency = 16 // a Worker's default Concurrency
	MaxScalingDrain           = 24 * time.Hour
	MaxScalingIdle            = time.Hour
	MaxScalingConcurrency     = 10_000
	// MaxScalingQueues bounds the queues one Inspector.Scaling call reads.
	MaxScalingQueues = 100
)

// arrivalWindow is how many whole arrival slots the arrival rate averages:
// half a minute, short enough that a step in the load shows within it.
const arrivalWindow = 6

// ScalingOptions tune Inspector.Scaling. A zero field takes its default.
type ScalingOptions struct {
	// Drain is how soon the ready backlog should be worked off, 1s..24h.
	// Default DefaultScalingDrain.
	Drain time.Duration
	// Idle is how long a queue must have had nothing to do (no task ready,
	// held, running or due within a minute, none created, claimed or
	// finished) before its desired worker count falls to 0, 0..1h
	// (rounded up to whole minutes). Default DefaultScalingIdle; use
	// NoScalingIdle for no wait.
	Idle time.Duration
	// Concurrency is the slots of one worker, used when no live worker
	// serves the queue to say: 1..MaxScalingConcurrency. Default
	// DefaultScalingConcurrency.
	Concurrency int
}

// NoScalingIdle as ScalingOptions.Idle lets a queue with nothing to do
// want 0 workers at once.
const NoScalingIdle time.Duration = -1

// resolve applies the defaults and checks the ranges.
func (o ScalingOptions) resolve() (ScalingOptions, error) {
	orDefault(&o.Drain, DefaultScalingDrain)
	orDefault(&o.Idle, DefaultScalingIdle)
	orDefault(&o.Concurrency, DefaultScalingConcurrency)
	if o.Idle == NoScalingIdle {
		o.Idle = 0
	}
	switch {
	case o.Drain < time.Second || o.Drain > MaxScalingDrain:
		return o, invalid("drain", "must be between 1s and 24h")
	case o.Idle < 0 || o.Idle > MaxScalingIdle:
		return o, invalid("idle", "must be between 0s and 1h")
	case o.Concurrency < 1 || o.Concurrency > MaxScalingConcurrency:
		return o, invalid("concurrency", "must be between 1 and %d", MaxScalingConcurrency)
	}
	return o, nil
}

// Scaling returns the autoscaling signal of each of queues (1 to
// MaxScalingQueues names, each registered), in the order given: the
// desired worker count and what it was computed from. A bad name or
// option is a *ValidationError, a queue never submitted to
// ErrQueueNotFound.
func (i *Inspector) Scaling(ctx context.Context, queues []string, opt *ScalingOptions) ([]*dtqtype.QueueScaling, error) {
	var o ScalingOptions
	if opt != nil {
		o = *opt
	}
	o, err := o.resolve()
	if err != nil {
		return nil, err
	}
	if len(queues) == 0 || len(queues) > MaxScalingQueues {
		return nil, invalid("queue", "name 1 to %d queues", MaxScalingQueues)
	}
	for _, q := range queues {
		if !ValidQueueName(q) {
			return nil, invalid("queue", "%q must match ^[a-z0-9][a-z0-9_-]{0,63}$", q)
		}
	}
	exist, err := i.rdb.QueuesExist(ctx, queues)
	if err != nil {
		return nil, err
	}
	for j, ok := range exist {
		if !ok {
			return nil, fmt.Errorf("no such queue %q: nothing was ever submitted to it, or it was deleted: %w", queues[j], ErrQueueNotFound)
		}
	}
	now := time.Now()
	if i.clock != nil {
		now = i.clock()
	}
	workers, err := i.rdb.Workers(ctx, now)
	if err != nil {
		return nil, err
	}
	lookback := int((o.Idle + time.Minute - 1) / time.Minute)
	samples, err := i.partitionedSamples(ctx, queues, now, lookback)
	if err != nil {
		return nil, err
	}
	out := make([]*dtqtype.QueueScaling, len(samples))
	for j := range samples {
		in := scalingInputOf(&samples[j], workerConcurrency(workers, queues[j], o.Concurrency), o)
		out[j] = in.signal()
	}
	return out, nil
}

// workerConcurrency is the mean concurrency of the live workers serving
// queue, rounded to the nearest, or def when none says.
func workerConcurrency(workers []*dtqtype.WorkerInfo, queue string, def int) int {
	sum, n := 0, 0
	for _, w := range workers {
		if !w.Live || w.Concurrency < 1 {
			continue
		}
		for _, wq := range w.Queues {
			if name, _, _ := strings.Cut(wq, ":"); name == queue {
				sum += w.Concurrency
				n++
				break
			}
		}
	}
	if n == 0 {
		return def
	}
	return (sum + n/2) / n
}

// scalingInput is what the desired worker count is computed from: the
// pure part of Scaling, which the tests drive with recorded samples.
type scalingInput struct {
	queue                         string
	ready, held, running, dueSoon int64
	arrivalRate                   float64 // tasks a second
	serviceMS                     float64 // mean run time of an attempt
	oldestReadyMS                 int64
	concurrency                   int
	drain, idle                   time.Duration
	quietFor                      time.Duration // since the queue last did anything
}

// scalingInputOf reads a sample: a paused queue's ready tasks count as
// held, since no worker may take them until it resumes.
func scalingInputOf(s *rdb.ScalingSample, concurrency int, o ScalingOptions) scalingInput {
	in := scalingInput{queue: s.Queue, ready: s.Ready, held: s.Held, running: s.Running, dueSoon: s.DueSoon,
		arrivalRate: arrivalRate(s.Arrivals), concurrency: concurrency, drain: o.Drain, idle: o.Idle}
	if s.Paused {
		in.held += in.ready
		in.ready = 0
	}
	if s.Runs > 0 {
		in.serviceMS = float64(s.RunMSSum) / float64(s.Runs)
	}
	if !s.OldestReady.IsZero() {
		in.oldestReadyMS = max(0, s.Now.Sub(s.OldestReady).Milliseconds())
	}
	in.quietFor = time.Duration(math.MaxInt64)
	if s.Arrivals[0] > 0 {
		in.quietFor = 0
	} else if s.LastActive >= 0 {
		// The minute's counters say only that something happened in it:
		// count from its end.
		in.quietFor = max(0, s.Now.Sub(time.Unix((s.LastActive+1)*60, 0)))
	}
	return in
}

// arrivalRate is the tasks a second over the arrivalWindow whole slots
// before the one now falls in (which is still filling).
func arrivalRate(slots [rdb.ArrivalSlots]int64) float64 {
	var n int64
	for _, c := range slots[1 : 1+arrivalWindow] {
		n += c
	}
	return float64(n) / (arrivalWindow * rdb.ArrivalSlot.Seconds())
}

// desired is ⌈(arrival rate × service time + ready × service time / drain)
// / concurrency⌉, at least 1 while anything waits, runs or is due within a
// minute, or anything happened within idle.
func (in *scalingInput) desired() int64 {
	svc := in.serviceMS / 1000
	busy := in.arrivalRate*svc + float64(in.ready)*svc/in.drain.Seconds()
	// A hair below a whole number is that number: 200/s × 0.1 s / 4 is 5,
	// not 6 for a rounding error.
	n := int64(math.Ceil(busy/float64(in.concurrency) - 1e-9))
	if n < 1 && (in.ready+in.held+in.running+in.dueSoon > 0 || in.arrivalRate > 0 || in.quietFor < in.idle) {
		n = 1
	}
	return max(0, n)
}

// signal is the answer for in.
func (in *scalingInput) signal() *dtqtype.QueueScaling {
	return &dtqtype.QueueScaling{Queue: in.queue, DesiredWorkers: in.desired(), Ready: in.ready, Held: in.held,
		Running: in.running, DueSoon: in.dueSoon, ArrivalRate: math.Round(in.arrivalRate*1000) / 1000,
		ServiceTimeMeanMS: math.Round(in.serviceMS*10) / 10, OldestReadyAgeMS: in.oldestReadyMS,
		PerWorkerConcurrency: in.concurrency}
}
