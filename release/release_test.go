package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/stretchr/testify/require"
)

const (
	testVersion  = "v0.9.1"
	testRevision = "0123456789ab"
)

var testCreated = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// testCerts writes a PEM bundle with one self-signed certificate and
// returns its path and content.
func testCerts(t *testing.T) (string, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "release test CA"},
		NotBefore:    testCreated,
		NotAfter:     testCreated.Add(time.Hour),
		IsCA:         true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	b := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	path := filepath.Join(t.TempDir(), "ca.crt")
	require.NoError(t, os.WriteFile(path, b, 0o644))
	return path, b
}

func testConfig(t *testing.T, platforms ...platform) config {
	t.Helper()
	certs, _ := testCerts(t)
	return config{
		version:   testVersion,
		revision:  testRevision,
		created:   testCreated,
		out:       filepath.Join(t.TempDir(), "dist"),
		cmdDir:    "../cmd/dtq",
		certs:     certs,
		name:      "dtq",
		source:    "https://github.com/dtq-io/dtq",
		goCmd:     "go",
		platforms: platforms,
	}
}

// TestRelease builds a release for this machine's architecture from the dtq
// command, as make release does, opens what it wrote as a registry client
// would and runs the image's binary.
func TestRelease(t *testing.T) {
	t.Parallel()
	host := platform{"linux", runtime.GOARCH}
	cfg := testConfig(t, host)
	certs, err := os.ReadFile(cfg.certs)
	require.NoError(t, err)

	// The tool runs as a program of its own, built without the race
	// detector this test may run under: compressing the 30 MB layer takes
	// seconds there and minutes under it.
	tool := filepath.Join(t.TempDir(), "release")
	out, err := exec.CommandContext(t.Context(), "go", "build", "-o", tool, ".").CombinedOutput()
	require.NoError(t, err, "building the release tool: %s", out)
	cmd := exec.CommandContext(t.Context(), tool, "-version", cfg.version, "-revision", cfg.revision,
		"-source-date-epoch", strconv.FormatInt(cfg.created.Unix(), 10), "-out", cfg.out,
		"-certs", cfg.certs, "-platforms", host.String())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	require.NoError(t, err, "make release's tool: %s", stderr.Bytes())
	binName := "dtq_v0.9.1_linux_" + runtime.GOARCH
	tarName := "dtq_v0.9.1_image_linux_" + runtime.GOARCH + ".tar"
	require.Equal(t, strings.Join([]string{
		filepath.Join(cfg.out, binName),
		filepath.Join(cfg.out, tarName),
		filepath.Join(cfg.out, "dtq_v0.9.1_oci"),
		filepath.Join(cfg.out, "SHA256SUMS"),
	}, "\n")+"\n", string(stdout), "the tool lists what it wrote")

	checkSums(t, cfg.out, []string{binName, tarName})

	// The layout: index.json names one index by the version, which holds
	// the image for the platform.
	lp, err := layout.FromPath(filepath.Join(cfg.out, "dtq_v0.9.1_oci"))
	require.NoError(t, err)
	top, err := lp.ImageIndex()
	require.NoError(t, err)
	topManifest, err := top.IndexManifest()
	require.NoError(t, err)
	require.Len(t, topManifest.Manifests, 1)
	require.Equal(t, types.OCIImageIndex, topManifest.Manifests[0].MediaType)
	require.Equal(t, testVersion, topManifest.Manifests[0].Annotations[annotationRefName])

	idx, err := top.ImageIndex(topManifest.Manifests[0].Digest)
	require.NoError(t, err)
	im, err := idx.IndexManifest()
	require.NoError(t, err)
	require.Len(t, im.Manifests, 1)
	require.Equal(t, &v1.Platform{OS: "linux", Architecture: runtime.GOARCH}, im.Manifests[0].Platform)
	require.Equal(t, testVersion, im.Annotations[labelVersion])
	require.Equal(t, testRevision, im.Annotations[labelRevision])

	img, err := idx.Image(im.Manifests[0].Digest)
	require.NoError(t, err)
	checkConfig(t, img, host)

	files2 := layerFiles(t, img)
	require.Equal(t, certs, files2[certsPath[1:]].body, "the CA bundle is the one named by -certs")
	bin := files2[binaryPath[1:]]
	require.Equal(t, int64(0o755), bin.mode)
	built, err := os.ReadFile(filepath.Join(cfg.out, binName))
	require.NoError(t, err)
	require.Equal(t, built, bin.body, "the image holds the released binary")

	// The binary runs and says which release it is.
	require.Equal(t, "linux", runtime.GOOS, "the image's binary is a linux one: run this test on linux")
	exe := filepath.Join(t.TempDir(), "dtq")
	require.NoError(t, os.WriteFile(exe, bin.body, 0o755))
	out, err = exec.CommandContext(t.Context(), exe, "version").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.True(t, strings.HasPrefix(string(out), "dtq v0.9.1 (revision 0123456789ab, go"), "dtq version printed %q", out)
	require.Contains(t, string(out), "linux/"+runtime.GOARCH)

	// The docker load tarball holds the same image, tagged dtq:VERSION.
	tag, err := name.NewTag("dtq:" + testVersion)
	require.NoError(t, err)
	fromTar, err := tarball.ImageFromPath(filepath.Join(cfg.out, tarName), &tag)
	require.NoError(t, err)
	wantConfig, err := img.ConfigName()
	require.NoError(t, err)
	gotConfig, err := fromTar.ConfigName()
	require.NoError(t, err)
	require.Equal(t, wantConfig, gotConfig)
	var manifest []struct{ RepoTags []string }
	require.NoError(t, json.Unmarshal(tarMember(t, filepath.Join(cfg.out, tarName), "manifest.json"), &manifest))
	require.Len(t, manifest, 1)
	require.Equal(t, []string{"dtq:v0.9.1"}, manifest[0].RepoTags)
}

