package cli

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The docs' shell blocks run as written against `dtq dev` (only the API's
// address is changed), so that they cannot drift from the code: ```sh blocks
// must succeed; the transcripts (``` blocks of `$ command` lines and the
// output shown) must succeed or fail as shown and print the first line
// shown, ids, times and numbers aside. The blocks and commands below are
// not run, each for its reason; every other one is.

// docBlocksNotRun are ```sh blocks no test runs, by their first line.
var docBlocksNotRun = map[string]string{
	"make dev    # API + dashboard on http://127.0.0.1:8080/":                                                   "README: starts the server the other blocks run against, and make test runs every test",
	"export DTQ_API_URL=https://dtq.internal.example.com":                                                       "cli.md: points the CLI at a remote deployment",
	"dtq events tail --type TASK_DEAD_LETTERED -o json | jq -r '[.ts, .task_id, .metadata.error_class] | @tsv'": "cli.md: runs until Ctrl-C",
	"# bash (needs the bash-completion package)":                                                                "cli.md: installs completion scripts into the system, for shells (zsh, fish, PowerShell) a test machine lacks; TestCompletion prints each script",
	"DTQ_API_KEYS='worker:py:w-secret,producer:feed:p-secret,admin:ops:a-secret' make dev":                      "http-workers.md: starts the server; TestHTTPWorkersDoc starts dev with these keys",
}

// docCommandsNotRun are transcript commands no test runs.
var docCommandsNotRun = map[string]string{
	"dtq events tail --queue default":               "runs until Ctrl-C; TestEventsTailLive covers it",
	"DTQ_TOKEN=$READER_KEY dtq queues pause emails": "needs a server with keys, among them a reader key named dash; TestCredentials covers the refusal",
}

// docRaces are the other first lines a transcript command may print
// (normalized) when dev's worker acts first: a cancelled running task may
// already have stopped, a requeued or run-now task may already run (or
// have run and failed again).
var docRaces = map[string][]string{
	"cancel requested for task ID: it is running; its handler is told to stop": {"task ID is cancelled"},
	"requeued task ID: queued, attempt N/N of round N (requeued N time)": {
		"requeued task ID: running, attempt N/N of round N (requeued N time)",
		// dev's worker ran the always-failing task again before the read.
		"requeued task ID: retrying, attempt N/N of round N (requeued N time)",
		"requeued task ID: dead_lettered, attempt N/N of round N (requeued N time)",
	},
	"task ID is due now (queued)": {"task ID is due now (running)"},
}

// docCommand is one `$ ` command of a transcript and the output shown.
type docCommand struct {
	cmd    string // continuation lines joined with "\\\n"
	output []string
}

var fenceRe = regexp.MustCompile("(?ms)^```([a-z]*)\n(.*?)^```\n") //nolint:gocritic // under (?m) the second ^ anchors the closing fence at a line start

// docBlocks returns the fenced blocks of md of the given language ("" for
// none), in order.
func docBlocks(md, lang string) []string {
	var out []string
	for _, b := range fenceRe.FindAllStringSubmatch(md, -1) {
		if b[1] == lang {
			out = append(out, b[2])
		}
	}
	return out
}

// transcripts returns the commands of md's transcript blocks: plain blocks
// whose first line starts with "$ ".
func transcripts(md string) []docCommand {
	var out []docCommand
	for _, b := range docBlocks(md, "") {
		if !strings.HasPrefix(b, "$ ") {
			continue
		}
		lines := strings.Split(strings.TrimSuffix(b, "\n"), "\n")
		for i := 0; i < len(lines); i++ {
			if !strings.HasPrefix(lines[i], "$ ") {
				out[len(out)-1].output = append(out[len(out)-1].output, lines[i])
				continue
			}
			cmd := strings.TrimPrefix(lines[i], "$ ")
			for strings.HasSuffix(cmd, "\\") && i+1 < len(lines) {
				i++
				cmd += "\n" + lines[i]
			}
			out = append(out, docCommand{cmd: cmd})
		}
	}
	return out
}

// catRe matches a transcript's `cat file`, which shows a file later
// commands read.
var catRe = regexp.MustCompile(`^cat ([\w.-]+)$`)

