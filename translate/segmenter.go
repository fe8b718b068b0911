package translate

import (
	"bytes"
	"cmp"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/docstream/docstream/documents"
)

// Options configure a Segmenter for one response.
type Options struct {
	ResponseID     string // chat_…
	ConversationID string // set when resuming: response_start goes out at Start
	Model          string // the requested model, or "auto"
	Mode           string // agent, plan, ask or debug
	Created        string // RFC 3339 UTC
	Workspace      string // the default working directory of terminal commands
	Thinking       bool   // emit thinking_delta events
	IncludeRaw     bool   // emit an agent_event per agent line
	MaxLine        int    // the decoder's line limit, for error details
	// Redact, when set, masks secrets in the error details taken from the
	// agent's output (its stderr tail, its lines that were not JSON).
	Redact func(string) string
}

// End says how the agent's output ended, for a response that saw no result.
type End struct {
	Reason   documents.StopReason // set when the gateway ended the run
	Message  string               // a human message for Reason
	Exited   bool                 // the process exit status is known
	ExitCode int
	Signal   string
	Stderr   string // the tail of the agent's stderr
	Err      error  // the agent could not be started or read
	Source   string // the error's source; "cursor-agent" by default
	Code     string // the error document's code, when the reason's own does not fit
	Elapsed  int64  // milliseconds since the run started
}

// Stats counts what a Segmenter skipped.
type Stats struct {
	NotJSON  int
	Unknown  int
	Oversize int
}

// Segmenter turns normalized agent events into document stream events,
// emitted through a callback in order. It is not safe for concurrent use.
type Segmenter struct {
	opts Options
	out  func(documents.Event)
	lex  lexer

	started bool
	done    bool
	conv    string
	seq     int

	// the assistant segment being received, for snapshot handling
	seg     []byte   // the segment's text so far, reused across segments
	said    []string // the text of the response's earlier segments
	saidAll string   // said joined, once asked for
	segText string   // the segment's text while it came in one piece (seg is empty)
	sealed  bool     // a model_call_id flush ended the segment's model step
	sawText bool

	join      joiner // a character split at the end of the last text piece
	thinkJoin joiner // the same for thinking

	// the open text or code document: one at a time
	docID     string
	docMeta   jsontext.Value // its start's metadata, which its end repeats
	text      docText
	ahead     int    // what of the text being written the lexer has yet to take
	wsHeld    []byte // whitespace waiting for text to follow it
	fence     fence
	lastFinal bool

	tools     map[string]*toolState
	argDec    jsontext.Decoder // reads tool arguments
	toolOrder []*toolState
	turns     map[string]struct{}
	turnCount int // set by SetTurnCount when > 0: the done's turnCount

	init       *Init
	rawLines   int   // agent lines seen, for agent_event ids
	rawTS      int64 // the latest timestamp_ms, for lines without one
	stats      Stats
	lastNoJSON []string
	cloud      *documents.CloudInfo

	reconnects   int  // the reconnects of the run so far, for status events
	reconnecting bool // a reconnect is under way
}

type toolState struct {
	rawArgs   jsontext.Value // the args of the event that opened the call
	decoded   toolArgs       // rawArgs decoded
	docID     string
	class     toolClass
	rawKind   string // the agent's kind of tool, or the function's name
	toolName  string
	callID    string
	args      jsontext.Value
	startedAt int64
	startTS   int64
	ended     bool
	// what the call waited for: the client's approval or answers
	approval documents.Approval
	awaiting bool
	answers  []documents.QuestionAnswer
}

// NewSegmenter returns a Segmenter that emits through emit.
func NewSegmenter(opts Options, emit func(documents.Event)) *Segmenter {
	opts.Mode, opts.Model = cmp.Or(opts.Mode, "agent"), cmp.Or(opts.Model, "auto")
	if opts.MaxLine <= 0 {
		opts.MaxLine = DefaultMaxLine
	}
	s := &Segmenter{opts: opts, out: emit}
	s.lex = lexer{sink: s, state: lexLineStart}
	return s
}

// Start emits response_start at once when the conversation id is known.
func (s *Segmenter) Start() {
	if s.opts.ConversationID != "" {
		s.SetConversation(s.opts.ConversationID)
	}
}

// Done reports whether the done event was emitted.
func (s *Segmenter) Done() bool { return s.done }

// ConversationID returns the conversation id, once known.
func (s *Segmenter) ConversationID() string { return s.conv }

