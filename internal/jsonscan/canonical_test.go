package jsonscan

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// reencoded is what encoding/json writes for the JSON text b decoded with
// numbers as json.Number: the text AppendCanonical must match.
func reencoded(t testing.TB, b []byte) string {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	require.NoError(t, d.Decode(&v))
	out, err := json.Marshal(v)
	require.NoError(t, err)
	return string(out)
}

func TestAppendCanonical(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		json   string
		direct bool // written from its bytes, not left to encoding/json
	}{
		{`{}`, true},
		{`{"a":1,"b":[true,false,null],"c":{"d":"e"}}`, true},
		{`{"":0,"a":-0.5e+10,"b":1E3,"c":[],"d":[{}]}`, true},
		{`{"id":"o-1","lines":["a","b"],"n":12.50}`, true}, // 12.50 stays as written
		{`{"b":1,"a":2}`, true},                            // keys sorted
		{`{"z":{"y":[{"x":1,"w":2}],"b":0},"a":[1,2,{"z":1,"y":2}],"m":"n"}`, true},
		{`{"b":1,"a":2,"c":3,"a":4}`, false}, // a key twice: the last wins
		{`{"a": 1}`, false},                  // a space
		{`{"a":"x<y"}`, false},               // encoding/json escapes <
		{`{"a":"caf\u00e9"}`, false},         // an escape
		{`{"a":"café"}`, false},              // not ASCII
		{`{"k":"a\"b"}`, false},
		{`{"a":01}`, false}, // not JSON
		{`{"a":[[[1]]]}`, true},
		{strings.Repeat(`[`, 65) + strings.Repeat(`]`, 65), false}, // deeper than maxDepth
	} {
		got, ok := AppendCanonical([]byte("prefix:"), []byte(c.json), 64)
		require.Equal(t, c.direct, ok, c.json)
		if ok {
			require.Equal(t, "prefix:"+reencoded(t, []byte(c.json)), string(got), c.json)
		} else {
			require.Equal(t, "prefix:", string(got), "a refused text leaves dst as it was")
		}
	}
}

// TestAppendCanonicalOfMarshaled: what json.Marshal writes for maps and
// structs, and a wide object, are written from their bytes.
func TestAppendCanonicalOfMarshaled(t *testing.T) {
	t.Parallel()
	type order struct { // fields out of name order
		ID     string   `json:"id"`
		Amount float64  `json:"amount"`
		Lines  []string `json:"lines"`
	}
	wide := []byte{'{'} // more members than the sort's stack buffer holds, unsorted
	for i := 40; i > 0; i-- {
		wide = fmt.Appendf(wide, `"k%03d":%d,`, i, i)
	}
	wide[len(wide)-1] = '}'
	for _, v := range []any{
		map[string]any{"user": 42, "email": "a@example.com", "tags": []string{"x"}, "nested": map[string]int{"b": 1, "a": 2}},
		order{Amount: 12.5, ID: "o-1", Lines: []string{"a", "b"}},
		json.RawMessage(wide),
	} {
		b, err := json.Marshal(v)
		require.NoError(t, err)
		got, ok := AppendCanonical(nil, b, 64)
		require.True(t, ok, string(b))
		require.Equal(t, reencoded(t, b), string(got))
	}
}

// FuzzAppendCanonical: a text AppendCanonical writes is the one
// encoding/json writes.
func FuzzAppendCanonical(f *testing.F) {
	for _, seed := range []string{`{}`, `{"a":1}`, `{"b":1,"a":2}`, `{"a":[1,{"c":"d"}],"b":-0.0e-0}`,
		`{"a":"<&>"}`, `{"a" : 1 }`, `{"a":1,"a":1}`, `{"x":[[[[]]]]}`} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, text string) {
		got, ok := AppendCanonical(nil, []byte(text), 64)
		if !ok {
			return
		}
		if want := reencoded(t, []byte(text)); string(got) != want {
			t.Fatalf("%s: written %s, encoding/json %s", text, got, want)
		}
	})
}

func TestDepth(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		json  string
		depth int
	}{
		{``, 0},
		{`1`, 0},
		{`{}`, 1},
		{`{"a":[{"b":[]}]}`, 4},
		{`{"a":"[[[{{{"}`, 1}, // brackets in a string do not count
		{`{"a":"\"[[["}`, 1},  // nor after an escaped quote
		{`[[],[[]],[]]`, 3},   // the deepest branch
		{`{"a":"\\"}[[[`, 3},  // an escaped backslash ends the string
		{strings.Repeat(`[`, 70), 70},
	} {
		require.Equal(t, c.depth, Depth([]byte(c.json)), c.json)
	}
}