var (
	docTimeRe   = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z`)
	docNumberRe = regexp.MustCompile(`\d+`)
)

// normalizeLine is a line with its task ids, times and numbers replaced
// and its runs of blanks (table alignment) made one space.
func normalizeLine(s string) string {
	s = taskIDRe.ReplaceAllString(s, "ID")
	s = docTimeRe.ReplaceAllString(s, "TIME")
	s = docNumberRe.ReplaceAllString(s, "N")
	return strings.Join(strings.Fields(s), " ")
}

// errorHead is the part of an error line that does not depend on the
// data: "dtq: CODE" of an API error, else up to the second ": ".
func errorHead(s string) string {
	parts := strings.SplitN(s, ": ", 3)
	if len(parts) < 3 {
		return normalizeLine(s)
	}
	return normalizeLine(parts[0] + ": " + parts[1])
}

// dtqPath returns a PATH whose first directory holds `dtq`: this test
// binary, which TestMain runs as the dtq command when called by that name.
func dtqPath(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, os.Symlink(self, filepath.Join(dir, "dtq")))
	return dir + string(os.PathListSeparator) + os.Getenv("PATH")
}

// runShell runs script with bash in env, bounded, and returns its combined
// output and exit code.
func runShell(t *testing.T, dir string, env []string, script string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script)
	cmd.Env, cmd.Dir = env, dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	require.NoError(t, ctx.Err(), "%s: did not end within 90s:\n%s", script, out.String())
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return out.String(), code
}

func readDoc(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "..", name))
	require.NoError(t, err)
	return string(b)
}

// docSeed is a task a transcript names by an example id: the test submits
// one like it and runs the commands with its id.
type docSeed struct {
	docID, body string
	status      string // waited for before the commands run
}

// cliDocSeeds are the tasks of docs/cli.md's examples that no command of
// the page submits.
var cliDocSeeds = []docSeed{
	{"01a22abc8f597000af03a7373a890002", `{"task_type": "flaky", "payload": {"fail_times": 2}}`, ""},
	{"01a22abc7bb27000b2244e59161c0002", `{"task_type": "sleep", "payload": {"seconds": 1}, "delay_ms": 3600000}`, "pending"},
	{"01a22abc7bb27000b2244e59161c0003", `{"task_type": "sleep", "payload": {"seconds": 1}, "delay_ms": 3600000}`, "pending"},
	{"01a22ac0c2a67000a1c9f1e7f1d20001", `{"task_type": "sleep", "payload": {"seconds": 25}}`, "running"},
	{"01a22abc9bec70009a60c40cc31c0002", `{"task_type": "always_fail", "payload": {}, "max_attempts": 2}`, "dead_lettered"},
}

// TestCLIDocs runs docs/cli.md's and docs/schedules.md's shell blocks and
// transcripts, in order, against one `dtq dev` whose worker serves the
// queues the pages use.
func TestCLIDocs(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"bash", "jq"} {
		_, err := exec.LookPath(tool)
		require.NoError(t, err, "docs/cli.md's blocks need %s (.ci/run installs it)", tool)
	}
	r := startCmd(t, map[string]string{"DTQ_QUEUES": "default,emails"}, "dev", "--redis=server", "--api-addr=127.0.0.1:0",
		"--data-dir="+filepath.Join(t.TempDir(), ".dtq"), "--drain-timeout-s=1", "--retry-base-delay=100ms")
	r.waitHealthy(t)
	ids := map[string]string{} // example id -> the id of the task standing for it
	for _, s := range cliDocSeeds {
		status, _, created := r.do(t, http.MethodPost, "/api/v1/tasks", nil, s.body)
		require.Equal(t, http.StatusAccepted, status, "%v", created)
		ids[s.docID] = created["task_id"].(string)
	}
	for _, s := range cliDocSeeds {
		if s.status != "" {
			require.Eventually(t, func() bool {
				_, _, got := r.do(t, http.MethodGet, "/api/v1/tasks/"+ids[s.docID], nil, "")
				return got["status"] == s.status
			}, 30*time.Second, 20*time.Millisecond, "seed %s never became %s", s.docID, s.status)
		}
	}
	path := dtqPath(t)
	workDir := t.TempDir() // where the commands run
	env := func(apiURL string) []string {
		return append(os.Environ(), "PATH="+path, "DTQ_API_URL="+apiURL, "NO_PROXY=127.0.0.1", "no_proxy=127.0.0.1",
			"id="+ids["01a22abc8f597000af03a7373a890002"]) // `dtq tasks watch "$id"`
	}
	subst := func(s string) string {
		for doc, real := range ids {
			s = strings.ReplaceAll(s, doc, real)
		}
		return s
	}

	ran, skipped := 0, 0
	for _, page := range []string{"docs/cli.md", "docs/schedules.md"} {
		md := readDoc(t, page)
		for _, block := range docBlocks(md, "sh") {
			first, _, _ := strings.Cut(block, "\n")
			if reason, ok := docBlocksNotRun[first]; ok {
				t.Logf("%s: not run: %q: %s", page, first, reason)
				skipped++
				continue
			}
			out, code := runShell(t, workDir, env(r.base), "set -euo pipefail\n"+block)
			require.Equal(t, 0, code, "%s: the block\n%s\nfailed:\n%s", page, block, out)
			ran++
		}
		for _, c := range transcripts(md) {
			if reason, ok := docCommandsNotRun[c.cmd]; ok {
				t.Logf("%s: not run: %q: %s", page, c.cmd, reason)
				skipped++
				continue
			}
			want := ""
			if len(c.output) > 0 {
				want = subst(c.output[0])
			}
			apiURL := r.base
			if strings.Contains(want, "cannot reach the dtq API at http://127.0.0.1:8080 ") {
				apiURL = "http://127.0.0.1:1" // the example of no server running
				want = strings.ReplaceAll(want, "http://127.0.0.1:8080", apiURL)
			}
			if strings.HasPrefix(want, "duplicate (replayed): ") {
				// The replay is of a finished task: wait for it to finish.
				id := taskIDRe.FindString(want)
				require.NotEmpty(t, id)
				_, _, got := r.do(t, http.MethodGet, "/api/v1/tasks/"+id+"?wait=30s", nil, "")
				require.Equal(t, "succeeded", got["status"], "%v", got)
			}
			if m := catRe.FindStringSubmatch(c.cmd); m != nil {
				// `$ cat file` shows a file the next commands read: write it.
				require.True(t, filepath.IsLocal(m[1]), c.cmd)
				require.NoError(t, os.WriteFile(filepath.Join(workDir, m[1]), []byte(strings.Join(c.output, "\n")+"\n"), 0o600))
			}
			out, code := runShell(t, workDir, env(apiURL), subst(c.cmd))
			ran++
			got, _, _ := strings.Cut(out, "\n")
			switch {
			case strings.HasPrefix(want, "dtq: "):
				require.NotEqual(t, 0, code, "%s: $ %s should fail as shown (%s); it printed:\n%s", page, c.cmd, want, out)
				require.Equal(t, errorHead(want), errorHead(got), "%s: $ %s printed:\n%s", page, c.cmd, out)
			case strings.HasPrefix(c.cmd, "dtq tasks watch "):
				// Which statuses get a line depends on when each is seen;
				// the watch must follow the task to its end.
				require.Equal(t, 0, code, "%s: $ %s printed:\n%s", page, c.cmd, out)
				if want != "" {
					require.Regexp(t, `  succeeded +attempt 3/5 `, out, "%s: $ %s", page, c.cmd)
				}
			default:
				require.Equal(t, 0, code, "%s: $ %s failed:\n%s", page, c.cmd, out)
				if want == "" {
					continue
				}
				ok := normalizeLine(got) == normalizeLine(want) ||
					slices.Contains(docRaces[normalizeLine(want)], normalizeLine(got))
				require.True(t, ok, "%s: $ %s\nshows:   %s\nprinted: %s", page, c.cmd, want, out)
			}
			// Ids the output shows (a submission's) stand for the example's.
			wantIDs, gotIDs := taskIDRe.FindAllString(want, -1), taskIDRe.FindAllString(got, -1)
			if len(wantIDs) == len(gotIDs) {
				for i, doc := range wantIDs {
					if _, ok := ids[doc]; !ok {
						ids[doc] = gotIDs[i]
					}
				}
			}
		}
	}
	t.Logf("docs/cli.md and docs/schedules.md: %d blocks and commands run, %d not run (listed above)", ran, skipped)
	require.Equal(t, 0, r.stop(t), "stderr:\n%s", r.stderr)
}

// TestHTTPWorkersDoc runs docs/http-workers.md's walk-through as written
// against `dtq dev` with the page's keys, and checks the statuses its
// comments show, in order.
func TestHTTPWorkersDoc(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"bash", "curl", "grep", "cut"} {
		_, err := exec.LookPath(tool)
		require.NoError(t, err, "docs/http-workers.md's walk-through needs %s (.ci/run installs it)", tool)
	}
	md := readDoc(t, "docs/http-workers.md")
	blocks := docBlocks(md, "sh")
	require.Len(t, blocks, 2, "the keys and the walk-through")
	first, _, _ := strings.Cut(blocks[0], "\n")
	require.Contains(t, docBlocksNotRun, first)
	keys := regexp.MustCompile(`^DTQ_API_KEYS='([^']+)' `).FindStringSubmatch(blocks[0])
	require.NotNil(t, keys, blocks[0])

	r := startCmd(t, map[string]string{"DTQ_API_KEYS": keys[1]}, "dev", "--redis=server", "--api-addr=127.0.0.1:0",
		"--data-dir="+filepath.Join(t.TempDir(), ".dtq"), "--drain-timeout-s=1")
	walk := blocks[1]
	require.Contains(t, walk, "DTQ=http://127.0.0.1:8080\n")
	out, code := runShell(t, t.TempDir(), append(os.Environ(), "NO_PROXY=127.0.0.1", "no_proxy=127.0.0.1"),
		"set -euo pipefail\n"+strings.ReplaceAll(walk, "http://127.0.0.1:8080", r.base))
	require.Equal(t, 0, code, "the walk-through failed:\n%s", out)

	var shown []string
	for _, l := range strings.Split(walk, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "#") {
			shown = append(shown, regexp.MustCompile(`"(status|task_type|attempt|cancel_requested)":("[^"]*"|\d+|true|false)`).FindAllString(l, -1)...)
		}
	}
	require.Equal(t, []string{`"status":"queued"`, `"task_type":"resize"`, `"attempt":1`, `"cancel_requested":false`,
		`"status":"retrying"`, `"status":"succeeded"`}, shown, "the fields the test compares")
	rest := out
	for _, f := range shown {
		i := strings.Index(rest, f)
		require.GreaterOrEqual(t, i, 0, "the walk-through's output lacks %s (in order):\n%s", f, out)
		rest = rest[i+len(f):]
	}
	require.Equal(t, 0, r.stop(t), "stderr:\n%s", r.stderr)
}

