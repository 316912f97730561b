package rdb

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/dtq-io/dtq/dtqtype"
)

// Bounds of progress and log lines (docs/progress.md).
const (
	// MaxProgressBytes bounds a progress object's JSON.
	MaxProgressBytes = 4 << 10
	// MaxLogLineBytes bounds one log line.
	MaxLogLineBytes = 1 << 10
	// MaxLogPage bounds one page of a task's logs.
	MaxLogPage = 1000
)

// LogCaps bound what one attempt's log keeps: its newest Lines lines
// within Bytes stored bytes (each line stored with its time offset).
type LogCaps struct {
	Lines int
	Bytes int
}

// DefaultLogCaps are the caps of an attempt's log: 1,000 lines, 256 KiB.
var DefaultLogCaps = LogCaps{Lines: 1000, Bytes: 256 << 10}

// LogEntry is one line to append to an attempt's log.
type LogEntry struct {
	TS   time.Time
	Line string
}

// ProgressWrite is one write of a running attempt's progress and lines.
type ProgressWrite struct {
	Queue   string
	ID      string
	Attempt int
	// Seq increases with every write of the run: a write whose Seq is not
	// above the last one applied writes nothing (a call sent again) and
	// answers as the last one did. 0 is the next number, unchecked.
	Seq int64
	// Progress is the progress JSON; nil leaves it unchanged.
	Progress []byte
	// Lines are appended to the attempt's log, oldest first.
	Lines []LogEntry
	// Dropped counts the lines the writer dropped before sending.
	Dropped int64
	// MinInterval refuses a write closer than this to the run's last one.
	MinInterval time.Duration
}

// ProgressStatus is what a progress write did.
type ProgressStatus int

// Progress write outcomes.
const (
	// ProgressWritten: written, or written by an earlier send of the same
	// Seq (then nothing more is).
	ProgressWritten   ProgressStatus = 1
	ProgressLeaseLost ProgressStatus = 0 // nothing written
	ProgressTooSoon   ProgressStatus = 3 // nothing written: within MinInterval of the last write
)

// ProgressResult is the answer of WriteProgress.
type ProgressResult struct {
	Status ProgressStatus
	// Dropped is how many lines this write dropped (over the caps).
	Dropped int64
	// RetryAfter is, for ProgressTooSoon, how long until a write may land.
	RetryAfter time.Duration
}

// logEntry is a line as the log list stores it: the ms since the time in
// the task id, a space, the line.
func logEntry(idTime time.Time, e LogEntry) string {
	off := max(e.TS.UnixMilli()-idTime.UnixMilli(), 0)
	return strconv.FormatInt(off, 10) + " " + e.Line
}

// WriteProgress writes w, fenced on the attempt, the worker (s.WorkerID)
// and, when s.Claim is set, the claim nonce (see lua/progress.lua).
func (r *RDB) WriteProgress(ctx context.Context, s *WorkerSettings, now time.Time, w *ProgressWrite, caps LogCaps) (ProgressResult, error) {
	idTime := TaskIDTime(w.ID)
	lines := make([]string, len(w.Lines))
	for i, e := range w.Lines {
		lines[i] = logEntry(idTime, e)
	}
	v, err := r.callProgress(ctx, &progressKeys{
		Task: r.keys.Task(w.Queue, w.ID), Log: r.keys.TaskLog(w.Queue, w.ID, w.Attempt), Events: r.keys.Events(w.Queue),
	}, &progressArgs{
		Now: now.UnixMilli(), ID: w.ID, Attempt: w.Attempt, WorkerID: s.WorkerID, Claim: s.Claim, Seq: w.Seq,
		Progress: string(w.Progress), EventsMaxLen: s.EventsMaxLen, CapLines: caps.Lines, CapBytes: caps.Bytes,
		IntervalMS: w.MinInterval.Milliseconds(), Dropped: w.Dropped, Lines: lines,
	})
	if err != nil {
		return ProgressResult{}, err
	}
	out := ProgressResult{Status: ProgressStatus(v.Code)}
	switch out.Status {
	case ProgressLeaseLost: // nothing written, nothing more to report
	case ProgressWritten:
		out.Dropped = v.N
	case ProgressTooSoon:
		out.RetryAfter = time.Duration(v.N) * time.Millisecond
	}
	return out, nil
}

// TruncatedMarker is the line a log page starts an attempt with when that
// attempt's oldest lines were dropped.
func TruncatedMarker(n int64) string {
	return "[dtq: " + strconv.FormatInt(n, 10) + " earlier lines truncated]"
}

