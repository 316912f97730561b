package wire

import (
	"encoding/json"
	"fmt"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/internal/idemkey"
)

// CheckIdempotencyKey checks an Idempotency-Key header as the Client will
// read it (see dtq.Submission.IdempotencyKey): a key that is not 1..255
// printable ASCII characters, once unquoted, is a *dtq.ValidationError.
func CheckIdempotencyKey(k string) error {
	if _, err := idemkey.Normalize(k, dtq.MaxIdempotencyKey); err != nil {
		return invalid("idempotency_key", "%s", err.Error())
	}
	return nil
}

// jsonString reads a JSON string field.
func jsonString(field string, raw json.RawMessage) (string, error) {
	var v string
	if err := json.Unmarshal(raw, &v); err != nil {
		return "", invalid(field, "must be a string")
	}
	return v, nil
}

// invalid is a field error; it matches dtq.ErrInvalidTask.
func invalid(field, format string, args ...any) error {
	return &dtq.ValidationError{Field: field, Message: fmt.Sprintf(format, args...)}
}
