package cli

import (
	"github.com/spf13/cobra"
)

// auditView is one audit log entry.
type auditView struct {
	ID        string `json:"id"`
	TS        string `json:"ts"`
	Actor     string `json:"actor"`
	Role      string `json:"role"`
	Action    string `json:"action"`
	Target    string `json:"target"`
	RequestID string `json:"request_id"`
	Detail    string `json:"detail"`
}

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
		s, err := r.open(cmd)
		if err != nil {
			return err
		}
		defer s.close()
		items, next, err := s.api.listPages(cmd.Context(), "/api/v1/audit", filterQuery(map[string]string{"cursor": cursor}, limit), all)
		if err != nil {
			return err
		}
		defer nextPageHint(e.stderr, "dtq audit", next)
		if s.out.json {
			return s.out.items(items)
		}
		rows := make([][]string, 0, len(items))
		for _, raw := range items {
			var a auditView
			if err := decodeAnswer(raw, &a); err != nil {
				return err
			}
			rows = append(rows, []string{a.TS, a.Actor, a.Role, a.Action, a.Target, a.RequestID, truncate(cell(a.Detail), 60)})
		}
		return s.out.table([]string{"TIME", "ACTOR", "ROLE", "ACTION", "TARGET", "REQUEST_ID", "DETAIL"}, rows)
	})
	return cmd
}
