package dtq_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestOptionalDependenciesStayOptional: a program that imports only the
// dtq package links no Prometheus, protobuf or OpenTelemetry (metrics come
// through dtqprom, tracing through dtqotel), and the dtq binary, which
// wires in dtqprom, links no OpenTelemetry.
func TestOptionalDependenciesStayOptional(t *testing.T) {
	t.Parallel()
	goCmd, err := exec.LookPath("go")
	require.NoError(t, err, "the go command must be on PATH to list dependencies")
	for _, tc := range []struct {
		dir    string // the module's directory
		pkg    string
		banned []string
	}{
		{".", "github.com/dtq-io/dtq", []string{"prometheus", "protobuf", "go.opentelemetry.io/"}},
		{"cmd/dtq", "github.com/dtq-io/dtq/cmd/dtq", []string{"go.opentelemetry.io/"}},
	} {
		cmd := exec.Command(goCmd, "list", "-deps", tc.pkg)
		cmd.Dir = tc.dir
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, string(out))
		deps := strings.Fields(string(out))
		require.Contains(t, deps, tc.pkg)
		for _, d := range deps {
			for _, b := range tc.banned {
				require.NotContains(t, d, b, "%s depends on %s", tc.pkg, d)
			}
		}
	}
}

// TestLibraryModuleLean: `go get github.com/dtq-io/dtq` brings none of the
// dtq command's dependencies (cmd/dtq/go.mod requires them) nor Prometheus
// or OpenTelemetry (dtqprom's and dtqotel's modules do). The root module's
// test-only requirements stay: testify and goleak, with the YAML packages
// they require.
func TestLibraryModuleLean(t *testing.T) {
	t.Parallel()
	goCmd, err := exec.LookPath("go")
	require.NoError(t, err, "the go command must be on PATH to list modules")
	out, err := exec.Command(goCmd, "list", "-m", "all").CombinedOutput()
	require.NoError(t, err, string(out))
	for _, m := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		for _, b := range []string{"spf13/cobra", "spf13/pflag", "chromedp", "go.opentelemetry.io/", "prometheus",
			"coder/websocket", "miniredis", "porcupine"} {
			require.NotContains(t, m, b, "the root module requires %s", m)
		}
	}
}
