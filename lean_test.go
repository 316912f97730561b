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
	for pkg, banned := range map[string][]string{
		"github.com/dtq-io/dtq":         {"prometheus", "protobuf", "go.opentelemetry.io/"},
		"github.com/dtq-io/dtq/cmd/dtq": {"go.opentelemetry.io/"},
	} {
		out, err := exec.Command(goCmd, "list", "-deps", pkg).CombinedOutput()
		require.NoError(t, err, string(out))
		deps := strings.Fields(string(out))
		require.Contains(t, deps, pkg)
		for _, d := range deps {
			for _, b := range banned {
				require.NotContains(t, d, b, "%s depends on %s", pkg, d)
			}
		}
	}
}
