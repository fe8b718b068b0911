package simulator

import (
	"context"
	"os"
	"testing"
)

// childEnv makes the test binary act as `docstream agent-sim`, so that tests
// can run the simulator as a real process (signals, exit codes, pipes).
const childEnv = "DOCSTREAM_SIM_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		os.Exit(Main(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv))
	}
	os.Exit(m.Run())
}
