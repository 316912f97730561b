package buildinfo

import (
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestModuleVersion(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		bi   debug.BuildInfo
		want string
	}{
		{"main module, tagged", debug.BuildInfo{Main: debug.Module{Path: ModulePath, Version: "v0.3.0"}}, "v0.3.0"},
		{"main module, development", debug.BuildInfo{Main: debug.Module{Path: ModulePath, Version: "(devel)"}}, ""},
		{"the dtq command, tagged", debug.BuildInfo{Main: debug.Module{Path: ModulePath + "/cmd/dtq", Version: "v0.3.0"},
			Deps: []*debug.Module{{Path: ModulePath, Version: "v0.3.0"}}}, "v0.3.0"},
		{"dependency", debug.BuildInfo{Main: debug.Module{Path: "example.com/app"},
			Deps: []*debug.Module{{Path: "github.com/x/y", Version: "v1.0.0"}, {Path: ModulePath, Version: "v0.2.1"}}}, "v0.2.1"},
		{"replaced dependency", debug.BuildInfo{Main: debug.Module{Path: "example.com/app"},
			Deps: []*debug.Module{{Path: ModulePath, Version: "v0.2.1", Replace: &debug.Module{Path: "../dtq"}}}}, ""},
		{"not a dependency", debug.BuildInfo{Main: debug.Module{Path: "example.com/app"}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, moduleVersion(&tt.bi))
		})
	}
}

func TestVCSRevision(t *testing.T) {
	t.Parallel()
	const rev = "0123456789abcdef0123456789abcdef01234567"
	tests := []struct {
		name string
		bi   debug.BuildInfo
		want string
	}{
		{"clean", debug.BuildInfo{Main: debug.Module{Path: ModulePath},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: "false"}}}, "0123456789ab"},
		{"modified", debug.BuildInfo{Main: debug.Module{Path: ModulePath},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: "true"}}}, "0123456789ab-dirty"},
		{"none recorded", debug.BuildInfo{Main: debug.Module{Path: ModulePath}}, ""},
		{"the dtq command", debug.BuildInfo{Main: debug.Module{Path: ModulePath + "/cmd/dtq"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: rev}}}, "0123456789ab"},
		{"another main module", debug.BuildInfo{Main: debug.Module{Path: "example.com/app"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: rev}}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, vcsRevision(&tt.bi))
		})
	}
}

func TestFallbacks(t *testing.T) {
	t.Parallel()
	// A test binary carries no stamp and no module version.
	require.NotEmpty(t, Version())
	require.NotEmpty(t, Revision())
	require.Regexp(t, `^go1\.`, GoVersion())
}
