package main

import (
	"flag"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite testdata/golden.go.txt")

// TestGolden: the file generated for testdata's scripts is the one checked
// in. A header edit shows up here as a diff of the structs Go code fills
// in: a renamed, retyped or removed entry no longer compiles there.
func TestGolden(t *testing.T) {
	t.Parallel()
	got, err := generateDir(os.DirFS("testdata"))
	require.NoError(t, err)
	if *update {
		require.NoError(t, os.WriteFile("testdata/golden.go.txt", got, 0o600))
	}
	want, err := os.ReadFile("testdata/golden.go.txt")
	require.NoError(t, err)
	require.Equal(t, string(want), string(got))
}

// TestUpToDate: internal/rdb's scripts_gen.go is what the scripts' headers
// generate now (run go generate ./internal/rdb after editing a header).
func TestUpToDate(t *testing.T) {
	t.Parallel()
	got, err := generateDir(os.DirFS("../../lua"))
	require.NoError(t, err)
	want, err := os.ReadFile("../../scripts_gen.go")
	require.NoError(t, err)
	require.Equal(t, string(want), string(got), "scripts_gen.go is stale: run go generate ./internal/rdb")
}

func TestHeaderErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, src, err string }{
		{"a gap", "-- KEYS[1] a: a\n-- KEYS[3] c: c\n-- Returns: int\n", "want [2]"},
		{"a span out of place", "-- KEYS[1] a: a\n-- KEYS[3..4] c: c\n-- Returns: int\n", "want a span from [2]"},
		{"after a tail, a fixed index", "-- ARGV[1..] a []string: a\n-- ARGV[2] b: b\n-- Returns: int\n", "want [1 + 1*n]"},
		{"a wrong stride", "-- ARGV[1..] a []{x, y}: a\n-- ARGV[1 + 1*n] b: b\n-- Returns: int\n", "want [1 + 2*n]"},
		{"a typed key", "-- KEYS[1] a int: a\n-- Returns: int\n", "KEYS entries are strings"},
		{"an unknown type", "-- ARGV[1] a uint: a\n-- Returns: int\n", "unknown type"},
		{"a name twice", "-- ARGV[1] a: a\n-- ARGV[2] a: a\n-- Returns: int\n", "named twice"},
		{"required after optional", "-- KEYS[1] a?: a\n-- KEYS[2] b: b\n-- Returns: int\n", "a required entry after an optional one"},
		{"an unnamed entry", "-- KEYS[1] lease ZSET\n-- Returns: int\n", "cannot read"},
		{"a bad reply", "-- KEYS[1] a: a\n-- Returns: map\n", "the Returns: line: cannot read"},
		{"items named twice", "-- KEYS[1..] t []{a, b}: t\n-- ARGV[1..] t []{a, b}: t\n-- Returns: int\n", "in both KEYS and ARGV"},
		{"no Returns line", "-- KEYS[1] a hash  ARGV[1] now\n-- Returns 1.\n", "no Returns: line"},
		{"a packed key", "-- KEYS[1..] a packed []string: a\n-- Returns: int\n", "only an ARGV tail may be packed"},
		{"a packed single value", "-- ARGV[1] a packed string: a\n-- Returns: int\n", "only an ARGV tail may be packed"},
		{"after a packed tail", "-- ARGV[1..] a packed []{x, y}: a\n-- ARGV[1 + 2*n] b: b\n-- Returns: int\n", "nothing follows a packed tail"},
		{"packed any", "-- ARGV[1..] a packed []any: a\n-- Returns: int\n", "not any"},
		{"a field after rest", "-- KEYS[1] a: a\n-- Returns: {a ...string, b int}\n", "after the ...rest"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := parseHeader("x", tc.src+"\nreturn 1\n")
			require.ErrorContains(t, err, tc.err)
		})
	}
}
