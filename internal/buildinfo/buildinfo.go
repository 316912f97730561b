// Package buildinfo says which build of dtq is running. The Makefile and the
// Dockerfile stamp the version and the revision with
//
//	-ldflags "-X github.com/dtq-io/dtq/internal/buildinfo.version=v0.3.0
//	          -X github.com/dtq-io/dtq/internal/buildinfo.revision=0123456789ab"
//
// A build without them falls back to what the Go toolchain recorded: the
// module version (go install …@v0.3.0, or dtq as a dependency of your
// binary) and the VCS revision (go build in a git checkout).
package buildinfo

import (
	"runtime"
	"runtime/debug"
)

// ModulePath is dtq's module path.
const ModulePath = "github.com/dtq-io/dtq"

// commandModulePath is the module of the dtq command (cmd/dtq), the main
// module of the dtq binary.
const commandModulePath = ModulePath + "/cmd/dtq"

// isDTQ reports whether path is dtq's module or the dtq command's.
func isDTQ(path string) bool { return path == ModulePath || path == commandModulePath }

// Set with -ldflags -X; see the package comment.
var (
	version  = ""
	revision = ""
)

// revisionLen is how many hex digits of a commit hash are shown.
const revisionLen = 12

// Version returns dtq's version: the stamped one, else the module version
// the Go toolchain recorded, else "dev".
func Version() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v := moduleVersion(bi); v != "" {
			return v
		}
	}
	return "dev"
}

// Revision returns the commit dtq was built from: the stamped one, else the
// VCS revision the Go toolchain recorded (with "-dirty" for a modified
// checkout), else "unknown".
func Revision() string {
	if revision != "" {
		return revision
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if r := vcsRevision(bi); r != "" {
			return r
		}
	}
	return "unknown"
}

// GoVersion returns the Go release the binary was built with.
func GoVersion() string { return runtime.Version() }

// moduleVersion is dtq's version in bi: the main module's when dtq (or the
// dtq command) is the main module, else the dependency's; "" for a
// development build.
func moduleVersion(bi *debug.BuildInfo) string {
	m := &bi.Main
	if !isDTQ(m.Path) {
		m = nil
		for _, d := range bi.Deps {
			if d.Path == ModulePath {
				m = d
				if d.Replace != nil {
					m = d.Replace
				}
				break
			}
		}
	}
	if m == nil || m.Version == "" || m.Version == "(devel)" {
		return ""
	}
	return m.Version
}

// vcsRevision is the shortened vcs.revision of bi, "" when none was
// recorded or neither dtq nor the dtq command is the main module.
func vcsRevision(bi *debug.BuildInfo) string {
	if !isDTQ(bi.Main.Path) {
		return ""
	}
	var rev string
	var dirty bool
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return ""
	}
	if len(rev) > revisionLen {
		rev = rev[:revisionLen]
	}
	if dirty {
		rev += "-dirty"
	}
	return rev
}
