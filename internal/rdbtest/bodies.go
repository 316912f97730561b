package rdbtest

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/internal/rdb"
)

// BodySubmission is a task of queue whose payload (over Redis's default
// hash-max-listpack-value, so a queued task keeps it in its band entry) and
// metadata carry name: a task given another task's body shows. mod, when
// not nil, changes the submission.
func BodySubmission(queue, name string, mod func(*dtq.Submission)) dtq.Submission {
	s := dtq.Submission{Queue: queue, Type: "t",
		Payload:  map[string]string{"name": name, "pad": strings.Repeat("x", 100)},
		Metadata: map[string]string{"trace": "trace-" + name}}
	if mod != nil {
		mod(&s)
	}
	return s
}

// RequireBody fails t unless task id has status want and still carries the
// payload and metadata BodySubmission gave it for name.
func RequireBody(t testing.TB, insp *dtq.Inspector, id, name string, want dtqtype.Status) {
	t.Helper()
	ti, err := insp.GetTask(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, want, ti.Status)
	require.Contains(t, string(ti.Payload), fmt.Sprintf(`"name":%q`, name))
	require.JSONEq(t, fmt.Sprintf(`{"trace":"trace-%s"}`, name), string(ti.Metadata))
}

// RequireNoBandEntries fails t when a band stream of queue holds an entry.
func RequireNoBandEntries(t testing.TB, rc redis.Cmdable, prefix, queue string) {
	t.Helper()
	keys := rdb.NewKeys(prefix)
	for b := range rdb.NumBands {
		require.Zero(t, rc.XLen(context.Background(), keys.Stream(queue, b)).Val(), "band %d of %s", b, queue)
	}
}
