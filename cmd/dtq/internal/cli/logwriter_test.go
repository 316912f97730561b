package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestLogWriterBatchesLines(t *testing.T) {
	t.Parallel()
	var out syncBuffer
	l := newLogWriter(&out)
	_, err := l.Write([]byte("one\n"))
	require.NoError(t, err)
	_, err = l.Write([]byte("two\n"))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return out.String() == "one\ntwo\n" }, 5*time.Second, 5*time.Millisecond,
		"lines reach the writer within the flush interval")

	big := strings.Repeat("x", logBufferSize) + "\n"
	_, err = l.Write([]byte(big))
	require.NoError(t, err)
	require.Equal(t, "one\ntwo\n"+big, out.String(), "a full buffer is written at once")

	_, err = l.Write([]byte("last\n"))
	require.NoError(t, err)
	require.NoError(t, l.Close())
	require.True(t, strings.HasSuffix(out.String(), big+"last\n"), "Close writes what is left")
	require.NoError(t, l.Close())
	_, err = l.Write([]byte("after\n"))
	require.NoError(t, err)
	require.True(t, strings.HasSuffix(out.String(), "last\nafter\n"), "after Close, writes go through")
}
