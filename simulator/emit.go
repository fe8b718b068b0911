package simulator

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
)

// Pacing at speed 1. Every delay is divided by the speed; speed 0 removes them.
const (
	firstTokenDelay = 350 * time.Millisecond // between the prompt echo and the first thinking or text
	thinkChunkDelay = 12 * time.Millisecond  // between thinking deltas
	tokenDelay      = 6 * time.Millisecond   // between assistant text deltas
	flushDelay      = 40 * time.Millisecond  // between the last delta of a segment and its flush
	toolStartDelay  = 15 * time.Millisecond  // between the starts of parallel tool calls
	modelDelay      = 250 * time.Millisecond // between the last tool result and the next model output
	resultDelay     = 20 * time.Millisecond  // between the last assistant event and result
)

// Event shapes. Field order follows the real CLI's lines.
type (
	textPart struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	message struct {
		Role    string     `json:"role"`
		Content []textPart `json:"content"`
	}
	initEvent struct {
		Type           string `json:"type"`
		Subtype        string `json:"subtype"`
		APIKeySource   string `json:"apiKeySource"`
		Cwd            string `json:"cwd"`
		SessionID      string `json:"session_id"`
		Model          string `json:"model"`
		PermissionMode string `json:"permissionMode"`
	}
	userEvent struct {
		Type      string  `json:"type"`
		Message   message `json:"message"`
		SessionID string  `json:"session_id"`
	}
	thinkingDelta struct {
		Type        string `json:"type"`
		Subtype     string `json:"subtype"`
		Text        string `json:"text"`
		SessionID   string `json:"session_id"`
		TimestampMs int64  `json:"timestamp_ms"`
	}
	thinkingCompleted struct {
		Type        string `json:"type"`
		Subtype     string `json:"subtype"`
		SessionID   string `json:"session_id"`
		TimestampMs int64  `json:"timestamp_ms"`
	}
	assistantEvent struct {
		Type        string  `json:"type"`
		Message     message `json:"message"`
		SessionID   string  `json:"session_id"`
		ModelCallID string  `json:"model_call_id,omitempty"`
		TimestampMs int64   `json:"timestamp_ms,omitempty"`
	}
	toolEvent struct {
		Type        string `json:"type"`
		Subtype     string `json:"subtype"`
		CallID      string `json:"call_id"`
		ToolCall    obj    `json:"tool_call"`
		ModelCallID string `json:"model_call_id"`
		SessionID   string `json:"session_id"`
		TimestampMs int64  `json:"timestamp_ms"`
	}
	usage struct {
		InputTokens      int `json:"inputTokens"`
		OutputTokens     int `json:"outputTokens"`
		CacheReadTokens  int `json:"cacheReadTokens"`
		CacheWriteTokens int `json:"cacheWriteTokens"`
	}
	resultEvent struct {
		Type          string `json:"type"`
		Subtype       string `json:"subtype"`
		DurationMs    int64  `json:"duration_ms"`
		DurationAPIMs int64  `json:"duration_api_ms"`
		IsError       bool   `json:"is_error"`
		Result        string `json:"result"`
		SessionID     string `json:"session_id"`
		RequestID     string `json:"request_id"`
		Usage         usage  `json:"usage"`
	}
)

// toolCall is one scripted tool invocation.
type toolCall struct {
	// kind is the key in tool_call, e.g. "shellToolCall".
	kind string
	// args builds the args object; it receives the call id because some
	// kinds (shell) repeat it inside args.
	args func(callID string) obj
	// description, when set, sits next to args (shell only in the captures).
	description string
	// result is the `result` object of the completed event.
	result obj
	// resultOnly drops args and description from the completed event, as the
	// CLI does for rejected shell calls.
	resultOnly bool
	// duration is how long the call runs at speed 1.
	duration time.Duration

	// asks says that the call is not on the CLI's allow list: print mode
	// rejects it, ACP mode asks the client; approvedOutput is its output
	// when allowed, and ran says that it was.
	asks           bool
	approvedOutput string
	ran            bool

	callID    string
	startedAt int64
}

// run writes one scripted agent turn.
type run struct {
	ctx     context.Context
	out     io.Writer
	format  string // "stream-json", "json" or "text"
	partial bool
	speed   float64
	now     func() time.Time

	sessionID string
	requestID string
	prompt    string
	cwd       string
	start     time.Time

	step          int    // index of the current model call in this turn
	modelCallID   string // model_call_id of the current step, made on first use
	segment       strings.Builder
	text          strings.Builder // all flushed segments, for result.result
	toolCount     int
	thinkingChars int

	acp *acpTurn // set when the run speaks ACP (agent-sim acp)
}

// sleep waits d scaled by the speed, or returns the context's error.
func (r *run) sleep(d time.Duration) error {
	if err := r.ctx.Err(); err != nil {
		return err
	}
	if r.speed == 0 || d <= 0 {
		return nil
	}
	t := time.NewTimer(time.Duration(float64(d) / r.speed))
	defer t.Stop()
	select {
	case <-r.ctx.Done():
		return r.ctx.Err()
	case <-t.C:
		return nil
	}
}

