package dtqprom_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRootPackageLinksNoPrometheus: a program that imports only the dtq
// package links no Prometheus and no protobuf; metrics are opt-in through
// this package (the dtq binary wires it in).
func TestRootPackageLinksNoPrometheus(t *testing.T) {
	t.Parallel()
	goCmd, err := exec.LookPath("go")
	require.NoError(t, err, "the go command must be on PATH to list dependencies")
	out, err := exec.Command(goCmd, "list", "-deps", "github.com/dtq-io/dtq").CombinedOutput()
	require.NoError(t, err, string(out))
	deps := strings.Fields(string(out))
	require.Contains(t, deps, "github.com/dtq-io/dtq")
	for _, d := range deps {
		require.False(t, strings.Contains(d, "prometheus") || strings.Contains(d, "protobuf"), "the dtq package depends on %s", d)
	}
}
