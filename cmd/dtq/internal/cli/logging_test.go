package cli

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestUnknownVariablesWarned starts `dtq api` with a misspelt variable: it
// is named at start with a did-you-mean, before the command goes on.
func TestUnknownVariablesWarned(t *testing.T) {
	t.Parallel()
	var out, errOut syncBuffer
	vars := map[string]string{"DTQ_REDIS_URL": "redis://127.0.0.1:1/0", "DTQ_LOG_JSON": "true", "DTQ_LOG_FORMAT": "json"}
	e := &env{stdout: &out, stderr: &errOut, lookupEnv: mapEnv(vars), environ: func() []string {
		return []string{"DTQ_REDIS_URL=redis://127.0.0.1:1/0", "DTQ_LOG_JSON=true", "DTQ_LOG_FORMAT=json", "HOME=/root"}
	}}
	code := execute(context.Background(), []string{"api"}, e)
	require.Equal(t, exitFailure, code, errOut.String())
	first, _, _ := strings.Cut(errOut.String(), "\n")
	var rec map[string]any
	require.NoError(t, json.Unmarshal([]byte(first), &rec), first)
	require.Equal(t, "WARN", rec["level"])
	require.Equal(t, "unknown environment variable DTQ_LOG_FORMAT is ignored; did you mean DTQ_LOG_JSON?", rec["msg"])
}

func TestRedisLoggerWritesSlog(t *testing.T) {
	t.Parallel()
	var buf syncBuffer
	var target atomic.Pointer[slog.Logger]
	target.Store(slog.New(slog.NewJSONHandler(&buf, nil)))
	redisLogger{target: &target}.Printf(context.Background(), "redis: %s:%d: connection pool: failed to dial\n", "pool.go", 770)
	var rec map[string]any
	require.NoError(t, json.Unmarshal([]byte(buf.String()), &rec), buf.String())
	require.Equal(t, "WARN", rec["level"])
	require.Equal(t, "redis: pool.go:770: connection pool: failed to dial", rec["msg"])
	require.Equal(t, "go-redis", rec["component"])
}
