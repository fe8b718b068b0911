package translate_test

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/docstream/docstream/documents"
	"github.com/docstream/docstream/translate"
)

// BenchmarkStages measures the decoder alone and parse + segment over the
// real corpus as docstream-bench does: without thinking, one run per file.
func BenchmarkStages(b *testing.B) {
	in := benchCorpus(b)
	opts := translate.Options{ResponseID: "chat_0123456789abcdef01234567", Model: "auto", Mode: "agent",
		Created: "2026-11-22T12:00:00Z", Workspace: "/home/dev/project"}
	b.Run("floor", func(b *testing.B) {
		b.SetBytes(in.bytes)
		b.ReportAllocs()
		for b.Loop() {
			for _, run := range in.runs {
				for line := range bytes.Lines(run) {
					if len(bytes.TrimSpace(line)) > 0 {
						var e envelope
						if json.Unmarshal(line, &e, floorOpts) != nil {
							e = envelope{}
						}
					}
				}
			}
		}
	})
	b.Run("decoder", func(b *testing.B) {
		b.SetBytes(in.bytes)
		b.ReportAllocs()
		for b.Loop() {
			for _, run := range in.runs {
				dec := translate.NewDecoder(bytes.NewReader(run), 0)
				for {
					if _, err := dec.Next(); errors.Is(err, io.EOF) {
						break
					} else if err != nil {
						b.Fatal(err)
					}
				}
			}
		}
	})
	b.Run("segment", func(b *testing.B) {
		b.SetBytes(in.bytes)
		b.ReportAllocs()
		for b.Loop() {
			for _, run := range in.runs {
				seg := translate.NewSegmenter(opts, func(documents.Event) {})
				seg.Start()
				if err := translate.Pump(translate.NewDecoder(bytes.NewReader(run), 0), seg); err != nil {
					b.Fatal(err)
				}
				seg.Close(translate.End{Exited: true})
			}
		}
	})
}

// envelope is what docstream-bench's typed-decode floor reads of a line.
type envelope struct {
	Type        string `json:"type"`
	Subtype     string `json:"subtype"`
	SessionID   string `json:"session_id"`
	CallID      string `json:"call_id"`
	TimestampMs int64  `json:"timestamp_ms"`
	Text        string `json:"text"`
	Message     *struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	} `json:"message"`
}

var floorOpts = json.JoinOptions(jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