// hang blocks until the context ends and returns its error.
func (r *run) hang() error {
	<-r.ctx.Done()
	return r.ctx.Err()
}

func (r *run) nowMs() int64 { return r.now().UnixMilli() }

// write sends one complete line (newline added) to stdout in a single write.
func (r *run) write(line []byte) error {
	if err := r.ctx.Err(); err != nil {
		return err
	}
	buf := make([]byte, 0, len(line)+1)
	buf = append(buf, line...)
	buf = append(buf, '\n')
	if _, err := r.out.Write(buf); err != nil {
		return fmt.Errorf("write stdout: %w", err)
	}
	return nil
}

// event writes v as a JSON line. In the text and json output formats only the
// result is printed.
func (r *run) event(v any) error {
	if r.acp != nil {
		return r.acp.event(r, v)
	}
	if r.format != "stream-json" {
		res, ok := v.(resultEvent)
		if !ok {
			return r.ctx.Err()
		}
		if r.format == "text" {
			return r.write([]byte(res.Result))
		}
	}
	line, err := marshalLine(v)
	if err != nil {
		return err
	}
	return r.write(line)
}

// raw writes a line verbatim (stream-json only), for deliberate garbage.
func (r *run) raw(line string) error {
	if r.format != "stream-json" {
		return r.ctx.Err()
	}
	return r.write([]byte(line))
}

// begin writes system/init and the user echo.
func (r *run) begin(apiKeySource, model, permissionMode string) error {
	if err := r.event(initEvent{
		Type: "system", Subtype: "init", APIKeySource: apiKeySource, Cwd: r.cwd,
		SessionID: r.sessionID, Model: model, PermissionMode: permissionMode,
	}); err != nil {
		return err
	}
	if err := r.event(userEvent{
		Type:      "user",
		Message:   message{Role: "user", Content: []textPart{{Type: "text", Text: r.prompt}}},
		SessionID: r.sessionID,
	}); err != nil {
		return err
	}
	return r.sleep(firstTokenDelay)
}

// tokenPattern is compiled on first use: most runs (bench:<n> among them)
// never split text, and every run is a new process.
var tokenPattern = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`[ \t]*[\p{L}\p{N}_']+|[ \t]*[^\s\p{L}\p{N}_']{1,3}|\s+`)
})

// tokens splits text into token-sized pieces whose concatenation is text.
func tokens(text string) []string {
	return tokenPattern().FindAllString(text, -1)
}

// think writes a thinking phase: deltas of a few words, then completed.
func (r *run) think(text string) error {
	toks := tokens(text)
	for i := 0; i < len(toks); i += 4 {
		chunk := strings.Join(toks[i:min(i+4, len(toks))], "")
		r.thinkingChars += len(chunk)
		if err := r.event(thinkingDelta{
			Type: "thinking", Subtype: "delta", Text: chunk, SessionID: r.sessionID, TimestampMs: r.nowMs(),
		}); err != nil {
			return err
		}
		if err := r.sleep(thinkChunkDelay); err != nil {
			return err
		}
	}
	return r.event(thinkingCompleted{
		Type: "thinking", Subtype: "completed", SessionID: r.sessionID, TimestampMs: r.nowMs(),
	})
}

// delta writes one assistant text delta (partial output only) and adds it to
// the current segment.
func (r *run) delta(text string) error {
	r.segment.WriteString(text)
	if !r.partial {
		return nil
	}
	return r.event(assistantEvent{
		Type: "assistant", Message: assistantMessage(text), SessionID: r.sessionID, TimestampMs: r.nowMs(),
	})
}

// say generates text into the current segment, one token at a time.
func (r *run) say(text string) error {
	for _, tok := range tokens(text) {
		if err := r.delta(tok); err != nil {
			return err
		}
		if err := r.sleep(tokenDelay); err != nil {
			return err
		}
	}
	return nil
}

func assistantMessage(text string) message {
	return message{Role: "assistant", Content: []textPart{{Type: "text", Text: text}}}
}

// callID returns the current step's model_call_id: `<request id>-<step>-<4 chars>`.
func (r *run) callID() string {
	if r.modelCallID == "" {
		r.modelCallID = fmt.Sprintf("%s-%d-%s", r.requestID, r.step, randomSuffix(4))
	}
	return r.modelCallID
}

// flushMidTurn writes the current segment whole, with model_call_id and
// timestamp_ms, as the CLI does before a tool call.
func (r *run) flushMidTurn() error {
	if r.segment.Len() == 0 {
		return nil
	}
	if err := r.sleep(flushDelay); err != nil {
		return err
	}
	text := r.segment.String()
	r.segment.Reset()
	r.text.WriteString(text)
	return r.event(assistantEvent{
		Type: "assistant", Message: assistantMessage(text), SessionID: r.sessionID,
		ModelCallID: r.callID(), TimestampMs: r.nowMs(),
	})
}

