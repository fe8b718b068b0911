package simulator

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

var callIDPattern = regexp.MustCompile(`^call-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}-\d+\nfc_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}_\d+$`)

// checkStream checks the ordering rules of a stream-json run and returns the
// concatenated assistant segments.
func checkStream(t *testing.T, evs []event, partial, wantResult bool) string {
	t.Helper()
	if len(evs) < 2 {
		t.Fatalf("want at least init and user, got %d events", len(evs))
	}
	init := evs[0]
	if init.typ() != "system" || init.subtype() != "init" {
		t.Fatalf("first event = %v, want system/init", init)
	}
	for _, k := range []string{"apiKeySource", "cwd", "session_id", "model", "permissionMode"} {
		if _, ok := init[k].(string); !ok {
			t.Errorf("init lacks string %s: %v", k, init)
		}
	}
	sid := init["session_id"].(string)
	if evs[1].typ() != "user" {
		t.Fatalf("second event = %v, want user", evs[1])
	}

	var acc, total strings.Builder
	open := map[string]string{} // call id -> model_call_id
	finalSeen := false
	results := 0
	for i, e := range evs {
		if e.typ() != "error" && e.typ() != "mystery" && e["session_id"] != sid {
			t.Fatalf("event %d has session_id %v, want %s", i, e["session_id"], sid)
		}
		if results > 0 {
			t.Fatalf("event %d (%s) after result", i, e.typ())
		}
		switch e.typ() {
		case "thinking":
			if !e.has("timestamp_ms") {
				t.Errorf("thinking event %d without timestamp_ms", i)
			}
			if e.subtype() == "delta" {
				if _, ok := e["text"].(string); !ok {
					t.Errorf("thinking delta %d without text", i)
				}
			}
		case "assistant":
			if finalSeen {
				t.Fatalf("assistant event %d after the final flush", i)
			}
			mc, ts := e.has("model_call_id"), e.has("timestamp_ms")
			switch {
			case ts && !mc:
				if !partial {
					t.Fatalf("delta event %d without --stream-partial-output", i)
				}
				acc.WriteString(e.text())
			case ts && mc:
				if partial && e.text() != acc.String() {
					t.Fatalf("mid-turn flush %d = %q, want the deltas %q", i, e.text(), acc.String())
				}
				total.WriteString(e.text())
				acc.Reset()
				if i+1 >= len(evs) || evs[i+1].typ() != "tool_call" || evs[i+1].subtype() != "started" ||
					evs[i+1]["model_call_id"] != e["model_call_id"] {
					// hang scenarios end on a flush without partial output
					if i+1 < len(evs) {
						t.Fatalf("mid-turn flush %d not followed by a tool start with its model_call_id", i)
					}
				}
			case !ts && !mc:
				if partial && e.text() != acc.String() {
					t.Fatalf("final flush %d = %q, want the deltas %q", i, e.text(), acc.String())
				}
				total.WriteString(e.text())
				acc.Reset()
				finalSeen = true
			default:
				t.Fatalf("assistant event %d with model_call_id but no timestamp_ms", i)
			}
		case "tool_call":
			id, _ := e["call_id"].(string)
			if !callIDPattern.MatchString(id) {
				t.Errorf("call_id %q has the wrong form", id)
			}
			mcid, _ := e["model_call_id"].(string)
			if mcid == "" {
				t.Errorf("tool event %d without model_call_id", i)
			}
			tc := e["tool_call"].(map[string]any)
			if tc["toolCallId"] != id {
				t.Errorf("toolCallId %v != call_id %q", tc["toolCallId"], id)
			}
			if _, ok := tc["startedAtMs"].(string); !ok {
				t.Errorf("startedAtMs is not a string: %v", tc["startedAtMs"])
			}
			if h, ok := tc["hookAdditionalContexts"].([]any); !ok || len(h) != 0 {
				t.Errorf("hookAdditionalContexts = %v", tc["hookAdditionalContexts"])
			}
			kind, inner := e.tool()
			if kind == "" {
				t.Fatalf("tool event %d without a ...ToolCall key", i)
			}
			switch e.subtype() {
			case "started":
				if acc.Len() > 0 {
					t.Fatalf("tool start %d with unflushed text %q", i, acc.String())
				}
				if _, dup := open[id]; dup {
					t.Fatalf("call %q started twice", id)
				}
				open[id] = mcid
			case "completed":
				if open[id] != mcid {
					t.Fatalf("completed %q was not started with model_call_id %s", id, mcid)
				}
				delete(open, id)
				if _, ok := tc["completedAtMs"].(string); !ok {
					t.Errorf("completedAtMs is not a string: %v", tc["completedAtMs"])
				}
				if inner["result"] == nil {
					t.Errorf("completed %s without result", kind)
				}
			}
		case "result":
			results++
			for _, k := range []string{"duration_ms", "duration_api_ms", "is_error", "result", "session_id", "request_id", "usage"} {
				if !e.has(k) {
					t.Errorf("result lacks %s", k)
				}
			}
			if e.subtype() == "success" {
				if e["result"] != total.String() {
					t.Errorf("result.result = %q, want the segments %q", e["result"], total.String())
				}
				if e["is_error"] != false {
					t.Errorf("success with is_error %v", e["is_error"])
				}
			}
		}
	}
	if wantResult && results != 1 {
		t.Fatalf("got %d result events, want 1", results)
	}
	if !wantResult && results != 0 {
		t.Fatalf("got a result event, want none")
	}
	if wantResult && len(open) > 0 {
		t.Errorf("calls still open at result: %d", len(open))
	}
	return total.String()
}

