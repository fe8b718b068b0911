package acp_test

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/docstream/docstream/acp"
)

// seeds returns the lines of testdata/agent.jsonl, as an agent writes them.
func seeds(t testing.TB) [][]byte {
	b, err := os.ReadFile("testdata/agent.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Split(bytes.TrimSpace(b), []byte("\n"))
}

func TestParse(t *testing.T) {
	var kinds []string
	for _, line := range seeds(t) {
		m, err := acp.Parse(line)
		switch {
		case errors.Is(err, acp.ErrNotMessage):
			kinds = append(kinds, "not")
		case err != nil:
			t.Fatalf("%s: %v", line, err)
		case m.IsRequest():
			kinds = append(kinds, "request")
		case m.IsResponse():
			kinds = append(kinds, "response")
		default:
			kinds = append(kinds, "notification")
		}
	}
	want := "notification request notification response response request notification response response not not not"
	if got := strings.Join(kinds, " "); got != want {
		t.Fatalf("got %s\nwant %s", got, want)
	}
}

func TestReadLinesOversize(t *testing.T) {
	in := "short\n" + strings.Repeat("x", 100) + "\n\n  \nlast"
	type line struct {
		data []byte
		size int
	}
	var got []line
	if err := acp.ReadLines(strings.NewReader(in), 10, func(l []byte, size int) {
		got = append(got, line{bytes.Clone(l), size})
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || string(got[0].data) != "short" || got[1].data != nil || got[1].size != 100 || string(got[2].data) != "last" {
		t.Fatalf("got %+v", got)
	}
}

// FuzzReadLines reads any output as lines and parses each: nothing
// panics, no line is longer than the limit, and a message written again
// parses to the same message.
func FuzzReadLines(f *testing.F) {
	lines := seeds(f)
	f.Add(bytes.Join(lines, []byte("\n")), 64)
	for _, l := range lines {
		f.Add(l, 16)
	}
	f.Fuzz(func(t *testing.T, in []byte, max int) {
		max = max%4096 + 1
		if max < 1 {
			max += 4096
		}
		total := 0
		err := acp.ReadLines(bytes.NewReader(in), max, func(line []byte, size int) {
			total += size
			if line == nil {
				return
			}
			if len(line) > max {
				t.Fatalf("a line of %d bytes, over the limit %d", len(line), max)
			}
			m, err := acp.Parse(line)
			if err != nil {
				return
			}
			var out bytes.Buffer
			w := acp.NewWriter(&out)
			switch {
			case m.IsResponse() && m.Error != nil:
				err = w.Fail(m.ID, m.Error.Code, m.Error.Message)
			case m.IsResponse():
				err = w.Reply(m.ID, m.Result)
			case len(m.ID) > 0:
				err = w.Request(m.ID, m.Method, m.Params)
			default:
				err = w.Notify(m.Method, m.Params)
			}
			if err != nil {
				return // the params were not valid JSON the writer accepts
			}
			again, err := acp.Parse(bytes.TrimSuffix(out.Bytes(), []byte("\n")))
			if err != nil || again.Method != m.Method || string(again.ID) != string(m.ID) && len(m.ID) > 0 {
				t.Fatalf("written again %q, parsed %+v, %v; was %+v", out.Bytes(), again, err, m)
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		if total > len(in) {
			t.Fatalf("the lines hold %d bytes of an input of %d", total, len(in))
		}
	})
}
