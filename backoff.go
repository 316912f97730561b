package dtq

import (
	"errors"
	"reflect"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// backoff returns the delay before the attempt after attempt: base·2^(attempt-1)
// capped at max, then jitter of ±jitter·delay (r in [0,1) picks where), then
// clamped to [0, max] again.
func backoff(attempt int, base, ceiling time.Duration, jitter, r float64) time.Duration {
	d := base
	for i := 1; i < attempt && d < ceiling; i++ {
		d *= 2
	}
	d = min(d, ceiling)
	d = time.Duration(float64(d) * (1 + jitter*(2*r-1)))
	return min(max(d, 0), ceiling)
}

// errorClass names the kind of a handler error for error_class: an explicit
// ErrorClass() method wins; otherwise the error's type name, with the
// standard library's anonymous error types shown as "Error".
func errorClass(err error) string {
	var c interface{ ErrorClass() string }
	if errors.As(err, &c) {
		return c.ErrorClass()
	}
	for {
		switch e := err.(type) {
		case *permanentError:
			err = e.err
			continue
		case *retryAfterError:
			err = e.err
			continue
		}
		break
	}
	t := reflect.TypeOf(err)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Name() == "" || !unicode.IsUpper(rune(t.Name()[0])) {
		return "Error"
	}
	return t.Name()
}

// maxErrorMessage is the longest error_message kept, in characters.
const maxErrorMessage = 500

// maxLoggedErrorMessage is the longest handler error message a worker's
// log line carries, in characters; the task keeps up to maxErrorMessage.
const maxLoggedErrorMessage = 200

// logErrorMessage is a handler's error message cut for a log line. The
// message is the handler's error text only: payloads are never logged.
func logErrorMessage(msg string) string {
	if utf8.RuneCountInString(msg) <= maxLoggedErrorMessage {
		return msg
	}
	return oneLine(msg, maxLoggedErrorMessage-1) + "…"
}

// oneLine makes s safe to store and show: control characters become spaces
// and it is cut to n characters (never inside a UTF-8 sequence).
func oneLine(s string, n int) string {
	var b strings.Builder
	count := 0
	for _, r := range s {
		if count == n {
			break
		}
		if r == utf8.RuneError || unicode.IsControl(r) {
			r = ' '
		}
		b.WriteRune(r)
		count++
	}
	return b.String()
}