// toolCallObj renders the tool_call object of a started or completed event.
func (c *toolCall) toolCallObj(completed bool, completedAt int64) obj {
	var inner obj
	if !(completed && c.resultOnly) {
		inner = append(inner, field{"args", c.args(c.callID)})
	}
	if completed {
		inner = append(inner, field{"result", c.result})
	}
	if c.description != "" && !(completed && c.resultOnly) {
		inner = append(inner, field{"description", c.description})
	}
	out := o(c.kind, inner, "hookAdditionalContexts", []any{}, "toolCallId", c.callID,
		"startedAtMs", fmt.Sprint(c.startedAt))
	if completed {
		out = append(out, field{"completedAtMs", fmt.Sprint(completedAt)})
	}
	return out
}

// tools runs one model step's tool calls: the segment flush, every started
// event (sharing one model_call_id), then the completed events in the order
// the calls finish.
func (r *run) tools(calls ...*toolCall) error {
	if err := r.flushMidTurn(); err != nil {
		return err
	}
	if r.acp != nil {
		if err := r.acp.tools(r, calls); err != nil {
			return err
		}
		r.toolCount += len(calls)
		r.step++
		r.modelCallID = ""
		return r.sleep(modelDelay)
	}
	mcid := r.callID()
	for i, c := range calls {
		if i > 0 {
			if err := r.sleep(toolStartDelay); err != nil {
				return err
			}
		}
		c.callID = newCallID(r.step, i)
		c.startedAt = r.nowMs()
		if err := r.event(toolEvent{
			Type: "tool_call", Subtype: "started", CallID: c.callID, ToolCall: c.toolCallObj(false, 0),
			ModelCallID: mcid, SessionID: r.sessionID, TimestampMs: r.nowMs(),
		}); err != nil {
			return err
		}
	}
	order := slices.Clone(calls)
	slices.SortStableFunc(order, func(a, b *toolCall) int { return cmp.Compare(a.duration, b.duration) })
	var elapsed time.Duration
	for _, c := range order {
		if err := r.sleep(c.duration - elapsed); err != nil {
			return err
		}
		elapsed = max(elapsed, c.duration)
		done := r.nowMs()
		if err := r.event(toolEvent{
			Type: "tool_call", Subtype: "completed", CallID: c.callID, ToolCall: c.toolCallObj(true, done),
			ModelCallID: mcid, SessionID: r.sessionID, TimestampMs: r.nowMs(),
		}); err != nil {
			return err
		}
	}
	r.toolCount += len(calls)
	r.step++
	r.modelCallID = ""
	return r.sleep(modelDelay)
}

// startTool writes only the started event of a call, for runs that die while
// a tool runs.
func (r *run) startTool(c *toolCall) error {
	if err := r.flushMidTurn(); err != nil {
		return err
	}
	c.callID = newCallID(r.step, 0)
	c.startedAt = r.nowMs()
	if r.acp != nil {
		_, err := r.acp.started(r, c)
		return err
	}
	return r.event(toolEvent{
		Type: "tool_call", Subtype: "started", CallID: c.callID, ToolCall: c.toolCallObj(false, 0),
		ModelCallID: r.callID(), SessionID: r.sessionID, TimestampMs: r.nowMs(),
	})
}

// flushFinal writes the last segment whole, without model_call_id and
// timestamp_ms, as the CLI does at the end of a turn.
func (r *run) flushFinal() error {
	if r.segment.Len() == 0 {
		return nil
	}
	if err := r.sleep(flushDelay); err != nil {
		return err
	}
	text := r.segment.String()
	r.segment.Reset()
	r.text.WriteString(text)
	return r.event(assistantEvent{Type: "assistant", Message: assistantMessage(text), SessionID: r.sessionID})
}

// usage returns token counts derived only from the scripted content, so the
// same scenario and prompt give the same numbers on every run.
func (r *run) usage() usage {
	steps := r.step + 1
	return usage{
		InputTokens:      8192 + ceilDiv(len(r.prompt), 4) + 350*(steps-1) + 60*r.toolCount,
		OutputTokens:     ceilDiv(r.text.Len(), 4) + ceilDiv(r.thinkingChars, 4) + 45*r.toolCount,
		CacheReadTokens:  4096 * steps,
		CacheWriteTokens: 128 * (steps - 1),
	}
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// finish flushes the last segment and writes result/success.
func (r *run) finish() error {
	if err := r.flushFinal(); err != nil {
		return err
	}
	if err := r.sleep(resultDelay); err != nil {
		return err
	}
	return r.result("success", false, r.text.String())
}

// result writes a result event.
func (r *run) result(subtype string, isError bool, text string) error {
	d := r.now().Sub(r.start).Milliseconds()
	return r.event(resultEvent{
		Type: "result", Subtype: subtype, DurationMs: d, DurationAPIMs: d, IsError: isError,
		Result: text, SessionID: r.sessionID, RequestID: r.requestID, Usage: r.usage(),
	})
}
