// Package wire reads what the HTTP API receives, beyond a submission, into
// the library's types: the JSON body of a schedule (PUT
// /api/v1/schedules/{name}) and the Idempotency-Key header. A submission's
// JSON form is read by dtq.Submission's own UnmarshalJSON, the one codec of
// that form. Refusals are *dtq.ValidationError naming the field, or wrap
// dtq.dtq.ErrInvalidJSON for a body that is not a JSON object at all.
package wire

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/internal/jsonscan"
)

// scheduleTaskFields are the fields of a schedule's JSON form that describe
// its tasks, read as a submission's.
var scheduleTaskFields = map[string]bool{"queue": true, "task_type": true, "payload": true,
	"priority": true, "max_attempts": true, "timeout_ms": true, "metadata": true}

// DecodeSchedule parses the JSON form of schedule name (the body of PUT
// /api/v1/schedules/{name}): spec, timezone, queue, task_type, payload,
// priority, max_attempts, timeout_ms, metadata, and optionally name, which
// must then equal name. Unknown fields and wrong types are
// *ValidationError naming the field; a body that is not a JSON object
// wraps dtq.ErrInvalidJSON. Ranges are checked by dtq.Admin.PutSchedule.
func DecodeSchedule(name string, data []byte) (dtq.Schedule, error) {
	data = bytes.TrimSpace(data)
	if d := jsonscan.Depth(data); d > dtq.MaxJSONDepth+2 {
		return dtq.Schedule{}, fmt.Errorf("%w: nests %d levels deep; the limit is %d", dtq.ErrInvalidJSON, d, dtq.MaxJSONDepth)
	}
	var m map[string]json.RawMessage
	if len(data) == 0 || data[0] != '{' || json.Unmarshal(data, &m) != nil {
		return dtq.Schedule{}, fmt.Errorf("%w: expected an object like {\"spec\": \"@every 1m\", \"task_type\": \"echo\"}", dtq.ErrInvalidJSON)
	}
	s := dtq.Schedule{Name: name}
	task := map[string]json.RawMessage{}
	for field, raw := range m {
		var err error
		switch {
		case field == "spec":
			s.Spec, err = jsonString(field, raw)
		case field == "timezone":
			if string(raw) != "null" {
				s.Timezone, err = jsonString(field, raw)
			}
		case field == "name":
			var n string
			if n, err = jsonString(field, raw); err == nil && n != name {
				err = invalid(field, "is %q but the path names %q; leave it out or make them equal", n, name)
			}
		case scheduleTaskFields[field]:
			task[field] = raw
		default:
			if field == "" {
				field = "(empty name)"
			}
			err = invalid(field, "is not a schedule field; accepted: spec, timezone, queue, task_type, payload, priority, max_attempts, timeout_ms, metadata")
		}
		if err != nil {
			return dtq.Schedule{}, err
		}
	}
	// The task's fields are a submission's: its codec reads them.
	taskJSON, err := json.Marshal(task)
	if err != nil {
		return dtq.Schedule{}, fmt.Errorf("%w: %w", dtq.ErrInvalidJSON, err)
	}
	var sub dtq.Submission
	if err := sub.UnmarshalJSON(taskJSON); err != nil {
		return dtq.Schedule{}, err
	}
	s.Queue, s.TaskType, s.Payload, s.Priority = sub.Queue, sub.Type, sub.Payload, sub.Priority
	s.MaxAttempts, s.Timeout, s.Metadata = sub.MaxAttempts, sub.Timeout, sub.Metadata
	return s, nil
}
