package dtq

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSubmissionUnmarshalJSONNamesThePosition(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, body, want string
	}{
		{"trailing comma", `{"task_type": "echo",}`, "not valid JSON at line 1, column 22 (byte 22): invalid character '}' looking for beginning of object key string"},
		{"second line", "{\"task_type\": \"echo\",\n \"payload\": {\"a\": 1,}}", "not valid JSON at line 2, column 21 (byte 43)"},
		{"cut short", `{"task_type": "echo"`, "unexpected end of JSON input"},
		{"not an object", `["echo"]`, `expected an object like {"task_type": "echo", "payload": {}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var s Submission
			err := s.UnmarshalJSON([]byte(tt.body))
			require.True(t, errors.Is(err, ErrInvalidJSON), "%v", err)
			require.Contains(t, err.Error(), tt.want)
		})
	}
}