// checkConfig checks the image's configuration for p.
func checkConfig(t *testing.T, img v1.Image, p platform) {
	t.Helper()
	mt, err := img.MediaType()
	require.NoError(t, err)
	require.Equal(t, types.OCIManifestSchema1, mt)
	cf, err := img.ConfigFile()
	require.NoError(t, err)
	require.Equal(t, p.os, cf.OS)
	require.Equal(t, p.arch, cf.Architecture)
	require.True(t, testCreated.Equal(cf.Created.Time), "created %v", cf.Created)
	c := cf.Config
	require.Equal(t, "65532:65532", c.User)
	require.Equal(t, []string{"/usr/local/bin/dtq"}, c.Entrypoint)
	require.Equal(t, []string{"api"}, c.Cmd)
	require.Contains(t, c.Env, "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt")
	require.Contains(t, c.Env, "DTQ_API_ADDR=0.0.0.0:8080")
	require.Contains(t, c.ExposedPorts, "8080/tcp")
	require.Equal(t, map[string]string{
		"org.opencontainers.image.title":    "dtq",
		"org.opencontainers.image.version":  testVersion,
		"org.opencontainers.image.revision": testRevision,
		"org.opencontainers.image.source":   "https://github.com/dtq-io/dtq",
		"org.opencontainers.image.licenses": "MIT",
		"org.opencontainers.image.created":  "2026-01-02T03:04:05Z",
	}, c.Labels)
	layers, err := img.Layers()
	require.NoError(t, err)
	require.Len(t, layers, 1, "one layer on an empty base")
}

// layerFile is a member of the image's layer.
type layerFile struct {
	dir      bool
	mode     int64
	uid, gid int
	modTime  time.Time
	body     []byte
}

// layerFiles reads the image's single layer.
func layerFiles(t *testing.T, img v1.Image) map[string]layerFile {
	t.Helper()
	layers, err := img.Layers()
	require.NoError(t, err)
	require.Len(t, layers, 1)
	rc, err := layers[0].Uncompressed()
	require.NoError(t, err)
	defer rc.Close()
	files := map[string]layerFile{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		body, err := io.ReadAll(tr)
		require.NoError(t, err)
		files[h.Name] = layerFile{dir: h.Typeflag == tar.TypeDir, mode: h.Mode, uid: h.Uid, gid: h.Gid, modTime: h.ModTime, body: body}
	}
	return files
}

// tarMember returns one member of a tar file.
func tarMember(t *testing.T, path, member string) []byte {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		require.NoError(t, err, "%s has no %s", path, member)
		if h.Name == member {
			b, err := io.ReadAll(tr)
			require.NoError(t, err)
			return b
		}
	}
}