func TestScenarios(t *testing.T) {
	garbage := []string{
		"T: [internal] retrying",
		`{"type":"assistant","message":{"role":"assistant","content":[{"type":"te`,
		"RetriableError: [unavailable] simulated transient error",
		"T: [internal] Failed to run step, exceeded max retries",
	}
	cases := []struct {
		prompt     string
		code       int
		wantResult bool
		stderr     string
		noOutput   bool
	}{
		{prompt: "hello there", wantResult: true},
		{prompt: "tour", wantResult: true},
		{prompt: "plan a caching layer", wantResult: true},
		{prompt: "ask", wantResult: true},
		{prompt: "echo me", wantResult: true},
		{prompt: "tools", wantResult: true},
		{prompt: "long:3", wantResult: true},
		{prompt: "bench:20", wantResult: true},
		{prompt: "fault:crash", code: 1, stderr: "Error: simulated crash"},
		{prompt: "fault:oversize", wantResult: true},
		{prompt: "fault:garbage", wantResult: true},
		{prompt: "fault:grandchild", wantResult: true},
		{prompt: "fault:no-result"},
		{prompt: "fault:error-event", wantResult: true},
		{prompt: "fault:is-error", wantResult: true},
		{prompt: "fault:exit-signal", code: 137},
		{prompt: "fault:reconnect", wantResult: true},
		{prompt: "fault:retry-exhausted", code: 1, stderr: "exceeded max retries"},
		{prompt: "fault:auth", code: 1, stderr: "Authentication required", noOutput: true},
	}
	for _, tc := range cases {
		for _, partial := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/partial=%v", tc.prompt, partial), func(t *testing.T) {
				t.Parallel()
				res := runSim(t, streamArgs(partial, "--", tc.prompt), runConfig{})
				if res.code != tc.code {
					t.Fatalf("exit code %d, want %d; stderr %q", res.code, tc.code, res.stderr)
				}
				if tc.stderr != "" && !strings.Contains(res.stderr, tc.stderr) {
					t.Fatalf("stderr %q lacks %q", res.stderr, tc.stderr)
				}
				if tc.noOutput {
					if res.stdout != "" {
						t.Fatalf("stdout = %q, want empty", res.stdout)
					}
					return
				}
				evs := decode(t, res.stdout, garbage...)
				checkStream(t, evs, partial, tc.wantResult)
			})
		}
	}
}

func TestEveryListedScenarioPlays(t *testing.T) {
	for _, sc := range Scenarios() {
		word := strings.Replace(sc.Name, "<n>", "2", 1)
		sel, ok := scenarioByWord(word)
		if sc.Name == "default" {
			sel = selectScenario("what is up", "")
			ok = true
		}
		if !ok || sel.name != sc.Name {
			t.Errorf("scenario %q resolves to %q (ok=%v)", sc.Name, sel.name, ok)
		}
		if sc.Description == "" {
			t.Errorf("scenario %q has no description", sc.Name)
		}
	}
	if got := selectScenario("Please tour the code", "").name; got != "default" {
		t.Errorf("a prompt not starting with a scenario word played %q", got)
	}
	if got := selectScenario("TOUR!", "").name; got != "tour" {
		t.Errorf("TOUR! played %q", got)
	}
	if got := selectScenario("add caching", "plan").name; got != "plan" {
		t.Errorf("--mode plan played %q", got)
	}
}

