package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/dtq-io/dtq/dtqtype"
)

// logsPage is GET /api/v1/tasks/{id}/logs's answer.
type logsPage struct {
	Items      []json.RawMessage `json:"items"`
	NextCursor string            `json:"next_cursor"`
}

// logsPageSize is how many lines `tasks logs` asks for at once.
const logsPageSize = 1000

func newTasksLogsCmd(r *remote) *cobra.Command {
	var (
		follow   bool
		attempt  int
		interval time.Duration
	)
	cmd := &cobra.Command{
		Use:   "logs <task-id>",
		Short: "Print a task's log lines, oldest first",
		Long: "Print the lines a task's handler logged (dtq.Logger, or logs sent by an HTTP\n" +
			"worker), oldest first: time, attempt and line. Every attempt's lines, or one's\n" +
			"with --attempt. An attempt whose oldest lines were dropped over its cap starts\n" +
			"with \"[dtq: N earlier lines truncated]\". With -f, keep printing new lines until\n" +
			"the task finishes. With -o json each line is one item's JSON.",
		Example: "  dtq tasks logs 0199d5e8a93c7d2a8f0e4b2c1d3e5f60\n  dtq tasks logs 0199d5e8a93c7d2a8f0e4b2c1d3e5f60 -f\n" +
			"  dtq tasks logs 0199d5e8a93c7d2a8f0e4b2c1d3e5f60 --attempt 2 -o json",
		Args: cobra.ExactArgs(1),
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new lines until the task finishes")
	cmd.Flags().IntVar(&attempt, "attempt", 0, "only this attempt's lines")
	cmd.Flags().DurationVar(&interval, "interval", time.Second, "with -f, how often to look for new lines (100ms..60s)")
	cmd.RunE = runE(func(cmd *cobra.Command, args []string) error {
		if attempt < 0 {
			return usageError(fmt.Errorf("--attempt=%d: must be positive", attempt))
		}
		if interval < minWatchInterval || interval > maxWatchInterval {
			return usageError(fmt.Errorf("--interval=%s: must be between %s and %s", interval, minWatchInterval, maxWatchInterval))
		}
		s, err := r.open(cmd)
		if err != nil {
			return err
		}
		defer s.close()
		err = printTaskLogs(cmd.Context(), s, args[0], attempt, follow, interval)
		if errors.Is(err, errInterrupted) {
			return nil
		}
		return err
	})
	return cmd
}

// printTaskLogs prints the task's lines page by page; following, it then
// polls for new ones until the task is terminal and nothing is left.
func printTaskLogs(ctx context.Context, s *session, id string, attempt int, follow bool, interval time.Duration) error {
	cursor := ""
	for {
		next, n, err := printLogsPage(ctx, s, id, attempt, cursor)
		if err != nil {
			if ctx.Err() != nil {
				return errInterrupted
			}
			return err
		}
		cursor = next
		if n >= logsPageSize {
			continue // more right away
		}
		if !follow {
			return nil
		}
		if n == 0 {
			// Done once the task is, after one more page: its last lines
			// are written before it finishes.
			t, _, err := getTask(ctx, s.api, id, 0)
			if err != nil {
				if ctx.Err() != nil {
					return errInterrupted
				}
				return err
			}
			if t.terminal() {
				follow = false
				continue
			}
		}
		select {
		case <-ctx.Done():
			return errInterrupted
		case <-time.After(interval):
		}
	}
}

// printLogsPage prints one page of lines from cursor; it returns the next
// cursor and how many items it printed.
func printLogsPage(ctx context.Context, s *session, id string, attempt int, cursor string) (string, int, error) {
	q := url.Values{"limit": {strconv.Itoa(logsPageSize)}}
	if attempt > 0 {
		q.Set("attempt", strconv.Itoa(attempt))
	}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	res, err := s.api.do(ctx, request{method: http.MethodGet, path: taskPath(id) + "/logs", query: q})
	if err != nil {
		return cursor, 0, err
	}
	var page logsPage
	if err := decodeAnswer(res.body, &page); err != nil {
		return cursor, 0, err
	}
	for _, raw := range page.Items {
		if err := printLogItem(s.out, raw); err != nil {
			return cursor, 0, err
		}
	}
	return page.NextCursor, len(page.Items), nil
}

// printLogItem prints one log line: its JSON with -o json, else
// "<time>  #<attempt>  <line>", the line as visible shows it: a handler's
// line is anyone's text, and must not drive the reader's terminal.
func printLogItem(p *printer, raw json.RawMessage) error {
	if p.json {
		return p.line(raw)
	}
	var it dtqtype.LogLine
	if err := json.Unmarshal(raw, &it); err != nil {
		return err
	}
	return p.textf("%s  #%d  %s", it.TS.UTC().Format(dtqtype.TimeLayout), it.Attempt, visible(it.Line))
}
