package simulator

import (
	"slices"
	"strconv"
	"strings"
	"time"
)

// Scenario names one scripted run the simulator can play.
type Scenario struct {
	// Name is the prompt's first word that selects the scenario, e.g. "tour"
	// or "long:<n>".
	Name string
	// Description says what the run contains.
	Description string
}

var scenarioList = []Scenario{
	{"default", "Any other prompt: thinking, then a short markdown reply that quotes the prompt and contains a fenced ```go code block."},
	{"tour", "Every document type in one run: text, a code block with a language, a code reference (```12:14:src/main.py), file creation and edit (editToolCall), file deletion, a shell success and a rejected shell, read, glob, grep, ls, MCP and web fetch calls, a plan, a todo update, a clarification, two parallel shell calls that complete out of order, thinking, and a final text."},
	{"plan", "What --mode plan gives (also picked by --mode plan for any prompt that names no scenario): thinking, no text, and a createPlanToolCall whose todos have dependencies."},
	{"ask", "A clarification: an askQuestionToolCall with stable ids (q1: jwt, session; q2: postgres, sqlite), then text."},
	{"permissions", "Two shell commands outside the CLI's allow list (npm test, then rm -rf build/): print mode rejects them; in ACP mode each asks the client for permission and runs when allowed."},
	{"echo", "A tiny run whose assistant text is a JSON object {argv, prompt, resume, stdin, model, mode, workspace, force, trust, approveMcps, streamPartialOutput} describing what the simulator received."},
	{"tools", "One of each non-file tool in a row: shell, read, glob, grep, ls, semantic search, read lints, web search, web fetch and MCP."},
	{"long:<n>", "n paragraphs of text (default 5, at most 10000) streamed as deltas."},
	{"bench:<n>", "For load tests: n assistant deltas (default 100, at most 10000000), each exactly `[ts:<unix nanoseconds at emit>] `, then the final flush and result. No thinking, no tools. Use with --stream-partial-output."},
	{"fault:crash", "Some output and an open tool call, then `Error: simulated crash` on stderr and exit code 1 without a result."},
	{"fault:hang-mid", "init and some text, then silence until killed."},
	{"fault:hang-after", "A complete run including result, then silence until killed (the CLI sometimes does not exit)."},
	{"fault:oversize", "A normal run with one 10 MiB line in the middle (a readToolCall completed with a huge content)."},
	{"fault:garbage", "A normal run with non-JSON lines (`T: [internal] retrying`), a truncated JSON line and an unknown event type mixed in."},
	{"fault:stderr-flood", "A normal run that writes 20 MiB to stderr meanwhile; result is written after the flood is complete."},
	{"fault:ignore-term", "Ignores SIGTERM, writes some text, then hangs until killed with SIGKILL."},
	{"fault:grandchild", "Starts `sleep 3600` holding stdout and stderr, writes a complete run and exits 0 while the child lives on."},
	{"fault:no-result", "A normal run without the result line; exit code 0."},
	{"fault:error-event", "A {\"type\":\"error\",\"message\":\"upstream hiccup\"} line mid-run, then the run continues to result."},
	{"fault:is-error", "A run that ends with result subtype error, is_error true, result \"simulated agent error\"; exit code 0."},
	{"fault:exit-signal", "Kills itself with SIGKILL mid-stream."},
	{"fault:reconnect", "connection/reconnecting, retry/starting and connection/reconnected mid-turn; the run still succeeds."},
	{"fault:retry-exhausted", "Three reconnect/retry rounds, then `T: [internal] Failed to run step, exceeded max retries`, an error on stderr and exit code 1 without a result."},
	{"fault:auth", "Exits 1 at once with the CLI's authentication error on stderr and nothing on stdout."},
}

// Scenarios returns the scenarios the simulator knows, in the order they are
// documented. The prompt's first word selects one; anything else plays "default".
func Scenarios() []Scenario {
	return append([]Scenario(nil), scenarioList...)
}

// scenarioFunc plays one scenario on a started run and returns its exit code.
type scenarioFunc func(s *session) (int, error)

// selection is the scenario picked for a prompt.
type selection struct {
	name string // as listed in Scenarios, e.g. "long:<n>"
	n    int    // the <n> of long/bench
	play scenarioFunc
}

const (
	defaultLongParagraphs = 5
	maxLongParagraphs     = 10000
	defaultBenchDeltas    = 100
	maxBenchDeltas        = 10_000_000
)

// selectScenario picks the scenario from the prompt's first word (case does
// not matter), falling back to plan in --mode plan and to default otherwise.
func selectScenario(prompt, mode string) selection {
	word := ""
	if f := strings.Fields(prompt); len(f) > 0 {
		word = strings.ToLower(f[0])
	}
	if sel, ok := scenarioByWord(word); ok {
		return sel
	}
	if mode == "plan" {
		return selection{name: "plan", play: playPlan}
	}
	return selection{name: "default", play: playDefault}
}

