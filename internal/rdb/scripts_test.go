package rdb

import (
	"context"
	"errors"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq/internal/redistest"
)

func TestAssembleTakesWhatIsIncluded(t *testing.T) {
	t.Parallel()
	lib := `-- header of the file
-- (dropped)

-- b calls a.
--! uses: a
local function b(x)
  return a(x) * 2
end

-- a is used by b.
local function a(x)
  return x + 1
end

local shared = {'x'} -- a table

-- c is not included.
local function c()
  return shared
end
`
	list := splitHelpers("_t.lua", lib)
	helpers := map[string]*helper{}
	var names []string
	for _, h := range list {
		helpers[h.name] = h
		names = append(names, h.name)
	}
	require.Equal(t, []string{"b", "a", "shared", "c"}, names)
	require.True(t, strings.HasPrefix(helpers["b"].text, "-- b calls a.\n--! uses: a\nlocal function b(x)"))
	require.NotContains(t, helpers["b"].text, "header")
	require.Equal(t, []string{"a"}, helpers["b"].uses)
	require.Equal(t, 4, helpers["b"].line)

	src := "-- s: a script\n--! include: b\n\nreturn b(1)\n"
	got, parts, err := assemble(helpers, "s.lua", src)
	require.NoError(t, err)
	require.Equal(t, helpers["a"].text+helpers["b"].text+src, got, "a helper comes after those it uses")
	require.Equal(t, []part{{"_t.lua", 10, 5}, {"_t.lua", 4, 6}, {"s.lua", 1, 5}}, parts)
	require.Equal(t, "lua/_t.lua:10", position(parts, 1))
	require.Equal(t, "lua/_t.lua:9", position(parts, 11), "the blank line closing b")
	require.Equal(t, "lua/s.lua:4", position(parts, 15))
	require.Empty(t, position(parts, 17))

	plain, _, err := assemble(helpers, "s.lua", "return 1\n")
	require.NoError(t, err)
	require.Equal(t, "return 1\n", plain, "nothing included, nothing prepended")
	_, _, err = assemble(helpers, "s.lua", "--! include: a, d\nreturn d()\n")
	require.ErrorContains(t, err, "lua/s.lua includes d, which no lua/_*.lua declares")
	helpers["a"].uses = []string{"b"}
	_, _, err = assemble(helpers, "s.lua", src)
	require.ErrorContains(t, err, "uses itself")
}

func TestScriptsCarryTheirHelpers(t *testing.T) {
	t.Parallel()
	claim := assembled(t, "claim")
	for _, want := range []string{"local function emit(", "local function hget_into(", "local function expire_task(", "local function keep_body("} {
		require.Contains(t, claim, want)
	}
	require.NotContains(t, claim, "local function dlq_requeue_one(")
	require.NotContains(t, assembled(t, "lease_secret"), "local function", "a script that includes nothing carries nothing")
}

// assembled is the source of script name as sent to Redis.
func assembled(t *testing.T, name string) string {
	t.Helper()
	helpers := loadHelpers(t)
	src, err := luaFS.ReadFile("lua/" + name + ".lua")
	require.NoError(t, err)
	text, _, err := assemble(helpers, name+".lua", string(src))
	require.NoError(t, err)
	return text
}

func loadHelpers(t *testing.T) map[string]*helper {
	t.Helper()
	entries, err := luaFS.ReadDir("lua")
	require.NoError(t, err)
	helpers := map[string]*helper{}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "_") {
			continue
		}
		src, err := luaFS.ReadFile("lua/" + e.Name())
		require.NoError(t, err)
		for _, h := range splitHelpers(e.Name(), string(src)) {
			helpers[h.name] = h
		}
	}
	return helpers
}

// luaNames are the identifiers of Lua source outside its comments.
func luaNames(src string) map[string]bool {
	names := map[string]bool{}
	for _, line := range strings.Split(src, "\n") {
		if i := strings.Index(line, "--"); i >= 0 {
			line = line[:i]
		}
		for _, f := range strings.FieldsFunc(line, func(r rune) bool { return !isLuaIdent(r) }) {
			names[f] = true
		}
	}
	return names
}

