package simulator

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

const (
	oversizeBytes = 10 << 20 // size of the huge read result of fault:oversize
	floodBytes    = 20 << 20 // bytes written to stderr by fault:stderr-flood
)

// Extra event shapes used by the fault scenarios.
type (
	errorEvent struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	}
	mysteryEvent struct {
		Type string `json:"type"`
	}
	reconnectingEvent struct {
		Type        string `json:"type"`
		Subtype     string `json:"subtype"`
		SessionID   string `json:"session_id"`
		TimestampMs int64  `json:"timestamp_ms"`
		Attempt     int    `json:"attempt"`
		EndpointURL string `json:"endpoint_url"`
	}
	retryEvent struct {
		Type        string `json:"type"`
		Subtype     string `json:"subtype"`
		SessionID   string `json:"session_id"`
		TimestampMs int64  `json:"timestamp_ms"`
		Attempt     int    `json:"attempt"`
		IsResume    bool   `json:"is_resume"`
	}
	reconnectedEvent struct {
		Type        string `json:"type"`
		Subtype     string `json:"subtype"`
		SessionID   string `json:"session_id"`
		TimestampMs int64  `json:"timestamp_ms"`
	}
)

// shortRun writes a small but complete turn body: thinking, a sentence, one
// shell call and a closing sentence. The caller decides how the turn ends.
func shortRun(s *session) error {
	r := s.run
	if err := r.think("Checking the project status before answering."); err != nil {
		return err
	}
	if err := r.say("I'll check the repository status first."); err != nil {
		return err
	}
	if err := r.tools(r.shell(shellSpec{
		command: "git status --short", description: "Show working tree status",
		stdout: " M src/main.py\n", duration: 250 * time.Millisecond,
	})); err != nil {
		return err
	}
	return r.say("One file is modified: `src/main.py`. Everything else is clean.")
}

// playCrash dies with an open tool call and an error on stderr.
func playCrash(s *session) (int, error) {
	if err := s.begin(); err != nil {
		return 0, err
	}
	r := s.run
	if err := r.think("Building the project."); err != nil {
		return 0, err
	}
	if err := r.say("I'll build the project first."); err != nil {
		return 0, err
	}
	if err := r.startTool(r.shell(shellSpec{command: "make build", description: "Build the project"})); err != nil {
		return 0, err
	}
	if err := r.sleep(200 * time.Millisecond); err != nil {
		return 0, err
	}
	fmt.Fprintln(s.stderr, "Error: simulated crash")
	return 1, nil
}

// hangText writes some visible text and leaves the turn open.
func hangText(s *session) error {
	r := s.run
	if err := r.think("Working on it."); err != nil {
		return err
	}
	if err := r.say("Working on it; this will take a moment."); err != nil {
		return err
	}
	if !r.partial {
		// Without partial output the text would stay invisible until the
		// segment ends; show it as a mid-turn segment instead.
		return r.flushMidTurn()
	}
	return nil
}

// playHangMid writes some text and then waits until it is killed.
func playHangMid(s *session) (int, error) {
	if err := s.begin(); err != nil {
		return 0, err
	}
	if err := hangText(s); err != nil {
		return 0, err
	}
	return 0, s.run.hang()
}

// playHangAfter writes a complete run and then does not exit.
func playHangAfter(s *session) (int, error) {
	if err := s.begin(); err != nil {
		return 0, err
	}
	if err := shortRun(s); err != nil {
		return 0, err
	}
	if err := s.run.finish(); err != nil {
		return 0, err
	}
	return 0, s.run.hang()
}

// playIgnoreTerm ignores SIGTERM, writes some text and hangs.
func playIgnoreTerm(s *session) (int, error) {
	s.opts.ignoreTerm()
	if err := s.begin(); err != nil {
		return 0, err
	}
	if err := hangText(s); err != nil {
		return 0, err
	}
	return 0, s.run.hang()
}

// hugeContent returns n bytes of numbered text lines.
func hugeContent(n int) string {
	var sb strings.Builder
	sb.Grow(n)
	const filler = " the quick brown fox jumps over the lazy dog; pack my box with five dozen liquor jugs\n"
	for i := 1; sb.Len() < n; i++ {
		line := "line " + strconv.Itoa(i) + ":" + filler
		if rest := n - sb.Len(); len(line) > rest {
			line = strings.Repeat("x", rest-1) + "\n"
		}
		sb.WriteString(line)
	}
	return sb.String()
}