// scenarioByWord resolves a scenario word such as "tour", "long:12" or "fault:crash".
func scenarioByWord(word string) (selection, bool) {
	if name, arg, ok := strings.Cut(word, ":"); ok && (name == "long" || name == "bench") {
		n, err := strconv.Atoi(strings.TrimRight(arg, ".,;!?"))
		if name == "long" {
			if err != nil || n < 1 {
				n = defaultLongParagraphs
			}
			return selection{name: "long:<n>", n: min(n, maxLongParagraphs), play: playLong}, true
		}
		if err != nil || n < 0 {
			n = defaultBenchDeltas
		}
		return selection{name: "bench:<n>", n: min(n, maxBenchDeltas), play: playBench}, true
	}
	word = strings.TrimRight(word, ".,;:!?")
	switch word {
	case "long":
		return selection{name: "long:<n>", n: defaultLongParagraphs, play: playLong}, true
	case "bench":
		return selection{name: "bench:<n>", n: defaultBenchDeltas, play: playBench}, true
	case "default":
		return selection{name: "default", play: playDefault}, true
	}
	if play, ok := scenarioFuncs[word]; ok {
		return selection{name: word, play: play}, true
	}
	return selection{}, false
}

var scenarioFuncs map[string]scenarioFunc

func init() {
	scenarioFuncs = map[string]scenarioFunc{
		"tour":                  playTour,
		"plan":                  playPlan,
		"ask":                   playAsk,
		"permissions":           playPermissions,
		"echo":                  playEcho,
		"tools":                 playTools,
		"fault:crash":           playCrash,
		"fault:hang-mid":        playHangMid,
		"fault:hang-after":      playHangAfter,
		"fault:oversize":        playOversize,
		"fault:garbage":         playGarbage,
		"fault:stderr-flood":    playStderrFlood,
		"fault:ignore-term":     playIgnoreTerm,
		"fault:grandchild":      playGrandchild,
		"fault:no-result":       playNoResult,
		"fault:error-event":     playErrorEvent,
		"fault:is-error":        playIsError,
		"fault:exit-signal":     playExitSignal,
		"fault:reconnect":       playReconnect,
		"fault:retry-exhausted": playRetryExhausted,
		"fault:auth":            playAuth,
	}
}

// quote renders text as a markdown block quote.
func quote(text string) string {
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	for i, l := range lines {
		if l == "" {
			lines[i] = ">"
		} else {
			lines[i] = "> " + l
		}
	}
	return strings.Join(lines, "\n")
}

// playDefault answers any prompt with a short markdown reply.
func playDefault(s *session) (int, error) {
	if err := s.begin(); err != nil {
		return 0, err
	}
	r := s.run
	if err := r.think("The user sent a prompt that names no scenario. I'll quote it back and show a short Go example."); err != nil {
		return 0, err
	}
	prompt := strings.TrimSpace(r.prompt)
	if prompt == "" {
		prompt = "(empty prompt)"
	}
	text := "You asked:\n\n" + quote(prompt) + "\n\n" +
		"This is the **Docstream simulator**, so no model read your prompt. " +
		"Here is a small Go program to show how code renders:\n\n" +
		"```go\npackage main\n\nimport \"fmt\"\n\nfunc main() {\n\tfmt.Println(\"hello from the Docstream simulator\")\n}\n```\n\n" +
		"Start a prompt with `tour` to see every document type, or with `plan`, `ask`, `tools` or `long:5`."
	if err := r.say(text); err != nil {
		return 0, err
	}
	return 0, r.finish()
}

// playLong streams n paragraphs.
func playLong(s *session) (int, error) {
	if err := s.begin(); err != nil {
		return 0, err
	}
	r := s.run
	if err := r.think("Writing a long answer, one paragraph after another."); err != nil {
		return 0, err
	}
	for i := 1; i <= s.sel.n; i++ {
		if i > 1 {
			if err := r.say("\n\n"); err != nil {
				return 0, err
			}
		}
		if err := r.say(longParagraph(i, s.sel.n)); err != nil {
			return 0, err
		}
	}
	return 0, r.finish()
}

var longSentences = []string{
	"Streaming turns a long wait into steady progress that a reader can follow.",
	"Each delta carries only a few characters, so the gateway forwards many small events.",
	"Clients that reconnect resume from the last event id they saw.",
	"Nothing in this text is generated by a model; the simulator repeats it on purpose.",
	"Backpressure keeps a slow reader from growing the server's memory without bound.",
}

