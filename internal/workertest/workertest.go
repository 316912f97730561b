// Package workertest runs a dtq worker for the length of a test.
package workertest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/dtq-io/dtq"
)

// stopWithin is how long a stopping worker may take to return from Run.
const stopWithin = 60 * time.Second

// Run starts w.Run in the background and stops it when the test ends, or
// earlier when the returned stop is called: it cancels Run's context and
// fails the test if Run returns an error or has not returned within a
// minute.
func Run(t testing.TB, w *dtq.Worker) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("worker: Run returned %v", err)
				}
			case <-time.After(stopWithin):
				t.Error("worker did not stop")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}
