// Command release builds dtq's release files into one directory: the dtq
// binary for linux and darwin on amd64 and arm64, an OCI image of the linux
// binaries (a layout directory holding a multi-platform index, and one
// tarball per platform for docker load), and SHA256SUMS over the files.
// No Docker daemon is involved. `make release VERSION=v0.1.0` runs it;
// docs/install.md describes what it writes and how to publish it.
//
// It is a Go module of its own so that go-containerregistry never enters
// the library's or the dtq command's module graph.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := mainErr(ctx, os.Args[1:], os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

// mainErr parses args, builds the release and lists its files on stdout.
func mainErr(ctx context.Context, args []string, stdout io.Writer) error {
	cfg, err := parseFlags(args)
	if err != nil {
		return err
	}
	files, err := run(ctx, cfg)
	if err != nil {
		return err
	}
	for _, f := range files {
		if _, err := fmt.Fprintln(stdout, f); err != nil {
			return err
		}
	}
	return nil
}

// parseFlags reads the command line into a config.
func parseFlags(args []string) (config, error) {
	fs := flag.NewFlagSet("release", flag.ContinueOnError)
	cfg := config{}
	var platforms string
	var epoch string
	fs.StringVar(&cfg.version, "version", "", "the release's version, a semantic version tag such as v0.1.0 (required)")
	fs.StringVar(&cfg.revision, "revision", "", "the commit the release is built from (required)")
	fs.StringVar(&epoch, "source-date-epoch", os.Getenv("SOURCE_DATE_EPOCH"),
		"Unix seconds stamped as the image's creation time and its files' times (the commit's time makes the image reproducible; default 0)")
	fs.StringVar(&cfg.out, "out", "dist", "the directory the files are written to; it must be absent or empty")
	fs.StringVar(&cfg.cmdDir, "cmd", "../cmd/dtq", "the dtq command's module directory")
	fs.StringVar(&cfg.certs, "certs", "/etc/ssl/certs/ca-certificates.crt", "the PEM bundle of CA certificates put in the image")
	fs.StringVar(&cfg.name, "name", "dtq", "the repository name of the image's tag in the docker load tarballs (NAME:VERSION)")
	fs.StringVar(&cfg.source, "source-url", "https://github.com/dtq-io/dtq", "the org.opencontainers.image.source label")
	fs.StringVar(&cfg.goCmd, "go", "go", "the go command that builds the binaries")
	fs.StringVar(&platforms, "platforms", strings.Join(platformNames(defaultPlatforms), ","),
		"the OS/ARCH pairs to build the binary for; the linux ones make up the image")
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected arguments %q: every setting is a flag (-help lists them)", fs.Args())
	}
	var err error
	if cfg.platforms, err = parsePlatforms(platforms); err != nil {
		return config{}, err
	}
	if epoch != "" {
		secs, err := strconv.ParseInt(epoch, 10, 64)
		if err != nil || secs < 0 {
			return config{}, fmt.Errorf("-source-date-epoch %q: want Unix seconds, such as the output of git log -1 --format=%%ct", epoch)
		}
		cfg.created = time.Unix(secs, 0).UTC()
	} else {
		cfg.created = time.Unix(0, 0).UTC()
	}
	return cfg, nil
}

// parsePlatforms reads a comma-separated list of OS/ARCH pairs.
func parsePlatforms(s string) ([]platform, error) {
	var ps []platform
	for item := range strings.SplitSeq(s, ",") {
		goos, goarch, ok := strings.Cut(strings.TrimSpace(item), "/")
		if !ok || goos == "" || goarch == "" || strings.Contains(goarch, "/") {
			return nil, fmt.Errorf("-platforms: %q is not OS/ARCH (such as linux/amd64)", item)
		}
		ps = append(ps, platform{os: goos, arch: goarch})
	}
	if len(ps) == 0 {
		return nil, errors.New("-platforms: name at least one OS/ARCH")
	}
	return ps, nil
}
