package dtq

import (
	"testing"
	"time"

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
