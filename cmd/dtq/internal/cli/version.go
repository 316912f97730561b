package cli

import (
	"fmt"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/dtq-io/dtq/internal/buildinfo"
)

// versionString is dtq's version; see internal/buildinfo for where it
// comes from.
func versionString() string { return buildinfo.Version() }

func newVersionCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of dtq, the commit it was built from and the Go release",
		Args:  cobra.NoArgs,
		RunE: runE(func(*cobra.Command, []string) error {
			_, err := fmt.Fprintf(e.stdout, "dtq %s (revision %s, %s, %s/%s)\n",
				buildinfo.Version(), buildinfo.Revision(), buildinfo.GoVersion(), runtime.GOOS, runtime.GOARCH)
			return err
		}),
	}
}
