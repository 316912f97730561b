package rdb

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPartitionOf(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		queue string
		k     int
	}{
		{"emails", "emails", 0},
		{"emails#1.0", "emails", 1},
		{"emails#17.3f", "emails", 17},
		{"emails#x.0", "emails", 0},
	} {
		q, k := PartitionOf(tc.name)
		require.Equal(t, tc.queue, q, tc.name)
		require.Equal(t, tc.k, k, tc.name)
	}
	require.False(t, IsPartition("emails"))
	require.True(t, IsPartition("emails#1.0"))
}

func TestValidStorageName(t *testing.T) {
	t.Parallel()
	for name, ok := range map[string]bool{
		"emails": true, "emails#1.0": true, "emails#255.zz9": true,
		"Emails": false, "emails#": false, "emails#1": false, "emails#1.": false, "emails#a.0": false,
		"emails#1.A": false, "#1.0": false, "emails#1.0#2.0": false, "emails#1234567890.123456": false,
	} {
		require.Equal(t, ok, ValidStorageName(name), name)
	}
}

// TestChoosePartitionsSpreadsOverMasters: with a slot map of M masters,
// P partitions land P/M on each (partition 0 where the queue's name puts
// it), and the names read back from their encoding.
func TestChoosePartitionsSpreadsOverMasters(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ masters, partitions int }{{1, 4}, {3, 6}, {3, 7}, {6, 12}, {5, 256}} {
		masterOf := func(slot int) int { return slot * tc.masters / 16384 } // even ranges, as a new Cluster has
		names := choosePartitions("events", tc.partitions, tc.masters, masterOf)
		require.Len(t, names, tc.partitions)
		require.Equal(t, "events", names[0])
		count := make([]int, tc.masters)
		seen := map[string]bool{}
		for k, n := range names {
			q, got := PartitionOf(n)
			require.Equal(t, "events", q)
			require.Equal(t, k, got)
			require.True(t, ValidStorageName(n), n)
			require.False(t, seen[n])
			seen[n] = true
			count[masterOf(HashSlot("{"+n+"}"))]++
		}
		for m, c := range count {
			require.InDelta(t, float64(tc.partitions)/float64(tc.masters), c, 1, "master %d of %d holds %d of %d", m, tc.masters, c, tc.partitions)
		}
		back, err := decodePartitions("events", encodePartitions(names))
		require.NoError(t, err)
		require.Equal(t, names, back)
	}
}

func TestDecodePartitionsRefusesOtherMaps(t *testing.T) {
	t.Parallel()
	one, err := decodePartitions("q", "")
	require.NoError(t, err)
	require.Equal(t, []string{"q"}, one)
	for _, m := range []string{"2 q#1.0", "1", "1 p#1.0", "1 q#2.0", "1 q#1.0 q#1.1"} {
		_, err := decodePartitions("q", m)
		require.Error(t, err, m)
	}
}
