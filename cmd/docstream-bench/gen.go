package main

import (
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
)

// genTranscript returns a synthetic stream-json transcript of about size
// bytes, shaped like a long cursor-agent run with --stream-partial-output:
// per model step a thinking phase in small deltas, assistant text in
// token-sized deltas and its flush, then a tool call (read, shell, edit or
// grep) whose result is large (1–48 KB). The same seed gives the same bytes.
func genTranscript(size int, seed uint64) []byte {
	g := &gen{rng: rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15)), session: "2565114f-567d-4159-8360-1941b1538285"}
	b := make([]byte, 0, size+size/8)
	ts := int64(1795351851456)
	b = append(b, `{"type":"system","subtype":"init","apiKeySource":"login","cwd":"/home/dev/project","session_id":"`+g.session+`","model":"Auto","permissionMode":"default"}`+"\n"...)
	b = append(b, `{"type":"user","message":{"role":"user","content":[{"type":"text","text":"Refactor the config loader and run the tests."}]},"session_id":"`+g.session+`"}`+"\n"...)
	var all strings.Builder
	for step := 0; len(b) < size; step++ {
		mcid := "083ab97d-5640-40e0-bc10-008fcbab0ce4-" + strconv.Itoa(step) + "-ua3m"
		for i := 0; i < 12; i++ {
			ts += 12
			b = append(b, `{"type":"thinking","subtype":"delta","text":`...)
			b = quote(b, g.words(4))
			b = g.tail(b, "", ts)
		}
		b = append(b, `{"type":"thinking","subtype":"completed"`...)
		b = g.tail(b, "", ts)
		var text strings.Builder
		for i := 0; i < 40; i++ {
			ts += 6
			tok := g.words(1)
			text.WriteString(tok)
			b = append(b, `{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":`...)
			b = quote(b, tok)
			b = append(b, `}]}`...)
			b = g.tail(b, "", ts)
		}
		all.WriteString(text.String())
		b = append(b, `{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":`...)
		b = quote(b, text.String())
		b = append(b, `}]}`...)
		b = g.tail(b, mcid, ts)
		b = g.tool(b, step, mcid, &ts)
	}
	b = append(b, `{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"All tests pass."}]},"session_id":"`+g.session+`"}`+"\n"...)
	b = append(b, `{"type":"result","subtype":"success","duration_ms":91234,"duration_api_ms":91234,"is_error":false,"result":`...)
	b = quote(b, all.String())
	b = append(b, `,"session_id":"`+g.session+`","request_id":"083ab97d-5640-40e0-bc10-008fcbab0ce4","usage":{"inputTokens":812345,"outputTokens":23456,"cacheReadTokens":409600,"cacheWriteTokens":12800}}`+"\n"...)
	return b
}

type gen struct {
	rng     *rand.Rand
	session string
}

var genWords = strings.Fields(`the config loader reads settings from a file and the environment then
	validates each value before the server starts func return err nil if for range := string int
	map[string]any struct{} "quoted" path/to/file.go // comment → naïve café tests pass fail retry
	timeout handler request response stream event document segment parser buffer flush`)

func quote(b []byte, s string) []byte {
	b, _ = jsontext.AppendQuote(b, s)
	return b
}

// words returns n words, each with its leading space.
func (g *gen) words(n int) string {
	var sb strings.Builder
	for i := 0; i < n; i++ {
		sb.WriteByte(' ')
		sb.WriteString(genWords[g.rng.IntN(len(genWords))])
	}
	return sb.String()
}

// code returns about n bytes of source-like text: lines of words, indents,
// quotes and newlines.
func (g *gen) code(n int) string {
	var sb strings.Builder
	sb.Grow(n + 80)
	for sb.Len() < n {
		sb.WriteString(strings.Repeat("\t", g.rng.IntN(3)))
		sb.WriteString(strings.TrimSpace(g.words(3 + g.rng.IntN(8))))
		sb.WriteByte('\n')
	}
	return sb.String()
}

// tail ends a line with the optional model_call_id, the session and the
// timestamp.
func (g *gen) tail(b []byte, mcid string, ts int64) []byte {
	if mcid != "" {
		b = append(b, `,"model_call_id":"`+mcid+`"`...)
	}
	b = append(b, `,"session_id":"`+g.session+`","timestamp_ms":`...)
	b = strconv.AppendInt(b, ts, 10)
	return append(b, "}\n"...)
}

