package dtq

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/internal/jsonscan"
	"github.com/dtq-io/dtq/internal/rdb"
)

// Bounds of progress and log lines (docs/progress.md).
const (
	// MaxProgressBytes bounds a progress object's JSON.
	MaxProgressBytes = rdb.MaxProgressBytes
	// MaxLogLineBytes bounds one task log line; Logger cuts longer lines.
	MaxLogLineBytes = rdb.MaxLogLineBytes
	// DefaultTaskLogLines and DefaultTaskLogBytes are the caps of what one
	// attempt's log keeps (its newest lines).
	DefaultTaskLogLines = 1000
	DefaultTaskLogBytes = 256 << 10
)

// ErrInvalidProgress is returned by Progress for a value that is neither a
// number 0..100 nor a JSON object of at most MaxProgressBytes.
var ErrInvalidProgress = errors.New("dtq: invalid progress")

// ErrNotInHandler is returned by Progress called outside a task handler.
var ErrNotInHandler = errors.New("dtq: not called from a task handler")

type progressKey struct{}

// Progress reports the progress of the task whose handler ctx belongs to:
// a number 0..100 (any Go number, or json.Number) or a JSON object (a map,
// a struct, or json.RawMessage holding one) of at most MaxProgressBytes.
// The last value reported within a second wins: the worker writes at most
// once per task per second, and once more right before the attempt's
// finalize. Progress never blocks on Redis. A stale attempt (its lease
// lost) writes nothing.
func Progress(ctx context.Context, v any) error {
	tl, ok := ctx.Value(progressKey{}).(*taskLog)
	if !ok {
		return ErrNotInHandler
	}
	raw, err := ProgressJSON(v)
	if err != nil {
		return err
	}
	tl.setProgress(raw)
	return nil
}

// ProgressJSON checks a progress value and returns it as JSON: a number
// 0..100 or a JSON object of at most MaxProgressBytes nesting at most
// MaxJSONDepth levels (as a payload). The HTTP API checks
// a request's progress with it.
func ProgressJSON(v any) (json.RawMessage, error) {
	var raw []byte
	switch x := v.(type) {
	case json.RawMessage:
		raw = bytes.TrimSpace(x)
	case []byte:
		raw = bytes.TrimSpace(x)
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidProgress, err)
		}
		raw = b
	}
	if len(raw) == 0 {
		return nil, fmt.Errorf("%w: empty", ErrInvalidProgress)
	}
	switch {
	case raw[0] == '{':
		if len(raw) > MaxProgressBytes {
			return nil, fmt.Errorf("%w: the object is %d bytes, over %d", ErrInvalidProgress, len(raw), MaxProgressBytes)
		}
		// Readers decode progress as it is stored: the payload's bound
		// keeps a deep object from breaking a recursive decoder.
		if d := jsonscan.Depth(raw); d > MaxJSONDepth {
			return nil, fmt.Errorf("%w: the object nests %d levels deep; the limit is %d", ErrInvalidProgress, d, MaxJSONDepth)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, fmt.Errorf("%w: not a JSON object: %w", ErrInvalidProgress, err)
		}
		var b bytes.Buffer
		if err := json.Compact(&b, raw); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidProgress, err)
		}
		return b.Bytes(), nil
	case raw[0] == '-' || (raw[0] >= '0' && raw[0] <= '9'):
		var f float64
		if err := json.Unmarshal(raw, &f); err != nil || math.IsNaN(f) {
			return nil, fmt.Errorf("%w: not a number", ErrInvalidProgress)
		}
		if f < 0 || f > 100 {
			return nil, fmt.Errorf("%w: %s is outside 0..100", ErrInvalidProgress, raw)
		}
		if len(raw) > 32 {
			return nil, fmt.Errorf("%w: the number is over 32 characters", ErrInvalidProgress)
		}
		return raw, nil
	}
	return nil, fmt.Errorf("%w: want a number 0..100 or a JSON object", ErrInvalidProgress)
}

// Logger returns the logger of the task whose handler ctx belongs to: its
// lines go to the worker's logger (with the task's id, queue, type and
// attempt) and to the attempt's task log (docs/progress.md), each cut to
// MaxLogLineBytes. Outside a handler it is slog.Default().
func Logger(ctx context.Context) *slog.Logger {
	tl, ok := ctx.Value(progressKey{}).(*taskLog)
	if !ok {
		return slog.Default()
	}
	return tl.logger
}

