package deploy

import (
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq/cmd/dtq/internal/config"
	"github.com/dtq-io/dtq/internal/redistest"
)

// deployDir is the repository's deploy/ directory, whose files these tests
// check; paths in the tests are relative to it.
const deployDir = "../../../../deploy"

// binDir holds the dtq binary the tests build once.
var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "dtq-deploy-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	os.Exit(redistest.Main(m, redistest.After(func() { _ = os.RemoveAll(dir) }) /* a temp dir: nothing to do if it stays */))
}

// Stamped into the test binary in place of the Dockerfile's build args.
const (
	testVersion  = "v0.0.0-deploytest"
	testRevision = "0123456789ab"
)

var (
	buildOnce sync.Once
	buildErr  error
	buildOut  []byte
)

// dtqBinary builds cmd/dtq once, as the Dockerfile does: CGO_ENABLED=0,
// -trimpath and the Dockerfile's own -ldflags.
func dtqBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(binDir, "dtq")
	buildOnce.Do(func() {
		ldflags := dockerfileLdflags(t)
		ldflags = strings.NewReplacer("${VERSION}", testVersion, "${REVISION}", testRevision).Replace(ldflags)
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags", ldflags, "-o", bin, "../..")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		buildOut, buildErr = cmd.CombinedOutput()
	})
	require.NoError(t, buildErr, "go build:\n%s", buildOut)
	return bin
}

// dockerfileLdflags returns the -ldflags value of the Dockerfile's go build.
func dockerfileLdflags(t *testing.T) string {
	t.Helper()
	m := regexp.MustCompile(`-ldflags "([^"]+)"`).FindStringSubmatch(readFile(t, "../Dockerfile"))
	require.NotNil(t, m, "the Dockerfile's go build has no -ldflags")
	return m[1]
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(deployDir, path))
	require.NoError(t, err)
	return string(b)
}

var (
	helpOnce  sync.Mutex
	helpFlags = map[string][]string{}
)

// flagsOf lists the long flags `dtq <command> --help` prints.
func flagsOf(t *testing.T, command string) []string {
	t.Helper()
	helpOnce.Lock()
	defer helpOnce.Unlock()
	if f, ok := helpFlags[command]; ok {
		return f
	}
	out, err := exec.Command(dtqBinary(t), command, "--help").CombinedOutput()
	require.NoError(t, err, "dtq %s --help:\n%s", command, out)
	var flags []string
	for _, m := range regexp.MustCompile(`(?m)^\s+(?:-\w, )?(--[a-z0-9-]+)`).FindAllStringSubmatch(string(out), -1) {
		flags = append(flags, m[1])
	}
	require.NotEmpty(t, flags, "dtq %s --help lists no flags:\n%s", command, out)
	helpFlags[command] = flags
	return flags
}

// checkCommand checks a dtq command line (without the program): a server
// command and flags that command has.
func checkCommand(t *testing.T, where string, args []string) {
	t.Helper()
	require.NotEmpty(t, args, "%s: no dtq command", where)
	require.Contains(t, []string{"api", "worker", "dev", "version"}, args[0], "%s: dtq %s", where, args[0])
	flags := flagsOf(t, args[0])
	for _, a := range args[1:] {
		if !strings.HasPrefix(a, "--") {
			continue
		}
		name, _, _ := strings.Cut(a, "=")
		require.Contains(t, flags, name, "%s: dtq %s has no flag %s", where, args[0], name)
	}
}

// checkVariable checks that name is a DTQ_ setting dtq reads.
func checkVariable(t *testing.T, where, name string) {
	t.Helper()
	require.True(t, slices.Contains(config.Names(), name), "%s: %s is not a setting (internal/config lists them)", where, name)
}

// dtqVarRe finds DTQ_ names in any text.
var dtqVarRe = regexp.MustCompile(`\bDTQ_[A-Z0-9_]+\b`)

// checkVariablesIn checks every DTQ_ name in text.
func checkVariablesIn(t *testing.T, where, text string) {
	t.Helper()
	for _, name := range dtqVarRe.FindAllString(text, -1) {
		checkVariable(t, where, name)
	}
}

func TestStaticBinary(t *testing.T) {
	t.Parallel()
	bin := dtqBinary(t)
	f, err := elf.Open(bin)
	require.NoError(t, err)
	defer f.Close()
	for _, p := range f.Progs {
		require.NotEqual(t, elf.PT_INTERP, p.Type, "the binary asks for a dynamic loader: it is not static")
	}
	libs, err := f.ImportedLibraries()
	require.NoError(t, err)
	require.Empty(t, libs, "the binary links shared libraries")

	out, err := exec.Command(bin, "version").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Regexp(t, `^dtq `+regexp.QuoteMeta(testVersion)+` \(revision `+testRevision+`, go\S+, \S+/\S+\)\n$`, string(out))
}

func TestDockerfile(t *testing.T) {
	t.Parallel()
	df := readFile(t, "../Dockerfile")
	var froms, users []string
	var entrypoint string
	for _, line := range strings.Split(df, "\n") {
		switch {
		case strings.HasPrefix(line, "FROM "):
			froms = append(froms, line)
		case strings.HasPrefix(line, "USER "):
			users = append(users, strings.TrimPrefix(line, "USER "))
		case strings.HasPrefix(line, "ENTRYPOINT "):
			entrypoint = strings.TrimPrefix(line, "ENTRYPOINT ")
		}
	}
	require.GreaterOrEqual(t, len(froms), 2, "a multi-stage build")
	require.Contains(t, froms[0], " AS build")
	require.NotEmpty(t, users, "the image sets a USER")
	user, _, _ := strings.Cut(users[len(users)-1], ":")
	require.NotContains(t, []string{"root", "0"}, user, "the image runs as a non-root user")
	require.Equal(t, `["/usr/local/bin/dtq"]`, entrypoint)
	require.Contains(t, df, "COPY --from=build /out/dtq /usr/local/bin/dtq")
	require.Regexp(t, `RUN CGO_ENABLED=0 go build -trimpath`, df)
	require.Contains(t, df, "WORKDIR /src/cmd/dtq\n")
	require.Contains(t, df, "-o /out/dtq .\n")
	ld := dockerfileLdflags(t)
	require.Contains(t, ld, "-X github.com/dtq-io/dtq/internal/buildinfo.version=${VERSION}")
	require.Contains(t, ld, "-X github.com/dtq-io/dtq/internal/buildinfo.revision=${REVISION}")
	checkVariablesIn(t, "Dockerfile", df)
	m := regexp.MustCompile(`CMD \["(\w+)"\]`).FindStringSubmatch(df)
	require.NotNil(t, m, "the Dockerfile has a default command")
	checkCommand(t, "Dockerfile CMD", []string{m[1]})

	// The Makefile stamps the same variables.
	mk := readFile(t, "../Makefile")
	require.Contains(t, mk, "-X github.com/dtq-io/dtq/internal/buildinfo.version=$(VERSION)")
	require.Contains(t, mk, "-X github.com/dtq-io/dtq/internal/buildinfo.revision=$(REVISION)")
}
