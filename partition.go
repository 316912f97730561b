package dtq

import (
	"cmp"
	"context"
	"hash/fnv"
	"slices"
	"time"

	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/internal/attempt"
	"github.com/dtq-io/dtq/internal/rdb"
)

// partitionKey is the key that places n's task in a partition of its
// queue: its concurrency key, else its dedup key, else its idempotency key
// (docs/partitions.md); "" for none, and then the Client spreads it.
func (n *normalized) partitionKey() string {
	switch {
	case n.concurrencyKey != "":
		return n.concurrencyKey
	case n.dedup != nil:
		return n.dedup.Key
	}
	return n.key
}

// route picks the partition of parts (a queue's storage-side names,
// partition 0 first) that n's task goes to: by its partition key, so that
// one key's tasks and records are always in one partition, or round-robin.
func (c *Client) route(n *normalized, parts []string) string {
	if len(parts) == 1 {
		return parts[0]
	}
	if k := n.partitionKey(); k != "" {
		return parts[jumpHash(keyHash(k), len(parts))]
	}
	return parts[c.spread.Add(1)%uint64(len(parts))]
}

// keyHash is a stable 64-bit hash of a partition key's bytes (FNV-1a):
// every process and version places a key in the same partition.
func keyHash(k string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(k))
	return h.Sum64()
}

// jumpHash maps key to one of buckets buckets so that growing the buckets
// from n to n+1 moves only 1/(n+1) of the keys (Lamping and Veach's jump
// consistent hash): a linear congruential sequence of jumps, the last one
// below buckets wins.
func jumpHash(key uint64, buckets int) int {
	b, j := int64(-1), int64(0)
	for j < int64(buckets) {
		b = j
		key = key*2862933555777941757 + 1
		j = int64(float64(b+1) * (float64(int64(1)<<31) / float64((key>>33)+1)))
	}
	return int(b)
}

// partitionShare is queue's live-task bound per partition: max spread over
// its partitions, at least 1 (docs/partitions.md). storage is a
// partition's name.
func (c *Client) partitionShare(ctx context.Context, storage string, bound int64) int64 {
	queue, _ := rdb.PartitionOf(storage)
	parts, err := c.rdb.Partitions(ctx, queue, false)
	if err != nil || len(parts) <= 1 {
		return bound
	}
	return max(1, bound/int64(len(parts)))
}

// queueOf is the queue a storage-side name (a queue's, or a partition's)
// belongs to: what tasks, logs and metrics name.
func queueOf(storage string) string {
	q, _ := rdb.PartitionOf(storage)
	return q
}

// resolvePartitions lists the partitions of the worker's queues; a queue
// nobody created yet is its name alone.
func (w *Worker) resolvePartitions(ctx context.Context) ([]string, error) {
	var out []string
	for _, q := range w.queues() {
		parts, err := w.rdb.PartitionsOf(ctx, q)
		if err != nil {
			return nil, err
		}
		out = append(out, parts...)
	}
	return out, nil
}

// partitionsAtStart is what resolvePartitions found when the worker
// started.
func (w *Worker) partitionsAtStart() []string { return w.atStart }

// partitionsRecheck is how often a worker looks for partitions of its
// queues it does not serve yet.
const partitionsRecheck = 10 * time.Second

// watchPartitions starts serve for each partition of the worker's queues
// that served does not hold, every partitionsRecheck, until ctx ends.
func (w *Worker) watchPartitions(ctx context.Context, served map[string]bool, serve func(string)) {
	for {
		attempt.Sleep(ctx, partitionsRecheck)
		if ctx.Err() != nil {
			return
		}
		parts, err := w.resolvePartitions(ctx)
		if err != nil {
			continue
		}
		for _, p := range parts {
			if !served[p] {
				if err := w.rdb.EnsureGroups(ctx, p); err != nil {
					continue
				}
				served[p] = true
				serve(p)
			}
		}
	}
}

