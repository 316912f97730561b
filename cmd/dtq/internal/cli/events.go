package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/dtq-io/dtq/cmd/dtq/internal/events"
)

// Event-feed client settings.
const (
	// sseIdleTimeout is how long a stream may stay silent before it is
	// taken for dropped; the API sends a keep-alive every 15s.
	sseIdleTimeout = 60 * time.Second
	// Reconnects back off from sseMinBackoff, doubling up to sseMaxBackoff.
	sseMinBackoff = 100 * time.Millisecond
	sseMaxBackoff = 5 * time.Second
	// sseMaxLine bounds one line of the stream.
	sseMaxLine = 4 << 20
)

func newEventsCmd(e *env) *cobra.Command {
	r := &remote{}
	cmd := groupCmd(e, "events", "Follow the event feed", r)
	cmd.AddCommand(newEventsTailCmd(r))
	return cmd
}

// tailOptions select what `dtq events tail` follows.
type tailOptions struct {
	queue, taskID, types, cursor, since string
}

func (o *tailOptions) query() url.Values {
	return filterQuery(map[string]string{"queue": o.queue, "task_id": o.taskID, "type": o.types, "since": o.since}, 0)
}

func newEventsTailCmd(r *remote) *cobra.Command {
	var o tailOptions
	cmd := &cobra.Command{
		Use:   "tail",
		Short: "Print events as they happen, one line each",
		Long: "Print events as they happen under a header: time, event type, queue, task\n" +
			"type, task id, attempt, worker and detail (a TASK_PROGRESS event's value, other\n" +
			"events' metadata as key=value), one line each (with -o json: the event's JSON,\n" +
			"one a line). A dropped connection is resumed from the last event seen, so\n" +
			"nothing is missed or repeated while the events are retained; if they were\n" +
			"trimmed first, a notice goes to stderr and the feed continues from its live\n" +
			"end. Stop it with Ctrl-C. --cursor resumes from an event_id cursor a\n" +
			"previous run saw; --since starts at a time instead of now (a task's\n" +
			"history, say).",
		Example: "  dtq events tail --queue emails,critical\n  dtq events tail --task-id 0199d5e8a93c7d2a8f0e4b2c1d3e5f60 -o json\n" +
			"  dtq events tail --task-id 0199d5e8a93c7d2a8f0e4b2c1d3e5f60 --since 2026-11-30T09:00:00Z",
		Args: cobra.NoArgs,
	}
	fs := cmd.Flags()
	fs.StringVarP(&o.queue, "queue", "q", "", "only these queues (comma-separated)")
	fs.StringVar(&o.taskID, "task-id", "", "only this task's events")
	fs.StringVar(&o.types, "type", "", "only these event types (comma-separated), e.g. TASK_FAILED,TASK_DEAD_LETTERED")
	fs.StringVar(&o.cursor, "cursor", "", "start after this cursor (default: from now)")
	fs.StringVar(&o.since, "since", "", "without --cursor, start at this time (RFC 3339 or epoch ms) instead of now")
	_ = cmd.RegisterFlagCompletionFunc("type", cobra.FixedCompletions(events.Types, cobra.ShellCompDirectiveNoFileComp))
	cmd.RunE = runE(func(cmd *cobra.Command, _ []string) error {
		s, err := r.open(cmd)
		if err != nil {
			return err
		}
		defer s.close()
		t := &tailer{api: s.api, out: s.out, stderr: r.e.stderr, query: o.query(), lastID: o.cursor}
		return t.run(cmd.Context())
	})
	return cmd
}

// tailer follows the event feed across reconnects.
type tailer struct {
	api    *apiClient
	out    *printer
	stderr io.Writer
	query  url.Values
	// lastID is the feed position to resume from: the id of the last frame
	// that carried one (events, the opening frame and keep-alives).
	lastID string
	// connected is set once a stream was opened: from then on a failure is
	// retried instead of ending the command.
	connected bool
	// headed is set once the table's header is printed.
	headed bool
}

