package rdb

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestWithHelpersTakesOnlyWhatIsUsed(t *testing.T) {
	t.Parallel()
	lib := `-- header of the file
-- (dropped)

-- a is used by b.
local function a(x)
  return x + 1
end

local shared = {'x'} -- a table

-- b calls a.
local function b(x)
  return a(x) * 2
end

-- c is unused.
local function c()
  return shared
end
`
	helpers := splitLib(lib)
	var names []string
	for _, h := range helpers {
		names = append(names, h.name)
	}
	require.Equal(t, []string{"a", "shared", "b", "c"}, names)
	require.True(t, strings.HasPrefix(helpers[0].text, "-- a is used by b.\nlocal function a(x)"))
	require.NotContains(t, helpers[0].text, "header")

	got := withHelpers(helpers, "return b(1)\n")
	require.Equal(t, helpers[0].text+helpers[2].text+"return b(1)\n", got)
	require.Equal(t, "return 1\n", withHelpers(helpers, "return 1\n"))
	require.Contains(t, withHelpers(helpers, "return c_value, c()\n"), "local function c()")
	require.NotContains(t, withHelpers(helpers, "local bc = 1 return bc\n"), "local function b(")
}

func TestScriptsCarryTheirHelpers(t *testing.T) {
	t.Parallel()
	lib, err := luaFS.ReadFile("lua/_lib.lua")
	require.NoError(t, err)
	helpers := splitLib(string(lib))
	require.Equal(t, strings.Count("\n"+string(lib), "\nlocal "), len(helpers), "every top-level declaration is a block")
	claim, err := luaFS.ReadFile("lua/claim.lua")
	require.NoError(t, err)
	src := withHelpers(helpers, string(claim))
	for _, want := range []string{"local function emit(", "local function hget_into(", "local function expire_task(", "local function keep_body("} {
		require.Contains(t, src, want)
	}
	require.NotContains(t, src, "local function dlq_requeue_one(")
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
