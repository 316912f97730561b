package redistest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// compat.sh (make test-compat) checks every server it is given before any
// test runs and fails loudly, naming the binary, when one is missing, not
// executable, or has no cli beside it.
func TestCompatScriptRefusesBadServers(t *testing.T) {
	t.Parallel()
	bash, err := exec.LookPath("bash")
	require.NoError(t, err, "compat.sh needs bash")
	dir := t.TempDir()
	write := func(name string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte("#!/bin/sh\necho \"fake server v=0.0.1\"\n"), mode))
		return p
	}
	good := write("good-server", 0o755)
	write("good-cli", 0o755)
	lonely := write("lonely-server", 0o755)
	noExec := write("noexec-server", 0o644)
	write("noexec-cli", 0o755)
	odd := write("keydb", 0o755)

	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{name: "no servers", want: "test-compat: no servers given"},
		{name: "not name=path", args: []string{good}, want: "want name=/path/to/server"},
		{name: "missing", args: []string{"gone=" + filepath.Join(dir, "gone-server")}, want: "test-compat: gone: server binary " + filepath.Join(dir, "gone-server") + " is missing"},
		{name: "not executable", args: []string{"x=" + noExec}, want: noExec + " is not an executable file"},
		{name: "no cli", args: []string{"lonely=" + lonely}, want: "cli " + filepath.Join(dir, "lonely-cli") + " (beside the server) is missing"},
		{name: "odd name", args: []string{"odd=" + odd}, want: "must end in -server"},
		// The good server is checked, then the missing one stops the run
		// before any suite starts.
		{name: "one of two missing", args: []string{"good=" + good, "gone=" + filepath.Join(dir, "gone-server")}, want: "gone: server binary"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cmd := exec.CommandContext(context.Background(), bash, append([]string{"compat.sh"}, tt.args...)...)
			cmd.Env = append(os.Environ(), "GO=false") // a suite that started would fail, not run
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			require.ErrorAs(t, err, &exit, "compat.sh %v: %s", tt.args, out)
			require.Equal(t, 2, exit.ExitCode(), "%s", out)
			require.Contains(t, string(out), "test-compat: ")
			require.Contains(t, string(out), tt.want)
			require.NotContains(t, string(out), "== ", "a suite started")
		})
	}
}
