package rdb

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestTaskIDCarriesQueueNumber(t *testing.T) {
	t.Parallel()
	for _, num := range []uint16{0, 1, 2, 255, 256, 65534, 65535} {
		id := NewTaskID(num, time.Now())
		got, ok := ParseTaskID(id)
		require.True(t, ok, id)
		require.Equal(t, num, got, id)
	}
}

func TestTaskIDLayout(t *testing.T) {
	t.Parallel()
	for range 1000 {
		id := NewTaskID(0xbeef, time.Now())
		require.Len(t, id, 32)
		require.Equal(t, strings.ToLower(id), id)
		require.Equal(t, byte('7'), id[12], "version nibble of %s", id)
		require.Contains(t, "89ab", string(id[16]), "RFC 9562 variant bits of %s", id)
		require.Equal(t, "beef", id[28:])
	}
}

// TestTaskIDsIncreaseWithinOneMillisecond generates more ids at one instant
// than the 12-bit sequence holds, so the generator must borrow later
// milliseconds and still keep order.
func TestTaskIDsIncreaseWithinOneMillisecond(t *testing.T) {
	t.Parallel()
	now := time.Now()
	prev := ""
	for i := range 10000 {
		id := NewTaskID(3, now)
		require.Greater(t, id, prev, "id %d", i)
		require.False(t, TaskIDTime(id).Before(now.Truncate(time.Millisecond)), "id %d", i)
		prev = id
	}
}

func TestTaskIDTimeRecoversMillisecond(t *testing.T) {
	t.Parallel()
	// Ids never go back in time within a process, so start ahead of every id
	// made so far (other tests use the real clock).
	base := TaskIDTime(NewTaskID(0, time.Now())).Add(time.Hour)
	for i, d := range []time.Duration{0, time.Millisecond, 999 * time.Millisecond, time.Hour + 7*time.Millisecond} {
		at := base.Add(d + 1500*time.Microsecond) // sub-millisecond part is dropped
		id := NewTaskID(9, at)
		require.Equal(t, at.Truncate(time.Millisecond).UnixMilli(), TaskIDTime(id).UnixMilli(), "case %d: %s", i, id)
	}
}

func TestTaskIDTimeOfFixedIDs(t *testing.T) {
	t.Parallel()
	cases := []struct {
		id   string
		want int64 // epoch ms
	}{
		{"0190a5c4e2c07000800000000000ffff", 0x0190a5c4e2c0},
		{"00000000000070008000000000000000", 0},
		{"ffffffffffff7fffbfffffffffffffff", 0xffffffffffff},
	}
	for _, c := range cases {
		require.Equal(t, c.want, TaskIDTime(c.id).UnixMilli(), c.id)
	}
	require.True(t, TaskIDTime("short").IsZero())
	require.True(t, TaskIDTime("zzzzzzzzzzzz7000800000000000ffff").IsZero())
}

func TestParseTaskIDRejects(t *testing.T) {
	t.Parallel()
	valid := NewTaskID(42, time.Now())
	cases := map[string]string{
		"empty":         "",
		"short":         valid[:31],
		"long":          valid + "0",
		"uppercase":     strings.ToUpper(valid[:12]) + valid[12:],
		"not hex":       "g" + valid[1:],
		"uuid dashes":   valid[:8] + "-" + valid[9:],
		"version 4":     valid[:12] + "4" + valid[13:],
		"path traverse": "../../../../../../../../../../..",
	}
	for name, id := range cases {
		_, ok := ParseTaskID(id)
		require.False(t, ok, "%s: %q", name, id)
	}
	num, ok := ParseTaskID(valid)
	require.True(t, ok)
	require.Equal(t, uint16(42), num)
}