func TestPartialOutputDuplication(t *testing.T) {
	res := runSim(t, streamArgs(true, "--", "tour"), runConfig{})
	evs := decode(t, res.stdout)
	deltas, mid, final := 0, 0, 0
	for _, e := range evs {
		if e.typ() != "assistant" {
			continue
		}
		switch {
		case e.isDelta():
			deltas++
			if len(e.text()) > 20 {
				t.Errorf("delta %q is not token-sized", e.text())
			}
		case e.has("model_call_id"):
			mid++
		default:
			final++
		}
	}
	if deltas < 100 || mid < 5 || final != 1 {
		t.Fatalf("deltas=%d mid-turn flushes=%d final flushes=%d", deltas, mid, final)
	}

	res = runSim(t, streamArgs(false, "--", "tour"), runConfig{})
	for _, e := range decode(t, res.stdout) {
		if e.isDelta() {
			t.Fatalf("delta without --stream-partial-output: %v", e)
		}
	}
}

func TestTourCoversEveryDocument(t *testing.T) {
	res := runSim(t, streamArgs(true, "--", "tour"), runConfig{})
	evs := decode(t, res.stdout)
	text := checkStream(t, evs, true, true)

	for _, want := range []string{"```12:14:src/main.py\n", "```python\n", "```bash\n"} {
		if !strings.Contains(text, want) {
			t.Errorf("text lacks %q", want)
		}
	}
	for _, e := range evs {
		if e.typ() == "error" {
			t.Errorf("tour has an error event")
		}
	}

	started := map[string][]map[string]any{}
	completed := map[string][]map[string]any{}
	var thinking int
	for _, e := range evs {
		if e.typ() == "thinking" && e.subtype() == "delta" {
			thinking++
		}
		if e.typ() != "tool_call" {
			continue
		}
		kind, inner := e.tool()
		if e.subtype() == "started" {
			started[kind] = append(started[kind], inner)
		} else {
			completed[kind] = append(completed[kind], inner)
		}
	}
	if thinking == 0 {
		t.Error("no thinking deltas")
	}
	for _, kind := range []string{"editToolCall", "deleteToolCall", "shellToolCall", "readToolCall", "globToolCall",
		"grepToolCall", "lsToolCall", "mcpToolCall", "webFetchToolCall", "createPlanToolCall",
		"updateTodosToolCall", "askQuestionToolCall"} {
		if len(started[kind]) == 0 || len(completed[kind]) != len(started[kind]) {
			t.Errorf("%s: started %d, completed %d", kind, len(started[kind]), len(completed[kind]))
		}
	}

	// File edits: one creation, one edit with a real hunk.
	var create, edit map[string]any
	for _, c := range completed["editToolCall"] {
		s := c["result"].(map[string]any)["success"].(map[string]any)
		if strings.HasPrefix(s["diffString"].(string), "--- /dev/null\n") {
			create = s
		} else {
			edit = s
		}
	}
	if create == nil || create["afterFullFileContent"] == nil || create["beforeFullFileContent"] != nil {
		t.Errorf("no proper file creation: %v", create)
	}
	if edit == nil || edit["beforeFullFileContent"] == nil || edit["afterFullFileContent"] == nil ||
		!strings.Contains(edit["diffString"].(string), "\n@@ -3,8 +3,7 @@\n") ||
		edit["linesAdded"] != 1.0 || edit["linesRemoved"] != 2.0 {
		t.Errorf("no proper file edit: %v", edit)
	}

	// Shell: a success with every output field, a rejection without args.
	var success, rejected bool
	for _, c := range completed["shellToolCall"] {
		r := c["result"].(map[string]any)
		if s, ok := r["success"].(map[string]any); ok {
			for _, k := range []string{"stdout", "stderr", "exitCode", "executionTime", "interleavedOutput"} {
				if _, ok := s[k]; !ok {
					t.Errorf("shell success lacks %s", k)
				}
			}
			success = true
		}
		if rj, ok := r["rejected"].(map[string]any); ok {
			rejected = true
			if _, ok := c["args"]; ok || len(c) != 1 {
				t.Errorf("rejected shell completed carries more than result: %v", c)
			}
			for _, k := range []string{"command", "workingDirectory", "reason", "isReadonly"} {
				if _, ok := rj[k]; !ok {
					t.Errorf("rejected lacks %s", k)
				}
			}
		}
	}
	if !success || !rejected {
		t.Errorf("shell success=%v rejected=%v", success, rejected)
	}

	// Two parallel shell calls sharing a model_call_id complete out of order.
	outOfOrder := false
	for i := 0; i+3 < len(evs); i++ {
		a, b, c, d := evs[i], evs[i+1], evs[i+2], evs[i+3]
		if a.subtype() == "started" && b.subtype() == "started" && c.subtype() == "completed" && d.subtype() == "completed" {
			ka, _ := a.tool()
			kb, _ := b.tool()
			if ka == "shellToolCall" && kb == "shellToolCall" && a["model_call_id"] == b["model_call_id"] &&
				c["call_id"] == b["call_id"] && d["call_id"] == a["call_id"] {
				outOfOrder = true
			}
		}
	}
	if !outOfOrder {
		t.Error("no parallel shell pair completing out of order")
	}

	// Plan, todos, question and MCP shapes.
	plan := started["createPlanToolCall"][0]["args"].(map[string]any)
	todos := plan["todos"].([]any)
	deps := 0
	for _, td := range todos {
		m := td.(map[string]any)
		if m["status"] != "TODO_STATUS_PENDING" || m["id"] == "" || m["content"] == "" {
			t.Errorf("plan todo %v", m)
		}
		deps += len(m["dependencies"].([]any))
	}
	if deps == 0 || plan["plan"] == "" || plan["overview"] == "" || plan["name"] == "" {
		t.Errorf("plan args %v", plan)
	}
	upd := started["updateTodosToolCall"][0]["args"].(map[string]any)
	if upd["merge"] != true {
		t.Errorf("updateTodos merge = %v", upd["merge"])
	}
	statuses := map[string]bool{}
	for _, td := range upd["todos"].([]any) {
		statuses[td.(map[string]any)["status"].(string)] = true
	}
	if !statuses["TODO_STATUS_COMPLETED"] || !statuses["TODO_STATUS_IN_PROGRESS"] {
		t.Errorf("updateTodos statuses %v", statuses)
	}
	q := started["askQuestionToolCall"][0]["args"].(map[string]any)
	qs := q["questions"].([]any)
	if q["title"] == "" || len(qs) == 0 || len(qs[0].(map[string]any)["options"].([]any)) < 2 ||
		qs[0].(map[string]any)["allowMultiple"] != false {
		t.Errorf("askQuestion args %v", q)
	}
	m := completed["mcpToolCall"][0]
	ma := m["args"].(map[string]any)
	for _, k := range []string{"name", "providerIdentifier", "toolName", "args"} {
		if _, ok := ma[k]; !ok {
			t.Errorf("mcp args lack %s", k)
		}
	}
	ms := m["result"].(map[string]any)["success"].(map[string]any)
	if ms["isError"] != false || ms["content"].([]any)[0].(map[string]any)["text"].(map[string]any)["text"] == "" {
		t.Errorf("mcp result %v", ms)
	}
}