// declared are the names a helper's declaration line introduces ("local a,
// b = ..." declares both).
func declared(h *helper) []string {
	for _, line := range strings.Split(h.text, "\n") {
		if rest, ok := strings.CutPrefix(line, "local "); ok {
			rest = strings.TrimPrefix(rest, "function ")
			if i := strings.IndexAny(rest, "=("); i >= 0 {
				rest = rest[:i]
			}
			var out []string
			for _, n := range strings.Split(rest, ",") {
				out = append(out, strings.TrimSpace(n))
			}
			return out
		}
	}
	return nil
}

// TestIncludesAreExact: each script includes, and each helper uses, exactly
// the helpers its code names. A helper left out would fail only when the
// line that calls it runs; one too many costs every call its prelude.
func TestIncludesAreExact(t *testing.T) {
	t.Parallel()
	helpers := loadHelpers(t)
	owner := map[string]string{} // declared name -> helper
	for _, h := range helpers {
		for _, n := range declared(h) {
			owner[n] = h.name
		}
	}
	needs := func(src, self string) []string {
		set := map[string]bool{}
		for n := range luaNames(src) {
			if o, ok := owner[n]; ok && o != self {
				set[o] = true
			}
		}
		out := make([]string, 0, len(set))
		for n := range set {
			out = append(out, n)
		}
		slices.Sort(out)
		return out
	}
	sorted := func(s []string) []string {
		s = append([]string{}, s...)
		slices.Sort(s)
		return s
	}
	for _, h := range helpers {
		require.Equal(t, needs(h.text, h.name), sorted(h.uses), "--! uses: of %s in lua/%s", h.name, h.file)
	}
	for name := range scripts {
		src, err := luaFS.ReadFile("lua/" + name + ".lua")
		require.NoError(t, err)
		require.Equal(t, needs(string(src), ""), sorted(directive(string(src), "--! include:")), "--! include: of lua/%s.lua", name)
	}
}

// TestPositionsPointAtTheirLines: every line of every assembled script maps
// back to the file line it came from (as sent outside the strict-scripts
// mode, which TestMain turns on).
func TestPositionsPointAtTheirLines(t *testing.T) {
	t.Parallel()
	_, scriptParts := loadScripts(false)
	for name, parts := range scriptParts {
		text := assembled(t, name)
		for n, line := range strings.Split(text, "\n") {
			pos := position(parts, n+1)
			file, num, ok := strings.Cut(strings.TrimPrefix(pos, "lua/"), ":")
			require.True(t, ok, "%s line %d: %q", name, n+1, pos)
			src, err := luaFS.ReadFile("lua/" + file)
			require.NoError(t, err)
			i, err := strconv.Atoi(num)
			require.NoError(t, err)
			require.Equal(t, strings.Split(string(src), "\n")[i-1], line, "%s line %d maps to %s", name, n+1, pos)
		}
	}
}

// TestScriptErrorsNameTheirFile: a script error from Redis names the file
// and line it happened on, and stays a redis.Error.
func TestScriptErrorsNameTheirFile(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	r := New(s.Client, s.Prefix)
	// renew with a "now" that is no number: its first line adds a nil.
	err := r.run(context.Background(), scriptRenew, []string{r.keys.Lease("q")}, "soon", 1000, "w1", r.keys.TaskPrefix("q"), "").Err()
	require.Error(t, err)
	var re redis.Error
	require.ErrorAs(t, err, &re)
	m := regexp.MustCompile(`user_script:(\d+) \(lua/renew\.lua:(\d+)\)`).FindStringSubmatch(err.Error())
	require.NotNil(t, m, err.Error())
	t.Log(err)
	src, rerr := luaFS.ReadFile("lua/renew.lua")
	require.NoError(t, rerr)
	line, _ := strconv.Atoi(m[2])
	require.Contains(t, strings.Split(string(src), "\n")[line-1], "tonumber(ARGV[1]) + tonumber(ARGV[2])", err.Error())

	plain := errors.New("ERR no such thing")
	require.Same(t, plain, placeError(scriptRenew.parts, plain), "an error without a line is left alone")
}