// TestReadmeShellBlocks: every ```sh block of the README is run by
// TestReadmeWalkthrough or listed in docBlocksNotRun; and every listed
// block or command still exists in the docs.
func TestReadmeShellBlocks(t *testing.T) {
	t.Parallel()
	readme := readDoc(t, "README.md")
	walk := readmeSteps(t, readme, "Submitting a task")
	for _, b := range docBlocks(readme, "sh") {
		first, _, _ := strings.Cut(b, "\n")
		_, listed := docBlocksNotRun[first]
		inWalk := slices.ContainsFunc(walk, func(s readmeStep) bool { return s.script == b })
		require.True(t, listed || inWalk, "README block %q is neither run nor listed as not run", first)
	}
	all := ""
	for _, page := range []string{"README.md", "docs/cli.md", "docs/schedules.md", "docs/http-workers.md"} {
		all += readDoc(t, page)
	}
	for first := range docBlocksNotRun {
		require.Contains(t, all, "```sh\n"+first+"\n", "a block listed as not run is gone from the docs")
	}
	for cmd := range docCommandsNotRun {
		require.Contains(t, all, "\n$ "+cmd+"\n", "a command listed as not run is gone from the docs")
	}
}

func TestTranscripts(t *testing.T) {
	t.Parallel()
	md := "```\n$ dtq a \\\n    --b\nout 1\nout 2\n$ dtq c\n```\n\n```\ndtq usage\n```\n"
	require.Equal(t, []docCommand{{cmd: "dtq a \\\n    --b", output: []string{"out 1", "out 2"}}, {cmd: "dtq c"}}, transcripts(md))
	require.Equal(t, "task ID at TIME: N of N", normalizeLine("task 01a22abc8f597000af03a7373a890002   at 2026-11-30T04:35:24.659Z: 2 of 3"))
	require.Equal(t, "dtq: TASK_NOT_FOUND", errorHead("dtq: TASK_NOT_FOUND: no task has this id"))
	require.Equal(t, "dtq: refusing to discard N", errorHead("dtq: refusing to discard 3"))
}
