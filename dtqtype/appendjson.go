package dtqtype

import (
	"strconv"
	"unicode/utf8"
)

// AppendJSON appends the JSON encoding of t to b and returns the extended
// buffer. The bytes are exactly those of json.Marshal(t), HTML escaping and
// compaction of Payload, Metadata and Result included; a nil t appends null.
// It exists because encoding a task is a large share of a submission's cost
// and reflection is most of that.
//
// The only error is a raw JSON field that does not hold valid JSON, which
// json.Marshal refuses too; b is then returned unchanged.
//
// A struct embedding *TaskInfo gets this method promoted, and it encodes
// only the TaskInfo part: such a struct must shadow it (as DLQEntry does) or
// not be encoded through it.
func (t *TaskInfo) AppendJSON(b []byte) ([]byte, error) {
	if t == nil {
		return append(b, "null"...), nil
	}
	orig := len(b)
	b, err := t.appendMembers(append(b, '{'))
	if err != nil {
		return b[:orig], err
	}
	return append(b, '}'), nil
}

// AppendJSON appends the JSON encoding of e to b, byte for byte what
// json.Marshal(e) gives: the task's members, then failed_at. It shadows the
// method promoted from *TaskInfo, which would leave failed_at out. Errors
// are those of (*TaskInfo).AppendJSON.
func (e *DLQEntry) AppendJSON(b []byte) ([]byte, error) {
	if e == nil {
		return append(b, "null"...), nil
	}
	orig := len(b)
	b = append(b, '{')
	if e.TaskInfo != nil { // encoding/json skips the members of a nil embedded pointer
		var err error
		if b, err = e.appendMembers(b); err != nil {
			return b[:orig], err
		}
		b = append(b, ',')
	}
	b = append(b, `"failed_at":`...)
	b = e.FailedAt.appendJSON(b)
	return append(b, '}'), nil
}

// appendMembers appends t's members without the braces, in declaration
// order as encoding/json writes them, so embedding types can add theirs.
func (t *TaskInfo) appendMembers(b []byte) ([]byte, error) {
	var err error
	b = append(b, `"task_id":`...)
	b = appendString(b, t.ID)
	b = append(b, `,"queue":`...)
	b = appendString(b, t.Queue)
	b = append(b, `,"task_type":`...)
	b = appendString(b, t.Type)
	b = append(b, `,"payload":`...)
	if b, err = appendRaw(b, t.Payload, "payload"); err != nil {
		return b, err
	}
	b = append(b, `,"priority":`...)
	b = strconv.AppendInt(b, int64(t.Priority), 10)
	b = append(b, `,"max_attempts":`...)
	b = strconv.AppendInt(b, int64(t.MaxAttempts), 10)
	b = append(b, `,"attempt":`...)
	b = strconv.AppendInt(b, int64(t.Attempt), 10)
	b = append(b, `,"timeout_ms":`...)
	b = strconv.AppendInt(b, t.TimeoutMS, 10)
	b = append(b, `,"idempotency_key":`...)
	if t.IdempotencyKey == nil {
		b = append(b, "null"...)
	} else {
		b = appendString(b, *t.IdempotencyKey)
	}
	if t.ConcurrencyKey != "" {
		b = append(b, `,"concurrency_key":`...)
		b = appendString(b, t.ConcurrencyKey)
	}
	if t.DedupKey != "" {
		b = append(b, `,"dedup_key":`...)
		b = appendString(b, t.DedupKey)
	}
	b = append(b, `,"status":`...)
	b = appendString(b, string(t.Status))
	b = append(b, `,"created_at":`...)
	b = t.CreatedAt.appendJSON(b)
	b = append(b, `,"available_at":`...)
	b = t.AvailableAt.appendJSON(b)
	b = append(b, `,"expires_at":`...)
	b = t.ExpiresAt.appendJSON(b)
	b = append(b, `,"metadata":`...)
	if b, err = appendRaw(b, t.Metadata, "metadata"); err != nil {
		return b, err
	}
	b = append(b, `,"cancel_requested":`...)
	b = strconv.AppendBool(b, t.CancelRequested)
	b = append(b, `,"execution":`...)
	b = t.Execution.appendJSON(b)
	b = append(b, `,"attempts":`...)
	if t.Attempts == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range t.Attempts {
			if i > 0 {
				b = append(b, ',')
			}
			b = t.Attempts[i].appendJSON(b)
		}
		b = append(b, ']')
	}
	b = append(b, `,"result":`...)
	if b, err = appendRaw(b, t.Result, "result"); err != nil {
		return b, err
	}
	b = append(b, `,"result_truncated":`...)
	b = strconv.AppendBool(b, t.ResultTruncated)
	b = append(b, `,"result_expired":`...)
	b = strconv.AppendBool(b, t.ResultExpired)
	b = append(b, `,"previous_attempts":`...)
	b = strconv.AppendInt(b, int64(t.PreviousAttempts), 10)
	if t.RetentionSeconds != nil {
		b = append(b, `,"retention_seconds":`...)
		b = strconv.AppendInt(b, *t.RetentionSeconds, 10)
	}
	if t.KeepPayload {
		b = append(b, `,"keep_payload":true`...)
	}
	if t.PayloadDropped {
		b = append(b, `,"payload_dropped":true`...)
	}
	if t.WorkflowID != "" {
		b = append(b, `,"workflow_id":`...)
		b = appendString(b, t.WorkflowID)
	}
	if t.Ref != "" {
		b = append(b, `,"ref":`...)
		b = appendString(b, t.Ref)
	}
	if len(t.Progress) > 0 {
		b = append(b, `,"progress":`...)
		if b, err = appendRaw(b, t.Progress, "progress"); err != nil {
			return b, err
		}
	}
	if t.ProgressAt != nil {
		b = append(b, `,"progress_at":`...)
		b = t.ProgressAt.appendJSON(b)
	}
	if t.LogAttempts != 0 {
		b = append(b, `,"log_attempts":`...)
		b = strconv.AppendInt(b, int64(t.LogAttempts), 10)
	}
	return b, nil
}