// Stats returns the counts of skipped lines.
func (s *Segmenter) Stats() Stats { return s.stats }

// SetTurnCount sets the turnCount of the done metadata, for a source whose
// steps are not model calls (a cloud agent's assistant messages).
func (s *Segmenter) SetTurnCount(n int) { s.turnCount = n }

// SetCloud records the cloud agent behind the response, for the done metadata.
func (s *Segmenter) SetCloud(c documents.CloudInfo) { s.cloud = &c }

// SetConversation emits response_start with the given conversation id, if
// it has not gone out yet.
func (s *Segmenter) SetConversation(conv string) {
	if s.started {
		return
	}
	s.started = true
	s.conv = conv
	var c *string
	if conv != "" {
		c = new(conv)
	}
	s.out(documents.ResponseStart{ID: s.opts.ResponseID, ConversationID: c, Model: s.opts.Model, Mode: s.opts.Mode, Created: s.opts.Created})
}

// emit sends ev, after response_start.
func (s *Segmenter) emit(ev documents.Event) {
	s.SetConversation(s.opts.ConversationID)
	s.out(ev)
}

// Feed takes one agent event.
func (s *Segmenter) Feed(ev Event) {
	if s.done {
		return
	}
	if ev.Kind == KindInit {
		s.init = ev.Init
		s.SetConversation(ev.Init.SessionID)
	}
	if s.opts.IncludeRaw {
		s.rawEvent(ev)
	}
	if ev.ModelCallID != "" {
		if s.turns == nil {
			s.turns = map[string]struct{}{}
		}
		s.turns[ev.ModelCallID] = struct{}{}
	}
	switch ev.Kind {
	case KindThinkingDelta:
		if s.opts.Thinking {
			s.thinking(s.thinkJoin.join(ev.Text, false))
		}
	case KindThinkingDone:
		s.thinking(s.thinkJoin.flush()) // holds nothing unless thinking is on
	case KindAssistant:
		s.assistant(ev)
	case KindToolStarted:
		s.EndSegment()
		// A call already open is started again when the agent resumes
		// after a reconnect: it is still the one call, with one document.
		if st := s.tools[ev.CallID]; ev.CallID == "" || st == nil || st.ended {
			s.openTool(ev)
		}
	case KindToolCompleted:
		st := s.tools[ev.CallID]
		if st == nil || st.ended {
			s.EndSegment()
			st = s.openTool(ev)
		}
		s.finishTool(st, ev.Tool, ev.TimestampMs)
	case KindResult:
		s.result(ev.Result, 0)
	case KindError:
		// The text goes on around the error: its open document, a fence
		// in it, and the segment that later snapshots repeat stay open.
		msg := cmp.Or(pairSurrogates(ev.Text), "the agent reported an error")
		s.errorDoc(documents.CodeAgentError, "cursor-agent", msg, pairSurrogates(ev.Details))
	case KindNotJSON:
		s.stats.NotJSON++
		if len(s.lastNoJSON) == 4 {
			s.lastNoJSON = s.lastNoJSON[1:]
		}
		s.lastNoJSON = append(s.lastNoJSON, clip(string(ev.Raw), 1024))
	case KindOversize:
		s.stats.Oversize++
		s.errorDoc(documents.CodeLineTooLong, "gateway", "an agent line was too long and was skipped",
			fmt.Sprintf("the line was %d bytes; the limit is %d bytes", ev.Size, s.opts.MaxLine))
	case KindUnknown:
		s.stats.Unknown++
	case KindStatus:
		s.status(ev)
	}
}

// status emits a status event for the agent's connection and retry lines.
// Attempt counts the reconnects within the run, so that it grows even when
// the agent counts each reconnect from 1: connection/reconnecting starts
// one, and so does a retry line outside of one; connection/reconnected
// ends it.
func (s *Segmenter) status(ev Event) {
	state := documents.StateRetrying
	switch {
	case ev.Type == "connection" && ev.Subtype == "reconnecting":
		state = documents.StateReconnecting
		s.reconnecting = false
	case ev.Type == "connection":
		state = documents.StateReconnected
	}
	if !s.reconnecting || s.reconnects == 0 {
		s.reconnects++
	}
	s.reconnecting = state != documents.StateReconnected
	s.emit(documents.StatusEvent{State: state, Attempt: s.reconnects})
}

