package translate

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
)

// readAllLines reads lr to its end and returns the lines, the long lines
// joined from their ErrBufferFull pieces, and checks every piece.
func readAllLines(t *testing.T, lr *lineReader, max int) []string {
	t.Helper()
	var lines []string
	var cur []byte
	for {
		chunk, err := lr.ReadSlice('\n')
		switch {
		case err == bufio.ErrBufferFull:
			if len(chunk) != max {
				t.Fatalf("a full buffer returned %d bytes, want %d", len(chunk), max)
			}
			cur = append(cur, chunk...)
			continue
		case err == nil:
			if chunk[len(chunk)-1] != '\n' {
				t.Fatalf("a line without its newline: %q", chunk)
			}
		}
		cur = append(cur, chunk...)
		if len(cur) > 0 {
			lines = append(lines, string(cur))
		}
		cur = nil
		if err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatalf("unexpected error %v", err)
			}
			return lines
		}
	}
}

func TestLineReaderGrowsAndSplits(t *testing.T) {
	var in bytes.Buffer
	want := []string{}
	for i, n := range []int{0, 10, 4095, 4096, 4097, 9000, 70000, 3, 200000} {
		line := string(bytes.Repeat([]byte{'a' + byte(i)}, n)) + "\n"
		in.WriteString(line)
		want = append(want, line)
	}
	in.WriteString("tail without newline")
	want = append(want, "tail without newline")
	for name, r := range map[string]io.Reader{
		"whole":    bytes.NewReader(in.Bytes()),
		"one byte": iotest.OneByteReader(bytes.NewReader(in.Bytes())),
		"half":     iotest.HalfReader(bytes.NewReader(in.Bytes())),
	} {
		lr := newLineReader(r, 16, 64<<10)
		got := readAllLines(t, lr, 64<<10)
		if len(got) != len(want) {
			t.Fatalf("%s: %d lines, want %d", name, len(got), len(want))
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("%s: line %d has %d bytes, want %d", name, i, len(got[i]), len(want[i]))
			}
		}
		if len(lr.buf) != 64<<10 {
			t.Errorf("%s: the buffer is %d bytes after a 70000-byte line, want the maximum", name, len(lr.buf))
		}
	}
}

func TestLineReaderStaysSmallForShortLines(t *testing.T) {
	var in bytes.Buffer
	for i := 0; i < 1000; i++ {
		in.WriteString(`{"type":"assistant","message":{"content":[{"type":"text","text":"hello"}]}}` + "\n")
	}
	// One line at a time, as an agent writes them.
	lr := newLineReader(iotest.OneByteReader(&in), firstBufSize, readBufSize)
	if n := len(readAllLines(t, lr, readBufSize)); n != 1000 {
		t.Fatalf("%d lines", n)
	}
	if len(lr.buf) != firstBufSize {
		t.Errorf("the buffer grew to %d bytes for short lines read one at a time", len(lr.buf))
	}
}

func TestLineReaderGrowsForBursts(t *testing.T) {
	var in bytes.Buffer
	for i := 0; i < 5000; i++ {
		in.WriteString(`{"type":"assistant","message":{"content":[{"type":"text","text":"hello"}]}}` + "\n")
	}
	// A reader that fills whatever it is given: a backlog.
	lr := newLineReader(&in, firstBufSize, readBufSize)
	if n := len(readAllLines(t, lr, readBufSize)); n != 5000 {
		t.Fatalf("%d lines", n)
	}
	if len(lr.buf) != readBufSize {
		t.Errorf("the buffer is %d bytes after a backlog, want %d", len(lr.buf), readBufSize)
	}
}

// FuzzLineReader checks that a lineReader returns the same lines as
// bufio.Reader whatever the sizes and the read pattern.
func FuzzLineReader(f *testing.F) {
	f.Add([]byte("a\nbb\n\nccc"), uint8(1), uint8(3))
	f.Add(bytes.Repeat([]byte("xyz\n"), 100), uint8(16), uint8(0))
	f.Fuzz(func(t *testing.T, in []byte, size, growth uint8) {
		first := int(size%64) + 1
		max := first << (growth % 5)
		lr := newLineReader(iotest.HalfReader(bytes.NewReader(in)), first, max)
		got := readAllLines(t, lr, max)
		want := readAllLines(t, &lineReader{rd: bytes.NewReader(in), buf: make([]byte, max), max: max}, max)
		// bufio.Reader as the reference for whole lines.
		var ref []string
		br := bufio.NewReader(bytes.NewReader(in))
		for {
			s, err := br.ReadString('\n')
			if s != "" {
				ref = append(ref, s)
			}
			if err != nil {
				break
			}
		}
		if len(got) != len(ref) || len(want) != len(ref) {
			t.Fatalf("%d / %d lines, bufio %d", len(got), len(want), len(ref))
		}
		for i := range ref {
			if got[i] != ref[i] || want[i] != ref[i] {
				t.Fatalf("line %d: %q / %q, bufio %q", i, got[i], want[i], ref[i])
			}
		}
	})
}

