package cli

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// Defaults of the operator commands' connection flags.
const (
	defaultAPIURL  = "http://127.0.0.1:8080"
	defaultTimeout = 30 * time.Second
)

// Output formats of -o/--output.
const (
	outputTable = "table"
	outputJSON  = "json"
)

var outputFormats = []string{outputTable, outputJSON}

// remote holds the flags every operator command shares: where the API is,
// the credential, the output format and the request timeout. They are
// persistent flags of each command group (tasks, dlq, queues, workers,
// audit, events).
type remote struct {
	e       *env
	apiURL  string
	token   string
	output  string
	timeout time.Duration
}

// operatorCommands are the commands that talk to the HTTP API.
func operatorCommands(e *env) []*cobra.Command {
	return []*cobra.Command{newTasksCmd(e), newDLQCmd(e), newQueuesCmd(e), newWorkersCmd(e), newAuditCmd(e), newEventsCmd(e), newSchedulesCmd(e), newWorkflowsCmd(e)}
}

// groupCmd is a command group of operator commands with the shared flags.
func groupCmd(e *env, use, short string, r *remote) *cobra.Command {
	cmd := &cobra.Command{Use: use, Short: short, Args: cobra.NoArgs,
		// Runnable, so that a misspelt subcommand is a usage error (exit 2)
		// instead of a help page.
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() }}
	r.e = e
	r.addFlags(cmd)
	return cmd
}

func (r *remote) addFlags(cmd *cobra.Command) {
	fs := cmd.PersistentFlags()
	fs.StringVar(&r.apiURL, "api-url", defaultAPIURL, "base URL of the dtq API (env DTQ_API_URL)")
	fs.StringVar(&r.token, "token", "", "API key sent as a bearer token (env DTQ_TOKEN)")
	fs.StringVarP(&r.output, "output", "o", outputTable, "output format: table or json")
	fs.DurationVar(&r.timeout, "timeout", defaultTimeout, "how long one API request may take")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(outputFormats, cobra.ShellCompDirectiveNoFileComp))
}

// session is a resolved remote: a client and a printer.
type session struct {
	api *apiClient
	out *printer
}

// open resolves the flags against the environment (a flag wins over its
// variable) and returns a session; close it when done. DTQ_API_KEY is never
// read: it configures servers, while the CLI's credential is DTQ_TOKEN.
func (r *remote) open(cmd *cobra.Command) (*session, error) {
	base := r.apiURL
	if v, ok := r.e.lookupEnv("DTQ_API_URL"); ok && v != "" && !cmd.Flags().Changed("api-url") {
		base = v
	}
	if err := checkAPIURL(base); err != nil {
		return nil, usageError(err)
	}
	token := r.token
	if v, ok := r.e.lookupEnv("DTQ_TOKEN"); ok && !cmd.Flags().Changed("token") {
		token = v
	}
	if strings.ContainsAny(token, " \t\r\n") {
		return nil, usageError(errors.New("the token (--token or DTQ_TOKEN) must not contain spaces or line breaks"))
	}
	if !slices.Contains(outputFormats, r.output) {
		return nil, usageError(fmt.Errorf("--output=%q: must be table or json", r.output))
	}
	if r.timeout <= 0 {
		return nil, usageError(fmt.Errorf("--timeout=%s: must be positive", r.timeout))
	}
	return &session{api: newAPIClient(base, token, r.timeout), out: &printer{w: r.e.stdout, json: r.output == outputJSON}}, nil
}

func (s *session) close() { s.api.close() }

// checkAPIURL accepts an http or https URL with a host and no query or
// fragment; a path is kept, for an API behind a path prefix.
func checkAPIURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("--api-url/DTQ_API_URL %q: must be an http:// or https:// URL such as %s", s, defaultAPIURL)
	}
	return nil
}

// requireYes refuses a destructive command run without --yes.
func requireYes(yes bool, what string) error {
	if yes {
		return nil
	}
	return usageError(fmt.Errorf("refusing to %s without --yes", what))
}

// call opens a session, sends req, decodes the answer into answer (nil:
// not decoded) and prints it: as the API sent it with -o json, else what
// text writes.
func (r *remote) call(cmd *cobra.Command, req request, answer any, text func(p *printer, res *apiResponse) error) error {
	s, err := r.open(cmd)
	if err != nil {
		return err
	}
	defer s.close()
	res, err := s.api.do(cmd.Context(), req)
	if err != nil {
		return err
	}
	if err := decodeAnswer(res.body, answer); err != nil {
		return err
	}
	if s.out.json {
		return s.out.raw(res.body)
	}
	return text(s.out, res)
}

// showRun is the run of a command that reads one thing, at path(args[0]),
// and prints it.
func showRun[T any](r *remote, path func(string) string, show func(*printer, *T) error) func(*cobra.Command, []string) error {
	return runE(func(cmd *cobra.Command, args []string) error {
		var v T
		return r.call(cmd, request{method: http.MethodGet, path: path(args[0])}, &v, func(p *printer, _ *apiResponse) error {
			return show(p, &v)
		})
	})
}

// pausedState names a queue's or a schedule's state.
func pausedState(paused bool) string {
	if paused {
		return "paused"
	}
	return "active"
}

// pauseAnswer is the answer of a queue's or a schedule's pause or resume.
type pauseAnswer struct {
	Queue    string        `json:"queue"` // a queue's name
	Name     string        `json:"name"`  // a schedule's name
	Paused   bool          `json:"paused"`
	Changed  bool          `json:"changed"`
	Schedule *scheduleView `json:"schedule"` // a schedule as it is now
}

// pausable is what pauses and resumes: queues or schedules.
type pausable struct {
	group, noun  string // the command group and what it names: "queues", "queue"
	arg, example string // the argument as help shows it, and an example of it
	path         func(name string) string
	complete     cobra.CompletionFunc // of the argument; nil: none
}

// newPauseCmd is the pause or resume (action) command of what.
func newPauseCmd(r *remote, what pausable, action, short, long string) *cobra.Command {
	return &cobra.Command{
		Use:               action + " " + what.arg,
		Short:             short,
		Long:              long,
		Example:           "  dtq " + what.group + " " + action + " " + what.example,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: what.complete,
		RunE:              pauseRun(r, what.noun, action, what.path),
	}
}

// pauseRun is the run of action (pause or resume) of the noun (queue or
// schedule) named args[0], at path(args[0]).
func pauseRun(r *remote, noun, action string, path func(string) string) func(*cobra.Command, []string) error {
	return runE(func(cmd *cobra.Command, args []string) error {
		var out pauseAnswer
		req := request{method: http.MethodPost, path: path(args[0]) + "/" + action}
		return r.call(cmd, req, &out, func(p *printer, _ *apiResponse) error {
			name := cmp.Or(out.Queue, out.Name)
			state, was := "resumed", "running"
			if out.Paused {
				state, was = "paused", "paused"
			}
			switch {
			case !out.Changed:
				return p.textf("%s %s was already %s", noun, name, was)
			case !out.Paused && out.Schedule != nil:
				return p.textf("%s %s resumed; next run %s", noun, name, wireTime(out.Schedule.NextRunAt))
			}
			return p.textf("%s %s %s", noun, name, state)
		})
	})
}
