package rdb

import (
	"fmt"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq/internal/redistest"
)

// TestMain records every script call of the suite and, once it passed,
// checks each call's key and argument counts against its script's header.
func TestMain(m *testing.M) {
	calls := recordCalls()
	code := redistest.Main(m)
	if code == 0 {
		if errs := calls.check(); len(errs) > 0 {
			fmt.Fprintln(os.Stderr, "script calls that disagree with their KEYS/ARGV headers:\n  "+strings.Join(errs, "\n  "))
			code = 1
		}
	}
	os.Exit(code)
}

// callCounts is how many keys and arguments one script call carried.
type callCounts struct {
	script     string
	keys, args int
}

// callLog holds the distinct call shapes seen through callHook.
type callLog struct {
	mu   sync.Mutex
	seen map[callCounts]bool
}

// recordCalls installs callHook for the whole test binary.
func recordCalls() *callLog {
	l := &callLog{seen: map[callCounts]bool{}}
	callHook = func(name string, keys []string, args []any) {
		c := callCounts{script: name, keys: len(keys), args: wireArgs(args)}
		l.mu.Lock()
		l.seen[c] = true
		l.mu.Unlock()
	}
	return l
}

// wireArgs is how many ARGV entries args become on the wire: go-redis
// flattens a lone slice or map argument.
func wireArgs(args []any) int {
	if len(args) != 1 {
		return len(args)
	}
	v := reflect.ValueOf(args[0])
	switch {
	case v.Kind() == reflect.Slice && v.Type().Elem().Kind() != reflect.Uint8:
		return v.Len()
	case v.Kind() == reflect.Map:
		return 2 * v.Len()
	}
	return 1
}

func (l *callLog) check() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var errs []string
	for c := range l.seen {
		if err := checkCall(c); err != nil {
			errs = append(errs, err.Error())
		}
	}
	slices.Sort(errs)
	return errs
}

// checkCall compares one call's counts with its script's header.
func checkCall(c callCounts) error {
	src, err := luaFS.ReadFile("lua/" + c.script + ".lua")
	if err != nil {
		return err
	}
	if generatedCall.MatchString(string(src)) {
		return nil // called through scripts_gen.go: the compiler checks it
	}
	keys, args, err := parseHeader(string(src))
	if err != nil {
		return fmt.Errorf("%s.lua: %w", c.script, err)
	}
	nk, err := keys.match(c.keys)
	if err != nil {
		return fmt.Errorf("%s.lua called with %d KEYS: %w", c.script, c.keys, err)
	}
	na, err := args.match(c.args)
	if err != nil {
		return fmt.Errorf("%s.lua called with %d ARGV: %w", c.script, c.args, err)
	}
	if nk >= 0 && na >= 0 && nk != na {
		// With optional entries after the items, both sides may be read
		// the other way: KEYS and ARGV must then agree with them.
		ak, aok := keys.matchAlt(c.keys)
		aa, aaok := args.matchAlt(c.args)
		if aok && aaok && ak == aa {
			return nil
		}
		return fmt.Errorf("%s.lua called with KEYS for %d items and ARGV for %d", c.script, nk, na)
	}
	return nil
}

// matchAlt reports how many items n entries hold when the optional
// entries after the items are there.
func (s shape) matchAlt(n int) (int, bool) {
	if s.altTotal == 0 || s.stride == 0 || n < s.altTotal || (n-s.altTotal)%s.stride != 0 {
		return -1, false
	}
	return (n - s.altTotal) / s.stride, true
}

// shape is what a header says of one of KEYS and ARGV: entries 1..fixed,
// the last few of them optional down to min; or an open tail from tail on
// (in pairs when pairs); or per item blocks of stride entries from base
// on, the whole being total + totalStride*n entries for n items, or
// altTotal + totalStride*n when entries after the items are optional.
type shape struct {
	fixed, min         int
	tail               int
	pairs              bool
	base, stride       int
	total, totalStride int
	altTotal           int
}

