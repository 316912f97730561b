package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// actionTimeout bounds an admin action once it started. The action runs on
// a context the client cannot cancel: leaving mid-way must not cut a bulk
// action short or let one happen without its audit entry.
const actionTimeout = 30 * time.Second

// maxActionBody bounds the optional JSON body of an admin action.
const maxActionBody = 64 << 10

// actionContext is the context an admin action runs on: the request
// context's values, not its cancellation (see actionTimeout).
func actionContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), actionTimeout)
}

// decodeActionBody decodes the optional JSON object body of an admin action
// into dst and reports whether there was one. An empty body leaves dst
// alone; a body must be sent as JSON and hold only dst's fields. example is
// a valid body, for the error message.
func decodeActionBody(w http.ResponseWriter, r *http.Request, dst any, example string) (bool, error) {
	return decodeBody(w, r, dst, example, maxActionBody)
}

// decodeBody is decodeActionBody with a body limit of limit bytes.
func decodeBody(w http.ResponseWriter, r *http.Request, dst any, example string, limit int64) (bool, error) {
	raw, err := readBody(w, r, limit)
	if err != nil {
		return false, err
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return false, nil
	}
	if err := requireJSON(r); err != nil {
		return false, err
	}
	bad := badRequest("", "the body must be a JSON object like %s, or empty", example)
	if raw[0] != '{' {
		return false, bad
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &te) && te.Field != "":
			return false, badRequest(te.Field, "%s: must be a %s", te.Field, te.Type.Kind())
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			f, _ := strconv.Unquote(strings.TrimPrefix(err.Error(), "json: unknown field "))
			return false, badRequest(f, "%s: is not a known field; the body looks like %s", f, example)
		}
		return false, bad
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return false, bad
	}
	return true, nil
}

// noBody refuses a body on an action that takes none; "{}" is accepted.
func noBody(w http.ResponseWriter, r *http.Request) error {
	_, err := decodeActionBody(w, r, &struct{}{}, "{}")
	return err
}

// actionInput checks an admin action's query string (none accepted) and
// body (none but "{}").
func actionInput(w http.ResponseWriter, r *http.Request) error {
	if _, err := parseQuery(r); err != nil {
		return err
	}
	return noBody(w, r)
}

// partial is the audit detail of an action that failed after doing some of
// its work.
func partial(err error, format string, args ...any) string {
	d := fmt.Sprintf(format, args...)
	if err != nil {
		d += " (partial: the action stopped on an error)"
	}
	return d
}