// run streams until ctx ends (then it returns nil) or a failure that a
// reconnect cannot fix.
func (t *tailer) run(ctx context.Context) error {
	backoff := sseMinBackoff
	for {
		opened, err := t.stream(ctx)
		select {
		case <-ctx.Done():
			return nil // told to stop: not a failure
		default:
		}
		if opened {
			backoff = sseMinBackoff
		}
		if !t.connected || permanent(err) {
			return err
		}
		notef(t.stderr, "event stream interrupted (%s); reconnecting", oneLine(err.Error()))
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, sseMaxBackoff)
	}
}

// permanent reports whether err would happen again after a reconnect: a
// failure to print, or a 4xx answer (bad filter, a key that is not
// accepted).
func permanent(err error) bool {
	var (
		ee *exitError
		ae *apiError
	)
	if errors.As(err, &ee) {
		return true
	}
	return errors.As(err, &ae) && ae.Status >= 400 && ae.Status < 500 && ae.Status != http.StatusRequestTimeout &&
		ae.Status != http.StatusTooManyRequests
}

// stream opens the feed once and prints its events until the stream ends.
// opened reports whether the API answered with a stream.
func (t *tailer) stream(parent context.Context) (opened bool, err error) {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	// The timeout covers getting the answer's headers; the stream itself is
	// watched for silence instead.
	var timedOut atomic.Bool
	expire := func() { timedOut.Store(true); cancel() }
	headerTimer := time.AfterFunc(t.api.timeout, expire)
	q := url.Values{}
	maps.Copy(q, t.query)
	if !t.connected && t.lastID != "" {
		q.Set("cursor", t.lastID)
	}
	hr, err := t.api.newRequest(ctx, request{method: http.MethodGet, path: "/api/v1/events", query: q})
	if err != nil {
		return false, err
	}
	hr.Header.Set("Accept", "text/event-stream")
	if t.connected && t.lastID != "" {
		hr.Header.Set("Last-Event-ID", t.lastID)
	}
	res, err := t.api.http.Do(hr)
	headerTimer.Stop()
	switch {
	case timedOut.Load():
		if err == nil {
			res.Body.Close()
		}
		return false, fmt.Errorf("the dtq API at %s did not answer within %s (--timeout)", t.api.base, t.api.timeout)
	case err != nil:
		return false, t.api.transportError(parent, err, t.api.timeout)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
		return false, errorAnswer(res, body)
	}
	if mt, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type")); mt != "text/event-stream" {
		return false, fmt.Errorf("the API at %s answered GET /api/v1/events with %q, not an event stream", t.api.base, mt)
	}
	t.connected = true
	if !t.headed && !t.out.json {
		t.headed = true
		if err := t.out.textf("%s", eventHeader); err != nil {
			return true, &exitError{code: exitFailure, err: err}
		}
	}

	idle := time.AfterFunc(sseIdleTimeout, expire)
	defer idle.Stop()
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 0, 64<<10), sseMaxLine)
	var f sseFrame
	for sc.Scan() {
		idle.Reset(sseIdleTimeout)
		if !f.add(sc.Text()) {
			continue
		}
		if f.hasID {
			t.lastID = f.id
		}
		if err := t.handle(&f); err != nil {
			return true, &exitError{code: exitFailure, err: err} // not cured by reconnecting
		}
		f = sseFrame{}
	}
	switch {
	case timedOut.Load():
		return true, fmt.Errorf("no data for %s", sseIdleTimeout)
	case sc.Err() != nil:
		return true, sc.Err()
	}
	return true, errors.New("the API closed the stream")
}

// sseFrame collects the fields of one Server-Sent Events frame.
type sseFrame struct {
	id    string
	hasID bool
	event string
	data  strings.Builder
	lines int // data lines
}