// appendJSON appends x as json.Marshal encodes it.
func (x *Execution) appendJSON(b []byte) []byte {
	b = append(b, `{"started_at":`...)
	b = x.StartedAt.appendJSON(b)
	b = append(b, `,"finished_at":`...)
	b = x.FinishedAt.appendJSON(b)
	b = append(b, `,"duration_ms":`...)
	b = appendInt64Ptr(b, x.DurationMS)
	if x.WorkerID != "" {
		b = append(b, `,"worker_id":`...)
		b = appendString(b, x.WorkerID)
	}
	if x.ErrorClass != "" {
		b = append(b, `,"error_class":`...)
		b = appendString(b, x.ErrorClass)
	}
	if x.ErrorMessage != "" {
		b = append(b, `,"error_message":`...)
		b = appendString(b, x.ErrorMessage)
	}
	b = append(b, `,"retryable":`...)
	if x.Retryable == nil {
		b = append(b, "null"...)
	} else {
		b = strconv.AppendBool(b, *x.Retryable)
	}
	b = append(b, `,"retry_delay_ms":`...)
	b = appendInt64Ptr(b, x.RetryDelayMS)
	return append(b, '}')
}

// appendJSON appends a as json.Marshal encodes it.
func (a *AttemptRecord) appendJSON(b []byte) []byte {
	b = append(b, `{"attempt":`...)
	b = strconv.AppendInt(b, int64(a.Attempt), 10)
	b = append(b, `,"worker_id":`...)
	b = appendString(b, a.WorkerID)
	b = append(b, `,"started_at":`...)
	b = a.StartedAt.appendJSON(b)
	b = append(b, `,"finished_at":`...)
	b = a.FinishedAt.appendJSON(b)
	b = append(b, `,"duration_ms":`...)
	b = strconv.AppendInt(b, a.DurationMS, 10)
	b = append(b, `,"outcome":`...)
	b = appendString(b, a.Outcome)
	if a.ErrorClass != "" {
		b = append(b, `,"error_class":`...)
		b = appendString(b, a.ErrorClass)
	}
	if a.ErrorMessage != "" {
		b = append(b, `,"error_message":`...)
		b = appendString(b, a.ErrorMessage)
	}
	return append(b, '}')
}

// appendJSON appends t as MarshalJSON encodes it: TimeLayout in UTC, quoted,
// or null for the zero Time.
func (t Time) appendJSON(b []byte) []byte {
	if t.IsZero() {
		return append(b, "null"...)
	}
	u := t.UTC()
	year, month, day := u.Date()
	if year < 0 || year > 9999 {
		// Outside four digits the layout's own rules apply; not worth copying.
		b = append(b, '"')
		b = u.AppendFormat(b, TimeLayout)
		return append(b, '"')
	}
	hour, minute, sec := u.Clock()
	ms := u.Nanosecond() / 1e6 // the layout truncates, it does not round
	// Indexing a string of digits yields bytes without a conversion; every
	// index is one decimal digit (year is 0..9999, checked above).
	const d = "0123456789"
	return append(b, '"',
		d[year/1000], d[year/100%10], d[year/10%10], d[year%10], '-',
		d[month/10], d[month%10], '-',
		d[day/10], d[day%10], 'T',
		d[hour/10], d[hour%10], ':',
		d[minute/10], d[minute%10], ':',
		d[sec/10], d[sec%10], '.',
		d[ms/100], d[ms/10%10], d[ms%10], 'Z', '"')
}

func appendInt64Ptr(b []byte, p *int64) []byte {
	if p == nil {
		return append(b, "null"...)
	}
	return strconv.AppendInt(b, *p, 10)
}

const hexDigits = "0123456789abcdef"

// stringSafe marks the ASCII bytes encoding/json copies into a string
// unchanged (with HTML escaping on); other ASCII bytes are escaped and
// non-ASCII ones decoded.
var stringSafe = func() (safe [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		switch c {
		case '"', '\\', '<', '>', '&':
		default:
			safe[c] = true
		}
	}
	return safe
}()

// appendString appends s as a JSON string the way encoding/json does:
// short escapes for \b \f \n \r \t, \u00XX for other control bytes and for
// < > &, \u2028 and \u2029 escaped, each invalid UTF-8 byte as \ufffd.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if stringSafe[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
