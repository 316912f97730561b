package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
)

// buildinfoPkg is the package whose variables -ldflags -X stamps, as the
// Makefile's LDFLAGS and the Dockerfile do.
const buildinfoPkg = "github.com/dtq-io/dtq/internal/buildinfo"

// sumsFile is the name of the checksum file, in sha256sum's format.
const sumsFile = "SHA256SUMS"

// platform is a Go OS/architecture pair.
type platform struct {
	os, arch string
}

func (p platform) String() string { return p.os + "/" + p.arch }

// defaultPlatforms are the binaries a release ships; the linux ones make up
// the image.
var defaultPlatforms = []platform{
	{"linux", "amd64"}, {"linux", "arm64"},
	{"darwin", "amd64"}, {"darwin", "arm64"},
}

func platformNames(ps []platform) []string {
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = p.String()
	}
	return names
}

// config is what one release is built from.
type config struct {
	version   string // v0.1.0
	revision  string // the commit, as the Makefile's REVISION
	created   time.Time
	out       string // the output directory
	cmdDir    string // cmd/dtq, the command's module
	certs     string // CA bundle for the image
	name      string // repository name of the docker load tag
	source    string // the org.opencontainers.image.source label
	goCmd     string
	platforms []platform
}

// semver is a release version: v, MAJOR.MINOR.PATCH, an optional
// pre-release suffix (v0.2.0-rc.1). Build metadata (+...) is left out: it
// cannot appear in an image tag.
var semver = regexp.MustCompile(`^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?$`)

// revisionPattern is a commit name: hex digits.
var revisionPattern = regexp.MustCompile(`^[0-9a-f]{7,40}$`)

// validate checks cfg before anything is built, so that a typo costs no
// build time.
func (cfg config) validate() error {
	if !semver.MatchString(cfg.version) {
		return fmt.Errorf("version %q is not a release version: want v0.MINOR.PATCH, such as make release VERSION=v0.1.0", cfg.version)
	}
	if strings.HasSuffix(cfg.version, "-dirty") {
		return fmt.Errorf("version %q is of a modified checkout: build a release from a clean one", cfg.version)
	}
	if !revisionPattern.MatchString(cfg.revision) {
		return fmt.Errorf("revision %q is not a commit hash: want hex digits, such as git rev-parse --short=12 HEAD prints", cfg.revision)
	}
	if cfg.out == "" || cfg.cmdDir == "" || cfg.certs == "" || cfg.name == "" || cfg.goCmd == "" {
		return errors.New("-out, -cmd, -certs, -name and -go must not be empty")
	}
	if len(cfg.platforms) == 0 {
		return errors.New("no platform to build for")
	}
	return nil
}

// artifactPrefix starts every file name of the release: dtq_v0.1.0.
func (cfg config) artifactPrefix() string { return "dtq_" + cfg.version }

// binaryName is the file name of the binary for p: dtq_v0.1.0_linux_amd64.
func (cfg config) binaryName(p platform) string {
	return cfg.artifactPrefix() + "_" + p.os + "_" + p.arch
}

// run builds the release into cfg.out and returns the paths it wrote (the
// binaries, the image tarballs, the layout directory and SHA256SUMS).
func run(ctx context.Context, cfg config) ([]string, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	certs, err := loadCerts(cfg.certs)
	if err != nil {
		return nil, err
	}
	if err := prepareOut(cfg.out); err != nil {
		return nil, err
	}

	var files, written []string
	binaries := map[platform]string{}
	for _, p := range cfg.platforms {
		path := filepath.Join(cfg.out, cfg.binaryName(p))
		if err := buildBinary(ctx, cfg, p, path); err != nil {
			return nil, err
		}
		binaries[p] = path
		files = append(files, path)
	}

	var linux []platform
	for _, p := range cfg.platforms {
		if p.os == "linux" {
			linux = append(linux, p)
		}
	}
	if len(linux) > 0 {
		imageFiles, err := writeImages(cfg, linux, binaries, certs)
		if err != nil {
			return nil, err
		}
		files = append(files, imageFiles.tarballs...)
		written = append(written, imageFiles.layout)
	}

	sums := filepath.Join(cfg.out, sumsFile)
	if err := writeSums(sums, files); err != nil {
		return nil, err
	}
	written = append(append(files, written...), sums)
	return written, nil
}

// prepareOut creates dir, which must be absent or empty: files of an
// earlier release must not end up beside (or in the sums of) this one.
func prepareOut(dir string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return os.MkdirAll(dir, 0o755) //nolint:gosec // release files are public: others may read them
	case err != nil:
		return err
	case len(entries) > 0:
		return fmt.Errorf("output directory %s is not empty: remove it first (make release does)", dir)
	}
	return nil
}

// ldflags stamps the version and revision (see internal/buildinfo) and
// drops the symbol table and DWARF data, as the Dockerfile does: the
// binary shrinks by a third and dtq version still reads the stamps.
func ldflags(cfg config) string {
	return "-s -w -X " + buildinfoPkg + ".version=" + cfg.version +
		" -X " + buildinfoPkg + ".revision=" + cfg.revision
}

// buildBinary builds the dtq command for p into dst: static (no cgo),
// without local paths (-trimpath), for the baseline of each architecture
// whatever the machine's GOAMD64 or GOARM64 says.
func buildBinary(ctx context.Context, cfg config, p platform, dst string) error {
	abs, err := filepath.Abs(dst)
	if err != nil {
		return err
	}
	//nolint:gosec // runs the go command the caller names, as make does
	cmd := exec.CommandContext(ctx, cfg.goCmd, "build", "-trimpath", "-ldflags", ldflags(cfg), "-o", abs, ".")
	cmd.Dir = cfg.cmdDir
	cmd.Env = append(os.Environ(),
		"CGO_ENABLED=0", "GOOS="+p.os, "GOARCH="+p.arch, "GOAMD64=v1", "GOARM64=v8.0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build for %s in %s: %w\n%s", p, cfg.cmdDir, err, out)
	}
	return nil
}

// writeSums writes path in sha256sum's format ("HEX  NAME" per line, sorted
// by name), over files named by their base name: `sha256sum -c SHA256SUMS`
// in the release directory checks them.
func writeSums(path string, files []string) error {
	names := make([]string, 0, len(files))
	byName := map[string]string{}
	for _, f := range files {
		name := filepath.Base(f)
		if _, dup := byName[name]; dup {
			return fmt.Errorf("two files named %s", name)
		}
		byName[name] = f
		names = append(names, name)
	}
	slices.Sort(names)
	var b strings.Builder
	for _, name := range names {
		sum, err := fileSHA256(byName[name])
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s  %s\n", sum, name)
	}
	return os.WriteFile(path, []byte(b.String()), 0o644) //nolint:gosec // published beside the files it covers
}

// fileSHA256 returns the hex SHA-256 of a file's content.
func fileSHA256(path string) (string, error) {
	f, err := os.Open(path) //nolint:gosec // a file this program wrote
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, bufio.NewReader(f)); err != nil {
		return "", fmt.Errorf("reading %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
