package translate_test

import (
	"io"
	"runtime"
	"strings"
	"testing"

	"github.com/docstream/docstream/translate"
)

// TestLongLineMemory checks what a line of megabytes costs the decoder: it
// is assembled with about twice its size allocated.
func TestLongLineMemory(t *testing.T) {
	const size = 8 << 20
	text := strings.Repeat("x", size)
	in := `{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"` + text + `"}]}}` + "\n" +
		`{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"short"}]}}` + "\n"
	d := translate.NewDecoder(strings.NewReader(in), 16<<20)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	ev, err := d.Next()
	runtime.ReadMemStats(&after)
	if err != nil || len(ev.Text) != size {
		t.Fatalf("the long line: %d bytes of text, %v", len(ev.Text), err)
	}
	// The line's buffer (at most twice the line) and the decoded text (the
	// line's size): before, the buffer alone took about five times.
	if got := after.TotalAlloc - before.TotalAlloc; got > 4*size {
		t.Errorf("decoding a %d MiB line allocated %d MiB", size>>20, got>>20)
	}
	if ev, err := d.Next(); err != nil || ev.Text != "short" {
		t.Fatalf("the next line: %q, %v", ev.Text, err)
	}
	if _, err := d.Next(); err != io.EOF {
		t.Errorf("end: %v", err)
	}
}
