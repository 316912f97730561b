package dtq_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
)

// metricSum sums every series of the named counter family of w.
func metricSum(t *testing.T, w *dtq.Worker, name string) float64 {
	t.Helper()
	mfs, err := w.Gatherer().Gather()
	require.NoError(t, err)
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			total += m.GetCounter().GetValue()
		}
	}
	return total
}