func longParagraph(i, n int) string {
	var sb strings.Builder
	sb.WriteString("Paragraph " + strconv.Itoa(i) + " of " + strconv.Itoa(n) + ".")
	for k := 0; k < 3; k++ {
		sb.WriteString(" " + longSentences[(i+k)%len(longSentences)])
	}
	return sb.String()
}

// playBench writes n timestamped deltas as fast as the speed allows.
func playBench(s *session) (int, error) {
	if err := s.begin(); err != nil {
		return 0, err
	}
	r := s.run
	for i := 0; i < s.sel.n; i++ {
		if i > 0 {
			if err := r.sleep(tokenDelay); err != nil {
				return 0, err
			}
		}
		if err := r.delta("[ts:" + strconv.FormatInt(r.now().UnixNano(), 10) + "] "); err != nil {
			return 0, err
		}
	}
	return 0, r.finish()
}

// playEcho reports what the simulator received.
func playEcho(s *session) (int, error) {
	if err := s.begin(); err != nil {
		return 0, err
	}
	r, c := s.run, s.cfg
	mode := c.mode
	if mode == "" {
		mode = "agent"
	}
	report := o(
		"argv", c.argv,
		"prompt", r.prompt,
		"resume", c.resume,
		"stdin", s.promptFromStdin,
		"model", c.model.ID,
		"mode", mode,
		"workspace", r.cwd,
		"force", c.force,
		"trust", c.trust,
		"approveMcps", c.approveMCPs,
		"streamPartialOutput", c.partial,
	)
	b, err := marshalLine(report)
	if err != nil {
		return 0, err
	}
	if err := r.say(string(b)); err != nil {
		return 0, err
	}
	return 0, r.finish()
}

// planTodos is the todo list of the plan scenario.
var planTodos = []todo{
	{id: "inspect", content: "Inspect the current request handling and list the call sites", status: "TODO_STATUS_PENDING"},
	{id: "design", content: "Design the new interface and write it down in the package comment", status: "TODO_STATUS_PENDING", deps: []string{"inspect"}},
	{id: "implement", content: "Implement the change behind the new interface", status: "TODO_STATUS_PENDING", deps: []string{"design"}},
	{id: "tests", content: "Add table tests for the edge cases", status: "TODO_STATUS_PENDING", deps: []string{"design"}},
	{id: "docs", content: "Update the README and the changelog", status: "TODO_STATUS_PENDING", deps: []string{"implement", "tests"}},
}

// playPlan is what --mode plan gives: no text, one createPlanToolCall.
func playPlan(s *session) (int, error) {
	if err := s.begin(); err != nil {
		return 0, err
	}
	r := s.run
	topic := strings.TrimSpace(r.prompt)
	if f := strings.Fields(topic); len(f) > 0 && strings.EqualFold(strings.TrimRight(f[0], ".,;:!?"), "plan") {
		topic = strings.TrimSpace(topic[len(f[0]):])
	}
	if topic == "" {
		topic = "the requested change"
	}
	topic, _, _ = strings.Cut(topic, "\n")
	if rs := []rune(strings.TrimSpace(topic)); len(rs) > 120 {
		topic = string(rs[:120]) + "…"
	}
	if err := r.think("Plan mode: read-only. I'll look at the structure and propose a plan with ordered steps."); err != nil {
		return 0, err
	}
	plan := "# Plan: " + topic + "\n\n" +
		"## Approach\n\nWork from the outside in: understand today's behaviour, agree on the interface, then change the code with tests beside it.\n\n" +
		"## Steps\n\n" +
		"1. **Inspect** the current request handling and list every call site.\n" +
		"2. **Design** the new interface; record the decision in the package comment.\n" +
		"3. **Implement** the change behind that interface.\n" +
		"4. **Test** the edge cases with table tests.\n" +
		"5. **Document** the change in the README and the changelog.\n\n" +
		"## Risks\n\n- Callers outside this repository may depend on the old behaviour.\n"
	if err := r.tools(createPlan("Plan: "+topic,
		"Five steps from inspection to documentation; tests and implementation can proceed in parallel once the design is agreed.",
		plan, planTodos, 200*time.Millisecond)); err != nil {
		return 0, err
	}
	return 0, r.finish()
}

// askQuestions are the stable questions of the ask scenario.
var askQuestions = []question{
	{id: "q1", prompt: "Which authentication method should the API use?", options: [][2]string{
		{"jwt", "JSON Web Tokens (stateless)"},
		{"session", "Server-side sessions with a cookie"},
	}},
	{id: "q2", prompt: "Where should user records be stored?", options: [][2]string{
		{"postgres", "PostgreSQL"},
		{"sqlite", "SQLite file"},
	}},
}

