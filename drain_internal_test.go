package dtq

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

func TestDrainingMessage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		n       int
		timeout time.Duration
		want    string
	}{
		{1, 30 * time.Second, "draining 1 running task, up to 30 s"},
		{3, time.Second, "draining 3 running tasks, up to 1 s"},
		{2, 1500 * time.Millisecond, "draining 2 running tasks, up to 1.5s"},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, drainingMessage(tt.n, tt.timeout))
	}
}

func TestLogErrorMessage(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 300)
	tests := []struct{ in, want string }{
		{"", ""},
		{"planned failure 1 of 2", "planned failure 1 of 2"},
		{long, strings.Repeat("é", maxLoggedErrorMessage-1) + "…"},
	}
	for _, tt := range tests {
		got := logErrorMessage(tt.in)
		require.Equal(t, tt.want, got)
		require.LessOrEqual(t, utf8.RuneCountInString(got), maxLoggedErrorMessage)
	}
}
