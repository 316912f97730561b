package workertest_test

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/internal/redistest"
	"github.com/dtq-io/dtq/internal/workertest"
)

func TestMain(m *testing.M) { os.Exit(redistest.Main(m)) }

// TestRunStopsTheWorker: stop returns once Run has, and the worker has
// recorded its stop; a second stop (the test's cleanup) does nothing.
func TestRunStopsTheWorker(t *testing.T) {
	t.Parallel()
	s := redistest.New(t)
	d, err := dtq.Open(s.Client, &dtq.DeploymentConfig{KeyPrefix: s.Prefix})
	require.NoError(t, err)
	w, err := d.NewWorker(&dtq.WorkerConfig{WorkerID: "wt", Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	insp := d.Inspector()
	stop := workertest.Run(t, w)
	require.Eventually(t, func() bool {
		_, err := insp.GetWorker(context.Background(), "wt")
		return err == nil
	}, 10*time.Second, 10*time.Millisecond, "the worker registers")
	stop() // returns once Run has
	wi, err := insp.GetWorker(context.Background(), "wt")
	require.NoError(t, err)
	require.Equal(t, "stopped", wi.Status)
}