// ErrBadCursor means a log cursor is not one TaskLogs answered.
var ErrBadCursor = errors.New("bad cursor")

// logCursor is where a log read resumes: an attempt and the number of its
// next line (dropped lines counted), written "<attempt>:<line>".
type logCursor struct {
	attempt int
	line    int64
}

func parseLogCursor(s string) (logCursor, bool) {
	a, l, ok := strings.Cut(s, ":")
	if !ok {
		return logCursor{}, false
	}
	an, err1 := strconv.Atoi(a)
	ln, err2 := strconv.ParseInt(l, 10, 64)
	if err1 != nil || err2 != nil || an < 1 || ln < 0 {
		return logCursor{}, false
	}
	return logCursor{an, ln}, true
}

func (c logCursor) String() string {
	return strconv.Itoa(c.attempt) + ":" + strconv.FormatInt(c.line, 10)
}

// TaskLogs reads up to limit lines of a task's logs, oldest first:
// attempt's alone, or every attempt's in order when attempt is 0. An
// attempt whose oldest lines were dropped starts with the TruncatedMarker
// item (not counted in limit). The next cursor is always set: it resumes
// after the last line answered, so a follower polls it for new lines. A
// task that does not exist (or is gone) is ErrNotFound.
func (r *RDB) TaskLogs(ctx context.Context, id string, attempt int, cursor string, limit int) (*dtqtype.ListResult[dtqtype.LogLine], error) {
	num, ok := ParseTaskID(id)
	if !ok {
		return nil, ErrNotFound
	}
	queue, err := r.QueueName(ctx, num)
	if err != nil {
		return nil, err
	}
	if queue == "" {
		return nil, ErrNotFound
	}
	v, err := r.c.HMGet(ctx, r.keys.Task(queue, id), "status", "lg").Result()
	if err != nil {
		return nil, err
	}
	if v[0] == nil {
		return nil, ErrNotFound
	}
	lg := 0
	if s, ok := v[1].(string); ok {
		lg, _ = strconv.Atoi(s)
	}
	last := max(lg, 1)
	if attempt > 0 {
		last = attempt
	}
	cur := logCursor{attempt: max(attempt, 1)}
	if cursor != "" {
		// A page's cursor names an attempt it read (lg only grows) and a
		// line no further than that attempt logged (checked by the first
		// page): anything else was not answered here.
		c, ok := parseLogCursor(cursor)
		if !ok || (attempt > 0 && c.attempt != attempt) || c.attempt > last {
			return nil, ErrBadCursor
		}
		cur = c
	}
	idTime := TaskIDTime(id)
	out := &dtqtype.ListResult[dtqtype.LogLine]{Items: []dtqtype.LogLine{}}
	left := limit
	for cur.attempt <= last {
		page, err := r.logPage(ctx, queue, id, cur, left, idTime)
		if err != nil {
			return nil, err
		}
		if cur.line > page.logged {
			return nil, ErrBadCursor
		}
		out.Items = append(out.Items, page.items...)
		left -= page.lines
		cur.line = page.next
		if left <= 0 || cur.attempt == last {
			break
		}
		cur = logCursor{attempt: cur.attempt + 1}
	}
	out.NextCursor = cur.String()
	return out, nil
}

type logPageResult struct {
	items  []dtqtype.LogLine
	lines  int   // lines answered (the marker not counted)
	next   int64 // the number of the line after them
	logged int64 // the lines the attempt logged, dropped ones included
}

func (r *RDB) logPage(ctx context.Context, queue, id string, cur logCursor, limit int, idTime time.Time) (*logPageResult, error) {
	v, err := r.callLogPage(ctx, &logPageKeys{Log: r.keys.TaskLog(queue, id, cur.attempt)},
		&logPageArgs{Cursor: cur.line, Count: limit})
	if err != nil {
		return nil, err
	}
	dropped, from := v.Dropped, v.First
	res := &logPageResult{next: from, logged: v.Logged}
	for _, s := range v.Lines {
		off, line, _ := strings.Cut(s, " ")
		ms, _ := strconv.ParseInt(off, 10, 64)
		res.items = append(res.items, dtqtype.LogLine{Attempt: cur.attempt,
			TS: dtqtype.MillisTime(idTime.UnixMilli() + ms), Line: line})
	}
	res.lines = len(res.items)
	res.next = from + int64(res.lines)
	if dropped > 0 && cur.line < dropped && res.lines > 0 {
		marker := dtqtype.LogLine{Attempt: cur.attempt, TS: res.items[0].TS, Line: TruncatedMarker(dropped)}
		res.items = append([]dtqtype.LogLine{marker}, res.items...)
	}
	return res, nil
}
