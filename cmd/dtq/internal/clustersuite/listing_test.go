package clustersuite_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
)

// TestListingPagesAcrossMasters: a listing of every queue pages by one
// cursor through queues on three masters (list_page runs on each queue's
// master, and its script is loaded there on first use), and a queued task's
// payload is read from its stream entry on its own master.
func TestListingPagesAcrossMasters(t *testing.T) {
	t.Parallel()
	c := sharedCluster(t)
	cc := c.Client(t)
	prefix := runPrefix("listing")
	ctx := context.Background()
	queues := queuesOnEveryMaster(t, c, prefix)
	dep := openDeployment(t, cc, prefix)
	client, err := dep.NewClient(nil)
	require.NoError(t, err)
	insp := dep.Inspector()

	var want []string
	for i := range 4 {
		for _, q := range queues {
			res, err := client.Submit(ctx, dtq.Submission{Queue: q, Type: "idle", Payload: map[string]int{"n": i}})
			require.NoError(t, err)
			want = append(want, res.TaskID)
		}
	}
	slices.Reverse(want) // newest first

	var got []string
	cursor := ""
	for {
		res, err := insp.ListTasks(ctx, &dtq.TaskListParams{Limit: 5, Cursor: cursor})
		require.NoError(t, err)
		for _, it := range res.Items {
			got = append(got, it.ID)
			require.JSONEq(t, fmt.Sprintf(`{"n":%d}`, round(want, it.ID, len(queues))), string(it.Payload))
		}
		if res.NextCursor == "" {
			break
		}
		cursor = res.NextCursor
	}
	require.Equal(t, want, got)
}

// round is the round (0..3) in which task id was submitted: want is newest
// first, one task per queue per round.
func round(want []string, id string, perRound int) int {
	i := slices.Index(want, id)
	return (len(want) - 1 - i) / perRound
}
