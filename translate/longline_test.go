package translate_test

import (
	"io"
	"runtime"
	"strings"
	"testing"

	"github.com/docstream/docstream/translate"
)

// TestLongLineMemory checks what a line of megabytes costs the decoder: it
// is assembled with about twice its size allocated, and its buffer is not
// kept once the next line is read.
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
	if d.LongBufCap() < size {
		t.Fatalf("the long line was not assembled in the long-line buffer (cap %d)", d.LongBufCap())
	}
	if ev, err := d.Next(); err != nil || ev.Text != "short" {
		t.Fatalf("the next line: %q, %v", ev.Text, err)
	}
	if c := d.LongBufCap(); c > 1<<20 {
		t.Errorf("the long line's buffer (%d bytes) is kept after the next line", c)
	}
	if _, err := d.Next(); err != io.EOF {
		t.Errorf("end: %v", err)
	}
}
