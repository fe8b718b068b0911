package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/docstream/docstream/documents"
	"github.com/docstream/docstream/runs"
	"github.com/docstream/docstream/sse"
	"github.com/docstream/docstream/translate"
)

// exitStatus carries a child-like exit code out of run.
type exitStatus int

func (e exitStatus) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// runTranslate reads a recorded cursor-agent transcript on stdin and prints
// the ChatResponse JSON, or with --stream the SSE bytes the gateway sends.
func runTranslate(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("translate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	stream := fs.Bool("stream", false, "print the SSE document stream instead of the ChatResponse JSON")
	thinking := fs.Bool("thinking", false, "include thinking_delta events (with --stream)")
	mode := fs.String("mode", "agent", "the response mode: agent, plan, ask or debug")
	model := fs.String("model", "auto", "the model name to report")
	maxLine := fs.Int("max-line", translate.DefaultMaxLine, "the longest agent line accepted, in bytes")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: docstream translate [--stream] [--thinking] [--mode M] [--model M] < transcript.ndjson")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return usageError{error: err, reported: true}
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return usageError{error: fmt.Errorf("translate takes no arguments, got %q", fs.Args())}
	}
	switch *mode {
	case "agent", "plan", "ask", "debug":
	default:
		return usageError{error: fmt.Errorf("unknown mode %q", *mode)}
	}
	w := bufio.NewWriter(stdout)
	var b documents.Builder
	n := 0
	var werr error
	emit := func(ev documents.Event) {
		if !*stream {
			b.Add(ev)
			return
		}
		n++
		f, err := sse.NewFrame(n, ev)
		if err == nil {
			_, err = f.WriteTo(w)
		}
		if err != nil && werr == nil {
			werr = err
		}
	}
	seg := translate.NewSegmenter(translate.Options{
		ResponseID: runs.NewResponseID(), Model: *model, Mode: *mode, Created: runs.Now(),
		Thinking: *thinking, MaxLine: *maxLine,
	}, emit)
	seg.Start()
	if err := translate.Pump(translate.NewDecoder(stdin, *maxLine), seg); err != nil {
		return fmt.Errorf("reading the transcript: %w", err)
	}
	seg.Close(translate.End{})
	if !*stream {
		if err := json.MarshalWrite(w, b.Response(), jsontext.AllowInvalidUTF8(true), jsontext.Multiline(true)); err != nil {
			return err
		}
		w.WriteByte('\n')
	}
	if werr != nil {
		return werr
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if f, ok := stdout.(*os.File); ok {
		_ = f.Sync()
	}
	return nil
}
