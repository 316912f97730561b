package cli

import (
	"github.com/dtq-io/dtq/dtqtype"

	"github.com/spf13/cobra"
)

// auditView is one audit log entry.
// auditView is an audit entry as the API answers it.
type auditView = dtqtype.AuditEntry

func newAuditCmd(e *env) *cobra.Command {
	r := &remote{e: e}
	var (
		limit  int
		cursor string
		all    bool
	)
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Show the audit log of operator actions, newest first (admin)",
		Long: "Show the audit log, newest first: every cancel, run-now, delete, queue\n" +
			"pause/resume/purge/recount and dead-letter requeue/discard, with the key's\n" +
			"name as the actor and the request id.",
		Example: "  dtq audit --limit 20",
		Args:    cobra.NoArgs,
	}
	r.addFlags(cmd)
	cmd.Flags().IntVar(&limit, "limit", 0, "entries per page, 1..1000 (default 50)")
	cmd.Flags().StringVar(&cursor, "cursor", "", "continue from a previous page's cursor")
	cmd.Flags().BoolVar(&all, "all", false, "read every page")
	cmd.RunE = runE(func(cmd *cobra.Command, _ []string) error {
		return printList(cmd, r, listing[auditView]{
			path: "/api/v1/audit", query: filterQuery(map[string]string{"cursor": cursor}, limit), all: all,
			hint:   "dtq audit",
			header: []string{"TIME", "ACTOR", "ROLE", "ACTION", "TARGET", "REQUEST_ID", "DETAIL"},
			row: func(a auditView) []string {
				return []string{wireTime(a.TS), a.Actor, a.Role, a.Action, a.Target, a.RequestID, truncate(cell(a.Detail), 60)}
			},
		})
	})
	return cmd
}
