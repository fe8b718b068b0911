package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"strconv"
	"testing"

	"github.com/docstream/docstream/documents"
	"github.com/docstream/docstream/runs"
	"github.com/docstream/docstream/translate"
)

// lineFeed hands a decoder one line per Read: the head once, then the
// deltas over and over.
type lineFeed struct {
	head, deltas [][]byte
	i            int
}

func (f *lineFeed) Read(p []byte) (int, error) {
	var l []byte
	if len(f.head) > 0 {
		l, f.head = f.head[0], f.head[1:]
	} else {
		l = f.deltas[f.i%len(f.deltas)]
		f.i++
	}
	return copy(p, l), nil
}

// interleaved is one run's path from its agent's line to its stream's
// writer, without the reads and writes: decoder, segmenter, document
// builder, log and frames.
type interleaved struct {
	dec  *translate.Decoder
	seg  *translate.Segmenter
	b    documents.Builder
	log  *runs.Log
	w    *bufio.Writer
	sent int // the id of the last frame written
}

func newInterleaved(head, deltas [][]byte) *interleaved {
	s := &interleaved{dec: translate.NewDecoder(&lineFeed{head: head, deltas: deltas}, 0), log: runs.NewLog(10000, 8<<20),
		w: bufio.NewWriterSize(io.Discard, 4096)}
	s.seg = translate.NewSegmenter(translate.Options{ResponseID: "chat_1", Model: "auto"}, func(ev documents.Event) {
		s.b.Add(ev)
		s.log.Append(ev)
	})
	s.seg.Start()
	for range head {
		s.step()
	}
	return s
}

// step takes one line through to the stream's writer.
func (s *interleaved) step() {
	ev, err := s.dec.Next()
	if err != nil {
		panic(err)
	}
	s.seg.Feed(ev)
	for f, _, _ := s.log.Next(s.sent); f.ID != 0; f, _, _ = s.log.Next(s.sent) {
		f.WriteTo(s.w)
		s.sent = f.ID
	}
	s.w.Flush()
}

// BenchmarkInterleaved is the per-event path of a run (see interleaved)
// with one stream, and with 100 and 1,000 whose deltas take turns, as the
// load harness's streams do: what an event costs when the state of the
// stream it belongs to is no longer in the caches.
func BenchmarkInterleaved(b *testing.B) {
	var buf bytes.Buffer
	if err := writeBenchLines(context.Background(), &buf, "bench:200", "/w"); err != nil {
		b.Fatal(err)
	}
	var head, deltas [][]byte
	for l := range bytes.Lines(buf.Bytes()) {
		if bytes.Contains(l, []byte(`"assistant"`)) && bytes.Contains(l, []byte(`"timestamp_ms"`)) {
			deltas = append(deltas, l)
		} else if len(deltas) == 0 {
			head = append(head, l)
		}
	}
	if len(head) == 0 || len(deltas) < 100 {
		b.Fatalf("%d head lines, %d deltas", len(head), len(deltas))
	}
	for _, n := range []int{1, 100, 1000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			streams := make([]*interleaved, n)
			for i := range streams {
				streams[i] = newInterleaved(head, deltas)
			}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				streams[i%n].step()
			}
		})
	}
}