func TestAskHasStableIDs(t *testing.T) {
	res := runSim(t, streamArgs(true, "--", "ask"), runConfig{})
	evs := decode(t, res.stdout)
	text := checkStream(t, evs, true, true)
	if text == "" {
		t.Fatal("ask has no text")
	}
	for _, e := range evs {
		if kind, inner := e.tool(); kind == "askQuestionToolCall" && e.subtype() == "started" {
			b, _ := json.Marshal(inner["args"])
			for _, want := range []string{`"id":"q1"`, `"id":"jwt"`, `"id":"session"`, `"id":"q2"`} {
				if !strings.Contains(string(b), want) {
					t.Errorf("question args lack %s: %s", want, b)
				}
			}
			return
		}
	}
	t.Fatal("no askQuestionToolCall")
}

func TestPlanModeHasNoText(t *testing.T) {
	res := runSim(t, streamArgs(true, "--mode", "plan", "--", "add a cache"), runConfig{})
	evs := decode(t, res.stdout)
	if text := checkStream(t, evs, true, true); text != "" {
		t.Fatalf("plan mode wrote text %q", text)
	}
	found := false
	for _, e := range evs {
		if kind, _ := e.tool(); kind == "createPlanToolCall" {
			found = true
		}
	}
	if !found {
		t.Fatal("no createPlanToolCall")
	}
}