func (s *Segmenter) rawEvent(ev Event) {
	s.rawLines++
	if s.rawLines == 1 {
		if t, err := time.Parse(time.RFC3339, s.opts.Created); err == nil {
			s.rawTS = t.UnixMilli()
		}
	}
	if ev.TimestampMs > 0 {
		s.rawTS = ev.TimestampMs
	}
	if ev.Kind == KindOversize {
		return
	}
	id := strconv.Itoa(s.rawLines)
	if ev.Kind == KindNotJSON {
		s.emit(documents.AgentEvent{ID: id, ChatID: s.opts.ResponseID, Timestamp: s.rawTS, Type: "raw", Data: string(ev.Raw)})
		return
	}
	payload := dedupe(ev.Raw)
	if len(payload) > 0 && &payload[0] == &ev.Raw[0] {
		payload = jsontext.Value(ev.Raw).Clone()
	}
	s.emit(documents.AgentEvent{ID: id, ChatID: s.opts.ResponseID, Timestamp: s.rawTS, Type: ev.Type, Subtype: ev.Subtype,
		Payload: payload, Raw: string(ev.Raw)})
}

// assistant handles assistant text: token deltas (timestamp_ms without
// model_call_id) are appended; anything else is a snapshot of the segment,
// of which only the part not yet emitted goes out. A snapshot with a
// model_call_id ends a model step: deltas after it start a new segment, so
// that the final flush, which repeats only the last segment, is seen as the
// repeat it is.
func (s *Segmenter) assistant(ev Event) {
	if ev.HasTimestamp && ev.ModelCallID == "" {
		if s.sealed {
			s.EndSegment()
		}
		s.appendPiece(ev.Text, false)
		return
	}
	s.complete(ev.Text, false)
	if ev.ModelCallID != "" {
		s.sealed = true
	}
}

// complete takes a complete assistant message (or result.result) and emits
// only what the response has not said yet. The message may hold the
// segment since the last tool call, the whole turn's text so far across
// tool calls, or a text that differs from the deltas:
//   - a snapshot of the current segment goes as Snapshot has it;
//   - a text that begins with the earlier segments (whitespace aside) is
//     the whole turn: what follows them is a snapshot of the segment;
//   - any other text starts a new segment, without the sentences the
//     response already holds; with onlyMore, it is dropped.
func (s *Segmenter) complete(text string, onlyMore bool) {
	text = pairSurrogatesBut(text)
	if !isBlank(s.segment()) && s.extendsSegment(text) {
		s.Snapshot(text)
		return
	}
	said := s.saidText()
	if !isBlank(said) {
		if rest, ok := afterSameText(text, said); ok {
			if isBlank(s.segment()) || s.extendsSegment(rest) {
				s.Snapshot(rest)
			} else if !onlyMore {
				s.differs(rest)
			}
			return
		}
	}
	switch {
	case isBlank(s.segment()) && isBlank(said):
		s.Snapshot(text)
	case !onlyMore:
		s.differs(text)
	}
}

// extendsSegment reports whether text is a snapshot of the current
// segment: it repeats it, or a part of it, or goes on from it, whitespace
// aside.
func (s *Segmenter) extendsSegment(text string) bool {
	cur := s.segment()
	if strings.HasPrefix(text, cur) || strings.HasPrefix(cur, text) {
		return true
	}
	_, ok := afterSameText(text, cur)
	return ok
}

// differs takes a text that is not a snapshot of what the response holds:
// it starts a new segment, without the sentences already said.
func (s *Segmenter) differs(text string) {
	text = unsaid(text, s.saidText(), s.segment())
	if isBlank(text) {
		return
	}
	s.EndSegment()
	s.appendPiece(text, false)
}

// minSaid is the length, without whitespace and final punctuation, from
// which a sentence counts as said when it comes again: shorter ones ("Done.",
// "}") repeat for good reasons.
const minSaid = 10

// unsaid returns text without its sentences that are in said or seg, the
// text so far. Sentences end at ".", "!", "?" or ":" before whitespace or
// a capital letter, or at a line break; the lines of fenced code blocks are kept as they are.
func unsaid(text, said, seg string) string {
	known := map[string]bool{}
	for _, src := range []string{said, seg} {
		eachSentence(src, func(p string, _ bool) {
			if k := sentenceKey(p); len(k) >= minSaid {
				known[k] = true
			}
		})
	}
	var b strings.Builder
	eachSentence(text, func(p string, code bool) {
		if code || !known[sentenceKey(p)] {
			b.WriteString(p)
		}
	})
	return b.String()
}

