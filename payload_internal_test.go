package dtq

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// objectJSON writes a map of plain members itself: its text must be
// json.Marshal's, and a map it leaves to json.Marshal must come out as before.
func TestPlainObjectJSONIsMarshals(t *testing.T) {
	t.Parallel()
	many := map[string]string{}
	for i := range plainMaxMembers + 1 {
		many["k"+strconv.Itoa(i)] = "v"
	}
	for _, v := range []any{
		map[string]string(nil),
		map[string]string{},
		map[string]string{"data": strings.Repeat("x", 88)},
		map[string]string{"b": "2", "a": "1", "": "", "A": "z", "a b": "c d"},
		map[string]string{"html": "<b>&</b>"},
		map[string]string{"quote": `say "hi"`, "tab": "a\tb", "nl": "a\nb"},
		map[string]string{"utf8": "héllo", "bad": "\xff", "sep": "\u2028"},
		map[string]string{`k"ey`: "v"},
		many,
		map[string]any(nil),
		map[string]any{},
		map[string]any{"order_id": 42, "b": true, "c": false, "n": nil, "s": "x", "i64": int64(-9223372036854775808)},
		map[string]any{"s": "plain", "t": "also plain"},
		map[string]any{"f": 1.5, "a": 1},
		map[string]any{"nested": map[string]any{"a": 1}},
		map[string]any{"u": uint(3)},
		map[string]any{"s": "<", "a": 1},
		map[string]any{"<": 1},
	} {
		got, err := objectJSON("payload", v)
		require.NoError(t, err)
		want, err := json.Marshal(v)
		require.NoError(t, err)
		if string(want) == "null" {
			want = []byte("{}")
		}
		require.Equal(t, string(want), string(got), "%#v", v)
	}
}

func FuzzPlainObjectJSON(f *testing.F) {
	f.Add("data", "xxx", "a", "1")
	f.Add("k", "<tag>", "", "é")
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2 string) {
		for _, v := range []any{map[string]string{k1: v1, k2: v2}, map[string]any{k1: v1, k2: len(v2)}} {
			want, err := json.Marshal(v)
			require.NoError(t, err)
			got, err := objectJSON("payload", v)
			require.NoError(t, err)
			require.Equal(t, string(want), string(got))
		}
	})
}

// BenchmarkNormalize validates the submission bench -scenario enqueue
// sends: a map payload, every other field left to its default.
func BenchmarkNormalize(b *testing.B) {
	lim := &limits{maxAttempts: 10, defaultTimeout: 30 * time.Second, maxPayloadBytes: DefaultMaxPayloadBytes}
	payload := map[string]string{"data": strings.Repeat("x", 88)}
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := normalize(&Submission{Type: "noop", Payload: payload}, lim, now); err != nil {
			b.Fatal(err)
		}
	}
}