// taskLog buffers the progress and lines of one running attempt between
// writes (see progressFlusher): the latest progress, and the newest lines
// within the caps (older ones dropped and counted).
type taskLog struct {
	queue, id string
	attempt   int
	caps      rdb.LogCaps
	clock     func() time.Time
	logger    *slog.Logger

	mu       sync.Mutex
	progress []byte
	lines    []rdb.LogEntry
	bytes    int
	dropped  int64
	closed   bool // the attempt's last write was made, or its lease lost

	// flushMu makes one write at a time; pending is a write whose answer
	// is unknown (an error), sent again as it was before any other.
	flushMu sync.Mutex
	seq     int64
	pending *rdb.ProgressWrite
}

func newTaskLog(ct *rdb.ClaimedTask, caps rdb.LogCaps, clock func() time.Time, base slog.Handler) *taskLog {
	tl := &taskLog{queue: ct.Queue, id: ct.ID, attempt: ct.Attempt, caps: caps, clock: clock}
	text := slog.NewTextHandler(taskLogWriter{tl}, &slog.HandlerOptions{Level: slog.LevelDebug,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{} // each line has its own time
			}
			return a
		}})
	worker := base.WithAttrs([]slog.Attr{slog.String("task_id", ct.ID), slog.String("queue", queueOf(ct.Queue)),
		slog.String("task_type", ct.Type), slog.Int("attempt", ct.Attempt)})
	tl.logger = slog.New(teeHandler{worker, text})
	return tl
}

func (tl *taskLog) setProgress(raw []byte) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if !tl.closed {
		tl.progress = raw
	}
}

// add appends a line, dropping the oldest beyond the caps.
func (tl *taskLog) add(line string) {
	line = cutLine(line, MaxLogLineBytes)
	now := tl.clock()
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if tl.closed {
		return
	}
	tl.lines = append(tl.lines, rdb.LogEntry{TS: now, Line: line})
	tl.bytes += len(line)
	drop := 0
	for len(tl.lines)-drop > tl.caps.Lines || (tl.bytes > tl.caps.Bytes && len(tl.lines)-drop > 1) {
		tl.bytes -= len(tl.lines[drop].Line)
		drop++
	}
	if drop > 0 {
		tl.lines = append(tl.lines[:0], tl.lines[drop:]...)
		tl.dropped += int64(drop)
	}
}

// cutLine cuts s to at most n bytes at a rune boundary, without its
// trailing newline.
func cutLine(s string, n int) string {
	s = strings.TrimRight(s, "\n")
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// flush writes what the buffer holds (or the pending write first), fenced
// by the attempt's lease. final closes the buffer: later calls add
// nothing. It reports whether nothing is left to write.
func (tl *taskLog) flush(ctx context.Context, w *Worker, final bool) bool {
	tl.flushMu.Lock()
	defer tl.flushMu.Unlock()
	for {
		if tl.pending == nil {
			tl.mu.Lock()
			if final {
				tl.closed = true
			}
			if tl.progress == nil && len(tl.lines) == 0 && tl.dropped == 0 {
				tl.mu.Unlock()
				return true
			}
			tl.seq++
			tl.pending = &rdb.ProgressWrite{Queue: tl.queue, ID: tl.id, Attempt: tl.attempt, Seq: tl.seq,
				Progress: tl.progress, Lines: tl.lines, Dropped: tl.dropped}
			tl.progress, tl.lines, tl.bytes, tl.dropped = nil, nil, 0, 0
			tl.mu.Unlock()
		}
		res, err := w.rdb.WriteProgress(ctx, &w.settings, w.dep.clock(), tl.pending, tl.caps)
		if err != nil {
			return false // sent again as it is next time
		}
		tl.pending = nil
		if res.Status == rdb.ProgressLeaseLost {
			tl.mu.Lock()
			tl.closed = true
			tl.progress, tl.lines, tl.bytes, tl.dropped = nil, nil, 0, 0
			tl.mu.Unlock()
			return true
		}
		if !final {
			return true
		}
		// A final flush goes on until the lines added meanwhile are out.
	}
}

// flushFinal writes what an attempt's handler left before its finalize,
// trying again a few times on errors: a write that cannot land is given
// up (the finalize matters more) with a warning.
func (tl *taskLog) flushFinal(ctx context.Context, w *Worker) {
	delay := 50 * time.Millisecond
	for try := 0; ; try++ {
		if tl.flush(ctx, w, true) {
			return
		}
		if try == 4 || ctx.Err() != nil {
			w.cfg.Logger.Warn("task progress and log lines not written before the finalize",
				"task_id", tl.id, "queue", tl.queue, "attempt", tl.attempt)
			return
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
		delay *= 2
	}
}

// taskLogWriter receives the task log's lines from the text handler (one
// Write per record).
type taskLogWriter struct{ tl *taskLog }

func (w taskLogWriter) Write(p []byte) (int, error) {
	w.tl.add(string(p))
	return len(p), nil
}

// teeHandler sends each record to two handlers.
type teeHandler struct{ a, b slog.Handler }

func (h teeHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.a.Enabled(ctx, l) || h.b.Enabled(ctx, l)
}

func (h teeHandler) Handle(ctx context.Context, r slog.Record) error {
	var errA, errB error
	if h.a.Enabled(ctx, r.Level) {
		errA = h.a.Handle(ctx, r.Clone())
	}
	if h.b.Enabled(ctx, r.Level) {
		errB = h.b.Handle(ctx, r)
	}
	return errors.Join(errA, errB)
}

func (h teeHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return teeHandler{h.a.WithAttrs(as), h.b.WithAttrs(as)}
}

func (h teeHandler) WithGroup(name string) slog.Handler {
	return teeHandler{h.a.WithGroup(name), h.b.WithGroup(name)}
}

// progressLoop writes the buffered progress and lines of running tasks
// once a second: at most one Redis write per task per second.
func (w *Worker) progressLoop(ctx context.Context) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		w.mu.Lock()
		logs := make([]*taskLog, 0, len(w.inflight))
		for _, r := range w.inflight {
			if r.log != nil {
				logs = append(logs, r.log)
			}
		}
		w.mu.Unlock()
		// A few writes at once: one after another, a thousand running
		// tasks would hold some of them a tenth of a second behind.
		next := make(chan *taskLog)
		var wg sync.WaitGroup
		for range min(progressWriters, len(logs)) {
			wg.Go(func() {
				for tl := range next {
					tl.flush(ctx, w, false)
				}
			})
		}
		for _, tl := range logs {
			next <- tl
		}
		close(next)
		wg.Wait()
	}
}

