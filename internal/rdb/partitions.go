package rdb

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// A partitioned queue is P queues on the storage side, its partitions: 0 is
// the queue itself (its name, its hash tag, today's layout byte for byte),
// and 1..P-1 are named "<queue>#<k>.<salt>", where the salt is chosen when
// the queue is created so that the partitions' slots spread evenly over the
// Cluster's masters. Each partition is registered under a number of its
// own, so a task id names its partition forever, and every per-queue script
// runs on one partition as it runs on a queue. Queue names never hold '#'.

// MaxPartitions bounds a queue's partitions.
const MaxPartitions = 256

// partitionSep separates a partition's queue from its number in its name.
const partitionSep = '#'

// partitionMapVersion is the version a map is written with; maps of other
// versions are refused, never misread.
const partitionMapVersion = "1"

// ErrQueueExists is returned by PartitionQueue for a queue that exists
// already with one partition: its partitions are chosen at creation only.
var ErrQueueExists = errors.New("queue exists with one partition")

// PartitionOf returns the queue a storage-side queue name belongs to and
// its partition number: (name, 0) for a queue's own name.
func PartitionOf(name string) (queue string, k int) {
	queue, rest, found := strings.Cut(name, string(partitionSep))
	if !found {
		return name, 0
	}
	rest, _, _ = strings.Cut(rest, ".")
	k, err := strconv.Atoi(rest)
	if err != nil {
		return queue, 0
	}
	return queue, k
}

// IsPartition reports whether name is partition 1 or higher of a queue
// (not a queue's own name).
func IsPartition(name string) bool { return strings.IndexByte(name, partitionSep) >= 0 }

func partitionName(queue string, k, salt int) string {
	return queue + string(partitionSep) + strconv.Itoa(k) + "." + strconv.FormatInt(int64(salt), 36)
}

// encodePartitions writes names (partition 0 first) as the registry holds
// them: the version, then partitions 1..P-1.
func encodePartitions(names []string) string {
	return partitionMapVersion + " " + strings.Join(names[1:], " ")
}

// decodePartitions reads queue's map as encodePartitions wrote it; "" is
// one partition.
func decodePartitions(queue, s string) ([]string, error) {
	if s == "" {
		return []string{queue}, nil
	}
	f := strings.Fields(s)
	if len(f) < 2 || f[0] != partitionMapVersion || len(f) > MaxPartitions {
		return nil, fmt.Errorf("queue %q: unreadable partition map %q", queue, s)
	}
	out := make([]string, 0, len(f))
	out = append(out, queue)
	for i, n := range f[1:] {
		if q, k := PartitionOf(n); q != queue || k != i+1 {
			return nil, fmt.Errorf("queue %q: partition map names %q as partition %d", queue, n, i+1)
		}
		out = append(out, n)
	}
	return out, nil
}

// choosePartitions names p partitions of queue (its own name first) so
// that their slots spread evenly over masters masters, masterOf mapping a
// slot to its master's index: partition 0's slot is fixed by the queue's
// name, each next partition goes to the master holding the fewest so far.
func choosePartitions(queue string, p int, masters int, masterOf func(slot int) int) []string {
	names := make([]string, p)
	names[0] = queue
	count := make([]int, max(masters, 1))
	count[masterOf(HashSlot("{"+queue+"}"))]++
	for k := 1; k < p; k++ {
		target := 0
		for m := range count {
			if count[m] < count[target] {
				target = m
			}
		}
		salt := 0
		// About masters tries each: the slot of a name is uniform.
		for ; salt < 1<<20; salt++ {
			if masters <= 1 || masterOf(HashSlot("{"+partitionName(queue, k, salt)+"}")) == target {
				break
			}
		}
		names[k] = partitionName(queue, k, salt)
		count[target]++
	}
	return names
}

// slotMasters returns how many masters the deployment has and a function
// from a slot to its master's index: one master outside a Cluster.
func (r *RDB) slotMasters(ctx context.Context) (int, func(int) int, error) {
	cc, ok := r.c.(*redis.ClusterClient)
	if !ok {
		return 1, func(int) int { return 0 }, nil
	}
	shards, err := cc.ClusterShards(ctx).Result()
	if err != nil {
		return 0, nil, err
	}
	owner := make([]int, 16384) // slot -> index of its master (its shard)
	masters := 0
	for _, sh := range shards {
		if len(sh.Slots) == 0 {
			continue // a shard without slots takes no partition
		}
		for _, rg := range sh.Slots {
			for s := max(rg.Start, 0); s <= rg.End && s < int64(len(owner)); s++ {
				owner[s] = masters
			}
		}
		masters++
	}
	if masters == 0 {
		return 1, func(int) int { return 0 }, nil
	}
	return masters, func(slot int) int { return owner[slot] }, nil
}

