package rdb

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// wipe deletes every key of the test's prefix, as a master restarted empty
// (or a lost registry node) would.
func (b *testRDB) wipe(t *testing.T) {
	t.Helper()
	keys, err := b.c.Keys(b.ctx, b.keys.Prefix()+":*").Result()
	require.NoError(t, err)
	if len(keys) > 0 {
		for _, k := range keys {
			require.NoError(t, b.c.Del(b.ctx, k).Err())
		}
	}
}

// A lost registry is rebuilt from the queues' own number keys: queues
// registered again, in any order, get the numbers their task ids carry.
func TestRegistryLostKeepsNumbers(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		order []string // the order the rebuilt registry sees the queues in
	}{
		{"same order", []string{"a", "b"}},
		{"reversed", []string{"b", "a"}},
		{"new queue first", []string{"c", "b", "a"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := newAdminTestRDB(t)
			nums := map[string]uint16{}
			for _, q := range []string{"a", "b"} {
				n, err := b.r.QueueNumber(b.ctx, q)
				require.NoError(t, err)
				nums[q] = n
			}
			require.NoError(t, b.c.Del(b.ctx, b.keys.Queues()).Err())
			fresh := New(b.c, b.keys.Prefix()) // nothing cached
			got := map[string]uint16{}
			for _, q := range tc.order {
				n, err := fresh.QueueNumber(b.ctx, q)
				require.NoError(t, err)
				got[q] = n
			}
			if n, ok := got["c"]; ok {
				// a new queue is numbered past every number in use
				require.Greater(t, n, max(nums["a"], nums["b"]))
				nums["c"] = n
			}
			require.Equal(t, nums, got)
			for q, n := range got {
				name, err := fresh.QueueName(b.ctx, n)
				require.NoError(t, err)
				require.Equal(t, q, name)
			}
		})
	}
}

// A process whose cache still holds a queue's number from before the data
// was wiped stamps ids the re-created registry resolves to another queue.
// Ingest refuses such ids before writing anything and the task is created
// under the queue's number now, readable by every process.
func TestIngestStaleNumberAfterWipe(t *testing.T) {
	t.Parallel()
	b := newAdminTestRDB(t)
	nt := b.task(t, "a", "") // caches a -> 1
	b.wipe(t)
	other := New(b.c, b.keys.Prefix())
	nb, err := other.QueueNumber(b.ctx, "b") // the re-created registry gives b number 1
	require.NoError(t, err)
	stale, _ := ParseTaskID(nt.ID)
	require.Equal(t, stale, nb, "the case needs b to take a's old number")

	tasks := []NewTask{nt}
	res := b.ingest(t, "a", tasks...)
	require.Equal(t, Created, res[0].Outcome)
	num, _ := ParseTaskID(res[0].TaskID)
	require.NotEqual(t, nb, num, "a task of a must not carry b's number")
	ti, err := other.GetTask(b.ctx, res[0].TaskID)
	require.NoError(t, err)
	require.Equal(t, "a", ti.Queue)
}

// A miss is never answered from the cache: after a wipe the cached name of a
// number may be another queue's, and the task is found under the name the
// registry holds now.
func TestGetTaskRereadsRegistryOnMiss(t *testing.T) {
	t.Parallel()
	b := newAdminTestRDB(t)
	_ = b.task(t, "a", "") // b.r caches 1 <-> a
	b.wipe(t)
	other := New(b.c, b.keys.Prefix())
	nt := testTask(0, b.now, "")
	n, err := other.QueueNumber(b.ctx, "b")
	require.NoError(t, err)
	nt.ID = WithQueueNumber(nt.ID, n)
	res, err := other.Ingest(b.ctx, "b", b.now, b.opt, []NewTask{nt})
	require.NoError(t, err)
	require.Equal(t, Created, res[0].Outcome)

	ti, err := b.r.GetTask(b.ctx, nt.ID)
	require.NoError(t, err, "the task exists; a cached name must not hide it")
	require.Equal(t, "b", ti.Queue)
}

// A registry lost while the queues' own keys remain (on Cluster the
// registry's master may lose its data alone) is rebuilt by the first
// lookup that misses, not by the next registration: a task is found by
// its id at once, by a process that never cached its queue.
func TestTaskLookupRebuildsALostRegistry(t *testing.T) {
	t.Parallel()
	b := newAdminTestRDB(t)
	_ = b.task(t, "a", "")
	nt := b.task(t, "b", "")
	b.ingest(t, "b", nt)

	for name, lookup := range map[string]func(r *RDB) (string, error){
		"TaskQueue": func(r *RDB) (string, error) { return r.TaskQueue(b.ctx, nt.ID) },
		"GetTask": func(r *RDB) (string, error) {
			ti, err := r.GetTask(b.ctx, nt.ID)
			if err != nil {
				return "", err
			}
			return ti.Queue, nil
		},
	} {
		require.NoError(t, b.c.Del(b.ctx, b.keys.Queues()).Err())
		q, err := lookup(New(b.c, b.keys.Prefix()))
		require.NoError(t, err, name)
		require.Equal(t, "b", q, name)
	}
	num, err := b.c.HGet(b.ctx, b.keys.Queues(), "a").Result()
	require.NoError(t, err, "the rebuilt registry holds every queue")
	n, _ := ParseTaskID(b.task(t, "a", "").ID)
	require.Equal(t, strconv.Itoa(int(n)), num)
}

// TaskQueue does not trust a cached name for a task that queue does not
// hold: after a wipe the number may belong to another queue.
func TestTaskQueueRereadsAStaleCache(t *testing.T) {
	t.Parallel()
	b := newAdminTestRDB(t)
	_ = b.task(t, "a", "") // b.r caches 1 <-> a
	b.wipe(t)
	other := New(b.c, b.keys.Prefix())
	n, err := other.QueueNumber(b.ctx, "c")
	require.NoError(t, err)
	nt := testTask(n, b.now, "")
	b.ingest(t, "c", nt)
	q, err := b.r.TaskQueue(b.ctx, nt.ID)
	require.NoError(t, err)
	require.Equal(t, "c", q)
}