// TestEveryScriptHasAHandle: each script of lua/ is bound to a package-level
// handle (so none is found by a string at run time), and a handle for a
// file that does not exist fails at once.
func TestEveryScriptHasAHandle(t *testing.T) {
	t.Parallel()
	bound := map[string]bool{}
	for _, h := range handles {
		require.False(t, bound[h.name], "two handles for %s", h.name)
		bound[h.name] = true
		require.Same(t, scripts[h.name], h.rs)
		require.Equal(t, !unacked[h.name], h.acked, h.name)
	}
	for name := range scripts {
		require.True(t, bound[name], "lua/%s.lua has no handle in scripts.go", name)
	}
	require.PanicsWithValue(t, "rdb: no script lua/claims.lua", func() { newScript("claims") })
}

// TestDeclaredKeysModeRefusesOtherKeys: the mode the package's tests run in
// (TestMain) fails a script that touches a key neither in KEYS nor under a
// declared hash tag, whatever the command's key positions, and lets the
// rest through.
func TestDeclaredKeysModeRefusesOtherKeys(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	ctx := context.Background()
	keys := []string{s.Prefix + ":a:{q}", s.Prefix + ":global"}
	cases := []struct {
		name, body string
		refused    string // the key named in the error; "" when it runs
	}{
		{"declared", "return redis.call('SET', KEYS[1], 'x')", ""},
		{"declared global", "return redis.call('GET', KEYS[2])", ""},
		{"same tag", "return redis.call('HSET', '" + s.Prefix + ":other:{q}:1', 'f', 'v')", ""},
		{"no keys", "return redis.call('TIME')", ""},
		{"a channel", "return redis.call('PUBLISH', 'channel', 'm')", ""},
		{"other tag", "return redis.call('GET', 'x:{r}')", "x:{r}"},
		{"untagged", "return redis.call('GET', 'loose')", "loose"},
		{"second key of DEL", "return redis.call('DEL', KEYS[1], 'loose2')", "loose2"},
		{"pcall", "return redis.pcall('INCR', 'loose3')", "loose3"},
		{"after STREAMS", "return redis.pcall('XREADGROUP', 'GROUP', 'g', 'c', 'STREAMS', 's:{q}', 'loose4', '>', '>')", "loose4"},
		{"a declared key's tag only", "return redis.call('GET', 'y:{" + s.Prefix + ":global}')", "y:{" + s.Prefix + ":global}"},
	}
	for _, tc := range cases {
		text := strictText(tc.body)
		err := redis.NewScript(text).Run(ctx, s.Client, keys).Err()
		if tc.refused == "" {
			if err != nil {
				require.ErrorIs(t, err, redis.Nil, tc.name)
			}
			continue
		}
		require.Error(t, err, tc.name)
		require.Contains(t, err.Error(), "strict scripts: ", tc.name)
		require.Contains(t, err.Error(), "touches "+tc.refused+",", tc.name)
	}
}

// The test clients' bound on a command's length is the one dtq keeps.
func TestCallBoundIsTheTestClientsBound(t *testing.T) {
	t.Parallel()
	require.Equal(t, MaxCallArgs, redistest.MaxArgs)
}

// TestStrictScriptsRefuseLongCalls: the strict mode fails a command of more
// than 3,999 arguments (what some proxies refuse), and lets 3,999 through.
func TestStrictScriptsRefuseLongCalls(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	ctx := context.Background()
	key := s.Prefix + ":long:{q}"
	text := strictText(
		"local t = {} for i = 1, tonumber(ARGV[1]) do t[i] = i end return redis.call('RPUSH', KEYS[1], unpack(t))")
	script := redis.NewScript(text)
	require.NoError(t, script.Run(ctx, s.Client, []string{key}, 3997).Err(), "RPUSH, its key and 3,997 values: 3,999 arguments")
	err := script.Run(ctx, s.Client, []string{key}, 3998).Err()
	require.Error(t, err)
	require.Contains(t, err.Error(), "strict scripts: RPUSH sent with 4000 arguments, more than 3,999")
}

