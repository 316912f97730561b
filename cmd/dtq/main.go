// Command dtq runs dtq's API server, the all-in-one development setup and
// the admin commands. All of it lives in internal/cli; main only wires the
// process to it.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/dtq-io/dtq/cmd/dtq/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		// After the first signal starts a graceful shutdown, a second one
		// gets the default behaviour and ends the process at once.
		<-ctx.Done()
		stop()
	}()
	code := cli.Execute(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
