package redistest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// ServerEnv picks the server and the -cli beside it; a binary it names that
// is missing, not executable or oddly named is an error naming it, never a
// fall back to PATH.
func TestBinaries(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte("#!/bin/sh\n"), mode))
		return p
	}
	valkey := write("valkey-server", 0o755)
	valkeyCLI := write("valkey-cli", 0o755)
	lonely := write("lonely-server", 0o755)
	noExec := write("noexec-server", 0o644)
	write("noexec-cli", 0o755)
	badCLI := write("badcli-server", 0o755)
	write("badcli-cli", 0o644)
	odd := write("keydb", 0o755)
	onPath := func(name string) (string, error) { return "/usr/bin/" + name, nil }
	notOnPath := func(name string) (string, error) { return "", errors.New("not found") }

	for _, tt := range []struct {
		name       string
		env        string
		withCLI    bool
		lookPath   func(string) (string, error)
		wantServer string
		wantCLI    string
		wantErr    string // substring; "" for success
	}{
		{name: "PATH", lookPath: onPath, withCLI: true, wantServer: "/usr/bin/redis-server", wantCLI: "/usr/bin/redis-cli"},
		{name: "PATH server only", lookPath: onPath, wantServer: "/usr/bin/redis-server"},
		{name: "nothing on PATH", lookPath: notOnPath, wantErr: "redis-server not found on PATH"},
		{name: "env server and cli", env: valkey, withCLI: true, lookPath: notOnPath, wantServer: valkey, wantCLI: valkeyCLI},
		{name: "env server only", env: lonely, lookPath: onPath, wantServer: lonely},
		{name: "env cli missing", env: lonely, withCLI: true, lookPath: onPath, wantErr: filepath.Join(dir, "lonely-cli")},
		{name: "env server missing", env: filepath.Join(dir, "gone-server"), lookPath: onPath, wantErr: filepath.Join(dir, "gone-server")},
		{name: "env server not executable", env: noExec, lookPath: onPath, wantErr: noExec + " is not an executable file"},
		{name: "env cli not executable", env: badCLI, withCLI: true, lookPath: onPath, wantErr: filepath.Join(dir, "badcli-cli") + " is not an executable file"},
		{name: "env directory", env: dir, lookPath: onPath, wantErr: "is not an executable file"},
		{name: "env name without -server", env: odd, withCLI: true, lookPath: onPath, wantErr: "must end in -server"},
		{name: "env relative", env: "bin/valkey-server", lookPath: onPath, wantErr: "want an absolute path"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			server, cli, err := binaries(tt.env, tt.withCLI, tt.lookPath)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.wantServer, server)
			require.Equal(t, tt.wantCLI, cli)
		})
	}
}

// The servers the tests start are the binary ServerBinary names (the one
// DTQ_TEST_REDIS_SERVER picks under make test-compat), as the server itself
// reports it.
func TestServerIsServerBinary(t *testing.T) {
	t.Parallel()
	want, err := ServerBinary()
	require.NoError(t, err)
	c := redis.NewClient(&redis.Options{Addr: Shared(t).Addr})
	defer c.Close()
	info, err := c.Info(context.Background(), "server").Result()
	require.NoError(t, err)
	require.Contains(t, info, "executable:"+want+"\r\n")
	t.Logf("%s: server_name=%s valkey_version=%s redis_version=%s", want,
		infoValue(info, "server_name"), infoValue(info, "valkey_version"), infoValue(info, "redis_version"))
}

// infoValue returns field's value in an INFO reply, or "-".
func infoValue(info, field string) string {
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v
		}
	}
	return "-"
}
