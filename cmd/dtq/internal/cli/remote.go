package cli

import (
	"errors"
	"fmt"
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
	return []*cobra.Command{newTasksCmd(e), newDLQCmd(e), newQueuesCmd(e), newWorkersCmd(e), newAuditCmd(e), newEventsCmd(e), newSchedulesCmd(e)}
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