// playAsk asks for a clarification, then answers with text.
func playAsk(s *session) (int, error) {
	if err := s.begin(); err != nil {
		return 0, err
	}
	r := s.run
	if err := r.think("The request leaves two decisions open. I should ask before writing code."); err != nil {
		return 0, err
	}
	if err := r.say("Before I start, two decisions are yours to make."); err != nil {
		return 0, err
	}
	if err := r.tools(askQuestion("Authentication setup", askQuestions, 120*time.Millisecond)); err != nil {
		return 0, err
	}
	if r.acp != nil && len(r.acp.answers) > 0 {
		var chosen []string
		for _, q := range askQuestions {
			for _, op := range q.options {
				if slices.Contains(r.acp.answers[q.id], op[0]) {
					chosen = append(chosen, "**"+op[1]+"**")
				}
			}
		}
		if err := r.say("You chose " + strings.Join(chosen, " and ") + ". I'll set up authentication accordingly."); err != nil {
			return 0, err
		}
		return 0, r.finish()
	}
	if err := r.say("I could not get answers in this run, so nothing has been changed yet. " +
		"Reply with your choices (for example **JSON Web Tokens** and **PostgreSQL**) and I'll set up " +
		"authentication accordingly."); err != nil {
		return 0, err
	}
	return 0, r.finish()
}

// playPermissions runs two commands that need the user's permission.
func playPermissions(s *session) (int, error) {
	if err := s.begin(); err != nil {
		return 0, err
	}
	r := s.run
	if err := r.think("Run the tests, then clean up; both commands need approval."); err != nil {
		return 0, err
	}
	for _, c := range []shellSpec{
		{command: "npm test", description: "Run the tests", stdout: "12 passing\n", rejected: true, duration: 300 * time.Millisecond},
		{command: "rm -rf build/", description: "Remove build output", rejected: true, duration: 60 * time.Millisecond},
	} {
		if err := r.say("Next: `" + c.command + "`."); err != nil {
			return 0, err
		}
		if err := r.tools(r.shell(c)); err != nil {
			return 0, err
		}
		outcome := " was not allowed, so I left it."
		if r.acp != nil && r.acp.approved {
			outcome = " ran."
		}
		if err := r.say("`" + c.command + "`" + outcome); err != nil {
			return 0, err
		}
	}
	return 0, r.finish()
}

// playTools calls one of each non-file tool in a row.
func playTools(s *session) (int, error) {
	if err := s.begin(); err != nil {
		return 0, err
	}
	r := s.run
	if err := r.think("I'll exercise each read-only tool once."); err != nil {
		return 0, err
	}
	steps := []struct {
		say  string
		call *toolCall
	}{
		{"First the shell.", r.shell(shellSpec{command: "git status --short", description: "Show working tree status",
			stdout: " M src/main.py\n?? notes.txt\n", duration: 300 * time.Millisecond})},
		{"Now I'll read a file.", r.readFile("README.md", tourReadme, 90*time.Millisecond)},
		{"Find the Python files.", r.glob("**/*.py", []string{"src/main.py", "tests/test_main.py"}, 120*time.Millisecond)},
		{"Search for the greeting.", r.grep("def greet", []grepMatch{{"src/main.py", 12, "def greet(name):"}}, 150*time.Millisecond)},
		{"List the workspace.", r.ls(tourTree, 110*time.Millisecond)},
		{"Search by meaning.", r.semSearch("how the greeting is printed", []grepMatch{{"src/main.py", 12, "def greet(name):"}}, 260*time.Millisecond)},
		{"Check for lint errors.", r.readLints([]string{"src/main.py"}, 140*time.Millisecond)},
		{"Search the web.", webSearch("python argparse optional positional argument", []obj{
			o("title", "argparse — Parser for command-line options", "url", "https://docs.python.org/3/library/argparse.html",
				"chunk", "nargs='?' consumes one argument if possible and produces a default otherwise."),
		}, 500*time.Millisecond)},
		{"Fetch a page.", webFetch("https://example.com/greeter/releases", tourReleaseNotes, 420*time.Millisecond)},
		{"Ask the docs server.", mcp("docs", "search_docs", o("query", "greeting configuration"),
			"The greeting text is configured by GREETING in src/config.py (default \"Hello\").", 300*time.Millisecond)},
	}
	for _, st := range steps {
		if err := r.say(st.say); err != nil {
			return 0, err
		}
		if err := r.tools(st.call); err != nil {
			return 0, err
		}
	}
	if err := r.say("Every tool answered. The working tree has one modified file and one untracked file; " +
		"no lint errors were found."); err != nil {
		return 0, err
	}
	return 0, r.finish()
}