// match reports whether n entries fit the shape, and for a per item shape
// how many items they hold (-1 otherwise).
func (s shape) match(n int) (int, error) {
	switch {
	case s.stride > 0:
		total, stride := s.total, s.stride
		if total == 0 { // no entries after the items
			total = s.base - 1
		}
		if alt := s.altTotal; alt > 0 && n >= alt && (n-alt)%stride == 0 && (n < total || (n-total)%stride != 0) {
			return (n - alt) / stride, nil
		}
		if n < total || (n-total)%stride != 0 {
			return -1, fmt.Errorf("want %d + %d per item (entries 1..%d, then items of %d from %d)",
				total, stride, s.fixed, s.stride, s.base)
		}
		return (n - total) / stride, nil
	case s.tail > 0:
		if n < s.tail-1 {
			return -1, fmt.Errorf("want at least %d (a tail from %d on)", s.tail-1, s.tail)
		}
		if s.pairs && (n-s.tail+1)%2 != 0 {
			return -1, fmt.Errorf("want pairs from %d on, got %d entries there", s.tail, n-s.tail+1)
		}
	case n < s.min || n > s.fixed:
		if s.min == s.fixed {
			return -1, fmt.Errorf("the header documents %d", s.fixed)
		}
		return -1, fmt.Errorf("the header documents %d..%d", s.min, s.fixed)
	}
	return -1, nil
}

var (
	generatedCall = regexp.MustCompile(`(?m)^-- Returns: `)
	headerToken = regexp.MustCompile(`(KEYS|ARGV)\[([^\]]+)\]|per \w+ i \(base = (\d+) \+ (\d+)\*\(i-1\)\)`)
	indexOne    = regexp.MustCompile(`^(\d+)$`)
	indexRange  = regexp.MustCompile(`^(\d+)\.\.(\d+)?$`)
	indexTotal  = regexp.MustCompile(`^(\d+) \+ (\d+)\*n$`)
	indexItem   = regexp.MustCompile(`^(\d+) \+ (\d+)\*\(i-1\)$`)
	indexSymbol = regexp.MustCompile(`^[a-z]+(\+\d+)?$`)
)

// parseHeader reads the KEYS and ARGV shapes from a script's leading
// comment block: KEYS[n], ranges KEYS[a..b], open tails ARGV[a..] ("pairs"
// in their description makes them come in pairs), "optional" entries,
// per item blocks "per task i (base = B + S*(i-1))" (belonging to the
// KEYS or ARGV named last before them) with symbolic entries such as
// KEYS[base+1], or item entries KEYS[B + S*(i-1)], and a total after the
// items, KEYS[B + S*n].
func parseHeader(src string) (keys, args shape, err error) {
	var header []string
	for _, line := range strings.Split(src, "\n") {
		t := strings.TrimSpace(line)
		if t != "" && !strings.HasPrefix(t, "--") {
			break
		}
		header = append(header, strings.TrimPrefix(t, "--"))
	}
	text := strings.Join(header, "\n")
	found := headerToken.FindAllStringSubmatchIndex(text, -1)
	if len(found) == 0 {
		return keys, args, fmt.Errorf("no KEYS/ARGV header")
	}
	last := ""
	for i, m := range found {
		// What the header says of this entry: up to the next one.
		end := len(text)
		if i+1 < len(found) {
			end = found[i+1][0]
		}
		about := text[m[1]:end]
		if m[2] < 0 { // a per item block
			s := &keys
			if last == "ARGV" {
				s = &args
			}
			s.base, _ = strconv.Atoi(text[m[6]:m[7]])
			s.stride, _ = strconv.Atoi(text[m[8]:m[9]])
			continue
		}
		last = text[m[2]:m[3]]
		s := &keys
		if last == "ARGV" {
			s = &args
		}
		idx := text[m[4]:m[5]]
		switch {
		case indexOne.MatchString(idx):
			n, _ := strconv.Atoi(idx)
			if n > s.fixed {
				s.fixed = n
				if !strings.Contains(about, "optional") {
					s.min = n
				}
			}
		case indexRange.MatchString(idx):
			r := indexRange.FindStringSubmatch(idx)
			from, _ := strconv.Atoi(r[1])
			if r[2] == "" {
				s.tail, s.pairs = from, strings.Contains(about, "pairs")
				continue
			}
			to, _ := strconv.Atoi(r[2])
			s.fixed, s.min = max(s.fixed, to), max(s.min, to)
		case indexTotal.MatchString(idx):
			r := indexTotal.FindStringSubmatch(idx)
			if v, _ := strconv.Atoi(r[1]); strings.Contains(about, "optional") {
				s.altTotal = v // optional entries after the items: the last one counts
			} else {
				s.total = v
			}
			s.totalStride, _ = strconv.Atoi(r[2])
		case indexItem.MatchString(idx):
			r := indexItem.FindStringSubmatch(idx)
			base, _ := strconv.Atoi(r[1])
			if s.base == 0 || base < s.base {
				s.base = base
			}
			s.stride, _ = strconv.Atoi(r[2])
		case indexSymbol.MatchString(idx):
			// an entry of a per item block, or a helper's view
		default:
			return keys, args, fmt.Errorf("cannot read %s[%s]", last, idx)
		}
	}
	for _, s := range []*shape{&keys, &args} {
		if s.tail > 0 && s.tail != s.fixed+1 {
			return keys, args, fmt.Errorf("an open tail from %d after %d fixed entries", s.tail, s.fixed)
		}
		if s.totalStride > 0 && s.totalStride != s.stride {
			return keys, args, fmt.Errorf("a total per item of %d for items of %d", s.totalStride, s.stride)
		}
	}
	return keys, args, nil
}

