package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/docstream/docstream/documents"
	"github.com/docstream/docstream/openai"
	"github.com/docstream/docstream/runs"
	"github.com/docstream/docstream/sse"
	"github.com/docstream/docstream/translate"
)

// errNoEvents is the error of an input that holds no agent event.
var errNoEvents = errors.New("holds no cursor-agent stream-json event (is it a --output-format stream-json transcript?)")

// runTranslate reads recorded cursor-agent transcripts (files, or stdin)
// and prints each as the ChatResponse JSON, the SSE document stream, or the
// markdown the OpenAI route sends.
func runTranslate(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("translate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	format := fs.String("format", "json", "what to print: json (the ChatResponse), sse (the document stream) or markdown (the OpenAI route's content)")
	stream := fs.Bool("stream", false, "the same as --format sse")
	thinking := fs.Bool("thinking", false, "include thinking_delta events (with --format sse)")
	mode := fs.String("mode", "agent", "the response mode: agent, plan, ask or debug")
	model := fs.String("model", "auto", "the model name to report")
	maxLine := fs.Int("max-line", translate.DefaultMaxLine, "the longest agent line accepted, in bytes")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: docstream translate [--format json|sse|markdown] [--thinking] [--mode M] [--model M] [FILE ...]")
		fmt.Fprintln(stderr, "       (no FILE, or -, reads standard input)")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return usageError{error: err, reported: true}
	}
	if *stream {
		*format = "sse"
	}
	if !slices.Contains([]string{"json", "sse", "markdown"}, *format) {
		return usageError{error: fmt.Errorf("unknown format %q: want json, sse or markdown", *format)}
	}
	if !slices.Contains([]string{"agent", "plan", "ask", "debug"}, *mode) {
		return usageError{error: fmt.Errorf("unknown mode %q", *mode)}
	}
	files := fs.Args()
	if len(files) == 0 {
		files = []string{"-"}
	}
	w := bufio.NewWriter(stdout)
	for _, name := range files {
		in, what := stdin, "standard input"
		if name != "-" {
			f, err := os.Open(name)
			if err != nil {
				return err
			}
			in, what = f, name
			defer f.Close()
		}
		opts := translate.Options{ResponseID: runs.NewResponseID(), Model: *model, Mode: *mode, Created: runs.Now(),
			Thinking: *thinking, MaxLine: *maxLine}
		if err := translateOne(w, in, opts, *format); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if f, ok := stdout.(*os.File); ok {
		_ = f.Sync()
	}
	return nil
}

// translateOne translates one transcript to w in the given format.
func translateOne(w *bufio.Writer, in io.Reader, opts translate.Options, format string) error {
	var b documents.Builder
	md := &openai.Renderer{Mode: openai.RenderMarkdown, Reasoning: openai.ReasoningContent}
	var frames []sse.Frame
	emit := func(ev documents.Event) {
		switch format {
		case "json":
			b.Add(ev)
		case "markdown":
			md.Event(ev)
		case "sse":
			if f, err := sse.NewFrame(len(frames)+1, ev); err == nil {
				frames = append(frames, f)
			}
		}
	}
	seg := translate.NewSegmenter(opts, emit)
	seg.Start()
	dec := translate.NewDecoder(in, opts.MaxLine)
	lines := 0
	for {
		ev, err := dec.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("reading the transcript: %w", err)
		}
		lines++
		seg.Feed(ev)
	}
	st := seg.Stats()
	if lines-st.NotJSON-st.Unknown-st.Oversize <= 0 {
		return errNoEvents
	}
	seg.Close(translate.End{})
	switch format {
	case "json":
		if err := json.MarshalWrite(w, b.Response(), jsontext.AllowInvalidUTF8(true), jsontext.Multiline(true)); err != nil {
			return err
		}
		return w.WriteByte('\n')
	case "markdown":
		_, err := w.WriteString(md.Content())
		return err
	}
	for _, f := range frames {
		if _, err := f.WriteTo(w); err != nil {
			return err
		}
	}
	return nil
}