// eachSentence calls fn with each piece of text: a sentence with the
// whitespace after it. code says that the piece is a line of a fenced
// block, or a fence line.
func eachSentence(text string, fn func(piece string, code bool)) {
	inFence, lineStart := false, true
	for len(text) > 0 {
		line := strings.TrimLeft(text, " ")
		fenceLine := lineStart && (strings.HasPrefix(line, "```") || strings.HasPrefix(line, "~~~"))
		if fenceLine || inFence {
			inFence = inFence != fenceLine
			end := strings.IndexByte(text, '\n')
			if end < 0 {
				end = len(text) - 1
			}
			fn(text[:end+1], true)
			text = text[end+1:]
			continue
		}
		end := len(text)
		for i := 0; i < len(text); i++ {
			c := text[i]
			// Texts joined without a space ("done.Next") end a sentence too.
			if c == '\n' || (c == '.' || c == '!' || c == '?' || c == ':') && i+1 < len(text) && (isSpace(text[i+1]) || 'A' <= text[i+1] && text[i+1] <= 'Z') {
				end = i + 1
				break
			}
		}
		for end < len(text) && isSpace(text[end]) {
			end++
		}
		piece := text[:end]
		lineStart = strings.HasSuffix(strings.TrimRight(piece, " \t"), "\n")
		fn(piece, false)
		text = text[end:]
	}
}

// sentenceKey is a sentence as compared: without whitespace, and without
// the punctuation that ends it.
func sentenceKey(p string) string {
	words := strings.FieldsFunc(p, func(r rune) bool { return r < utf8.RuneSelf && isSpace(byte(r)) })
	return strings.TrimRight(strings.Join(words, ""), ".!?:")
}

// Snapshot takes the whole text of the current assistant segment so far and
// emits only what is new. A snapshot that differs from the text already
// emitted only in whitespace is the same segment; a text that neither
// extends nor repeats the segment starts a new segment.
func (s *Segmenter) Snapshot(text string) {
	// Surrogates are compared as the pieces streamed them: paired, or
	// U+FFFD when alone, but for a high one at the end, which a later
	// piece may complete.
	text = pairSurrogatesBut(text)
	cur := s.segment()
	switch {
	case strings.HasPrefix(text, cur):
		s.appendPiece(text[len(cur):], true)
	case strings.HasPrefix(cur, text):
	default:
		if rest, ok := afterSameText(text, cur); ok {
			s.appendPiece(rest, true)
			return
		}
		s.EndSegment()
		s.appendPiece(text, false)
	}
}

// afterSameText reports whether text and cur hold the same non-whitespace
// characters as far as the shorter goes, and returns what text has beyond
// cur's non-whitespace characters.
func afterSameText(text, cur string) (string, bool) {
	i, j := 0, 0
	for {
		for j < len(cur) && isSpace(cur[j]) {
			j++
		}
		if j < len(cur) {
			for i < len(text) && isSpace(text[i]) {
				i++
			}
		}
		if j == len(cur) {
			if len(strings.TrimSpace(cur)) == 0 {
				return "", false
			}
			return text[i:], true
		}
		if i == len(text) {
			return "", len(strings.TrimSpace(text)) > 0
		}
		if text[i] != cur[j] {
			return "", false
		}
		i++
		j++
	}
}

// thinking emits a piece of thinking.
func (s *Segmenter) thinking(t string) {
	if t != "" {
		s.emit(documents.ThinkingDelta{Delta: t})
	}
}

// appendPiece appends a piece of the segment's text; repeat says that it
// continues a snapshot.
func (s *Segmenter) appendPiece(t string, repeat bool) {
	if t = s.join.join(t, repeat); t != "" {
		s.write(t)
	}
}

// lexPiece is the most text the lexer is given at once, so that it holds
// no copy of a long text: it takes the text in pieces of this size.
const lexPiece = 64 << 10

// write adds t to the segment and gives it to the lexer.
func (s *Segmenter) write(t string) {
	switch {
	case s.segText == "" && len(s.seg) == 0:
		s.segText = t // a segment in one piece is not copied
	case s.segText != "":
		s.seg, s.segText = append(s.seg[:0], s.segText...), ""
		fallthrough
	default:
		s.seg = append(s.seg, t...)
	}
	for len(t) > 0 {
		n := min(len(t), lexPiece)
		for n < len(t) && !utf8.RuneStart(t[n]) {
			n-- // a character is not split between pieces
		}
		s.ahead = len(t) - n
		s.lex.Write(t[:n])
		t = t[n:]
	}
}