// TestPackedValuesRoundTrip: what packer writes, packed_argv reads back
// byte for byte (colons, digits, NULs, bytes that are no UTF-8, empty
// values), 10,000 values in one argument.
func TestPackedValuesRoundTrip(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	text, _, err := assemble(loadHelpers(t), "roundtrip.lua",
		"--! include: packed_argv\nreturn packed_argv()\n")
	require.NoError(t, err)
	vals := []string{"", "3:abc", "12", ":", "\x00\xff\xfe", "é", strings.Repeat("x", 70000)}
	for i := range 10000 {
		vals = append(vals, strconv.Itoa(i))
	}
	var pk packer
	for _, v := range vals[:3] {
		pk.add(v)
	}
	pk.addBytes([]byte(vals[3]))
	for _, v := range vals[4:] {
		pk.add(v)
	}
	got, err := redis.NewScript(text).Run(context.Background(), s.Client, nil, "first", pk.String()).StringSlice()
	require.NoError(t, err)
	require.Equal(t, append([]string{"first"}, vals...), got)

	var nums packer
	nums.addInt(-42)
	nums.addFloat(0.25)
	got, err = redis.NewScript(text).Run(context.Background(), s.Client, nil, "n", nums.String()).StringSlice()
	require.NoError(t, err)
	require.Equal(t, []string{"n", "-42", "0.25"}, got)
}

// TestRefused: an ACL's refusal and a removed command are refusals; other
// errors are not.
func TestRefused(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	ctx := context.Background()
	require.False(t, refused(nil))
	require.False(t, refused(context.Canceled))
	unknown := s.Client.Do(ctx, "NOSUCHCOMMAND").Err()
	require.True(t, refused(unknown), "%v", unknown)
	wrongType := s.Client.Do(ctx, "INCR", s.Prefix+":x", "extra").Err()
	require.False(t, refused(wrongType), "%v", wrongType)
	srv, err := redistest.Start()
	require.NoError(t, err)
	t.Cleanup(srv.Stop)
	require.NoError(t, srv.Client(t).Do(ctx, "ACL", "SETUSER", "u", "on", ">pw", "~*", "+@all", "-scan").Err())
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, Username: "u", Password: "pw"})
	t.Cleanup(func() { _ = c.Close() })
	denied := c.Scan(ctx, 0, "*", 10).Err()
	require.True(t, refused(denied), "%v", denied)
}

// TestSuiteRunsAsARestrictedUser: the package's tests talk to Redis as a
// user denied what managed services refuse (TestMain: redistest.Restricted),
// so every script and call they run needs none of it.
func TestSuiteRunsAsARestrictedUser(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	for _, cmd := range [][]any{{"CONFIG", "GET", "maxmemory"}, {"KEYS", "*"}, {"SCAN", 0}, {"FLUSHDB"}, {"SCRIPT", "FLUSH"}} {
		require.ErrorContains(t, s.Client.Do(context.Background(), cmd...).Err(), "NOPERM", "%v", cmd)
	}
}

// TestStrictScriptsRefuseBlockingCommands: the strict mode fails a script
// that sends a blocking command, however spelt.
func TestStrictScriptsRefuseBlockingCommands(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	key := s.Prefix + ":b:{q}"
	for _, body := range []string{
		"return redis.call('BLPOP', KEYS[1], 1)",
		"return redis.pcall('brpop', KEYS[1], 1)",
		"return redis.call('XREAD', 'COUNT', 1, 'block', 10, 'STREAMS', KEYS[1], '$')",
		"return redis.call('WAIT', 0, 0)",
	} {
		text := strictText(body)
		err := redis.NewScript(text).Run(context.Background(), s.Client, []string{key}).Err()
		require.ErrorContains(t, err, "strict scripts: ", body)
		require.ErrorContains(t, err, " blocks", body)
	}
}
