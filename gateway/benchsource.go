package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/docstream/docstream/translate"
)

// BuiltinBench is a hidden agent.binary value for benchmarks. Instead of
// spawning a process, a run writes the lines of the simulator's bench:<n>
// scenario into an os.Pipe from a goroutine, and the gateway reads that pipe
// exactly as it reads an agent's stdout. It measures the gateway's own cost
// without the CPU and memory of child processes.
const BuiltinBench = "builtin:bench"

// runBuiltin is Run for BuiltinBench: the same decoder and segmenter, fed by
// WriteBenchLines through a pipe. ctx ends the run as it ends an agent.
func (b *CLIBackend) runBuiltin(ctx context.Context, spec *RunSpec, seg *translate.Segmenter) translate.End {
	start := time.Now()
	r, w, err := os.Pipe()
	if err != nil {
		return translate.End{Err: fmt.Errorf("creating a pipe: %w", err)}
	}
	genCtx, stopGen := context.WithCancel(ctx)
	genDone := make(chan struct{})
	go func() {
		defer close(genDone)
		_ = WriteBenchLines(genCtx, w, spec.Prompt, spec.Workspace)
		w.Close()
	}()
	unhook := context.AfterFunc(ctx, func() { r.Close() })
	_ = readAgent(translate.NewDecoder(r, b.cfg.MaxLineBytes), seg, nil, start)
	unhook()
	stopGen()
	r.Close()
	<-genDone
	end := translate.End{Elapsed: time.Since(start).Milliseconds(), Exited: true}
	if !seg.Done() && ctx.Err() != nil {
		end.Reason, end.Message, _ = stopCause(ctx)
	}
	return end
}

// WriteBenchLines writes what `docstream agent-sim` writes for the prompt
// "bench:<n>" with --stream-partial-output: system/init, the user echo, n
// assistant deltas whose text is exactly "[ts:<unix nanoseconds at emit>] ",
// the final flush and result/success, one write per line. A prompt word
// "every=<duration>" spaces the deltas (default: as fast as w takes them);
// the first delta follows the user echo at once. It stops early when ctx
// ends or a write fails.
func WriteBenchLines(ctx context.Context, w io.Writer, prompt, cwd string) error {
	n, every := parseBenchPrompt(prompt)
	session, request := benchID(), benchID()
	start := time.Now()
	buf := make([]byte, 0, 512)
	write := func() error {
		if err := ctx.Err(); err != nil {
			return err
		}
		buf = append(buf, '\n')
		_, err := w.Write(buf)
		return err
	}
	quote := func(b []byte, s string) []byte {
		b, _ = jsontext.AppendQuote(b, s)
		return b
	}
	buf = append(buf, `{"type":"system","subtype":"init","apiKeySource":"login","cwd":`...)
	buf = quote(buf, cwd)
	buf = append(buf, `,"session_id":"`+session+`","model":"Auto","permissionMode":"default"}`...)
	if err := write(); err != nil {
		return err
	}
	buf = append(buf[:0], `{"type":"user","message":{"role":"user","content":[{"type":"text","text":`...)
	buf = quote(buf, prompt)
	buf = append(buf, `}]},"session_id":"`+session+`"}`...)
	if err := write(); err != nil {
		return err
	}
	var text strings.Builder
	var timer *time.Timer
	for i := 0; i < n; i++ {
		if every > 0 && i > 0 {
			d := time.Until(start.Add(time.Duration(i) * every))
			if d > 0 {
				if timer == nil {
					timer = time.NewTimer(d)
					defer timer.Stop()
				} else {
					timer.Reset(d)
				}
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-timer.C:
				}
			}
		}
		now := time.Now()
		buf = append(buf[:0], `{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"[ts:`...)
		mark := len(buf) - len("[ts:")
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
		buf = append(buf[:0], `{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":`...)
		buf = quote(buf, all)
		buf = append(buf, `}]},"session_id":"`+session+`"}`...)
		if err := write(); err != nil {
			return err
		}
	}
	ms := strconv.FormatInt(time.Since(start).Milliseconds(), 10)
	buf = append(buf[:0], `{"type":"result","subtype":"success","duration_ms":`+ms+`,"duration_api_ms":`+ms+`,"is_error":false,"result":`...)
	buf = quote(buf, all)
	buf = append(buf, `,"session_id":"`+session+`","request_id":"`+request+`","usage":{"inputTokens":`...)
	buf = strconv.AppendInt(buf, int64(8192+(len(prompt)+3)/4), 10)
	buf = append(buf, `,"outputTokens":`...)
	buf = strconv.AppendInt(buf, int64((len(all)+3)/4), 10)
	buf = append(buf, `,"cacheReadTokens":4096,"cacheWriteTokens":0}}`...)
	return write()
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