// segment returns the current segment's text so far.
func (s *Segmenter) segment() string {
	if s.segText != "" {
		return s.segText
	}
	return string(s.seg)
}

// EndSegment ends the current assistant segment: held-back text goes out,
// an unterminated fence closes.
func (s *Segmenter) EndSegment() {
	if t := s.join.flush(); t != "" {
		s.write(t)
	}
	if len(s.seg) > 0 || s.segText != "" {
		s.lastFinal = !s.sealed
		s.lex.End()
		s.closeDoc()
		s.said, s.saidAll = append(s.said, s.segment()), ""
	}
	s.seg, s.segText = s.seg[:0], ""
	if cap(s.seg) > lexPiece {
		s.seg = nil // a long segment's buffer is not kept
	}
	s.sealed = false
}

// lexerSink

// proseText takes prose as the lexer finds it. Whitespace waits until text
// follows it in the same document: blank lines before a document and
// whitespace at its end are dropped, and the indentation of a document's
// first line is kept.
func (s *Segmenter) proseText(t string) {
	if isBlank(t) {
		s.wsHeld = append(s.wsHeld, t...)
		return
	}
	held := s.wsHeld
	s.wsHeld = s.wsHeld[:0]
	if s.docID == "" {
		if i := bytes.LastIndexByte(held, '\n'); i >= 0 {
			held = held[i+1:]
		}
		s.docID, s.docMeta = s.openDoc(documents.TypeText, textMeta), textMeta
	}
	end := len(t)
	for end > 0 && isSpace(t[end-1]) {
		end--
	}
	s.sawText = true
	s.emitDelta(held, t[:end])
	s.wsHeld = append(s.wsHeld, t[end:]...)
}

// emitDelta adds held and t to the open document's content and sends them
// as one delta.
func (s *Segmenter) emitDelta(held []byte, t string) {
	delta, all := s.text.add(held, t, s.segText, s.ahead)
	s.emit(documents.ContentDelta{DocumentID: s.docID, Delta: delta, Content: all})
}

// saidText returns the text of the response's earlier segments.
func (s *Segmenter) saidText() string {
	if s.saidAll == "" {
		s.saidAll = strings.Join(s.said, "\n")
	}
	return s.saidAll
}

// isSpace reports whether c is ASCII whitespace. Bytes decide, so that the
// rules do not depend on where the text is split into deltas.
func isSpace(c byte) bool {
	switch c {
	case ' ', '\t', '\n', '\r', '\v', '\f':
		return true
	}
	return false
}

// isBlank reports whether t holds only whitespace.
func isBlank(t string) bool {
	return strings.TrimLeft(t, " \t\n\r\v\f") == ""
}

var textMeta = jsontext.Value(`{"format":"markdown"}`)

func (s *Segmenter) openFence(f fence) {
	s.closeDoc()
	s.fence = f
}

// fenceText takes the content of an open fenced block. A block opens its
// document with its first non-blank text, so that a block of blank lines
// makes no document, as an empty one does; blank lines before that text
// are kept.
func (s *Segmenter) fenceText(t string) {
	var held []byte
	if s.docID == "" {
		if isBlank(t) {
			s.wsHeld = append(s.wsHeld, t...)
			return
		}
		held = s.wsHeld
		s.wsHeld = s.wsHeld[:0]
		ref, lang, file, start, end := parseInfo(s.fence.info)
		var meta jsontext.Value
		typ := documents.TypeCodeBlock
		if ref {
			typ = documents.TypeCodeReference
			meta = marshal(documents.CodeReferenceMeta{FilePath: file, StartLine: start, EndLine: end, Language: lang})
		} else {
			meta = marshal(documents.CodeBlockMeta{Language: lang, Purpose: s.purpose(lang)})
		}
		s.docID, s.docMeta = s.openDoc(typ, meta), meta
	}
	s.sawText = true
	s.emitDelta(held, t)
}

func (s *Segmenter) purpose(lang string) string {
	if s.opts.Mode == "ask" || s.opts.Mode == "plan" {
		return "suggestion"
	}
	switch lang {
	case "", "console", "output", "text", "plaintext", "txt", "log", "shell-session":
		return "example"
	}
	return "new_code"
}