// add takes one line and reports whether it ended the frame (a blank
// line). Comments (":") and unknown fields are ignored, as EventSource does.
func (f *sseFrame) add(line string) bool {
	if line == "" {
		return true
	}
	if strings.HasPrefix(line, ":") {
		return false
	}
	name, value, _ := strings.Cut(line, ":")
	value = strings.TrimPrefix(value, " ")
	switch name {
	case "id":
		if !strings.ContainsRune(value, 0) {
			f.id, f.hasID = value, true
		}
	case "event":
		f.event = value
	case "data":
		if f.lines > 0 {
			f.data.WriteByte('\n')
		}
		f.data.WriteString(value)
		f.lines++
	}
	return false
}

// resetNotice is the data of a "reset" frame.
type resetNotice struct {
	Cursor string `json:"cursor"`
	Queue  string `json:"queue"`
	Reason string `json:"reason"`
}

// handle prints one frame. A frame without data only moves the position.
func (t *tailer) handle(f *sseFrame) error {
	if f.lines == 0 {
		return nil
	}
	data := []byte(f.data.String())
	if f.event == "reset" {
		var n resetNotice
		_ = json.Unmarshal(data, &n)
		notef(t.stderr, "events of queue %s were trimmed before they could be read; continuing from the live end", cell(n.Queue))
		return nil
	}
	if t.out.json {
		return t.out.line(data)
	}
	var ev eventView
	if err := json.Unmarshal(data, &ev); err != nil {
		return fmt.Errorf("the API sent an event that is not JSON: %w", err)
	}
	return t.out.textf("%s", ev.line())
}

// eventView is the envelope of one event.
type eventView struct {
	EventID  string `json:"event_id"`
	TS       string `json:"ts"`
	Type     string `json:"type"`
	TaskID   string `json:"task_id"`
	Queue    string `json:"queue"`
	TaskType string `json:"task_type"`
	Attempt  int    `json:"attempt"`
	WorkerID string `json:"worker_id"`
	// Metadata is the type's details: a TASK_PROGRESS event's value, a
	// failure's error class, a requeue's reason.
	Metadata map[string]json.RawMessage `json:"metadata"`
}

// eventColumns is the format of an event line: time, event type, queue,
// task type, task id, attempt, worker and detail, in fixed-width columns so
// that the lines of a stream align under the header.
const eventColumns = "%-24s  %-23s  %-16s  %-16s  %-32s  %-7s  %-16s  %s"

// eventHeader is the table's header line, printed once before the events.
var eventHeader = strings.TrimRight(fmt.Sprintf(eventColumns, "TIME", "EVENT", "QUEUE", "TASK_TYPE", "TASK_ID", "ATTEMPT", "WORKER", "DETAIL"), " ")

// maxEventDetail bounds the DETAIL column (-o json has all of it).
const maxEventDetail = 100

// line is the event's table line.
func (ev *eventView) line() string {
	attempt := ""
	if ev.Attempt > 0 {
		attempt = strconv.Itoa(ev.Attempt)
	}
	detail := ""
	if d := ev.detail(); d != "" {
		detail = truncate(visible(d), maxEventDetail)
	}
	return strings.TrimRight(fmt.Sprintf(eventColumns,
		cell(ev.TS), cell(ev.Type), cell(ev.Queue), cell(ev.TaskType), cell(ev.TaskID), cell(attempt), cell(ev.WorkerID), detail), " ")
}

// detail is the event's metadata on one line: a TASK_PROGRESS event's
// value as tasks get shows progress ("40%", or the object), anything else
// as key=value pairs by key (strings bare, other values as compact JSON).
func (ev *eventView) detail() string {
	if p, ok := ev.Metadata["progress"]; ok && ev.Type == "TASK_PROGRESS" {
		return "progress " + progressText(p)
	}
	keys := slices.Sorted(maps.Keys(ev.Metadata))
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		v := ev.Metadata[k]
		var s string
		if json.Unmarshal(v, &s) != nil {
			s = compactJSON(v)
		}
		parts = append(parts, k+"="+s)
	}
	return strings.Join(parts, " ")
}
