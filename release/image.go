package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Where things are in the image. The binary's path is the Dockerfile's, so
// that both images run the same way.
const (
	binaryPath = "/usr/local/bin/dtq"
	certsPath  = "/etc/ssl/certs/ca-certificates.crt"
	// nonroot is the user the image runs as (distroless's nonroot, which
	// the Dockerfile's image uses too).
	nonroot = 65532
)

// OCI annotation and label keys.
const (
	labelVersion  = "org.opencontainers.image.version"
	labelRevision = "org.opencontainers.image.revision"
	labelSource   = "org.opencontainers.image.source"
	labelLicenses = "org.opencontainers.image.licenses"
	labelTitle    = "org.opencontainers.image.title"
	labelCreated  = "org.opencontainers.image.created"
	// annotationRefName names an entry of an OCI layout's index.json.
	annotationRefName = "org.opencontainers.image.ref.name"
)

// loadCerts reads the CA bundle for the image and checks it holds at least
// one certificate: an image without them cannot reach Redis over TLS.
func loadCerts(path string) ([]byte, error) {
	b, err := os.ReadFile(path) //nolint:gosec // the bundle the caller names
	if err != nil {
		return nil, fmt.Errorf("CA certificates for the image: %w (install ca-certificates, or name a PEM bundle with -certs)", err)
	}
	if !x509.NewCertPool().AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("CA certificates for the image: %s holds no PEM certificate", path)
	}
	return b, nil
}

// imageFiles are what writeImages wrote.
type imageFiles struct {
	layout   string   // the OCI layout directory
	tarballs []string // one docker load tarball per platform
}

// writeImages builds the image for each linux platform from its binary and
// writes the OCI layout (one index over every platform, named by the
// version) and a docker load tarball per platform, tagged NAME:VERSION.
func writeImages(cfg config, linux []platform, binaries map[platform]string, certs []byte) (imageFiles, error) {
	images := make([]v1.Image, len(linux))
	for i, p := range linux {
		bin, err := os.ReadFile(binaries[p])
		if err != nil {
			return imageFiles{}, err
		}
		if images[i], err = buildImage(cfg, p, bin, certs); err != nil {
			return imageFiles{}, fmt.Errorf("image for %s: %w", p, err)
		}
	}
	idx, err := buildIndex(cfg, linux, images)
	if err != nil {
		return imageFiles{}, err
	}

	var files imageFiles
	files.layout = filepath.Join(cfg.out, cfg.artifactPrefix()+"_oci")
	lp, err := layout.Write(files.layout, empty.Index)
	if err != nil {
		return imageFiles{}, err
	}
	if err := lp.AppendIndex(idx, layout.WithAnnotations(map[string]string{annotationRefName: cfg.version})); err != nil {
		return imageFiles{}, fmt.Errorf("writing the OCI layout: %w", err)
	}

	tag, err := name.NewTag(cfg.name + ":" + cfg.version)
	if err != nil {
		return imageFiles{}, fmt.Errorf("image tag: %w", err)
	}
	for i, p := range linux {
		path := filepath.Join(cfg.out, cfg.artifactPrefix()+"_image_"+p.os+"_"+p.arch+".tar")
		if err := tarball.WriteToFile(path, tag, images[i]); err != nil {
			return imageFiles{}, fmt.Errorf("writing %s: %w", path, err)
		}
		files.tarballs = append(files.tarballs, path)
	}
	return files, nil
}

// labels are the image's OCI labels, also set as annotations on its
// manifests (registries show those).
func labels(cfg config) map[string]string {
	return map[string]string{
		labelTitle:    "dtq",
		labelVersion:  cfg.version,
		labelRevision: cfg.revision,
		labelSource:   cfg.source,
		labelLicenses: "MIT",
		labelCreated:  cfg.created.Format(time.RFC3339),
	}
}

