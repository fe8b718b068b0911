// Command docstream is an HTTP gateway that runs the Cursor CLI agent and
// serves its work as typed documents over SSE, JSON and an OpenAI-compatible
// API.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		if !reported(err) {
			fmt.Fprintln(os.Stderr, "docstream:", err)
		}
		os.Exit(exitCode(err))
	}
}
