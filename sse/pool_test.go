package sse

import (
	"bytes"
	"io"
	"testing"
)

// TestHugeFrameBufferNotPooled checks that the buffer a frame of megabytes
// grew is not kept for the frames after it.
func TestHugeFrameBufferNotPooled(t *testing.T) {
	f := Frame{ID: 1, Name: "tool_result", Data: bytes.Repeat([]byte("x"), 1<<20)}
	if _, err := f.WriteTo(io.Discard); err != nil {
		t.Fatal(err)
	}
	if err := WriteData(io.Discard, f.Data); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 4; i++ {
		if bp := bufs.Get().(*[]byte); cap(*bp) > maxPooled {
			t.Fatalf("a %d KiB buffer is pooled", cap(*bp)>>10)
		}
	}
}
