package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/go-json-experiment/json/jsontext"
)

// inProcess is the agent binary of the no-child cases: the lines are
// written by writeBenchLines in the server's own process.
const inProcess = "in-process"

// writeBenchLines writes what `docstream agent-sim` writes for the prompt
// "bench:<n>" with --stream-partial-output: system/init, the user echo, n
// assistant deltas whose text is exactly "[ts:<unix nanoseconds at emit>] ",
// the final flush and result/success, one write per line. A prompt word
// "every=<duration>" spaces the deltas (default: as fast as w takes them).
// It stops early when ctx ends or a write fails.
func writeBenchLines(ctx context.Context, w io.Writer, prompt, cwd string) error {
	n, every := parseBenchPrompt(prompt)
	session, request := benchID(), benchID()
	start := time.Now()
	var buf []byte
	write := func() error {
		buf = append(buf, '\n')
		_, err := w.Write(buf)
		buf = buf[:0]
		return err
	}
	quote := func(s string) { buf, _ = jsontext.AppendQuote(buf, s) }

	buf = append(buf, `{"type":"system","subtype":"init","apiKeySource":"login","cwd":`...)
	quote(cwd)
	buf = append(buf, `,"session_id":"`+session+`","model":"Auto","permissionMode":"default"}`...)
	if err := write(); err != nil {
		return err
	}
	buf = append(buf, `{"type":"user","message":{"role":"user","content":[{"type":"text","text":`...)
	quote(prompt)
	buf = append(buf, `}]},"session_id":"`+session+`"}`...)
	if err := write(); err != nil {
		return err
	}

	var text strings.Builder
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for i := range n {
		if d := time.Until(start.Add(time.Duration(i) * every)); d > 0 {
			timer.Reset(d)
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-timer.C:
			}
		} else if err := ctx.Err(); err != nil {
			return err
		}
		now := time.Now()
		buf = append(buf, `{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"`...)
		mark := len(buf)
		buf = append(buf, "[ts:"...)
		buf = strconv.AppendInt(buf, now.UnixNano(), 10)
		buf = append(buf, "] "...)
		text.Write(buf[mark:])
		buf = append(buf, `"}]},"session_id":"`+session+`","timestamp_ms":`...)
		buf = strconv.AppendInt(buf, now.UnixMilli(), 10)
		buf = append(buf, '}')
		if err := write(); err != nil {
			return err
		}
	}

	all := text.String()
	if all != "" {
		buf = append(buf, `{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":`...)
		quote(all)
		buf = append(buf, `}]},"session_id":"`+session+`"}`...)
		if err := write(); err != nil {
			return err
		}
	}
	ms := strconv.FormatInt(time.Since(start).Milliseconds(), 10)
	buf = append(buf, `{"type":"result","subtype":"success","duration_ms":`+ms+`,"duration_api_ms":`+ms+`,"is_error":false,"result":`...)
	quote(all)
	buf = append(buf, `,"session_id":"`+session+`","request_id":"`+request+`","usage":{"inputTokens":`...)
	buf = strconv.AppendInt(buf, int64(8192+(len(prompt)+3)/4), 10)
	buf = append(buf, `,"outputTokens":`...)
	buf = strconv.AppendInt(buf, int64((len(all)+3)/4), 10)
	buf = append(buf, `,"cacheReadTokens":4096,"cacheWriteTokens":0}}`...)
	return write()
}

// startSource writes the lines of writeBenchLines into w in the background,
// then closes w. stop ends the writing early and waits for it; a reader
// that no longer reads must close its end first.
func startSource(w io.WriteCloser, prompt, cwd string) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = writeBenchLines(ctx, w, prompt, cwd)
		w.Close()
	}()
	return func() {
		cancel()
		<-done
	}
}

// parseBenchPrompt reads "bench:<n>" (default 100) and "every=<duration>"
// from a prompt.
func parseBenchPrompt(prompt string) (n int, every time.Duration) {
	n = 100
	for i, f := range strings.Fields(prompt) {
		if s, ok := strings.CutPrefix(strings.ToLower(f), "bench:"); ok && i == 0 {
			if v, err := strconv.Atoi(s); err == nil && v >= 0 {
				n = min(v, 10_000_000)
			}
		}
		if s, ok := strings.CutPrefix(f, "every="); ok {
			if d, err := time.ParseDuration(s); err == nil && d > 0 {
				every = d
			}
		}
	}
	return n, every
}

// benchID returns a random UUID-shaped id.
func benchID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
