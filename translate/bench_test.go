package translate_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/docstream/docstream/documents"
	"github.com/docstream/docstream/translate"
)

// Run with: go test -run '^$' -bench . -benchmem -cpu 1 ./translate/
//
// BenchmarkTranslate measures parse+segment (Decoder, Segmenter, no
// encoding) against two baselines over the same bytes: BenchmarkLineSplit
// (bufio line splitting alone) and BenchmarkTypedDecode (decoding each line
// into a small struct). Each runs over the real corpus and over a generated
// transcript of more than 50 MB.

// benchInput is a set of transcripts, each translated as its own run.
type benchInput struct {
	runs  [][]byte
	bytes int64
	lines int
}

func newBenchInput(runs ...[]byte) *benchInput {
	in := &benchInput{runs: runs}
	for _, r := range runs {
		in.bytes += int64(len(r))
		in.lines += bytes.Count(r, []byte("\n"))
		if len(r) > 0 && r[len(r)-1] != '\n' {
			in.lines++
		}
	}
	return in
}

var (
	corpusOnce  sync.Once
	corpusInput *benchInput
	largeOnce   sync.Once
	largeInput  *benchInput
)

func benchCorpus(b *testing.B) *benchInput {
	corpusOnce.Do(func() {
		paths, _ := filepath.Glob(filepath.Join(realDir, "*.ndjson"))
		var runs [][]byte
		for _, p := range paths {
			data, err := os.ReadFile(p)
			if err == nil {
				runs = append(runs, data)
			}
		}
		if len(runs) > 0 {
			corpusInput = newBenchInput(runs...)
		}
	})
	if corpusInput == nil {
		b.Skipf("no captures in %s", realDir)
	}
	return corpusInput
}

func benchLarge(b *testing.B) *benchInput {
	largeOnce.Do(func() { largeInput = newBenchInput(generateTranscript(50 << 20)) })
	return largeInput
}

// benchInputs names the inputs every benchmark runs over.
var benchInputs = []struct {
	name string
	get  func(*testing.B) *benchInput
}{{"corpus", benchCorpus}, {"large", benchLarge}}

// meter records what a benchmark used: allocations and process CPU time.
// CPU time, unlike the wall clock behind MB/s, does not count the time the
// benchmark waits for a core on a busy machine; with -cpu 1 it is the
// benchmark's own time plus the garbage collector's.
type meter struct {
	mem runtime.MemStats
	cpu time.Duration
}

func startMeter() *meter {
	m := &meter{cpu: cpuTime()}
	runtime.ReadMemStats(&m.mem)
	return m
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// report adds the allocations per agent line and the MiB per CPU second.
func (m *meter) report(b *testing.B, in *benchInput) {
	cpu := cpuTime() - m.cpu
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(after.Mallocs-m.mem.Mallocs)/float64(b.N)/float64(in.lines), "allocs/line")
	if cpu > 0 {
		b.ReportMetric(float64(in.bytes)*float64(b.N)/(1<<20)/cpu.Seconds(), "MiB/cpu-s")
	}
}

// benchRuns measures run over every agent run of each input, metered; run
// returns how many things it read, which must not all be zero.
func benchRuns(b *testing.B, run func(b *testing.B, transcript []byte) int) {
	for _, bi := range benchInputs {
		b.Run(bi.name, func(b *testing.B) {
			in := bi.get(b)
			b.SetBytes(in.bytes)
			b.ReportAllocs()
			m := startMeter()
			b.ResetTimer()
			n := 0
			for b.Loop() {
				for _, t := range in.runs {
					n += run(b, t)
				}
			}
			b.StopTimer()
			m.report(b, in)
			if n == 0 {
				b.Fatal("nothing read")
			}
		})
	}
}

func BenchmarkTranslate(b *testing.B) {
	opts := translate.Options{ResponseID: "chat_bench", Created: testCreated, Thinking: true}
	events := 0
	emit := func(documents.Event) { events++ }
	benchRuns(b, func(b *testing.B, t []byte) int {
		seg := translate.NewSegmenter(opts, emit)
		if err := translate.Pump(translate.NewDecoder(bytes.NewReader(t), 0), seg); err != nil {
			b.Fatal(err)
		}
		seg.Close(translate.End{})
		return events
	})
}