// progressWriters bounds the progress writes the ticker makes at once.
const progressWriters = 8

// taskLogCaps are the worker's caps of an attempt's log.
func (c *WorkerConfig) taskLogCaps() rdb.LogCaps {
	return rdb.LogCaps{Lines: c.TaskLogLines, Bytes: c.TaskLogBytes}
}

// ProgressReport is what an HTTP worker reports about a running attempt
// (POST /api/v1/tasks/{id}/progress, or inside its heartbeat).
type ProgressReport struct {
	// Progress is a number 0..100 or a JSON object (see Progress); empty
	// or null leaves it unchanged.
	Progress json.RawMessage
	// Logs are lines to append to the attempt's log, oldest first, each
	// at most MaxLogLineBytes, at most DefaultTaskLogLines per report.
	Logs []ReportedLine
	// Seq, when above 0, numbers the report within the attempt: a report
	// whose Seq is not above the last one applied (sent again after a
	// lost reply) writes nothing and answers as written.
	Seq int64
}

// ReportedLine is one line of a ProgressReport.
type ReportedLine struct {
	// TS is when the worker logged the line, kept to the millisecond; the
	// zero time means the time of the write. It may be at most
	// MaxLogLineSkew after the server's clock; a time before the task was
	// created is stored as its creation time.
	TS   time.Time
	Line string
}

// MaxLogLineSkew bounds how far a reported line's time may be ahead of
// the server's clock: a worker's clock may run a little fast, but a line
// from the future would sort and read as a lie.
const MaxLogLineSkew = time.Minute

// ProgressTooSoonError is returned by WorkerGateway.Progress for a report
// within a second of the attempt's last write: nothing was written; send
// it again after RetryAfter. It keeps Redis at one write per task per
// second whatever the number of API processes.
type ProgressTooSoonError struct {
	RetryAfter time.Duration
}

func (e *ProgressTooSoonError) Error() string {
	return fmt.Sprintf("dtq: progress reported less than a second after the last write; send it again in %v", e.RetryAfter)
}

// progressWindow is the least time between two progress writes of an
// HTTP worker's attempt.
const progressWindow = time.Second

// Validate checks a report (and normalizes its progress JSON): the
// progress value, the number of lines, each line's size and that no
// line's time is more than MaxLogLineSkew ahead of this machine's clock.
func (p *ProgressReport) Validate() error {
	return p.validateAt(time.Now())
}

