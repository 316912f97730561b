package cli

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq/internal/redistest"
)

// TestPythonClient runs the Python client's tests (clients/python) against
// a live `dtq api` on a private Redis (test_dtq), and against hostile local
// servers (test_hostile). python3 is required: .ci/run installs it, and
// without it this test fails rather than skip. Among them a 2-node workflow
// runs over HTTP (test_two_node_workflow).
func TestPythonClient(t *testing.T) {
	t.Parallel()
	py, err := exec.LookPath("python3")
	require.NoError(t, err, "python3 is needed to test clients/python (apt-get install python3; .ci/run installs it)")
	srv := redistest.Shared(t)
	r := startCmd(t, map[string]string{
		"DTQ_REDIS_URL":            srv.URL(),
		"DTQ_KEY_PREFIX":           redistest.New(t).Prefix,
		"DTQ_HEARTBEAT_INTERVAL_S": "1",
		"DTQ_API_KEYS":             "worker:py:w-secret,producer:feed:p-secret,admin:ops:a-secret",
	}, "api", "--api-addr=127.0.0.1:0")

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir, err := filepath.Abs(filepath.Join("..", "..", "..", "..", "clients", "python"))
	require.NoError(t, err)
	cmd := exec.CommandContext(ctx, py, "-m", "unittest", "-v", "test_dtq", "test_hostile")
	cmd.Dir = dir
	cmd.Env = append(cmd.Environ(), "DTQ_URL="+r.base, "DTQ_WORKER_TOKEN=w-secret", "DTQ_PRODUCER_TOKEN=p-secret",
		"DTQ_ADMIN_TOKEN=a-secret", "PYTHONDONTWRITEBYTECODE=1", "PYTHONUNBUFFERED=1")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	t.Logf("python3 -m unittest:\n%s", out.String())
	require.NoError(t, err, "the Python client's tests failed")
	require.Contains(t, out.String(), "\nOK")
	require.NotContains(t, out.String(), "skipped", "no Python test may be skipped")
	// A 2-node workflow ran over HTTP, its second node reading the first's result.
	require.Regexp(t, `test_two_node_workflow \(.*\) \.\.\. ok`, out.String())
	// A claim holding a task the client cannot decode costs only that task.
	require.Regexp(t, `test_one_undecodable_task_does_not_cost_its_claim \(.*\) \.\.\. ok`, out.String())
}