func (s *Segmenter) closeFence() { s.closeDoc() }

// closeDoc ends the open text or code document, if any.
func (s *Segmenter) closeDoc() {
	s.wsHeld = s.wsHeld[:0]
	if s.docID == "" {
		return
	}
	s.emit(documents.DocumentEnd{DocumentID: s.docID, FinalContent: new(s.text.String()), Metadata: s.docMeta})
	s.docID, s.text = "", docText{}
}

// openDoc emits document_start and returns the new document's id.
func (s *Segmenter) openDoc(t documents.Type, meta jsontext.Value) string {
	s.seq++
	id := documents.DocID(s.seq)
	s.emit(documents.DocumentStart{ID: id, Type: t, Sequence: s.seq, Metadata: meta})
	return id
}

// Error adds an error document to the response.
func (s *Segmenter) Error(code, source, message, details string) {
	if s.done {
		return
	}
	s.EndSegment()
	s.errorDoc(code, source, message, details)
}

func (s *Segmenter) errorDoc(code, source, message, details string) {
	id := s.openDoc(documents.TypeError, nil)
	meta := marshal(documents.ErrorMeta{ErrorCode: code, Source: source, Details: details})
	s.emit(documents.ContentDelta{DocumentID: id, Delta: message})
	s.emit(documents.DocumentEnd{DocumentID: id, FinalContent: &message, Metadata: meta})
}

// closeAll ends what is open: held thinking, tool calls (as unfinished) and
// the segment.
func (s *Segmenter) closeAll() {
	s.thinking(s.thinkJoin.flush())
	for _, st := range s.toolOrder {
		if !st.ended {
			s.finishTool(st, nil, 0)
		}
	}
	s.EndSegment()
}

// result closes the response after the agent's result event.
func (s *Segmenter) result(r *Result, elapsed int64) {
	s.closeAll()
	status := documents.StatusCompleted
	var stop documents.StopReason
	if r.IsError {
		msg := cmp.Or(r.Error, r.Text, "the agent reported an error")
		s.errorDoc(documents.CodeAgentError, "cursor-agent", msg, "")
		status, stop = documents.StatusError, documents.StopAgentError
	} else if strings.TrimSpace(r.Text) != "" {
		// result.result holds the turn's text: only what the messages
		// did not say goes out. A result that is not the turn's text (a
		// summary of its own) adds nothing to a response that has text.
		s.complete(r.Text, s.sawText)
		s.EndSegment()
	}
	s.finish(status, stop, r, elapsed)
}

// Complete ends the response as completed without an agent result event
// (the cloud backend's terminal status).
func (s *Segmenter) Complete(elapsed int64) {
	if s.done {
		return
	}
	s.result(&Result{}, elapsed)
}

// finish emits done with what r, the agent's result, reports.
func (s *Segmenter) finish(status documents.Status, stop documents.StopReason, r *Result, elapsed int64) {
	u := documents.Usage{}
	if r.Usage != nil {
		u = documents.Usage{PromptTokens: r.Usage.InputTokens, CompletionTokens: r.Usage.OutputTokens,
			CacheReadTokens: r.Usage.CacheReadTokens, CacheWriteTokens: r.Usage.CacheWriteTokens, Reported: true}
		u.TotalTokens = u.PromptTokens + u.CompletionTokens
	}
	turns := len(s.turns)
	if s.lastFinal {
		turns++
	}
	if s.turnCount > 0 {
		turns = s.turnCount
	}
	md := documents.ResponseMetadata{DurationMs: cmp.Or(r.DurationMs, elapsed), ToolCallCount: len(s.toolOrder), TurnCount: turns,
		StopReason: stop, SkippedLines: s.stats.NotJSON + s.stats.Unknown + s.stats.Oversize, Cloud: s.cloud}
	a := documents.AgentInfo{RequestID: r.RequestID, DurationAPIMs: r.DurationAPIMs}
	if s.init != nil {
		a.SessionID, a.Cwd, a.Model, a.PermissionMode = s.init.SessionID, s.init.Cwd, s.init.Model, s.init.PermissionMode
	}
	if a != (documents.AgentInfo{}) {
		md.Agent = &a
	}
	var c *string
	if s.conv != "" {
		c = new(s.conv)
	}
	s.done = true
	s.emit(documents.Done{ID: s.opts.ResponseID, ConversationID: c, Status: status, Usage: u, Metadata: md})
}

