package cursor

import (
	"encoding/base64"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func valid(s string) bool { return s != "" }

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name  string
		kind  Kind
		parts []string
	}{
		{"one part", Tasks, []string{"01a22aa1819e7000b8909fac70590002"}},
		{"numbers and names", DLQ, []string{"1700000000000", "emails", "01a22aa1819e7000b8909fac70590002"}},
		{"a long part", Workers, []string{strings.Repeat("w", 300)}},
		{"bytes a separator would break", Schedules, []string{"a:b\x00c", "\xff"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := Encode(tt.kind, tt.parts...)
			require.NotContains(t, c, "=", "no padding")
			require.Equal(t, c, base64.RawURLEncoding.EncodeToString(mustDecode(t, c)), "URL-safe")
			r := Read(c, tt.kind)
			var got []string
			for range tt.parts {
				got = append(got, r.String(func(string) bool { return true }))
			}
			require.NoError(t, r.Err())
			require.Equal(t, tt.parts, got)
		})
	}
}

func mustDecode(t *testing.T, c string) []byte {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(c)
	require.NoError(t, err)
	return b
}

func TestInt(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		part   string
		lo, hi int64
		want   int64
		ok     bool
	}{
		{"0", 0, 10, 0, true},
		{"10", 0, 10, 10, true},
		{"-3", -5, 0, -3, true},
		{"9223372036854775807", 0, math.MaxInt64, math.MaxInt64, true},
		{"11", 0, 10, 0, false},
		{"-1", 0, 10, 0, false},
		{"9223372036854775808", 0, math.MaxInt64, 0, false},
		{"07", 0, 10, 0, false},
		{"+7", 0, 10, 0, false},
		{"-0", -1, 1, 0, false},
		{"1e3", 0, 10000, 0, false},
		{"", 0, 10, 0, false},
		{" 1", 0, 10, 0, false},
	} {
		r := Read(Encode(DLQBulk, tt.part), DLQBulk)
		got := r.Int(tt.lo, tt.hi)
		if tt.ok {
			require.NoError(t, r.Err(), tt.part)
			require.Equal(t, tt.want, got, tt.part)
		} else {
			require.ErrorIs(t, r.Err(), ErrInvalid, tt.part)
		}
	}
}

// TestRefused: everything that is not a cursor of the kind asked for is
// ErrInvalid, and the message says why.
func TestRefused(t *testing.T) {
	t.Parallel()
	b64 := base64.RawURLEncoding.EncodeToString
	good := Encode(Queues, "emails")
	for _, tt := range []struct {
		name, cursor, says string
	}{
		{"empty", "", "too short"},
		{"not base64", "!!", "not base64url"},
		{"padded", good + "=", "not base64url"},
		{"a newline inside", good[:2] + "\n" + good[2:], "not base64url"},
		{"unused bits set", b64([]byte{version, byte(Queues), 1, 'a'})[:5] + "B", "not base64url"},
		{"version only", b64([]byte{version}), "too short"},
		{"another version", b64([]byte{2, byte(Queues), 1, 'a'}), "unknown version 2"},
		{"another list's", Encode(Tasks, "emails"), "it continues the task list, not the queue list"},
		{"an unknown kind", b64([]byte{version, 'z', 1, 'a'}), `unknown list "z"`},
		{"a length past the end", b64([]byte{version, byte(Queues), 9, 'a'}), "malformed"},
		{"a non-minimal length", b64([]byte{version, byte(Queues), 0x81, 0x00, 'a'}), "malformed"},
		{"no part", Encode(Queues), "malformed"},
		{"a part too many", Encode(Queues, "emails", "x"), "malformed"},
		{"a part out of range", Encode(Queues, ""), "out of range"},
		{"too long", strings.Repeat("A", MaxLen+1), "longer than"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := Read(tt.cursor, Queues)
			r.String(valid)
			err := r.Err()
			require.ErrorIs(t, err, ErrInvalid)
			require.Contains(t, err.Error(), tt.says)
		})
	}
}

// TestFirstFailureSticks: reads after a failure return zero values and
// keep the first error.
func TestFirstFailureSticks(t *testing.T) {
	t.Parallel()
	r := Read(Encode(DLQ, "x", "7"), DLQ)
	require.Empty(t, r.String(func(string) bool { return false }))
	require.Zero(t, r.Int(0, 10))
	require.ErrorContains(t, r.Err(), "a part is out of range")
}

// FuzzRead: no input panics; what Read accepts is exactly what Encode
// makes of the parts read, and every cursor Encode makes reads back.
func FuzzRead(f *testing.F) {
	for _, c := range []string{"", "AQ", Encode(Tasks, "a"), Encode(DLQ, "12", "q", "id"), Encode(DLQBulk, "0", "5"),
		Encode(Audit, "1700000000000", "0"), Encode(Workers, strings.Repeat("w", 200)), "AXQBYQ", "AXSBAGE"} {
		f.Add(c, byte(Tasks), "a", "7")
	}
	f.Fuzz(func(t *testing.T, c string, kind byte, a, b string) {
		k := Kind(kind)
		accept := func(string) bool { return true }

		r := Read(c, k)
		p1, p2 := r.String(accept), r.String(accept)
		if r.Err() == nil {
			require.Equal(t, c, Encode(k, p1, p2))
		}
		r = Read(c, k)
		n := r.Int(-1000, 1000)
		if r.Err() == nil {
			require.True(t, n >= -1000 && n <= 1000)
			require.Equal(t, c, Encode(k, strconv.FormatInt(n, 10)))
		}

		e := Encode(k, a, b)
		if len(e) > MaxLen {
			return
		}
		r = Read(e, k)
		require.Equal(t, a, r.String(accept))
		require.Equal(t, b, r.String(accept))
		require.NoError(t, r.Err())
		if k != Tasks {
			require.ErrorIs(t, Read(e, Tasks).Err(), ErrInvalid, "another kind")
		}
	})
}
