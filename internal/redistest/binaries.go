package redistest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// ServerEnv names the environment variable that picks the server binary the
// tests start instead of redis-server from PATH: an absolute path to a
// Redis-compatible server (make test-compat sets it, one server at a time).
// Its command-line tool is the file beside it named after it with -cli in
// place of -server: /opt/valkey/bin/valkey-server goes with
// /opt/valkey/bin/valkey-cli.
const ServerEnv = "DTQ_TEST_REDIS_SERVER"

// ServerBinary returns the server binary the tests start: ServerEnv's path
// when set, else redis-server from PATH.
func ServerBinary() (string, error) {
	server, _, err := binaries(os.Getenv(ServerEnv), false, exec.LookPath)
	return server, err
}

// CLIBinary returns the command-line tool that goes with ServerBinary: the
// -cli beside ServerEnv's server when set, else redis-cli from PATH.
func CLIBinary() (string, error) {
	_, cli, err := binaries(os.Getenv(ServerEnv), true, exec.LookPath)
	return cli, err
}

// binaries resolves the server (and, when withCLI, the cli) for env, the
// value of ServerEnv. A named binary that is not there is an error naming
// it, never a silent fall back to PATH: a compatibility run must test the
// server it was given.
func binaries(env string, withCLI bool, lookPath func(string) (string, error)) (server, cli string, err error) {
	if env == "" {
		server, err = lookPath("redis-server")
		if err != nil {
			return "", "", fmt.Errorf("redistest: redis-server not found on PATH (install it, e.g. apt-get install -y redis-server, or set %s): %w", ServerEnv, err)
		}
		if withCLI {
			cli, err = lookPath("redis-cli")
			if err != nil {
				return "", "", fmt.Errorf("redistest: redis-cli not found on PATH (it comes with redis-server): %w", err)
			}
		}
		return server, cli, nil
	}
	if !filepath.IsAbs(env) {
		return "", "", fmt.Errorf("redistest: %s=%s: want an absolute path (tests run in their package's directory)", ServerEnv, env)
	}
	if err := executable(env); err != nil {
		return "", "", fmt.Errorf("redistest: %s: %w", ServerEnv, err)
	}
	if withCLI {
		cli, err = cliBeside(env)
		if err != nil {
			return "", "", fmt.Errorf("redistest: %s: %w", ServerEnv, err)
		}
		if err := executable(cli); err != nil {
			return "", "", fmt.Errorf("redistest: %s: the cli beside the server: %w", ServerEnv, err)
		}
	}
	return env, cli, nil
}

// cliBeside names the cli that goes with server: valkey-server gives
// valkey-cli in the same directory.
func cliBeside(server string) (string, error) {
	dir, base := filepath.Split(server)
	name, ok := strings.CutSuffix(base, "-server")
	if !ok || name == "" {
		return "", fmt.Errorf("%s: the server's name must end in -server (its cli is the -cli beside it)", server)
	}
	return filepath.Join(dir, name+"-cli"), nil
}

// executable fails unless path is a regular file (after symlinks) with an
// execute bit.
func executable(path string) error {
	fi, err := os.Stat(path) //nolint:gosec // the binary the person running the tests names
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("%s is not an executable file", path)
	}
	return nil
}