// BenchmarkDecode measures the decoder alone, without the segmenter.
func BenchmarkDecode(b *testing.B) {
	benchRuns(b, func(b *testing.B, t []byte) int {
		dec := translate.NewDecoder(bytes.NewReader(t), 0)
		for n := 0; ; n++ {
			if _, err := dec.Next(); errors.Is(err, io.EOF) {
				return n
			} else if err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkLineSplit(b *testing.B) {
	var long []byte
	benchRuns(b, func(b *testing.B, t []byte) int {
		n := 0
		r := bufio.NewReaderSize(bytes.NewReader(t), 64<<10)
		for {
			line, err := r.ReadSlice('\n')
			if errors.Is(err, bufio.ErrBufferFull) {
				long = append(long[:0], line...)
				for errors.Is(err, bufio.ErrBufferFull) {
					line, err = r.ReadSlice('\n')
					long = append(long, line...)
				}
				line = long
			}
			if len(line) > 0 {
				n++
			}
			if err != nil {
				return n
			}
		}
	})
}

// smallLine is the few members a minimal consumer decodes from each line.
type smallLine struct {
	Type        string `json:"type"`
	Subtype     string `json:"subtype"`
	SessionID   string `json:"session_id"`
	ModelCallID string `json:"model_call_id"`
	CallID      string `json:"call_id"`
	TimestampMs int64  `json:"timestamp_ms"`
}

func BenchmarkTypedDecode(b *testing.B) {
	benchRuns(b, func(b *testing.B, t []byte) int {
		types := 0
		for line := range bytes.Lines(t) {
			var v smallLine
			if json.Unmarshal(line, &v) == nil && v.Type != "" {
				types++
			}
		}
		return types
	})
}

// generateTranscript writes a realistic partial-output transcript of at
// least size bytes in the current layout: model steps of thinking deltas,
// assistant token deltas (with fenced code now and then) and their flush,
// then a tool call; tool results carry whole files, diffs and command
// output. It ends with a final segment, its flush and a result.
func generateTranscript(size int) []byte {
	var buf bytes.Buffer
	r := rng(42)
	const sid = "5d0c3b7e-2a41-4f7e-9c55-0b8e1f6a2d94"
	ts := int64(1791000000000)
	line := func(v any) {
		b, err := json.Marshal(v)
		if err != nil {
			panic(err)
		}
		buf.Write(b)
		buf.WriteByte('\n')
	}
	words := strings.Fields("the cart total uses a discount helper that rounds each price to cents before it sums them and the tests check the rounding at the boundaries of every currency we support so a change here needs care")
	text := func(n int) string {
		var sb strings.Builder
		for i := range n {
			if i > 0 {
				sb.WriteByte(' ')
			}
			sb.WriteString(words[r.next()%uint64(len(words))])
		}
		return sb.String()
	}
	file := func(lines int) string {
		var sb strings.Builder
		for i := range lines {
			fmt.Fprintf(&sb, "func step%d(items []Item) int { return total(items) * %d / 100 } // %s\n", i, i%97, text(6))
		}
		return sb.String()
	}
	message := func(t string) map[string]any {
		return map[string]any{"role": "assistant", "content": []map[string]any{{"type": "text", "text": t}}}
	}
	line(map[string]any{"type": "system", "subtype": "init", "apiKeySource": "login", "cwd": "/home/dev/shop", "session_id": sid, "model": "Claude 4.5 Sonnet", "permissionMode": "default"})
	line(map[string]any{"type": "user", "message": map[string]any{"role": "user", "content": []map[string]any{{"type": "text", "text": "Refactor the cart totals."}}}, "session_id": sid})
	step := 0
	segment := func(mcid string) {
		for range 20 {
			ts += 2
			line(map[string]any{"type": "thinking", "subtype": "delta", "text": " " + text(4), "session_id": sid, "timestamp_ms": ts})
		}
		ts++
		line(map[string]any{"type": "thinking", "subtype": "completed", "session_id": sid, "timestamp_ms": ts})
		var seg strings.Builder
		delta := func(t string) {
			seg.WriteString(t)
			ts++
			line(map[string]any{"type": "assistant", "message": message(t), "session_id": sid, "timestamp_ms": ts})
		}
		for i := range 60 {
			delta(" " + text(1+int(r.next()%3)))
			if i == 30 && step%3 == 0 {
				delta(":\n\n```go\n")
				for j := range 8 {
					delta(fmt.Sprintf("x%d := total(items)\n", j))
				}
				delta("```\n\n")
			}
		}
		delta(".")
		flush := map[string]any{"type": "assistant", "message": message(seg.String()), "session_id": sid}
		if mcid != "" {
			ts++
			flush["model_call_id"], flush["timestamp_ms"] = mcid, ts
		}
		line(flush)
	}
	for buf.Len() < size {
		mcid := fmt.Sprintf("7c1e9a40-55d2-4b8e-8f3a-2d6b0c9e1f77-%d-k2qv", step)
		segment(mcid)
		id := fmt.Sprintf("call-%d\nfc_%d", step, step)
		var kind string
		var args, result map[string]any
		switch step % 4 {
		case 0:
			content := file(200 + int(r.next()%1800))
			kind, args = "readToolCall", map[string]any{"path": "/home/dev/shop/cart/cart.go"}
			result = map[string]any{"success": map[string]any{"content": content, "isEmpty": false, "exceededLimit": false, "totalLines": 1000, "fileSize": len(content)}}
		case 1:
			before := file(100 + int(r.next()%400))
			after := before + "func extra() {}\n"
			kind, args = "editToolCall", map[string]any{"path": "/home/dev/shop/cart/cart.go", "streamContent": "func extra() {}\n"}
			result = map[string]any{"success": map[string]any{"path": "/home/dev/shop/cart/cart.go", "linesAdded": 1, "linesRemoved": 0,
				"diffString": "--- a/cart/cart.go\n+++ b/cart/cart.go\n@@ -100,1 +100,2 @@\n }\n+func extra() {}", "beforeFullFileContent": before, "afterFullFileContent": after}}
		case 2:
			out := file(20 + int(r.next()%300))
			kind, args = "shellToolCall", map[string]any{"command": "go test ./cart/...", "workingDirectory": "", "timeout": 30000, "isBackground": false}
			result = map[string]any{"success": map[string]any{"command": "go test ./cart/...", "workingDirectory": "", "exitCode": 0, "signal": "", "stdout": out, "stderr": "", "executionTime": 812, "interleavedOutput": out}, "isBackground": false}
		default:
			kind, args = "grepToolCall", map[string]any{"pattern": "total\\(", "path": "/home/dev/shop"}
			result = map[string]any{"success": map[string]any{"workspaceResults": map[string]any{"/home/dev/shop": map[string]any{"content": map[string]any{"matches": []map[string]any{{"file": "cart/cart.go", "matches": []map[string]any{{"lineNumber": 12, "content": text(12)}}}}}}}}}
		}
		ts += 5
		started := map[string]any{kind: map[string]any{"args": args}, "hookAdditionalContexts": []any{}, "toolCallId": id, "startedAtMs": fmt.Sprint(ts)}
		line(map[string]any{"type": "tool_call", "subtype": "started", "call_id": id, "tool_call": started, "model_call_id": mcid, "session_id": sid, "timestamp_ms": ts})
		ts += 300
		completed := map[string]any{kind: map[string]any{"args": args, "result": result}, "hookAdditionalContexts": []any{}, "toolCallId": id, "startedAtMs": fmt.Sprint(ts - 300), "completedAtMs": fmt.Sprint(ts)}
		line(map[string]any{"type": "tool_call", "subtype": "completed", "call_id": id, "tool_call": completed, "model_call_id": mcid, "session_id": sid, "timestamp_ms": ts})
		step++
	}
	segment("")
	line(map[string]any{"type": "result", "subtype": "success", "duration_ms": 600000, "duration_api_ms": 600000, "is_error": false, "result": "done",
		"session_id": sid, "request_id": "7c1e9a40-55d2-4b8e-8f3a-2d6b0c9e1f77", "usage": map[string]any{"inputTokens": 900000, "outputTokens": 40000, "cacheReadTokens": 1200000, "cacheWriteTokens": 0}})
	return buf.Bytes()
}

// TestGeneratedTranscript keeps the benchmark's generator honest: a small
// transcript from it is well formed and translates cleanly.
func TestGeneratedTranscript(t *testing.T) {
	in := generateTranscript(200 << 10)
	opts := translate.Options{ResponseID: "chat_test", Created: testCreated}
	evs, err := translateReader(bytes.NewReader(in), opts, translate.End{})
	if err != nil {
		t.Fatal(err)
	}
	if err := checkStream(evs, opts); err != nil {
		t.Fatal(err)
	}
	resp := fold(evs)
	if resp.Status != documents.StatusCompleted || resp.Metadata.SkippedLines != 0 || resp.Metadata.ToolCallCount == 0 {
		t.Fatalf("status %s, %d skipped lines, %d tool calls", resp.Status, resp.Metadata.SkippedLines, resp.Metadata.ToolCallCount)
	}
}
