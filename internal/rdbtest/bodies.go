package rdbtest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/internal/rdb"
)

// BodyChecker submits tasks whose payload and metadata carry a name, and checks
// that each task still carries its own: a task given another task's body
// shows. It works straight on one Redis and key prefix, so the scripts a
// test runs another way (through a fault proxy) are the only ones faults
// reach.
type BodyChecker struct {
	rc     redis.UniversalClient
	prefix string
	client *dtq.Client
	insp   *dtq.Inspector
}

// NewBodyChecker returns a BodyChecker for the tasks under prefix on rc.
func NewBodyChecker(t testing.TB, rc redis.UniversalClient, prefix string) *BodyChecker {
	t.Helper()
	d, err := dtq.Open(rc, &dtq.DeploymentConfig{KeyPrefix: prefix})
	require.NoError(t, err)
	client, err := d.NewClient(nil)
	require.NoError(t, err)
	return &BodyChecker{rc: rc, prefix: prefix, client: client, insp: d.Inspector()}
}

// Submit submits a task of queue whose payload (over Redis's default
// hash-max-listpack-value, so a queued task keeps it in its band entry)
// and metadata carry name, and returns its id. mod, when not nil, changes
// the submission first.
func (b *BodyChecker) Submit(t testing.TB, queue, name string, mod func(*dtq.Submission)) string {
	t.Helper()
	s := dtq.Submission{Queue: queue, Type: "t",
		Payload:  map[string]string{"name": name, "pad": strings.Repeat("x", 100)},
		Metadata: map[string]string{"trace": "trace-" + name}}
	if mod != nil {
		mod(&s)
	}
	res, err := b.client.Submit(context.Background(), s)
	require.NoError(t, err)
	return res.TaskID
}

// Expiring is a Submit mod: the task expires a minute from now.
func Expiring(s *dtq.Submission) { s.ExpiresAt = time.Now().Add(time.Minute) }

// Keyed is a Submit mod: the task's concurrency key is "k".
func Keyed(s *dtq.Submission) { s.ConcurrencyKey = "k" }

// Require fails t unless task id has status want and still carries the
// payload and metadata Submit gave it for name.
func (b *BodyChecker) Require(t testing.TB, id, name string, want dtqtype.Status) {
	t.Helper()
	ti, err := b.insp.GetTask(context.Background(), id)
	require.NoError(t, err)
	require.Equal(t, want, ti.Status)
	require.Contains(t, string(ti.Payload), fmt.Sprintf(`"name":%q`, name))
	require.JSONEq(t, fmt.Sprintf(`{"trace":"trace-%s"}`, name), string(ti.Metadata))
}

// RequireNoBandEntries fails t when a band stream of queue holds an entry.
func (b *BodyChecker) RequireNoBandEntries(t testing.TB, queue string) {
	t.Helper()
	keys := rdb.NewKeys(b.prefix)
	for band := range rdb.NumBands {
		require.Zero(t, b.rc.XLen(context.Background(), keys.Stream(queue, band)).Val(), "band %d of %s", band, queue)
	}
}