// checkSums checks that SHA256SUMS in dir has one line per name of want,
// sorted, each with the file's SHA-256, and that these are all of dir's
// plain files besides itself.
func checkSums(t *testing.T, dir string, want []string) {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, sumsFile))
	require.NoError(t, err)
	defer f.Close()
	var names []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		require.True(t, ok, "line %q is not sha256sum's HEX  NAME", sc.Text())
		b, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		h := sha256.Sum256(b)
		require.Equal(t, hex.EncodeToString(h[:]), sum, "SHA-256 of %s", name)
		names = append(names, name)
	}
	require.NoError(t, sc.Err())
	require.True(t, slices.IsSorted(names), "sorted by name: %q", names)
	slices.Sort(want)
	require.Equal(t, want, names)

	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var plain []string
	for _, e := range entries {
		if e.Type().IsRegular() && e.Name() != sumsFile {
			plain = append(plain, e.Name())
		}
	}
	require.Equal(t, want, plain, "every file of the release is summed")
}

// TestImageIndexBothArchitectures builds the image for amd64 and arm64 from
// small stand-in binaries: the index names both platforms, each image's
// config says its own, the layer's files have the owners and modes a
// nonroot container needs, and the same inputs give the same digests.
func TestImageIndexBothArchitectures(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	_, certs := testCerts(t)
	platforms := []platform{{"linux", "amd64"}, {"linux", "arm64"}}
	build := func() v1.ImageIndex {
		images := make([]v1.Image, len(platforms))
		for i, p := range platforms {
			var err error
			images[i], err = buildImage(cfg, p, []byte("binary for "+p.String()), certs)
			require.NoError(t, err)
		}
		idx, err := buildIndex(cfg, platforms, images)
		require.NoError(t, err)
		return idx
	}
	idx := build()
	im, err := idx.IndexManifest()
	require.NoError(t, err)
	require.Equal(t, types.OCIImageIndex, im.MediaType)
	require.Len(t, im.Manifests, 2)
	for i, p := range platforms {
		t.Run(p.arch, func(t *testing.T) {
			t.Parallel()
			d := im.Manifests[i]
			require.Equal(t, &v1.Platform{OS: "linux", Architecture: p.arch}, d.Platform)
			img, err := idx.Image(d.Digest)
			require.NoError(t, err)
			checkConfig(t, img, p)
			files := layerFiles(t, img)
			for _, tc := range []struct {
				path     string
				dir      bool
				mode     int64
				uid, gid int
			}{
				{path: "usr/local/bin/dtq", mode: 0o755},
				{path: "etc/ssl/certs/ca-certificates.crt", mode: 0o644},
				{path: "etc/passwd", mode: 0o644},
				{path: "home/nonroot/", dir: true, mode: 0o700, uid: 65532, gid: 65532},
				{path: "tmp/", dir: true, mode: 0o1777},
			} {
				f, ok := files[tc.path]
				require.True(t, ok, "the layer has %s", tc.path)
				require.Equal(t, tc.dir, f.dir, tc.path)
				require.Equal(t, tc.mode, f.mode, "mode of %s", tc.path)
				require.Equal(t, []int{tc.uid, tc.gid}, []int{f.uid, f.gid}, "owner of %s", tc.path)
				require.True(t, testCreated.Equal(f.modTime), "time of %s", tc.path)
			}
			require.Equal(t, "binary for "+p.String(), string(files["usr/local/bin/dtq"].body))
			require.Contains(t, string(files["etc/passwd"].body), "nonroot:x:65532:65532:")
		})
	}

	first, err := idx.Digest()
	require.NoError(t, err)
	again, err := build().Digest()
	require.NoError(t, err)
	require.Equal(t, first, again, "the same inputs give the same image")
}