// partitionedInfo is QueueInfo of queue, summed over its partitions for a
// partitioned queue, with each partition's sizes.
func (i *Inspector) partitionedInfo(ctx context.Context, queue string) (*dtqtype.QueueInfo, error) {
	now := time.Now()
	parts, err := i.rdb.PartitionsOf(ctx, queue)
	if err != nil {
		return nil, err
	}
	if len(parts) == 1 {
		return i.rdb.QueueInfo(ctx, queue, now, throughputWindow)
	}
	var sum *dtqtype.QueueInfo
	var keys []dtqtype.KeyBacklog
	for k, part := range parts {
		qi, err := i.rdb.QueueInfo(ctx, part, now, throughputWindow)
		if err != nil {
			return nil, err
		}
		keys = append(keys, qi.TopKeys...)
		pi := dtqtype.PartitionInfo{Partition: k, Depth: qi.Depth, ReadyTotal: qi.ReadyTotal, Running: qi.Running,
			Scheduled: qi.Scheduled, DLQ: qi.DLQ}
		if sum == nil {
			sum = qi
			sum.Partitions = []dtqtype.PartitionInfo{pi}
			continue
		}
		sum.Partitions = append(sum.Partitions, pi)
		sum.Depth += qi.Depth
		sum.ReadyTotal += qi.ReadyTotal
		sum.Running += qi.Running
		sum.Pending += qi.Pending
		sum.Scheduled += qi.Scheduled
		sum.Waiting += qi.Waiting
		sum.DLQ += qi.DLQ
		sum.Paused = sum.Paused || qi.Paused
		sum.Throughput.Succeeded += qi.Throughput.Succeeded
		sum.Throughput.Failed += qi.Throughput.Failed
		sum.Throughput.Retried += qi.Throughput.Retried
		sum.Throughput.PerMinute += qi.Throughput.PerMinute
		addCounts(&sum.Ready, qi.Ready)
		addCounts(&sum.Retained, qi.Retained)
		addCounts(&sum.Deduplicated, qi.Deduplicated)
	}
	sum.Name = queue
	slices.SortFunc(keys, func(a, b dtqtype.KeyBacklog) int { return cmp.Compare(b.Queued, a.Queued) })
	sum.TopKeys = keys[:min(len(keys), 10)]
	if len(sum.TopKeys) == 0 {
		sum.TopKeys = nil
	}
	if sum.Limits, err = i.GetLimits(ctx, queue); err != nil {
		return nil, err
	}
	return sum, nil
}

// addCounts adds from's counts into *to.
func addCounts(to *map[string]int64, from map[string]int64) {
	if len(from) == 0 {
		return
	}
	if *to == nil {
		*to = map[string]int64{}
	}
	for k, v := range from {
		(*to)[k] += v
	}
}

// partitionedSamples is rdb.ScalingSamples of queues, a partitioned
// queue's summed over its partitions: one pipeline for all of them.
func (i *Inspector) partitionedSamples(ctx context.Context, queues []string, now time.Time, lookback int) ([]rdb.ScalingSample, error) {
	var all []string
	first := make([]int, len(queues)+1) // queue j's partitions are all[first[j]:first[j+1]]
	for j, q := range queues {
		parts, err := i.rdb.PartitionsOf(ctx, q)
		if err != nil {
			return nil, err
		}
		first[j] = len(all)
		all = append(all, parts...)
	}
	first[len(queues)] = len(all)
	samples, err := i.rdb.ScalingSamples(ctx, all, now, lookback)
	if err != nil || len(all) == len(queues) {
		return samples, err
	}
	out := make([]rdb.ScalingSample, len(queues))
	for j := range queues {
		s := samples[first[j]]
		for _, p := range samples[first[j]+1 : first[j+1]] {
			s.Ready += p.Ready
			s.Held += p.Held
			s.Running += p.Running
			s.DueSoon += p.DueSoon
			s.Paused = s.Paused || p.Paused
			for k := range s.Arrivals {
				s.Arrivals[k] += p.Arrivals[k]
			}
			s.RunMSSum += p.RunMSSum
			s.Runs += p.Runs
			if !p.OldestReady.IsZero() && (s.OldestReady.IsZero() || p.OldestReady.Before(s.OldestReady)) {
				s.OldestReady = p.OldestReady
			}
			s.LastActive = max(s.LastActive, p.LastActive)
		}
		s.Queue = queues[j]
		out[j] = s
	}
	return out, nil
}
