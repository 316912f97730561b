package cli

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq/internal/redistest"
)

// minNodeMajor is the oldest Node.js the TypeScript client supports
// (clients/typescript/package.json's engines).
const minNodeMajor = 20

// requireNode returns the path of a node of at least minNodeMajor, and
// fails the test (rather than skip it) without one: .ci/run installs it.
func requireNode(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	require.NoError(t, err, "node is needed to test clients/typescript (apt-get install nodejs; .ci/run installs it)")
	out, err := exec.Command(node, "--version").Output()
	require.NoError(t, err, "node --version")
	m := regexp.MustCompile(`^v(\d+)\.`).FindStringSubmatch(strings.TrimSpace(string(out)))
	require.NotNil(t, m, "node --version printed %q", out)
	major, err := strconv.Atoi(m[1])
	require.NoError(t, err)
	require.GreaterOrEqual(t, major, minNodeMajor, "clients/typescript needs Node.js >= %d; this node is %s", minNodeMajor, out)
	return node
}

// clientDir is the absolute path of clients/<name> in the repository.
func clientDir(t *testing.T, name string) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", "..", "..", "clients", name))
	require.NoError(t, err)
	return dir
}

// nodeTestSummary reads the counts of node --test's TAP summary
// ("# pass 12").
func nodeTestSummary(out string) map[string]int {
	counts := map[string]int{}
	for _, m := range regexp.MustCompile(`(?m)^# (tests|pass|fail|cancelled|skipped|todo) (\d+)$`).FindAllStringSubmatch(out, -1) {
		n, _ := strconv.Atoi(m[2])
		counts[m[1]] = n
	}
	return counts
}

// TestTypeScriptClient runs the TypeScript client's tests
// (clients/typescript/test/*.test.mjs, with node --test) against a live
// `dtq api` on a private Redis. Node.js >= 20 is required: .ci/run installs
// it, and without it this test fails rather than skip. No test may be
// skipped or left todo.
func TestTypeScriptClient(t *testing.T) {
	t.Parallel()
	node := requireNode(t)
	srv := redistest.Shared(t)
	r := startCmd(t, map[string]string{
		"DTQ_REDIS_URL":            srv.URL(),
		"DTQ_KEY_PREFIX":           redistest.New(t).Prefix,
		"DTQ_HEARTBEAT_INTERVAL_S": "1",
		"DTQ_API_KEYS":             "worker:ts:w-secret,producer:feed:p-secret,admin:ops:a-secret",
	}, "api", "--api-addr=127.0.0.1:0")

	dir := clientDir(t, "typescript")
	files, err := filepath.Glob(filepath.Join(dir, "test", "*.test.mjs"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "clients/typescript/test has no *.test.mjs")
	args := []string{"--test", "--test-reporter=tap"}
	for _, f := range files {
		rel, err := filepath.Rel(dir, f)
		require.NoError(t, err)
		args = append(args, rel)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, args...)
	cmd.Dir = dir
	cmd.Env = append(cmd.Environ(), "DTQ_URL="+r.base, "DTQ_WORKER_TOKEN=w-secret", "DTQ_PRODUCER_TOKEN=p-secret",
		"DTQ_ADMIN_TOKEN=a-secret")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	t.Logf("node --test:\n%s", out.String())
	require.NoError(t, err, "the TypeScript client's tests failed")
	sum := nodeTestSummary(out.String())
	require.Positive(t, sum["pass"], "node --test ran no test")
	require.Equal(t, sum["tests"], sum["pass"], "every test passes")
	for _, k := range []string{"fail", "cancelled", "skipped", "todo"} {
		n, ok := sum[k]
		require.True(t, ok, "node --test's summary lacks %q", k)
		require.Zero(t, n, "node --test: %d %s", n, k)
	}
	// A 2-node workflow ran over HTTP, its second node reading the first's
	// result; the example worker stopped gracefully.
	require.Regexp(t, `(?m)^ok \d+ - a two-node workflow`, out.String())
	require.Regexp(t, `(?m)^ok \d+ - the example worker serves resize and stops gracefully on SIGTERM`, out.String())
}

func TestNodeTestSummary(t *testing.T) {
	t.Parallel()
	out := "ok 1 - x\n# tests 3\n# suites 0\n# pass 2\n# fail 1\n# cancelled 0\n# skipped 0\n# todo 0\n# duration_ms 12.5\n"
	require.Equal(t, map[string]int{"tests": 3, "pass": 2, "fail": 1, "cancelled": 0, "skipped": 0, "todo": 0}, nodeTestSummary(out))
	require.Empty(t, nodeTestSummary("  # pass 2\n"), "a subtest's indented summary is not the run's")
}
