package cli

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq/internal/redistest"
)

// conformanceScenarios reads the scenario names of the client conformance
// suite from clients/conformance.md, its one list: the numbered items
// under "## Scenarios", each opening with its name in backquotes.
func conformanceScenarios(md string) []string {
	_, list, _ := strings.Cut(md, "\n## Scenarios\n")
	list, _, _ = strings.Cut(list, "\n## ")
	var names []string
	for _, m := range regexp.MustCompile("(?m)^\\d+\\. `([a-z0-9_]+)`").FindAllStringSubmatch(list, -1) {
		names = append(names, m[1])
	}
	return names
}

// conformanceLine is one line of a conformance program's output.
var conformanceLine = regexp.MustCompile(`^CONFORMANCE ([a-z0-9_]+) (ok|FAIL)(?: (.*))?$`)

// TestClientConformance drives the suite of clients/conformance.md through
// each HTTP client against one `dtq api`, the clients at once (each on
// queues of its own), and requires an ok line for every scenario, in the
// list's order, and no FAIL line.
func TestClientConformance(t *testing.T) {
	t.Parallel()
	md, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "clients", "conformance.md"))
	require.NoError(t, err)
	scenarios := conformanceScenarios(string(md))
	require.GreaterOrEqual(t, len(scenarios), 13, "clients/conformance.md lists the scenarios")
	require.Equal(t, "submit_created", scenarios[0])

	srv := redistest.Shared(t)
	r := startCmd(t, map[string]string{
		"DTQ_REDIS_URL":            srv.URL(),
		"DTQ_KEY_PREFIX":           redistest.New(t).Prefix,
		"DTQ_HEARTBEAT_INTERVAL_S": "1",
		"DTQ_API_KEYS":             "worker:conf:w-secret,producer:conf:p-secret,admin:conf:a-secret",
	}, "api", "--api-addr=127.0.0.1:0")

	clients := []struct {
		name    string
		command func(t *testing.T) (string, []string) // program and arguments
	}{
		{"python", func(t *testing.T) (string, []string) {
			py, err := exec.LookPath("python3")
			require.NoError(t, err, "python3 is needed (apt-get install python3; .ci/run installs it)")
			prog := filepath.Join(clientDir(t, "python"), "conformance.py")
			_, err = os.Stat(prog)
			require.NoError(t, err, "the Python client's conformance program")
			return py, []string{prog}
		}},
		{"typescript", func(t *testing.T) (string, []string) {
			return requireNode(t), []string{filepath.Join(clientDir(t, "typescript"), "test", "conformance.mjs")}
		}},
	}
	for _, c := range clients {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			prog, args := c.command(t)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, prog, args...)
			cmd.Dir = filepath.Dir(args[0])
			cmd.Env = append(cmd.Environ(), "DTQ_URL="+r.base, "DTQ_WORKER_TOKEN=w-secret",
				"DTQ_PRODUCER_TOKEN=p-secret", "DTQ_ADMIN_TOKEN=a-secret", "DTQ_CONFORMANCE_CLIENT="+c.name,
				"PYTHONDONTWRITEBYTECODE=1", "PYTHONUNBUFFERED=1")
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			runErr := cmd.Run()
			t.Logf("%s conformance:\n%s\nstderr:\n%s", c.name, stdout.String(), stderr.String())
			var got []string
			for _, l := range strings.Split(strings.TrimRight(stdout.String(), "\n"), "\n") {
				m := conformanceLine.FindStringSubmatch(l)
				require.NotNil(t, m, "a line that is not CONFORMANCE <scenario> ok|FAIL <reason>: %q", l)
				require.Equal(t, "ok", m[2], "scenario %s failed: %s", m[1], m[3])
				got = append(got, m[1])
			}
			require.Equal(t, scenarios, got, "one ok line per scenario, in the order of clients/conformance.md")
			require.NoError(t, runErr, "the %s conformance program exited non-zero", c.name)
		})
	}
}

func TestConformanceScenarios(t *testing.T) {
	t.Parallel()
	md := "# x\n\n1. `not_this` — before the list\n\n## Scenarios\n\n1. `first_one` — a.\n2. `second` — b `code`.\n" +
		"   3. `indented` — no\n10. `tenth` — c.\n\n## Later\n\n1. `after` — no.\n"
	require.Equal(t, []string{"first_one", "second", "tenth"}, conformanceScenarios(md))
	for _, tc := range []struct {
		line string
		ok   bool
	}{
		{"CONFORMANCE submit_created ok", true},
		{"CONFORMANCE lease_lost FAIL want LeaseLost, got 400", true},
		{"CONFORMANCE lease_lost fail", false},
		{"conformance x ok", false},
	} {
		require.Equal(t, tc.ok, conformanceLine.MatchString(tc.line), tc.line)
	}
}
