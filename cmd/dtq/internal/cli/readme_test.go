package cli

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// readmeStep is one command block of the README's walk-through and the
// answer block that follows it.
type readmeStep struct {
	script string // the sh block, as written
	answer string // the http block after it ("" when none)
}

// readmeSteps returns the walk-through of section "## "+section: every
// ```sh block with the ```http block that follows it, in order.
func readmeSteps(t *testing.T, readme, section string) []readmeStep {
	t.Helper()
	start := strings.Index(readme, "\n## "+section+"\n")
	require.NotEqual(t, -1, start, "README has no section %q", section)
	body := readme[start+1:]
	if end := strings.Index(body[3:], "\n## "); end >= 0 {
		body = body[:end+3]
	}
	var steps []readmeStep
	blocks := regexp.MustCompile("(?ms)^```(sh|http)\n(.*?)^```\n").FindAllStringSubmatch(body, -1) //nolint:gocritic // under (?m) the second ^ anchors the closing fence at a line start
	for _, b := range blocks {
		switch b[1] {
		case "sh":
			steps = append(steps, readmeStep{script: b[2]})
		case "http":
			require.NotEmpty(t, steps, "an http block before any sh block")
			steps[len(steps)-1].answer = b[2]
		}
	}
	return steps
}

var (
	taskIDRe     = regexp.MustCompile(`[0-9a-f]{32}`)
	statusLineRe = regexp.MustCompile(`(?m)^HTTP/1\.1 (\d{3}) .*$`)
	// answerFieldRe picks the fields of an answer block the test compares
	// with the real answer; the rest of the block is illustration.
	answerFieldRe = regexp.MustCompile(`"(code|status|duplicate|queue|task_type|idempotency_key|outcome)":("[^"]*"|true|false)`)
)

// checkAnswer compares what a step printed with the README's answer: the
// status line, every header shown (a task id stands for any id), and the
// fields answerFieldRe picks.
func checkAnswer(t *testing.T, i int, want, got string) {
	t.Helper()
	wantStatus := statusLineRe.FindStringSubmatch(want)
	require.NotNil(t, wantStatus, "step %d: the README's answer has no status line", i)
	gotStatus := statusLineRe.FindStringSubmatch(got)
	require.NotNil(t, gotStatus, "step %d printed no status line:\n%s", i, got)
	require.Equal(t, wantStatus[1], gotStatus[1], "step %d answered:\n%s", i, got)

	head, wantBody, _ := strings.Cut(want, "\n\n")
	for _, h := range strings.Split(head, "\n")[1:] {
		name, value, ok := strings.Cut(h, ": ")
		require.True(t, ok, "step %d: README header %q", i, h)
		pattern := "(?mi)^" + regexp.QuoteMeta(name) + ": " +
			strings.ReplaceAll(regexp.QuoteMeta(taskIDRe.ReplaceAllString(value, "ID")), "ID", "[0-9a-f]{32}") + "\r?$"
		require.Regexp(t, pattern, got, "step %d: header %q", i, h)
	}
	for _, f := range answerFieldRe.FindAllString(wantBody, -1) {
		require.Contains(t, got, f, "step %d: the answer lacks %s", i, f)
	}
}

// TestReadmeWalkthrough runs the README's curl walk-through as written
// against `dtq dev` (only the API's address is changed) and checks each
// answer against the one the README shows.
func TestReadmeWalkthrough(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"bash", "curl", "grep", "cut"} {
		_, err := exec.LookPath(tool)
		require.NoError(t, err, "the README's walk-through needs %s (.ci/run installs it)", tool)
	}
	readme, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "README.md"))
	require.NoError(t, err)
	steps := readmeSteps(t, string(readme), "Submitting a task")
	require.Len(t, steps, 5, "submit, in flight, wait, replay, mismatch")

	r := startCmd(t, nil, "dev", "--redis=server", "--api-addr=127.0.0.1:0",
		"--data-dir="+filepath.Join(t.TempDir(), ".dtq"), "--drain-timeout-s=1")
	r.waitHealthy(t)

	// One shell runs every step, so that variables carry over as they do
	// in a terminal; a marker line separates the steps' output.
	const marker = "@@readme-step"
	var script strings.Builder
	script.WriteString("set -eu\n")
	for i, s := range steps {
		require.Contains(t, s.script, "http://127.0.0.1:8080/", "step %d talks to make dev's API", i)
		fmt.Fprintf(&script, "echo %s %d\n%s", marker, i, strings.ReplaceAll(s.script, "http://127.0.0.1:8080", r.base))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script.String())
	cmd.Env = append(os.Environ(), "NO_PROXY=127.0.0.1", "no_proxy=127.0.0.1")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "the walk-through failed:\n%s", out)

	parts := strings.Split(string(out), marker+" ")
	require.Len(t, parts, len(steps)+1, "output:\n%s", out)
	for i, s := range steps {
		got := strings.TrimPrefix(parts[i+1], fmt.Sprint(i)+"\n")
		require.NotEmpty(t, s.answer, "step %d has no answer block in the README", i)
		checkAnswer(t, i, s.answer, got)
	}
}

func TestReadmeSteps(t *testing.T) {
	t.Parallel()
	md := "# x\n\n## A\n\n```sh\necho 1\n```\n\n```http\nHTTP/1.1 200 OK\n```\n\n```go\nx\n```\n\n```sh\necho 2\n```\n\n## B\n\n```sh\necho 3\n```\n"
	require.Equal(t, []readmeStep{{script: "echo 1\n", answer: "HTTP/1.1 200 OK\n"}, {script: "echo 2\n"}}, readmeSteps(t, md, "A"))
	require.Equal(t, []readmeStep{{script: "echo 3\n"}}, readmeSteps(t, md, "B"))
}

// TestExamplePayloadsDocumented checks that every example task type is
// listed with its payload in `dtq worker --help` and in the README.
func TestExamplePayloadsDocumented(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "README.md"))
	require.NoError(t, err)
	code, help, _ := runCmd(t, nil, "worker", "--help")
	require.Equal(t, 0, code)
	for _, typ := range exampleTaskTypes {
		require.Regexp(t, `(?m)^  `+typ+` +\S`, help, "dtq worker --help lists %s", typ)
		require.Regexp(t, "(?m)^\\| `"+typ+"` \\| \\S", string(readme), "the README's table lists %s", typ)
	}
}