// buildImage makes the image for p: one layer holding the static binary,
// the CA bundle, and passwd and group entries for the nonroot user, on an
// empty base, configured as the Dockerfile's image is.
func buildImage(cfg config, p platform, binary, certs []byte) (v1.Image, error) {
	layer, err := rootLayer(cfg.created, binary, certs)
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History: v1.History{
			Created:   v1.Time{Time: cfg.created},
			CreatedBy: "dtq release " + cfg.version,
			Comment:   "the dtq binary, CA certificates and the nonroot user",
		},
	})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS = p.os
	cf.Architecture = p.arch
	cf.Created = v1.Time{Time: cfg.created}
	cf.Config = v1.Config{
		User:       fmt.Sprintf("%d:%d", nonroot, nonroot),
		Entrypoint: []string{binaryPath},
		Cmd:        []string{"api"},
		WorkingDir: "/",
		Env: []string{
			"PATH=/usr/local/bin",
			"SSL_CERT_FILE=" + certsPath,
			// A container is reached on its own address, not on loopback:
			// listen on all interfaces (the Dockerfile's settings).
			"DTQ_API_ADDR=0.0.0.0:8080",
			"DTQ_WORKER_METRICS_ADDR=0.0.0.0:9464",
			"DTQ_LOG_JSON=true",
		},
		ExposedPorts: map[string]struct{}{"8080/tcp": {}, "9464/tcp": {}},
		Labels:       labels(cfg),
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, err
	}
	withAnnotations, ok := mutate.Annotations(img, labels(cfg)).(v1.Image)
	if !ok {
		return nil, errors.New("annotating the image manifest lost its type")
	}
	return withAnnotations, nil
}

// buildIndex makes the multi-platform index over images (one per entry of
// platforms).
func buildIndex(cfg config, platforms []platform, images []v1.Image) (v1.ImageIndex, error) {
	adds := make([]mutate.IndexAddendum, len(images))
	for i, img := range images {
		adds[i] = mutate.IndexAddendum{
			Add: img,
			Descriptor: v1.Descriptor{
				Platform: &v1.Platform{OS: platforms[i].os, Architecture: platforms[i].arch},
			},
		}
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	idx = mutate.AppendManifests(idx, adds...)
	withAnnotations, ok := mutate.Annotations(idx, labels(cfg)).(v1.ImageIndex)
	if !ok {
		return nil, errors.New("annotating the image index lost its type")
	}
	return withAnnotations, nil
}

// layerEntry is one file or directory of the image's layer.
type layerEntry struct {
	name     string
	dir      bool
	mode     int64
	uid, gid int
	body     []byte
}

// rootLayer builds the image's one layer, gzipped once here so that its
// digest is computed from fixed bytes: the same inputs give the same image.
func rootLayer(created time.Time, binary, certs []byte) (v1.Layer, error) {
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", nonroot, nonroot)
	group := fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", nonroot)
	entries := []layerEntry{
		{name: "etc/", dir: true, mode: 0o755},
		{name: "etc/group", mode: 0o644, body: []byte(group)},
		{name: "etc/passwd", mode: 0o644, body: []byte(passwd)},
		{name: "etc/ssl/", dir: true, mode: 0o755},
		{name: "etc/ssl/certs/", dir: true, mode: 0o755},
		{name: certsPath[1:], mode: 0o644, body: certs},
		{name: "home/", dir: true, mode: 0o755},
		{name: "home/nonroot/", dir: true, mode: 0o700, uid: nonroot, gid: nonroot},
		// Temporary files, as on any Unix; a read-only root file system
		// mounts its own here.
		{name: "tmp/", dir: true, mode: 0o1777},
		{name: "usr/", dir: true, mode: 0o755},
		{name: "usr/local/", dir: true, mode: 0o755},
		{name: "usr/local/bin/", dir: true, mode: 0o755},
		// Owned by root: the nonroot user cannot change it.
		{name: binaryPath[1:], mode: 0o755, body: binary},
	}

	var buf bytes.Buffer
	// The default level: the best one takes three times as long for a
	// layer 0.4% smaller.
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		h := &tar.Header{
			Name:    e.name,
			Mode:    e.mode,
			Uid:     e.uid,
			Gid:     e.gid,
			ModTime: created,
			Format:  tar.FormatPAX,
		}
		if e.dir {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag = tar.TypeReg
			h.Size = int64(len(e.body))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.body); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	gz := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(gz)), nil
	}, tarball.WithMediaType(types.OCILayer))
}