func TestBenchTimestamps(t *testing.T) {
	before := time.Now().UnixNano()
	res := runSim(t, streamArgs(true, "--", "bench:200"), runConfig{})
	after := time.Now().UnixNano()
	evs := decode(t, res.stdout)
	checkStream(t, evs, true, true)
	re := regexp.MustCompile(`^\[ts:(\d+)\] $`)
	var last int64
	n := 0
	for _, e := range evs {
		switch {
		case e.typ() == "thinking" || e.typ() == "tool_call":
			t.Fatalf("bench has %s events", e.typ())
		case e.isDelta():
			m := re.FindStringSubmatch(e.text())
			if m == nil {
				t.Fatalf("bench delta %q", e.text())
			}
			ts, err := strconv.ParseInt(m[1], 10, 64)
			if err != nil || ts < before || ts > after || ts < last {
				t.Fatalf("bench timestamp %d outside [%d, %d] or before %d", ts, before, after, last)
			}
			last = ts
			n++
		}
	}
	if n != 200 {
		t.Fatalf("got %d bench deltas, want 200", n)
	}
}

func TestLongParagraphs(t *testing.T) {
	res := runSim(t, streamArgs(true, "--", "long:7"), runConfig{})
	text := checkStream(t, decode(t, res.stdout), true, true)
	if got := len(strings.Split(text, "\n\n")); got != 7 {
		t.Fatalf("got %d paragraphs, want 7", got)
	}
}

func TestUsageIsDeterministic(t *testing.T) {
	usage := func() any {
		res := runSim(t, streamArgs(true, "--", "tour"), runConfig{})
		evs := decode(t, res.stdout)
		return evs[len(evs)-1]["usage"]
	}
	a, b := usage(), usage()
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Fatalf("usage differs between runs: %v vs %v", a, b)
	}
	u := a.(map[string]any)
	for _, k := range []string{"inputTokens", "outputTokens", "cacheReadTokens", "cacheWriteTokens"} {
		if _, ok := u[k].(float64); !ok {
			t.Errorf("usage lacks %s", k)
		}
	}
}

func TestEchoReportsInputs(t *testing.T) {
	args := streamArgs(false, "--resume", "abc-123", "--model", "sim-fast", "--", "echo", "a  b", `"quoted"`)
	res := runSim(t, args, runConfig{})
	evs := decode(t, res.stdout)
	text := checkStream(t, evs, false, true)
	var got struct {
		Argv   []string `json:"argv"`
		Prompt string   `json:"prompt"`
		Resume string   `json:"resume"`
		Stdin  bool     `json:"stdin"`
		Model  string   `json:"model"`
	}
	if err := json.Unmarshal([]byte(text), &got); err != nil {
		t.Fatalf("echo text is not JSON: %v: %s", err, text)
	}
	if strings.Join(got.Argv, "\x00") != strings.Join(args, "\x00") || got.Prompt != `echo a  b "quoted"` ||
		got.Resume != "abc-123" || got.Stdin || got.Model != "sim-fast" {
		t.Fatalf("echo = %+v", got)
	}
	if evs[0]["session_id"] != "abc-123" || evs[0]["model"] != "Simulator Fast" {
		t.Fatalf("init = %v", evs[0])
	}

	res = runSim(t, streamArgs(false), runConfig{stdin: strings.NewReader("echo\nfrom stdin\n")})
	text = checkStream(t, decode(t, res.stdout), false, true)
	if err := json.Unmarshal([]byte(text), &got); err != nil || !got.Stdin || got.Prompt != "echo\nfrom stdin\n" {
		t.Fatalf("echo from stdin = %+v (%v)", got, err)
	}
}

// failingReader fails the test when it is read.
type failingReader struct{ t *testing.T }

func (r failingReader) Read([]byte) (int, error) {
	r.t.Error("stdin was read although the prompt was given")
	return 0, fmt.Errorf("unexpected read")
}

func TestPromptArgsDoNotReadStdin(t *testing.T) {
	for _, args := range [][]string{streamArgs(false, "--", "hi"), streamArgs(false, "hi")} {
		res := runSim(t, args, runConfig{stdin: failingReader{t}})
		if res.code != 0 {
			t.Fatalf("exit %d: %s", res.code, res.stderr)
		}
	}
}

func TestCancelStopsWithoutResult(t *testing.T) {
	for _, prompt := range []string{"fault:hang-mid", "fault:hang-after", "fault:ignore-term", "tour"} {
		t.Run(prompt, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
			defer cancel()
			env := map[string]string{}
			if prompt == "tour" {
				env[SpeedEnv] = "1"
			}
			res := runSim(t, streamArgs(true, "--", prompt), runConfig{ctx: ctx, env: env})
			if res.code != exitSIGTERM {
				t.Fatalf("exit %d, want 143", res.code)
			}
			evs := decode(t, res.stdout)
			checkStream(t, evs, true, prompt == "fault:hang-after")
			if prompt == "fault:ignore-term" && !res.proc.ignoredTerm {
				t.Fatal("SIGTERM was not ignored")
			}
		})
	}
}

