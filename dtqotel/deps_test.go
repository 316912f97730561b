package dtqotel_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A program that imports only the root package, and the dtq binary, must
// not link OpenTelemetry: tracing is opt-in through this package.
func TestOnlyDtqotelLinksOpenTelemetry(t *testing.T) {
	t.Parallel()
	goCmd, err := exec.LookPath("go")
	require.NoError(t, err, "the go command must be on PATH to list dependencies")
	for _, pkg := range []string{"github.com/dtq-io/dtq", "github.com/dtq-io/dtq/cmd/dtq"} {
		out, err := exec.Command(goCmd, "list", "-deps", pkg).CombinedOutput()
		require.NoError(t, err, string(out))
		deps := strings.Fields(string(out))
		require.Contains(t, deps, pkg)
		for _, d := range deps {
			require.False(t, strings.HasPrefix(d, "go.opentelemetry.io/"), "%s depends on %s", pkg, d)
		}
	}
}