func TestParseHeader(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		src        string
		keys, args shape
	}{
		{"fixed", "-- KEYS[1] a  KEYS[2] b\n-- ARGV[1] x\n\nreturn 1\n",
			shape{fixed: 2, min: 2}, shape{fixed: 1, min: 1}},
		{"range and tail", "-- KEYS[1] a KEYS[2..11] bands\n-- ARGV[1] x  ARGV[2..] field, value pairs\nreturn 1",
			shape{fixed: 11, min: 11}, shape{fixed: 1, min: 1, tail: 2, pairs: true}},
		{"optional", "-- KEYS[1] a\n-- KEYS[2] optional: b\n-- ARGV[1] x\nreturn 1",
			shape{fixed: 2, min: 1}, shape{fixed: 1, min: 1}},
		{"per item", "-- KEYS[1] a\n-- then per task i (base = 2 + 2*(i-1)):\n-- KEYS[base] h  KEYS[base+1] r\n" +
			"-- then KEYS[2 + 2*n]: n\n-- ARGV[1] x ARGV[2] y\n-- then per task i (base = 3 + 5*(i-1)): ...\nreturn 1",
			shape{fixed: 1, min: 1, base: 2, stride: 2, total: 2, totalStride: 2}, shape{fixed: 2, min: 2, base: 3, stride: 5}},
		{"optional entries after the items", "-- KEYS[1] a\n-- then per task i (base = 2 + 2*(i-1)):\n-- KEYS[base] h\n" +
			"-- then KEYS[2 + 2*n]: n, KEYS[3 + 2*n] optional: f\n-- ARGV[1] x\n-- then per task i (base = 2 + 5*(i-1)): ...\n" +
			"-- then ARGV[2 + 5*n] optional: p\nreturn 1",
			shape{fixed: 1, min: 1, base: 2, stride: 2, total: 2, totalStride: 2, altTotal: 3},
			shape{fixed: 1, min: 1, base: 2, stride: 5, totalStride: 5, altTotal: 2}},
		{"item entries", "-- KEYS[1] a\n-- then per task i: KEYS[2 + 2*(i-1)] h, KEYS[3 + 2*(i-1)] r\n-- ARGV[1] x\nreturn 1",
			shape{fixed: 1, min: 1, base: 2, stride: 2}, shape{fixed: 1, min: 1}},
		{"later comments do not count", "-- KEYS[1] a\n-- ARGV[1] x\nlocal v = 1\n-- KEYS[9] late\nreturn v",
			shape{fixed: 1, min: 1}, shape{fixed: 1, min: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			keys, args, err := parseHeader(tc.src)
			require.NoError(t, err)
			require.Equal(t, tc.keys, keys)
			require.Equal(t, tc.args, args)
		})
	}
}