// playOversize puts one 10 MiB line in the middle of a normal run.
func playOversize(s *session) (int, error) {
	if err := s.begin(); err != nil {
		return 0, err
	}
	r := s.run
	if err := r.think("The data file is generated; reading it whole."); err != nil {
		return 0, err
	}
	if err := r.say("I'll read the generated data file."); err != nil {
		return 0, err
	}
	if err := r.tools(r.readFile("data/generated.txt", hugeContent(oversizeBytes), 400*time.Millisecond)); err != nil {
		return 0, err
	}
	if err := r.say("The file holds 10 MiB of numbered lines; nothing in it needs to change."); err != nil {
		return 0, err
	}
	return 0, r.finish()
}

// playGarbage mixes lines that are not events into a normal run.
func playGarbage(s *session) (int, error) {
	if err := s.begin(); err != nil {
		return 0, err
	}
	r := s.run
	if err := r.raw("T: [internal] retrying"); err != nil {
		return 0, err
	}
	if err := r.think("Checking the project status before answering."); err != nil {
		return 0, err
	}
	if err := r.say("I'll check the repository "); err != nil {
		return 0, err
	}
	if err := r.raw(`{"type":"assistant","message":{"role":"assistant","content":[{"type":"te`); err != nil {
		return 0, err
	}
	if err := r.say("status first."); err != nil {
		return 0, err
	}
	if err := r.tools(r.shell(shellSpec{
		command: "git status --short", description: "Show working tree status",
		stdout: " M src/main.py\n", duration: 250 * time.Millisecond,
	})); err != nil {
		return 0, err
	}
	if err := r.event(mysteryEvent{Type: "mystery"}); err != nil {
		return 0, err
	}
	if err := r.raw("RetriableError: [unavailable] simulated transient error"); err != nil {
		return 0, err
	}
	if err := r.say("One file is modified: `src/main.py`. Everything else is clean."); err != nil {
		return 0, err
	}
	return 0, r.finish()
}

// playStderrFlood writes 20 MiB to stderr while the run goes on, and writes
// result only after the flood is complete.
func playStderrFlood(s *session) (int, error) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		flood(s.stderr, floodBytes)
	}()
	if err := s.begin(); err != nil {
		return 0, err
	}
	if err := shortRun(s); err != nil {
		return 0, err
	}
	select {
	case <-done:
	case <-s.run.ctx.Done():
		return 0, s.run.ctx.Err()
	}
	return 0, s.run.finish()
}

// flood writes n bytes of log-like lines to w, stopping at the first error.
func flood(w io.Writer, n int) {
	var chunk strings.Builder
	for i := 0; chunk.Len() < 64<<10; i++ {
		fmt.Fprintf(&chunk, "[stderr-flood] %06d simulated diagnostic output %s\n", i, strings.Repeat(".", 60))
	}
	b := []byte(chunk.String())
	for n > 0 {
		k := min(n, len(b))
		if _, err := w.Write(b[:k]); err != nil {
			return
		}
		n -= k
	}
}

// playGrandchild leaves a child process holding stdout and stderr.
func playGrandchild(s *session) (int, error) {
	if err := s.opts.startChild(s.stdout, s.stderr); err != nil {
		fmt.Fprintf(s.stderr, "simulator: start child: %v\n", err)
	}
	if err := s.begin(); err != nil {
		return 0, err
	}
	if err := shortRun(s); err != nil {
		return 0, err
	}
	return 0, s.run.finish()
}

// playNoResult ends normally but never writes result.
func playNoResult(s *session) (int, error) {
	if err := s.begin(); err != nil {
		return 0, err
	}
	if err := shortRun(s); err != nil {
		return 0, err
	}
	return 0, s.run.flushFinal()
}

