package gateway

import (
	"errors"
	"net/http"
	"testing"
)

// TestOffStack checks that offStack returns once f has run and raises f's
// panic again on the caller's goroutine, with its value, so that the
// handler's recovery (a 500, or net/http's own for ErrAbortHandler) sees
// it as before.
func TestOffStack(t *testing.T) {
	ran := false
	offStack(func() { ran = true })
	if !ran {
		t.Fatal("offStack returned before f ran")
	}
	boom := errors.New("boom")
	for _, want := range []any{boom, http.ErrAbortHandler, "text"} {
		got := func() (p any) {
			defer func() { p = recover() }()
			offStack(func() { panic(want) })
			return nil
		}()
		if got != want {
			t.Errorf("recovered %v, want the panic of f, %v", got, want)
		}
	}
}
