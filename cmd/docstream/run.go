package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/docstream/docstream/simulator"
)

// usageError is a bad command line; the process exits with code 2.
// reported says that the flag package has already printed it.
type usageError struct {
	error
	reported bool
}

// configError is a configuration that cannot be served: like a bad
// command line, it exits 2 before anything listens.
func configError(err error) error { return usageError{error: fmt.Errorf("configuration: %w", err)} }

// reported says whether err has already been printed.
func reported(err error) bool {
	var u usageError
	return errors.As(err, &u) && u.reported
}

func exitCode(err error) int {
	var u usageError
	if errors.As(err, &u) {
		return 2
	}
	return 1
}

// run is the whole program: it dispatches the subcommands and otherwise
// serves the gateway until ctx ends.
func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "translate":
			return runTranslate(args[1:], stdin, stdout, stderr)
		case "agent-sim":
			if code := simulator.Main(ctx, args[1:], stdin, stdout, stderr, getenv); code != 0 {
				return fmt.Errorf("exit status %d", code)
			}
			return nil
		}
	}
	return serve(ctx, args, getenv, stdout, stderr)
}
