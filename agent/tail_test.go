package agent

import (
	"bytes"
	"strings"
	"testing"

	"github.com/docstream/docstream/openai"
)

// FuzzTail checks the stderr tail: it keeps exactly the last bytes written,
// within its bound, whatever the sizes of the writes.
func FuzzTail(f *testing.F) {
	f.Add([]byte("short"), 16, 3)
	f.Add(bytes.Repeat([]byte("x"), 5000), 64, 7)
	f.Add([]byte("ab\ncd\n"), 1, 1)
	f.Fuzz(func(t *testing.T, data []byte, max, chunk int) {
		if max < 1 || max > 4096 || chunk < 1 {
			return
		}
		for i := range data {
			data[i] = 'a' + data[i]%26
		}
		tl := newTail(max)
		for p := data; len(p) > 0; {
			n := min(chunk, len(p))
			tl.Write(p[:n])
			p = p[n:]
		}
		want := string(data)
		if len(want) > max {
			want = "…" + want[len(want)-max:]
		}
		if got := tl.String(); got != want {
			t.Fatalf("tail %q, want %q", got, want)
		}
		if len(tl.buf) > 2*max {
			t.Fatalf("the tail holds %d bytes for a bound of %d", len(tl.buf), max)
		}
	})
}

// TestTailBoundedUnderFlood writes 20 MiB, as fault:stderr-flood does, and
// checks the tail stays within its bound.
func TestTailBoundedUnderFlood(t *testing.T) {
	tl := newTail(16 << 10)
	chunk := bytes.Repeat([]byte("[stderr-flood] simulated diagnostic output\n"), 800)
	for n := 0; n < 20<<20; n += len(chunk) {
		tl.Write(chunk)
		if len(tl.buf) > 2*(16<<10)+len(chunk) {
			t.Fatalf("tail grew to %d bytes", len(tl.buf))
		}
	}
	if s := tl.String(); len(s) > 16<<10+len("…") || !strings.HasPrefix(s, "…") {
		t.Fatalf("tail of %d bytes, starting %q", len(s), openai.Clip(s, 20))
	}
}
