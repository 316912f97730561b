package attempt

import (
	"encoding/json"
	"errors"

	"github.com/dtq-io/dtq/internal/rdb"
)

// Success is the success finalize of attempt of task id with result body
// (JSON, nil for none): a body over maxBytes is dropped and flagged
// truncated, so an oversized result never reaches Redis.
func Success(id string, attempt int, body []byte, maxBytes int) rdb.Success {
	if len(body) > maxBytes {
		return rdb.Success{ID: id, Attempt: attempt, Truncated: true}
	}
	return rdb.Success{ID: id, Attempt: attempt, Result: body}
}

// ResultJSON encodes a handler's result: nil stays nil; json.RawMessage and
// []byte must already be valid JSON.
func ResultJSON(res any) ([]byte, error) {
	switch v := res.(type) {
	case nil:
		return nil, nil
	case json.RawMessage:
		if !json.Valid(v) {
			return nil, errors.New("result is not valid JSON")
		}
		return v, nil
	case []byte:
		if !json.Valid(v) {
			return nil, errors.New("result is not valid JSON")
		}
		return v, nil
	}
	return json.Marshal(res)
}