// playErrorEvent writes an error event mid-run and carries on.
func playErrorEvent(s *session) (int, error) {
	if err := s.begin(); err != nil {
		return 0, err
	}
	r := s.run
	if err := r.think("Reading the README first."); err != nil {
		return 0, err
	}
	if err := r.say("I'll read the README."); err != nil {
		return 0, err
	}
	if err := r.tools(r.readFile("README.md", tourReadme, 90*time.Millisecond)); err != nil {
		return 0, err
	}
	if err := r.event(errorEvent{Type: "error", Message: "upstream hiccup"}); err != nil {
		return 0, err
	}
	if err := r.say("The README describes a small greeter program that prints `Hello, <name>!`."); err != nil {
		return 0, err
	}
	return 0, r.finish()
}

// playIsError ends with an error result.
func playIsError(s *session) (int, error) {
	if err := s.begin(); err != nil {
		return 0, err
	}
	r := s.run
	if err := r.think("Trying to apply the change."); err != nil {
		return 0, err
	}
	if err := r.say("I'll apply the change now."); err != nil {
		return 0, err
	}
	if err := r.flushFinal(); err != nil {
		return 0, err
	}
	if err := r.sleep(resultDelay); err != nil {
		return 0, err
	}
	return 0, r.result("error", true, "simulated agent error")
}

// playExitSignal kills its own process with SIGKILL mid-stream.
func playExitSignal(s *session) (int, error) {
	if err := s.begin(); err != nil {
		return 0, err
	}
	if err := hangText(s); err != nil {
		return 0, err
	}
	s.opts.killSelf()
	// Only reached when killSelf does not kill (in tests): report what a
	// shell shows for a SIGKILL death.
	return 137, nil
}

// reconnect writes one connection/retry round.
func (r *run) reconnect(attempt int, resume bool) error {
	if err := r.event(reconnectingEvent{
		Type: "connection", Subtype: "reconnecting", SessionID: r.sessionID, TimestampMs: r.nowMs(),
		Attempt: attempt, EndpointURL: "https://agentn.global.api5.cursor.sh",
	}); err != nil {
		return err
	}
	if err := r.sleep(300 * time.Millisecond); err != nil {
		return err
	}
	if err := r.event(retryEvent{
		Type: "retry", Subtype: "starting", SessionID: r.sessionID, TimestampMs: r.nowMs(),
		Attempt: attempt, IsResume: resume,
	}); err != nil {
		return err
	}
	if err := r.sleep(150 * time.Millisecond); err != nil {
		return err
	}
	return r.event(reconnectedEvent{
		Type: "connection", Subtype: "reconnected", SessionID: r.sessionID, TimestampMs: r.nowMs(),
	})
}

// playReconnect loses the connection mid-turn and still succeeds.
func playReconnect(s *session) (int, error) {
	if err := s.begin(); err != nil {
		return 0, err
	}
	r := s.run
	if err := r.think("Finding the Python files."); err != nil {
		return 0, err
	}
	if err := r.say("I'll list the Python files."); err != nil {
		return 0, err
	}
	if err := r.tools(r.glob("**/*.py", []string{"src/main.py", "tests/test_main.py"}, 150*time.Millisecond)); err != nil {
		return 0, err
	}
	if err := r.reconnect(1, true); err != nil {
		return 0, err
	}
	if err := r.say("There are two Python files: `src/main.py` and `tests/test_main.py`."); err != nil {
		return 0, err
	}
	return 0, r.finish()
}

// playRetryExhausted reconnects until it gives up, without a result.
func playRetryExhausted(s *session) (int, error) {
	if err := s.begin(); err != nil {
		return 0, err
	}
	r := s.run
	for attempt := 1; attempt <= 3; attempt++ {
		if err := r.reconnect(attempt, false); err != nil {
			return 0, err
		}
	}
	if err := r.raw("T: [internal] Failed to run step, exceeded max retries"); err != nil {
		return 0, err
	}
	fmt.Fprintln(s.stderr, "RetriableError: [unavailable] simulated upstream outage: exceeded max retries")
	return 1, nil
}

// playAuth fails before any output, as the CLI does without credentials.
func playAuth(s *session) (int, error) {
	fmt.Fprintln(s.stderr, "Error: Authentication required. Please run 'agent login' first, or set CURSOR_API_KEY environment variable.")
	return 1, nil
}