func TestFaultEffects(t *testing.T) {
	res := runSim(t, streamArgs(true, "--", "fault:exit-signal"), runConfig{})
	if !res.proc.killed {
		t.Error("fault:exit-signal did not kill itself")
	}
	res = runSim(t, streamArgs(true, "--", "fault:grandchild"), runConfig{})
	if res.proc.children != 1 || res.code != 0 {
		t.Errorf("fault:grandchild children=%d code=%d", res.proc.children, res.code)
	}

	res = runSim(t, streamArgs(true, "--", "fault:oversize"), runConfig{})
	big := 0
	for _, line := range strings.Split(res.stdout, "\n") {
		if len(line) >= oversizeBytes {
			big++
			if !json.Valid([]byte(line)) {
				t.Error("oversize line is not valid JSON")
			}
		}
	}
	if big != 1 {
		t.Errorf("got %d lines of 10 MiB or more, want 1", big)
	}

	var stderr countingWriter
	res = runSim(t, streamArgs(true, "--", "fault:stderr-flood"), runConfig{stderr: &stderr})
	if stderr.n != floodBytes || res.code != 0 {
		t.Errorf("stderr flood wrote %d bytes (code %d), want %d", stderr.n, res.code, floodBytes)
	}
	checkStream(t, decode(t, res.stdout), true, true)

	res = runSim(t, streamArgs(true, "--", "fault:error-event"), runConfig{})
	if !strings.Contains(res.stdout, "\n"+`{"type":"error","message":"upstream hiccup"}`+"\n") {
		t.Error("no error event line")
	}
	res = runSim(t, streamArgs(true, "--", "fault:is-error"), runConfig{})
	evs := decode(t, res.stdout)
	last := evs[len(evs)-1]
	if last.subtype() != "error" || last["is_error"] != true || last["result"] != "simulated agent error" {
		t.Errorf("fault:is-error ends with %v", last)
	}
	res = runSim(t, streamArgs(true, "--", "fault:garbage"), runConfig{})
	if !strings.Contains(res.stdout, "\n"+`{"type":"mystery"}`+"\n") || !strings.Contains(res.stdout, "\nT: [internal] retrying\n") {
		t.Error("fault:garbage lacks its garbage")
	}
}

type countingWriter struct{ n int }

func (w *countingWriter) Write(p []byte) (int, error) {
	w.n += len(p)
	return len(p), nil
}

func TestSimLog(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "sim.log")
	env := map[string]string{LogEnv: logPath}
	environ := []string{"PATH=/usr/bin", "CURSOR_API_KEY=secret-value", "HOME=/h", "PATH=/dup"}
	runSim(t, streamArgs(true, "--resume", "sess_1", "--", "hello", "world"), runConfig{env: env, environ: environ})
	runSim(t, []string{"--bogus"}, runConfig{env: env, environ: environ})
	b, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "secret-value") {
		t.Fatal("log contains an environment value")
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 2 {
		t.Fatalf("got %d log lines, want 2", len(lines))
	}
	var entry struct {
		Argv   []string `json:"argv"`
		Prompt string   `json:"prompt"`
		Cwd    string   `json:"cwd"`
		Env    []string `json:"env"`
		Pid    int      `json:"pid"`
	}
	if err := json.Unmarshal([]byte(lines[0]), &entry); err != nil {
		t.Fatal(err)
	}
	if entry.Prompt != "hello world" || entry.Cwd != "/work/sim" || entry.Pid != os.Getpid() ||
		strings.Join(entry.Env, ",") != "CURSOR_API_KEY,HOME,PATH" || !strings.Contains(strings.Join(entry.Argv, " "), "--resume sess_1") {
		t.Fatalf("log entry %+v", entry)
	}
}

func TestPacing(t *testing.T) {
	start := time.Now()
	runSim(t, streamArgs(true, "--", "long:1"), runConfig{env: map[string]string{SpeedEnv: "4"}})
	slow := time.Since(start)
	start = time.Now()
	runSim(t, streamArgs(true, "--sim-speed=0", "--", "long:1"), runConfig{env: map[string]string{SpeedEnv: "4"}})
	fast := time.Since(start)
	if slow < 100*time.Millisecond || fast > slow/2 {
		t.Fatalf("speed 4 took %v, speed 0 took %v", slow, fast)
	}
}