// pendingReader returns its input a few bytes at a time, with ErrPending
// before every piece, as a pipe read with a deadline does.
type pendingReader struct {
	in      []byte
	step    int
	pending bool
}

func (p *pendingReader) Read(b []byte) (int, error) {
	if len(p.in) == 0 {
		return 0, io.EOF
	}
	if p.pending = !p.pending; p.pending {
		return 0, ErrPending
	}
	n := copy(b, p.in[:min(p.step, len(p.in))])
	p.in = p.in[n:]
	return n, nil
}

func TestDecoderResumesAfterPending(t *testing.T) {
	line := `{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"` + string(bytes.Repeat([]byte("x"), 300)) + `"}]},"session_id":"s"}`
	in := []byte(`{"type":"system","subtype":"init","session_id":"s","model":"m"}` + "\n" + line + "\n\n" + line + "\n" + `{"type":"result","subtype":"success","result":"r","session_id":"s"}`)
	plain := decodeAll(t, NewDecoder(bytes.NewReader(in), 0), false, false)
	for _, bufSize := range []int{16, 64, 4096} {
		for _, step := range []int{1, 7, 100, 1000} {
			for _, probe := range []bool{false, true} {
				dec := NewDecoderSize(&pendingReader{in: in, step: step}, 0, bufSize)
				got := decodeAll(t, dec, true, probe)
				if len(got) != len(plain) {
					t.Fatalf("buffer %d, step %d, HasLine %v: %d events, want %d", bufSize, step, probe, len(got), len(plain))
				}
				for i := range plain {
					if got[i] != plain[i] {
						t.Errorf("buffer %d, step %d, HasLine %v: event %d is %q, want %q", bufSize, step, probe, i, got[i], plain[i])
					}
				}
			}
		}
	}
}

// decodeAll returns each event's kind and line; with idle set it gives the
// buffer back at every ErrPending, with probe set it asks HasLine before
// every Next, as the gateway's pump does.
func decodeAll(t *testing.T, dec *Decoder, idle, probe bool) []string {
	t.Helper()
	var out []string
	for {
		if probe {
			dec.HasLine()
		}
		ev, err := dec.Next()
		if err == ErrPending {
			if idle {
				dec.Idle()
			}
			continue
		}
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ev.Kind.String()+" "+string(ev.Raw))
	}
}

// TestDecoderGivesBuffersBack decodes inputs one after the other and at the
// same time, so that buffers grown and given back at the end of one input
// are read into by the next: every decoder sees exactly its own lines.
func TestDecoderGivesBuffersBack(t *testing.T) {
	input := func(k, n int) []byte {
		var b bytes.Buffer
		for i := 0; i < n; i++ {
			fmt.Fprintf(&b, `{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"input %d line %d %s"}]}}`+"\n", k, i, strings.Repeat("x", (i*37)%3000))
		}
		return b.Bytes()
	}
	check := func(t *testing.T, k int) {
		in := input(k, 60)
		d := NewDecoder(iotest.HalfReader(bytes.NewReader(in)), 0)
		for i := 0; ; i++ {
			ev, err := d.Next()
			if err == io.EOF {
				if i != 60 {
					t.Errorf("input %d: %d lines, want 60", k, i)
				}
				if d.r != nil || d.w != nil {
					t.Errorf("input %d: the decoder kept its buffers after the end", k)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if want := fmt.Sprintf("input %d line %d ", k, i); !strings.HasPrefix(ev.Text, want) || len(ev.Text) != len(want)+(i*37)%3000 {
				t.Fatalf("input %d line %d: got %.40q…", k, i, ev.Text)
			}
		}
	}
	for k := 0; k < 5; k++ {
		check(t, k)
	}
	var wg sync.WaitGroup
	for k := 5; k < 13; k++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			check(t, k)
		}()
	}
	wg.Wait()
}

func TestDecoderHasLine(t *testing.T) {
	pr, pw := io.Pipe()
	d := NewDecoder(pr, 0)
	go func() {
		pw.Write([]byte("{\"type\":\"user\"}\n{\"type\":\"user\"}\n{\"type\":"))
		pw.Write([]byte("\"user\"}\n"))
		pw.Close()
	}()
	if d.HasLine() {
		t.Fatal("HasLine before any read")
	}
	if _, err := d.Next(); err != nil {
		t.Fatal(err)
	}
	if !d.HasLine() {
		t.Error("a second whole line is buffered, HasLine says no")
	}
	if _, err := d.Next(); err != nil {
		t.Fatal(err)
	}
	if d.HasLine() {
		t.Error("only part of a line is buffered, HasLine says yes")
	}
	if _, err := d.Next(); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Next(); err != io.EOF || d.HasLine() {
		t.Errorf("at the end: %v, HasLine %v", err, d.HasLine())
	}
}
