package dtq

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// RunUntilSignal is Run that also stops at the process's first SIGINT or
// SIGTERM (what `kill`, Ctrl-C, Kubernetes and systemd send), and drains as
// Run does when its context ends: running tasks get DrainTimeout to finish,
// the rest are handed back. It is the way to run a worker as a program's
// main loop:
//
//	if err := w.RunUntilSignal(context.Background()); err != nil {
//		log.Fatal(err)
//	}
//
// The first signal restores the signals' default behaviour, so a second
// one ends the process at once, without draining, as `dtq worker` does
// (unless the program listens for those signals itself with
// signal.Notify). Cancelling ctx stops the worker as Run does.
func (w *Worker) RunUntilSignal(ctx context.Context) error {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(ch)
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		select {
		case s := <-ch:
			// Stop first: from here on a second signal has its default
			// effect, the way out of a drain that takes too long.
			signal.Stop(ch)
			w.cfg.Logger.Info("stopping on "+s.String()+": running tasks get the drain timeout to finish; a second signal quits at once",
				"worker_id", w.cfg.WorkerID, "drain_timeout", w.cfg.DrainTimeout.String())
			stop()
		case <-ctx.Done():
		}
	}()
	return w.Run(ctx)
}
