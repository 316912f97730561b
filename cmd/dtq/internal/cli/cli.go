// Package cli is the dtq command: the servers (`dtq api`, `dtq worker`,
// `dtq dev`), the operator commands that talk to the HTTP API (`dtq tasks`,
// `dlq`, `queues`, `workers`, `audit`, `events tail`), `dtq version` and
// shell completion, one file per command group. cmd/dtq only hands it argv
// and a context that ends on SIGINT/SIGTERM.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"unicode"

	"github.com/spf13/cobra"

	"github.com/dtq-io/dtq/cmd/dtq/internal/config"
)

// Exit codes.
const (
	exitOK      = 0
	exitFailure = 1 // the command ran and failed
	exitUsage   = 2 // bad flags, arguments or configuration
)

// env is what a command may touch of the outside world, so that tests can
// run commands in-process and in parallel.
type env struct {
	stdout, stderr io.Writer
	lookupEnv      config.LookupEnv
	// environ lists the environment as NAME=value (os.Environ); nil skips
	// the check for unknown DTQ_* variables.
	environ func() []string
	// onListen, when set, is told the API's bound address (tests use it to
	// find a port chosen by the kernel).
	onListen func(addr string)
}

// Execute runs the dtq command line args (without the program name) and
// returns the process exit code: 0 on success, 1 when the command failed, 2
// for a usage or configuration error. ctx ending (SIGINT/SIGTERM) makes
// long-running commands shut down gracefully and return 0.
func Execute(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	installRedisLogger()
	return execute(ctx, args, &env{stdout: stdout, stderr: stderr, lookupEnv: os.LookupEnv, environ: os.Environ})
}

func execute(ctx context.Context, args []string, e *env) int {
	root := newRootCmd(e) //nolint:contextcheck // the commands take ctx through cmd.Context(), set by ExecuteContext below
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	code := exitUsage // cobra's own errors: unknown command or flag, bad arguments
	if ee, ok := errors.AsType[*exitError](err); ok {
		code = ee.code
	}
	notef(e.stderr, "%s", errorText(stripDtqPrefix(err.Error())))
	return code
}

// stripDtqPrefix drops the "dtq: " the library's errors start with: the
// CLI prints its own, and "dtq: dtq: …" says nothing more.
func stripDtqPrefix(s string) string {
	for strings.HasPrefix(s, "dtq: ") {
		s = strings.TrimPrefix(s, "dtq: ")
	}
	return s
}

// exitError carries a command's failure and the exit code it maps to.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }

func (e *exitError) Unwrap() error { return e.err }

// usageError marks err as the user's mistake (exit 2).
func usageError(err error) error { return &exitError{code: exitUsage, err: err} }

// runE adapts a command body: its errors are failures (exit 1) unless
// already classified.
func runE(f func(cmd *cobra.Command, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		err := f(cmd, args)
		var ee *exitError
		if err == nil || errors.As(err, &ee) {
			return err
		}
		return &exitError{code: exitFailure, err: err}
	}
}

// errorText is an error message as the CLI prints it: its own line breaks
// and tabs kept (cobra's "Did you mean this?" suggestions span lines and
// indent), other control characters escaped as visible shows them (an
// error may quote what a client sent), trailing blanks and repeated empty
// lines removed.
func errorText(s string) string {
	lines := strings.Split(s, "\n")
	out := make([]string, 0, len(lines))
	for _, l := range lines {
		parts := strings.Split(l, "\t")
		for i, p := range parts {
			parts[i] = visible(p)
		}
		l = strings.TrimRightFunc(strings.Join(parts, "\t"), unicode.IsSpace)
		if l == "" && (len(out) == 0 || out[len(out)-1] == "") {
			continue
		}
		out = append(out, l)
	}
	return strings.TrimRight(strings.Join(out, "\n"), "\n")
}

// oneLine keeps an error message on one line, so it can be read as one
// record in logs.
func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", "; ")), " ")
}

func newRootCmd(e *env) *cobra.Command {
	root := &cobra.Command{
		Use:   "dtq",
		Short: "dtq is a distributed task queue on Redis",
		Long: "dtq is an at-least-once distributed task queue on Redis.\n\n" +
			"Every setting is an environment variable DTQ_* with a matching flag;\n" +
			"flags override the environment. See docs/configuration.md.",
		Version:       versionString(),
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetOut(e.stdout)
	root.SetErr(e.stderr)
	root.SetVersionTemplate("dtq {{.Version}}\n")
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return usageError(fmt.Errorf("%w (see dtq %s --help)", err, cmd.Name()))
	})
	root.AddCommand(newAPICmd(e), newDevCmd(e), newWorkerCmd(e), newOutboxCmd(e), newVersionCmd(e))
	root.AddCommand(operatorCommands(e)...)
	return root
}

// serverLogger returns the logger of a server command (api, worker, dev)
// and warns, through it, about DTQ_* variables that nothing reads: a
// misspelt setting would otherwise be silently left at its default.
func serverLogger(cfg *config.Config, e *env) *slog.Logger {
	log := cfg.NewLogger(e.stderr)
	redisLogTarget.Store(log)
	for _, msg := range cfg.Deprecations() {
		log.Warn(msg, "see", "docs/configuration.md")
	}
	if e.environ == nil {
		return log
	}
	for _, u := range config.UnknownVariables(e.environ()) {
		msg := "unknown environment variable " + u.Name + " is ignored"
		if u.Suggestion != "" {
			msg += "; did you mean " + u.Suggestion + "?"
		}
		log.Warn(msg, "see", "docs/configuration.md")
	}
	return log
}

// loadConfig reads the configuration from cmd's flags and the environment.
// An invalid value is a usage error naming the variable.
func loadConfig(cmd *cobra.Command, e *env) (*config.Config, error) {
	cfg, err := config.Load(cmd.Flags(), e.lookupEnv)
	if err != nil {
		return nil, usageError(err)
	}
	return cfg, nil
}