// validateAt is Validate against the clock reading now.
func (p *ProgressReport) validateAt(now time.Time) error {
	if len(p.Progress) > 0 && string(bytes.TrimSpace(p.Progress)) != "null" {
		raw, err := ProgressJSON(p.Progress)
		if err != nil {
			return invalid("progress", "%s", strings.TrimPrefix(err.Error(), "dtq: invalid progress: "))
		}
		p.Progress = raw
	} else {
		p.Progress = nil
	}
	if len(p.Logs) > DefaultTaskLogLines {
		return invalid("logs", "has %d lines; send at most %d per report", len(p.Logs), DefaultTaskLogLines)
	}
	for i, l := range p.Logs {
		if len(l.Line) > MaxLogLineBytes {
			return invalid("logs", "line %d is %d bytes; a line is at most %d bytes", i, len(l.Line), MaxLogLineBytes)
		}
		if ahead := l.TS.Sub(now); !l.TS.IsZero() && ahead > MaxLogLineSkew {
			return invalid(fmt.Sprintf("logs[%d].ts", i), "%s is %s ahead of the server's clock; a line's time may be at most %s ahead "+
				"(check the worker's clock, or send the line as a plain string to have it timed by the server)",
				l.TS.UTC().Format(time.RFC3339Nano), ahead.Round(time.Second), MaxLogLineSkew)
		}
	}
	if p.Seq < 0 {
		return invalid("seq", "must be positive (or absent)")
	}
	return nil
}

// Progress writes an HTTP worker's report about task id's running attempt,
// fenced by token: ErrLeaseLost when the attempt no longer owns the task
// (nothing written), a *ValidationError for a bad report, and a
// *ProgressTooSoonError within a second of the attempt's last write.
func (g *WorkerGateway) Progress(ctx context.Context, id, token string, p ProgressReport) error {
	t, err := g.verifiedToken(ctx, id, token)
	if err != nil {
		return err
	}
	now := g.dep.clock()
	if err := p.validateAt(now); err != nil {
		return err
	}
	if p.Progress == nil && len(p.Logs) == 0 {
		return nil
	}
	w := &rdb.ProgressWrite{Queue: t.Queue, ID: id, Attempt: t.Attempt, Seq: p.Seq, Progress: p.Progress,
		MinInterval: progressWindow, Lines: make([]rdb.LogEntry, len(p.Logs))}
	for i, l := range p.Logs {
		ts := l.TS
		if ts.IsZero() {
			ts = now
		}
		w.Lines[i] = rdb.LogEntry{TS: ts, Line: strings.TrimRight(l.Line, "\n")}
	}
	res, err := g.rdb.WriteProgress(ctx, g.workerSettings(t.Worker, g.cfg.VisibilityTimeout, t.Claim), now, w, rdb.DefaultLogCaps)
	if err != nil {
		return err
	}
	switch res.Status {
	case rdb.ProgressWritten:
	case rdb.ProgressLeaseLost:
		return ErrLeaseLost
	case rdb.ProgressTooSoon:
		return &ProgressTooSoonError{RetryAfter: res.RetryAfter}
	}
	return nil
}

// maxLogAttempt bounds the attempt a logs read names.
const maxLogAttempt = 10000

// TaskLogsParams selects a page of a task's logs.
type TaskLogsParams struct {
	// Attempt reads that attempt's lines alone; 0 reads every attempt's,
	// in order.
	Attempt int
	// Cursor resumes after the lines an earlier page answered (its
	// NextCursor); "" starts at the oldest line kept.
	Cursor string
	// Limit bounds the lines of the page, 1..1000; 0 means 100.
	Limit int
}

// TaskLogs returns a page of task id's log lines, oldest first (see
// docs/progress.md). An attempt whose oldest lines were dropped over the
// caps starts with the line "[dtq: N earlier lines truncated]". The page's
// NextCursor is always set: a follower passes it again to get the lines
// logged since. ErrTaskNotFound when the task does not exist (or is gone).
func (i *Inspector) TaskLogs(ctx context.Context, id string, p TaskLogsParams) (*dtqtype.ListResult[dtqtype.LogLine], error) {
	if p.Limit == 0 {
		p.Limit = 100
	}
	if p.Limit < 1 || p.Limit > rdb.MaxLogPage {
		return nil, invalid("limit", "must be between 1 and %d", rdb.MaxLogPage)
	}
	if p.Attempt < 0 || p.Attempt > maxLogAttempt {
		return nil, invalid("attempt", "must be between 1 and %d (or absent: every attempt)", maxLogAttempt)
	}
	if len(p.Cursor) > 64 {
		return nil, invalid("cursor", "is not a cursor a logs page answered")
	}
	page, err := i.rdb.TaskLogs(ctx, id, p.Attempt, p.Cursor, p.Limit)
	switch {
	case errors.Is(err, rdb.ErrNotFound):
		return nil, ErrTaskNotFound
	case errors.Is(err, rdb.ErrBadCursor):
		return nil, invalid("cursor", "is not a cursor a logs page of this task and attempt answered")
	}
	return page, err
}