// PartitionQueue creates queue with p (2..MaxPartitions) partitions: it
// chooses their names against the Cluster's slot map, writes the map, and
// registers every partition. created is false when the queue existed
// already (created before with p partitions, or by a call sent again); a queue that
// exists with another number of partitions is returned as it is, and one
// that exists with one partition is ErrQueueExists.
func (r *RDB) PartitionQueue(ctx context.Context, queue string, p int) (created bool, names []string, err error) {
	if p < 2 || p > MaxPartitions {
		return false, nil, fmt.Errorf("partitions %d: want 2..%d", p, MaxPartitions)
	}
	masters, masterOf, err := r.slotMasters(ctx)
	if err != nil {
		return false, nil, fmt.Errorf("read the slot map: %w", err)
	}
	want := choosePartitions(queue, p, masters, masterOf)
	if err := r.restoreRegistry(ctx); err != nil {
		return false, nil, err
	}
	v, err := r.callPartitionQueue(ctx, &partitionQueueKeys{Registry: r.keys.Queues()},
		&partitionQueueArgs{Queue: queue, Map: encodePartitions(want)})
	if err != nil {
		return false, nil, err
	}
	if v.Partitions == "" {
		return false, nil, ErrQueueExists
	}
	names, err = decodePartitions(queue, v.Partitions)
	if err != nil {
		return false, nil, err
	}
	// Registering gives each partition its number (and the queue's number
	// key); a call sent again finds them registered.
	for i, n := range names {
		_, made, err := r.RegisterQueue(ctx, n, true)
		if err != nil {
			return false, nil, fmt.Errorf("register partition %q: %w", n, err)
		}
		if i == 0 {
			created = made // the one call that wrote the queue's number key created it
		}
	}
	return created, names, nil
}

// cachedParts is a queue's partition names remembered by a process.
type cachedParts struct {
	names []string
	at    time.Time
}

// Partitions returns queue's partitions' storage-side names, partition 0
// (the queue's own name) first: one name for a queue of one partition.
// With register, a queue the registry does not hold is registered (with
// one partition); without, it is ErrQueueNotRegistered. The names are
// cached for numberCacheTTL: a queue's partitions are fixed at creation.
// The caller must not change the slice.
func (r *RDB) Partitions(ctx context.Context, queue string, register bool) ([]string, error) {
	r.mu.RLock()
	c, ok := r.parts[queue]
	r.mu.RUnlock()
	if ok && time.Since(c.at) < numberCacheTTL {
		return c.names, nil
	}
	if register {
		if _, _, err := r.RegisterQueue(ctx, queue, true); err != nil {
			return nil, err
		}
	} else {
		// A read: the registry's entry and map, without caching the
		// queue's number (which a reader of a queue deleted meanwhile
		// would keep resolving ids with).
		v, err := r.c.HMGet(ctx, r.keys.Queues(), queue, "#p:"+queue).Result()
		if err != nil {
			return nil, err
		}
		if v[0] == nil {
			return nil, ErrQueueNotRegistered
		}
		m, _ := v[1].(string)
		if err := r.rememberParts(queue, m); err != nil {
			return nil, err
		}
	}
	r.mu.RLock()
	c = r.parts[queue]
	r.mu.RUnlock()
	return c.names, nil
}

// rememberParts caches queue's partition map as register_queue read it.
func (r *RDB) rememberParts(queue, m string) error {
	names, err := decodePartitions(queue, m)
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.parts[queue] = cachedParts{names: names, at: time.Now()}
	r.mu.Unlock()
	return nil
}

// PartitionsOf is Partitions without registering: a queue the registry
// does not hold (not created yet, or deleted) is its own name alone, as
// the readers and actions that name it then see it.
func (r *RDB) PartitionsOf(ctx context.Context, queue string) ([]string, error) {
	parts, err := r.Partitions(ctx, queue, false)
	if errors.Is(err, ErrQueueNotRegistered) {
		return []string{queue}, nil
	}
	return parts, err
}

// storageNames is what a listing of queue reads: its partitions, or with
// queue "" every registered queue and partition.
func (r *RDB) storageNames(ctx context.Context, queue string) ([]string, error) {
	if queue == "" {
		return r.Queues(ctx)
	}
	return r.PartitionsOf(ctx, queue)
}

// ValidStorageName reports whether name is a queue's name or one of its
// partitions' ("<queue>#<k>.<salt>").
func ValidStorageName(name string) bool {
	q, rest, found := strings.Cut(name, string(partitionSep))
	if !validQueueName(q) {
		return false
	}
	if !found {
		return true
	}
	k, salt, ok := strings.Cut(rest, ".")
	if !ok || k == "" || salt == "" || len(rest) > 16 {
		return false
	}
	for _, c := range k {
		if c < '0' || c > '9' {
			return false
		}
	}
	for _, c := range salt {
		if (c < '0' || c > '9') && (c < 'a' || c > 'z') {
			return false
		}
	}
	return true
}