// TestRunRefusesBadInput: bad settings are refused before anything is
// built, with a message saying what to give instead.
func TestRunRefusesBadInput(t *testing.T) {
	t.Parallel()
	notPEM := filepath.Join(t.TempDir(), "not.pem")
	require.NoError(t, os.WriteFile(notPEM, []byte("no certificates here\n"), 0o644))
	for _, tc := range []struct {
		name   string
		modify func(t *testing.T, cfg *config)
		want   string
	}{
		{"version without v", func(_ *testing.T, cfg *config) { cfg.version = "0.1.0" }, "want v0.MINOR.PATCH"},
		{"modified checkout", func(_ *testing.T, cfg *config) { cfg.version = "v0.1.0-3-gabcdef0-dirty" }, "build a release from a clean one"},
		{"no version", func(_ *testing.T, cfg *config) { cfg.version = "" }, "want v0.MINOR.PATCH"},
		{"two digits missing", func(_ *testing.T, cfg *config) { cfg.version = "v1" }, "want v0.MINOR.PATCH"},
		{"leading zero", func(_ *testing.T, cfg *config) { cfg.version = "v0.01.0" }, "want v0.MINOR.PATCH"},
		{"build metadata", func(_ *testing.T, cfg *config) { cfg.version = "v0.1.0+abc" }, "want v0.MINOR.PATCH"},
		{"no revision", func(_ *testing.T, cfg *config) { cfg.revision = "" }, "not a commit hash"},
		{"revision not hex", func(_ *testing.T, cfg *config) { cfg.revision = "unknown" }, "not a commit hash"},
		{"missing certs", func(_ *testing.T, cfg *config) { cfg.certs = filepath.Join(cfg.out, "none.crt") }, "install ca-certificates"},
		{"certs not PEM", func(_ *testing.T, cfg *config) { cfg.certs = notPEM }, "holds no PEM certificate"},
		{"output not empty", func(t *testing.T, cfg *config) {
			t.Helper()
			require.NoError(t, os.MkdirAll(cfg.out, 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(cfg.out, "old"), nil, 0o644))
		}, "is not empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := testConfig(t, platform{"linux", "amd64"})
			cfg.goCmd = "go-must-not-run"
			tc.modify(t, &cfg)
			_, err := run(t.Context(), cfg)
			require.Error(t, err)
			require.NotContains(t, err.Error(), "go-must-not-run", "refused before building")
			require.Contains(t, err.Error(), tc.want)
		})
	}
}

// TestRunAcceptsPreReleases: a pre-release version passes the check (the
// build then fails on the stand-in go command, which proves it got there).
func TestRunAcceptsPreReleases(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"v0.1.0", "v1.20.3", "v0.2.0-rc.1", "v0.2.0-beta-2", "v0.1.0-3-gabcdef0"} {
		t.Run(v, func(t *testing.T) {
			t.Parallel()
			cfg := testConfig(t, platform{"linux", "amd64"})
			cfg.version = v
			cfg.goCmd = "go-must-not-run"
			_, err := run(t.Context(), cfg)
			require.ErrorContains(t, err, "go build for linux/amd64")
		})
	}
}

// TestWriteSums checks the format against known digests.
func TestWriteSums(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	b := filepath.Join(dir, "b")
	a := filepath.Join(dir, "a")
	require.NoError(t, os.WriteFile(b, []byte("abc"), 0o644))
	require.NoError(t, os.WriteFile(a, nil, 0o644))
	sums := filepath.Join(dir, sumsFile)
	require.NoError(t, writeSums(sums, []string{b, a}))
	got, err := os.ReadFile(sums)
	require.NoError(t, err)
	require.Equal(t,
		"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855  a\n"+
			"ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad  b\n",
		string(got))
	require.ErrorContains(t, writeSums(sums, []string{a, filepath.Join(dir, "sub", "a")}), "two files named a")
}

// TestParseFlags covers the command line.
func TestParseFlags(t *testing.T) {
	t.Parallel()
	cfg, err := parseFlags([]string{"-version", "v0.1.0", "-revision", "abcdef0", "-source-date-epoch", "1700000000", "-platforms", "linux/amd64, darwin/arm64"})
	require.NoError(t, err)
	require.Equal(t, "v0.1.0", cfg.version)
	require.Equal(t, time.Unix(1700000000, 0).UTC(), cfg.created)
	require.Equal(t, []platform{{"linux", "amd64"}, {"darwin", "arm64"}}, cfg.platforms)

	cfg, err = parseFlags([]string{"-source-date-epoch", ""})
	require.NoError(t, err)
	require.Equal(t, defaultPlatforms, cfg.platforms)
	require.Equal(t, time.Unix(0, 0).UTC(), cfg.created)

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-platforms", "linux"}, "is not OS/ARCH"},
		{[]string{"-platforms", "linux/amd64,"}, "is not OS/ARCH"},
		{[]string{"-source-date-epoch", "yesterday"}, "want Unix seconds"},
		{[]string{"-source-date-epoch", "-5"}, "want Unix seconds"},
		{[]string{"v0.1.0"}, "every setting is a flag"},
	} {
		_, err := parseFlags(tc.args)
		require.ErrorContains(t, err, tc.want, "%q", tc.args)
	}
}