func TestShapeMatch(t *testing.T) {
	t.Parallel()
	perItem := shape{fixed: 5, min: 5, base: 6, stride: 2, total: 6, totalStride: 2}
	for _, tc := range []struct {
		name  string
		s     shape
		n     int
		items int
		ok    bool
	}{
		{"fixed", shape{fixed: 3, min: 3}, 3, -1, true},
		{"fixed short", shape{fixed: 3, min: 3}, 2, -1, false},
		{"fixed long", shape{fixed: 3, min: 3}, 4, -1, false},
		{"optional left out", shape{fixed: 2, min: 1}, 1, -1, true},
		{"tail empty", shape{fixed: 5, min: 5, tail: 6}, 5, -1, true},
		{"tail", shape{fixed: 5, min: 5, tail: 6}, 9, -1, true},
		{"tail short", shape{fixed: 5, min: 5, tail: 6}, 4, -1, false},
		{"pairs", shape{fixed: 1, min: 1, tail: 2, pairs: true}, 5, -1, true},
		{"odd pairs", shape{fixed: 1, min: 1, tail: 2, pairs: true}, 4, -1, false},
		{"items", perItem, 6 + 2*3, 3, true},
		{"items without the total", perItem, 5 + 2*3, -1, false},
		{"items without a trailer", shape{fixed: 9, min: 9, base: 10, stride: 17}, 9 + 17*2, 2, true},
		{"a partial item", shape{fixed: 9, min: 9, base: 10, stride: 17}, 9 + 17*2 + 1, -1, false},
		{"optional trailer left out", shape{fixed: 5, min: 5, base: 6, stride: 2, total: 6, totalStride: 2, altTotal: 9}, 6 + 2*3, 3, true},
		{"optional trailer given", shape{fixed: 5, min: 5, base: 6, stride: 2, total: 6, totalStride: 2, altTotal: 9}, 9 + 2*3, 3, true},
		{"optional args after items", shape{fixed: 9, min: 9, base: 10, stride: 17, totalStride: 17, altTotal: 11}, 11 + 17*2, 2, true},
		{"no optional args after items", shape{fixed: 9, min: 9, base: 10, stride: 17, totalStride: 17, altTotal: 11}, 9 + 17*2, 2, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			items, err := tc.s.match(tc.n)
			require.Equal(t, tc.ok, err == nil, "%v", err)
			require.Equal(t, tc.items, items)
		})
	}
}

// TestEveryScriptHasAHeader: every script documents its KEYS and ARGV in a
// form parseHeader reads.
func TestEveryScriptHasAHeader(t *testing.T) {
	t.Parallel()
	for name := range scripts {
		src, err := luaFS.ReadFile("lua/" + name + ".lua")
		require.NoError(t, err)
		if generatedCall.Match(src) {
			continue // scriptgen reads it
		}
		_, _, err = parseHeader(string(src))
		require.NoError(t, err, name)
	}
}

// TestScriptCallsMatchHeaders runs every script (exerciseScripts) and checks
// the key and argument counts on the wire against each script's header.
// TestMain checks the calls of the whole suite the same way.
func TestScriptCallsMatchHeaders(t *testing.T) {
	t.Parallel()
	srv, err := redistest.Start()
	require.NoError(t, err)
	t.Cleanup(srv.Stop)
	c := srv.Client(t)
	sc := redistest.CheckSlots(t, c, HashSlot)
	exerciseScripts(t, New(c, "headers"))
	seen := map[string]bool{}
	for _, call := range sc.Calls() {
		name := scriptName(call.Script)
		require.NotEmpty(t, name)
		seen[name] = true
		require.NoError(t, checkCall(callCounts{script: name, keys: len(call.Keys), args: len(call.Args)}))
	}
	for name := range scripts {
		require.True(t, seen[name], "script %s.lua is never run", name)
	}
}