// Close ends the response if the agent's result has not: open documents
// close, an error document says why, and done follows with status error.
// After done it does nothing.
func (s *Segmenter) Close(end End) {
	if s.done {
		return
	}
	s.closeAll()
	source := cmp.Or(end.Source, "cursor-agent")
	details := strings.TrimSpace(end.Stderr)
	if details == "" && len(s.lastNoJSON) > 0 {
		details = strings.Join(s.lastNoJSON, "\n")
	}
	if s.opts.Redact != nil {
		details = s.opts.Redact(details)
	}
	stop := cmp.Or(end.Reason, documents.StopAgentExit)
	switch {
	case end.Reason != "":
		code := map[documents.StopReason]string{
			documents.StopCancelled: documents.CodeCancelled, documents.StopTimeout: documents.CodeTimeout,
			documents.StopShutdown: documents.CodeShutdown, documents.StopInterrupted: documents.CodeInterrupted,
			documents.StopAgentError: documents.CodeAgentError, documents.StopAgentExit: documents.CodeAgentExited,
		}[end.Reason]
		msg := cmp.Or(end.Message, "the run ended: "+string(end.Reason))
		s.errorDoc(cmp.Or(end.Code, code), cmp.Or(end.Source, "gateway"), msg, details)
	case end.Err != nil:
		s.errorDoc(documents.CodeSpawnFailed, "gateway", "the agent could not be run: "+end.Err.Error(), details)
	case end.Signal != "":
		s.errorDoc(documents.CodeAgentExited, source, fmt.Sprintf("cursor-agent was killed by signal %s before it finished", end.Signal), details)
	case end.Exited && end.ExitCode != 0:
		s.errorDoc(documents.CodeAgentExited, source, fmt.Sprintf("cursor-agent exited with code %d before it finished", end.ExitCode), details)
	default:
		s.errorDoc(documents.CodeNoResult, source, "cursor-agent ended without a result", details)
	}
	s.finish(documents.StatusError, stop, &Result{}, end.Elapsed)
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// marshal encodes metadata; the types here always encode.
func marshal(v any) jsontext.Value {
	b, err := json.Marshal(v, jsontext.AllowInvalidUTF8(true))
	if err != nil {
		b, _ = json.Marshal(map[string]string{"error": err.Error()})
	}
	return b
}

// docText is the open document's content: a view of the segment's text
// while its deltas lie there one after another, else a copy of them.
type docText struct {
	src      string // the text the view is cut from
	from, to int    // the view: src[from:to]
	buf      strings.Builder
}

// String returns the content so far.
func (d *docText) String() string {
	if d.buf.Len() == 0 {
		return d.src[d.from:d.to]
	}
	return d.buf.String()
}

// add appends held and t, which may lie in src, and returns them as one
// delta and the content so far; ahead is what is known to follow them.
func (d *docText) add(held []byte, t, src string, ahead int) (delta, all string) {
	if d.buf.Len() == 0 {
		if at, ok := offset(src, t); ok && at >= len(held) && src[at-len(held):at] == string(held) &&
			(d.src == "" || d.src == src && d.to == at-len(held)) {
			if d.src == "" {
				d.src, d.from = src, at-len(held)
			}
			d.to = at + len(t)
			return src[at-len(held) : d.to], src[d.from:d.to]
		}
		if d.src != "" {
			d.buf.WriteString(d.src[d.from:d.to])
			d.src = ""
		}
	}
	mark, n := d.buf.Len(), len(held)+len(t)
	if d.buf.Cap()-mark < n {
		// Room for what of a long text is still to come, up to a few times
		// the content so far: a long document grows its buffer a few times.
		d.buf.Grow(n + min(ahead, 4*(mark+n)))
	}
	d.buf.Write(held)
	d.buf.WriteString(t)
	all = d.buf.String()
	return all[mark:], all
}

// offset returns where t lies in s, when it is a part of s's bytes rather
// than a copy (a view is kept of a long text instead of a second copy).
func offset(s, t string) (int, bool) {
	if len(s) == 0 || len(t) == 0 {
		return 0, false
	}
	base, p := uintptr(unsafe.Pointer(unsafe.StringData(s))), uintptr(unsafe.Pointer(unsafe.StringData(t)))
	if p < base || p-base > uintptr(len(s)-len(t)) {
		return 0, false
	}
	return int(p - base), true
}