// tool appends a started and a completed tool call with a large result.
func (g *gen) tool(b []byte, step int, mcid string, ts *int64) []byte {
	id := "call-47474154-80c7-42da-926d-" + strconv.Itoa(100000+step) + "\nfc_4b1af7b1-fc41-2ed6-6cf8-299e29688a84_0"
	path := "/home/dev/project/internal/config/loader_" + strconv.Itoa(step%50) + ".go"
	var kind string
	var args []byte
	var result []byte
	switch step % 4 {
	case 0:
		kind = "readToolCall"
		content := g.code(2<<10 + g.rng.IntN(46<<10))
		args = append(quote(append(args, `{"path":`...), path), '}')
		result = append(quote(append([]byte(nil), `{"success":{"content":`...), content), `,"isEmpty":false,"exceededLimit":false,"totalLines":`...)
		result = strconv.AppendInt(result, int64(strings.Count(content, "\n")), 10)
		result = append(result, `,"fileSize":`...)
		result = strconv.AppendInt(result, int64(len(content)), 10)
		result = append(quote(append(result, `,"path":`...), path), "}}"...)
	case 1:
		kind = "shellToolCall"
		out := g.code(1<<10 + g.rng.IntN(15<<10))
		args = append(quote(append(args, `{"command":"go test ./...","workingDirectory":"","timeout":30000,"toolCallId":`...), id),
			`,"simpleCommands":["go"],"hasInputRedirect":false,"hasOutputRedirect":false,"isBackground":false,"description":"Run the tests"}`...)
		result = append(result, `{"success":{"command":"go test ./...","workingDirectory":"","exitCode":0,"signal":"","stdout":`...)
		result = quote(result, out)
		result = append(result, `,"stderr":"","executionTime":640,"interleavedOutput":`...)
		result = quote(result, out)
		result = append(result, `,"localExecutionTimeMs":600},"isBackground":false}`...)
	case 2:
		kind = "editToolCall"
		after := g.code(1<<10 + g.rng.IntN(15<<10))
		args = append(quote(append(quote(append(args, `{"path":`...), path), `,"streamContent":`...), after), '}')
		diff := "--- a" + path + "\n+++ b" + path + "\n@@ -1,4 +1,9 @@\n+" + strings.ReplaceAll(after[:len(after)/2], "\n", "\n+")
		result = append(quote(append(result, `{"success":{"path":`...), path), `,"linesAdded":9,"linesRemoved":4,"diffString":`...)
		result = quote(result, diff)
		result = append(result, `,"afterFullFileContent":`...)
		result = quote(result, after)
		result = append(result, `,"message":"Wrote contents"}}`...)
	default:
		kind = "grepToolCall"
		args = append(quote(append(args, `{"pattern":"func Load","path":`...), "/home/dev/project"), `,"caseInsensitive":false,"multiline":false,"offset":0}`...)
		result = append(result, `{"success":{"pattern":"func Load","path":"/home/dev/project","outputMode":"content","workspaceResults":{"/home/dev/project":{"content":{"matches":[`...)
		n := 10 + g.rng.IntN(60)
		for i := 0; i < n; i++ {
			if i > 0 {
				result = append(result, ',')
			}
			result = append(quote(append(result, `{"file":`...), path), `,"matches":[{"lineNumber":`...)
			result = strconv.AppendInt(result, int64(g.rng.IntN(900)+1), 10)
			result = append(quote(append(result, `,"content":`...), strings.TrimSpace(g.words(8))), "}]}"...)
		}
		result = append(result, `],"totalLines":`...)
		result = strconv.AppendInt(result, int64(n), 10)
		result = append(result, `,"totalMatchedLines":`...)
		result = strconv.AppendInt(result, int64(n), 10)
		result = append(result, "}}}}}"...)
	}
	*ts += 15
	started := strconv.FormatInt(*ts, 10)
	b = append(b, `{"type":"tool_call","subtype":"started","call_id":`...)
	b = quote(b, id)
	b = append(b, `,"tool_call":{"`+kind+`":{"args":`...)
	b = append(b, args...)
	b = append(b, `},"hookAdditionalContexts":[],"toolCallId":`...)
	b = quote(b, id)
	b = append(b, `,"startedAtMs":"`+started+`"}`...)
	b = g.tail(b, mcid, *ts)
	*ts += 600
	b = append(b, `{"type":"tool_call","subtype":"completed","call_id":`...)
	b = quote(b, id)
	b = append(b, `,"tool_call":{"`+kind+`":{"args":`...)
	b = append(b, args...)
	b = append(b, `,"result":`...)
	b = append(b, result...)
	b = append(b, `},"hookAdditionalContexts":[],"toolCallId":`...)
	b = quote(b, id)
	b = append(b, `,"startedAtMs":"`+started+`","completedAtMs":"`+strconv.FormatInt(*ts, 10)+`"}`...)
	return g.tail(b, mcid, *ts)
}
