package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"testing"
)

// TestRunCommandLine covers what the command line answers outside serving:
// help is a success, a bad flag is reported once (by the flag package,
// with the usage) and exits 2, and a transcript that cannot be read is an
// error, not a response.
func TestRunCommandLine(t *testing.T) {
	getenv := func(string) string { return "" }
	for _, args := range [][]string{{"--help"}, {"translate", "--help"}} {
		var out, errOut bytes.Buffer
		if err := run(context.Background(), args, getenv, strings.NewReader(""), &out, &errOut); err != nil {
			t.Errorf("%v: %v, want success", args, err)
		}
		if !strings.Contains(errOut.String(), "usage:") {
			t.Errorf("%v: no usage printed: %q", args, errOut.String())
		}
	}
	for _, args := range [][]string{{"--bogus"}, {"translate", "--bogus"}} {
		var out, errOut bytes.Buffer
		err := run(context.Background(), args, getenv, strings.NewReader(""), &out, &errOut)
		if exitCode(err) != 2 || !reported(err) || strings.Count(errOut.String(), "not defined") != 1 {
			t.Errorf("%v: %v (exit %d, reported %v), printed %q", args, err, exitCode(err), reported(err), errOut.String())
		}
	}
	dir, err := os.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	var out bytes.Buffer
	err = run(context.Background(), []string{"translate"}, getenv, dir, &out, &bytes.Buffer{})
	if err == nil || exitCode(err) != 1 || reported(err) || out.Len() != 0 {
		t.Errorf("translate from a directory: %v, printed %q; want an error and no response", err, out.String())
	}
	var pathErr *os.PathError
	if !errors.As(err, &pathErr) {
		t.Errorf("the error does not say what failed: %v", err)
	}
}
