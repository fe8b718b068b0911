package translate

import (
	"bytes"
	"path"
	"strconv"
	"strings"
)

// stateFn is one state of the text lexer; it returns the next state, or nil
// when it needs more input.
type stateFn func(*lexer) stateFn

// fence describes an open fenced block.
type fence struct {
	char   byte
	length int
	indent int
	list   int // the list item's content column it opened in (0: none)
	info   string
}

// lexerSink receives what the lexer finds.
type lexerSink interface {
	proseText(s string) // text outside fences, as it arrives
	openFence(f fence)  // a fence line opened a block
	fenceText(s string) // content of the open block
	closeFence()        // the block ended (closing fence or end of message)
}

// lexer splits one assistant message into prose and fenced blocks, in the
// style of text/template's lexer: Write appends input and runs states until
// one needs more; only a partial line that could open or close a fence is
// held back.
type lexer struct {
	in    []byte
	pos   int
	eof   bool
	state stateFn
	sink  lexerSink
	fence fence // the open block; its char is 0 outside one
	// nlPending is the line break ("\n" or "\r\n") inside a block that
	// is sent only once the next line proves not to be the closing fence.
	nlPending string
	// wake says which input can change the decision of a state that is
	// waiting for more, so that Write does not scan a held line again for
	// every small piece (which would make long held lines quadratic).
	wake     wake
	wakeChar byte // the fence character, for wakeNotRun
	// src is the text of the last Write, which starts at in[srcAt]: what
	// the lexer reports from it is cut from src, not copied.
	src   string
	srcAt int
	// list is the list item the text is in: a fence in it may be indented
	// as far as its content, and 3 spaces more. head holds the start of
	// the current prose line, to tell.
	list     listState
	head     [32]byte
	headN    int
	headLong bool // the line goes on past head
}

// wake names the input a waiting state needs before it can decide.
type wake uint8

const (
	wakeAny      wake = iota // any input
	wakeNewline              // a line break
	wakeNotRun               // a byte other than wakeChar, ending a fence run
	wakeNotBlank             // a byte other than space, tab or CR
)

// waitFor stops the machine until input of the given kind arrives.
func (l *lexer) waitFor(w wake, c byte) stateFn {
	l.wake, l.wakeChar = w, c
	return nil
}

// woken reports whether the new input s can change the waiting state's
// decision.
func (l *lexer) woken(s string) bool {
	switch l.wake {
	case wakeNewline:
		return strings.IndexByte(s, '\n') >= 0
	case wakeNotRun:
		return strings.TrimLeft(s, string(l.wakeChar)) != ""
	case wakeNotBlank:
		return strings.TrimLeft(s, " \t\r") != ""
	}
	return true
}

// Write feeds message text to the lexer.
func (l *lexer) Write(s string) {
	if l.pos > 0 {
		l.in, l.pos = append(l.in[:0], l.in[l.pos:]...), 0
	}
	l.src, l.srcAt = s, len(l.in)
	l.in = append(l.in, s...)
	if l.woken(s) {
		l.run()
	}
}

// End flushes the message: held-back text is decided and an open block
// closes.
func (l *lexer) End() {
	l.eof = true
	l.run()
	if l.fence.char != 0 {
		l.sink.closeFence()
	}
	if cap(l.in) > 2*lexPiece {
		l.in = nil // a long held line's buffer is not kept
	}
	*l = lexer{in: l.in[:0], sink: l.sink, state: lexLineStart}
}

func (l *lexer) run() {
	l.wake = wakeAny
	for {
		next := l.state(l)
		if next == nil {
			return
		}
		l.state = next
	}
}

func (l *lexer) rest() []byte { return l.in[l.pos:] }

// text returns in[pos+from : pos+to] as a string, cut from the last
// Write's text when it lies there.
func (l *lexer) text(from, to int) string {
	from, to = l.pos+from, l.pos+to
	if from >= l.srcAt {
		return l.src[from-l.srcAt : to-l.srcAt]
	}
	return string(l.in[from:to])
}

// fenceLine reports whether the start of b is a fence line prefix: up to
// maxIndent spaces, then a run of ` or ~. It returns the indent, the char
// and the run length, and decided=false when more input could change the
// answer: with char 0 when b holds only spaces, else when the run reaches
// the end of b.
func fenceLine(b []byte, eof bool, maxIndent int) (indent int, char byte, run int, decided bool) {
	i := 0
	for i < len(b) && b[i] == ' ' && i <= maxIndent {
		i++
	}
	if i == len(b) {
		return i, 0, 0, eof
	}
	if i > maxIndent || (b[i] != '`' && b[i] != '~') {
		return i, 0, 0, true
	}
	char = b[i]
	j := i
	for j < len(b) && b[j] == char {
		j++
	}
	if j == len(b) && !eof {
		return i, char, j - i, false
	}
	return i, char, j - i, true
}

// lexLineStart runs at the start of a line outside a fence: it decides
// whether the line opens a fence, holding it back until it can tell.
func lexLineStart(l *lexer) stateFn {
	b := l.rest()
	if len(b) == 0 {
		return nil
	}
	indent, char, run, decided := fenceLine(b, l.eof, 3+l.list.top())
	if !decided {
		if char == 0 {
			return nil
		}
		return l.waitFor(wakeNotRun, char)
	}
	list, at := l.list, 0
	if char == 0 {
		// A list item may open with a fence: "1. ```bash".
		list, at, decided = l.list.itemFence(b, l.eof)
		if !decided {
			return nil
		}
		if at == 0 {
			return lexProse
		}
		if _, char, run, decided = fenceLine(b[at:], l.eof, 0); !decided {
			return l.waitFor(wakeNotRun, char)
		}
		indent = at
	} else if !l.list.fenceAt(indent) {
		return lexProse
	}
	if char == 0 || run < 3 {
		return lexProse
	}
	nl := bytes.IndexByte(b, '\n')
	if nl < 0 && !l.eof {
		return l.waitFor(wakeNewline, 0)
	}
	end := len(b)
	if nl >= 0 {
		end = nl
	}
	info := strings.TrimSpace(string(b[indent+run : end]))
	if char == '`' && strings.IndexByte(info, '`') >= 0 {
		return lexProse
	}
	if at > 0 {
		l.sink.proseText(l.text(0, at)) // the list item markers
	}
	l.pos += end
	if nl >= 0 {
		l.pos++
	}
	l.list = list.fenceOpened(indent)
	l.fence = fence{char: char, length: run, indent: indent, list: l.list.top(), info: info}
	l.sink.openFence(l.fence)
	return lexFenceLineStart
}

// lexProse sends prose up to and including the end of the line.
func lexProse(l *lexer) stateFn {
	b := l.rest()
	if len(b) == 0 {
		return nil
	}
	nl := bytes.IndexByte(b, '\n')
	if nl < 0 {
		l.keepHead(b)
		l.sink.proseText(l.text(0, len(b)))
		l.pos += len(b)
		if l.eof {
			return nil
		}
		return lexProse
	}
	l.keepHead(b[:nl])
	l.list = l.list.after(l.head[:l.headN], l.headLong)
	l.headN, l.headLong = 0, false
	l.sink.proseText(l.text(0, nl+1))
	l.pos += nl + 1
	return lexLineStart
}

// maxListDepth is how many nested list items the lexer follows; items
// deeper than that are read as their parent's content.
const maxListDepth = 8

// keepHead keeps what fits of b, the next part of a prose line, in head.
func (l *lexer) keepHead(b []byte) {
	n := copy(l.head[l.headN:], b)
	l.headN += n
	l.headLong = l.headLong || n < len(b)
}

// listState is what the lexer knows of the lists the text is in, from the
// starts of its prose lines, as CommonMark reads them: the content column
// of each open list item, outermost first.
type listState struct {
	cols  [maxListDepth]int32
	n     int
	para  bool // the last line was paragraph text
	empty bool // the innermost item has nothing after its marker yet
}

// top returns the content column of the innermost open item (0: none).
func (ls listState) top() int {
	if ls.n == 0 {
		return 0
	}
	return int(ls.cols[ls.n-1])
}

// close returns the state with the items a line indented indent spaces
// does not continue closed, and whether any was.
func (ls listState) close(indent int) (listState, bool) {
	n := ls.n
	for ls.n > 0 && int(ls.cols[ls.n-1]) > indent {
		ls.n--
	}
	return ls, ls.n < n
}

// push returns the state with an item whose content starts at col open
// in the innermost one.
func (ls listState) push(col int, empty bool) listState {
	ls.para, ls.empty = false, false
	if ls.n < maxListDepth {
		ls.cols[ls.n] = int32(col)
		ls.n++
		ls.empty = empty // so that a blank line closes this item, not its parent
	}
	return ls
}

// item returns the state after a list item marker at column i whose
// content starts at col, and false when the marker cannot start an item
// there: past the 3 spaces a container allows, or interrupting a
// paragraph of the same container while empty or numbered other than 1.
func (ls listState) item(i, col int, empty, first bool) (listState, bool) {
	in, closed := ls.close(i)
	if i-in.top() > 3 || (ls.para && !closed && (empty || !first)) {
		return ls, false
	}
	return in.push(col, empty), true
}

// after returns the state after a prose line that starts with head (long
// when the line goes on past it): a list item opens, a blank line keeps
// the items open (but ends an empty one), paragraph text goes on with the
// items it is lazily part of, and any other line closes the items it is
// not indented into.
func (ls listState) after(head []byte, long bool) listState {
	i := 0
	for i < len(head) && head[i] == ' ' {
		i++
	}
	if !long && isBlank(string(head[i:])) {
		if ls.empty {
			ls.n--
		}
		ls.para, ls.empty = false, false
		return ls
	}
	in, _ := ls.close(i)
	code := i-in.top() > 3 // an indented code line, or paragraph text
	if !code {
		switch {
		case thematicBreak(head[i:]), heading(head[i:]), ls.para && setextLine(head[i:]):
			in.para, in.empty = false, false
			return in
		}
		if col, empty, first, ok := listItem(head, i); ok {
			if next, ok := ls.item(i, col, empty, first); ok {
				// An item may open with another ("1. - a").
				for !empty && !thematicBreak(head[col:]) {
					c, e, _, ok := listItem(head, col)
					if !ok {
						break
					}
					next, col, empty = next.push(c, e), c, e
				}
				next.para = !empty // the item's first line of text
				return next
			}
		}
	}
	if ls.para {
		ls.empty = false
		return ls // paragraph text goes on, lazily if need be
	}
	in.para, in.empty = !code, false
	return in
}

// itemFence reads a line that may be list item markers followed by a
// fence ("1. ```bash"). It returns the state with those items open and
// where the fence run starts, at 0 when the line is not one; decided is
// false when more of the line is needed to tell.
func (ls listState) itemFence(b []byte, eof bool) (next listState, at int, decided bool) {
	if n := ls.top() + 4 + maxListDepth*16; len(b) > n {
		// No line of list markers is longer: what is past n decides.
		b, eof = b[:n], true
	}
	i := 0
	for depth := 0; depth < maxListDepth; depth++ {
		for i < len(b) && b[i] == ' ' {
			i++
		}
		if i == len(b) {
			return ls, 0, eof
		}
		if depth > 0 && (b[i] == '`' || b[i] == '~') {
			return ls, i, true
		}
		col, _, first, ok := listItem(b, i)
		if !ok {
			// Digits cut at the end of the input may still be a marker.
			j := i
			for j < len(b) && j-i < 9 && b[j] >= '0' && b[j] <= '9' {
				j++
			}
			return ls, 0, j == i || j < len(b) || eof
		}
		if col >= len(b) {
			return ls, 0, eof // the item's content is still to come
		}
		k := col
		for k < len(b) && b[k] == ' ' {
			k++
		}
		switch {
		case k == len(b):
			return ls, 0, eof
		case k != col || b[k] == '\r' || b[k] == '\n':
			return ls, 0, true // an empty item, or indented code in it
		}
		if ls, ok = ls.item(i, col, false, first); !ok {
			return ls, 0, true
		}
		i = col
	}
	return ls, 0, true
}

// fenceAt reports whether a fence line indented indent spaces opens a
// fence: up to 3 spaces past the content column of the innermost item it
// is indented into, or past column 0.
func (ls listState) fenceAt(indent int) bool {
	in, _ := ls.close(indent)
	return indent-in.top() <= 3
}

// fenceOpened returns the state once a fence indented indent spaces
// opened: the items it is not indented into are closed.
func (ls listState) fenceOpened(indent int) listState {
	in, _ := ls.close(indent)
	in.para, in.empty = false, false
	return in
}

// setextLine reports whether b is a setext heading's = underline.
func setextLine(b []byte) bool {
	b = bytes.TrimRight(b, " \t\r")
	return len(b) > 0 && len(bytes.Trim(b, "=")) == 0
}

// heading reports whether b starts an ATX heading: 1 to 6 # and then a
// space or the end of the line.
func heading(b []byte) bool {
	n := 0
	for n < len(b) && b[n] == '#' {
		n++
	}
	return n >= 1 && n <= 6 && (n == len(b) || b[n] == ' ' || b[n] == '\t' || b[n] == '\r')
}

// thematicBreak reports whether b is a line of three or more *, - or _
// (the same), with only spaces or tabs between them.
func thematicBreak(b []byte) bool {
	n := 0
	var c byte
	for _, x := range b {
		switch {
		case x == ' ' || x == '\t' || x == '\r':
		case (x == '*' || x == '-' || x == '_') && (c == 0 || x == c):
			c = x
			n++
		default:
			return false
		}
	}
	return n >= 3
}

// listItem reads a list item marker at head[i:] (-, *, + or 1 to 9 digits
// and . or ), then a space) and returns the column its content starts at,
// whether the item is empty, and whether it may start a list after a
// paragraph (a bullet, or the number 1).
func listItem(head []byte, i int) (col int, empty, first, ok bool) {
	j := i
	switch {
	case j < len(head) && (head[j] == '-' || head[j] == '*' || head[j] == '+'):
		j++
		first = true
	default:
		for j < len(head) && j-i < 9 && head[j] >= '0' && head[j] <= '9' {
			j++
		}
		if j == i || j == len(head) || (head[j] != '.' && head[j] != ')') {
			return 0, false, false, false
		}
		n, _ := strconv.Atoi(string(head[i:j]))
		first = n == 1
		j++
	}
	k := j
	for k < len(head) && head[k] == ' ' {
		k++
	}
	switch {
	case k == j && k < len(head) && head[k] != '\r':
		return 0, false, false, false // no space after the marker
	case k == len(head) || head[k] == '\r':
		return j + 1, true, first, true
	case k-j > 4:
		return j + 1, false, first, true // indented code in the item
	}
	return k, false, first, true
}

// lexFenceLineStart runs at the start of a line inside a fence: it decides
// whether the line closes the fence.
func lexFenceLineStart(l *lexer) stateFn {
	b := l.rest()
	if len(b) == 0 {
		return nil
	}
	indent, char, run, decided := fenceLine(b, l.eof, 3+l.fence.list)
	if !decided {
		if char == 0 {
			return nil
		}
		return l.waitFor(wakeNotRun, char)
	}
	if char == l.fence.char && run >= l.fence.length {
		// A closing fence has only spaces after the run.
		j := indent + run
		for j < len(b) && (b[j] == ' ' || b[j] == '\t' || b[j] == '\r') {
			j++
		}
		switch {
		case j < len(b) && b[j] == '\n':
			l.pos += j + 1
			return l.closeFence()
		case j == len(b) && l.eof:
			l.pos += j
			return l.closeFence()
		case j == len(b):
			return l.waitFor(wakeNotBlank, 0)
		}
	}
	// A content line: strip up to the opening fence's indent.
	strip := 0
	for strip < l.fence.indent && strip < len(b) && b[strip] == ' ' {
		strip++
	}
	l.pos += strip
	if l.nlPending != "" {
		l.sink.fenceText(l.nlPending)
		l.nlPending = ""
	}
	return lexFenceLine
}

func (l *lexer) closeFence() stateFn {
	l.fence, l.nlPending = fence{}, ""
	l.sink.closeFence()
	return lexLineStart
}

// lexFenceLine sends block content up to the end of the line; the line
// break itself (a newline, or a carriage return and newline) waits for the
// next line.
func lexFenceLine(l *lexer) stateFn {
	b := l.rest()
	if len(b) == 0 {
		return nil
	}
	nl := bytes.IndexByte(b, '\n')
	if nl < 0 {
		n := len(b)
		if b[n-1] == '\r' && !l.eof {
			n-- // it may be the start of a line break
		}
		if n == 0 {
			return nil
		}
		l.sink.fenceText(l.text(0, n))
		l.pos += n
		return lexFenceLine
	}
	brk := nl
	if brk > 0 && b[brk-1] == '\r' {
		brk--
	}
	if brk > 0 {
		l.sink.fenceText(l.text(0, brk))
	}
	l.nlPending = l.text(brk, nl+1)
	l.pos += nl + 1
	return lexFenceLineStart
}

// parseInfo reads a fence's info string: `start:end:path` is a code
// reference (ref), anything else names a language by its first word.
func parseInfo(info string) (ref bool, lang, file string, start, end int) {
	if a, rest, ok := strings.Cut(info, ":"); ok {
		if b, p, ok := strings.Cut(rest, ":"); ok && p != "" {
			s, err1 := strconv.Atoi(a)
			e, err2 := strconv.Atoi(b)
			if err1 == nil && err2 == nil && s >= 0 && e >= s {
				p = strings.TrimSpace(p)
				return true, LanguageOf(p), p, s, e
			}
		}
	}
	lang = info
	if i := strings.IndexAny(lang, " \t{"); i >= 0 {
		lang = lang[:i]
	}
	return false, strings.ToLower(lang), "", 0, 0
}

// languages maps file extensions to language names.
var languages = map[string]string{
	".go": "go", ".py": "python", ".js": "javascript", ".mjs": "javascript", ".cjs": "javascript",
	".jsx": "javascript", ".ts": "typescript", ".tsx": "typescript", ".rs": "rust", ".java": "java",
	".kt": "kotlin", ".swift": "swift", ".c": "c", ".h": "c", ".cc": "cpp", ".cpp": "cpp", ".hpp": "cpp",
	".cs": "csharp", ".rb": "ruby", ".php": "php", ".sh": "bash", ".bash": "bash", ".zsh": "bash",
	".ps1": "powershell", ".sql": "sql", ".html": "html", ".htm": "html", ".css": "css", ".scss": "scss",
	".json": "json", ".yaml": "yaml", ".yml": "yaml", ".toml": "toml", ".xml": "xml", ".md": "markdown",
	".markdown": "markdown", ".txt": "text", ".lua": "lua", ".r": "r", ".scala": "scala", ".dart": "dart",
	".vue": "vue", ".svelte": "svelte", ".proto": "protobuf", ".tf": "hcl", ".ex": "elixir", ".exs": "elixir",
	".erl": "erlang", ".hs": "haskell", ".ml": "ocaml", ".clj": "clojure", ".zig": "zig", ".nim": "nim",
	".dockerfile": "dockerfile", ".mk": "makefile", ".ini": "ini", ".cfg": "ini", ".env": "dotenv",
}

// LanguageOf returns the language of a file path by its extension, or ""
// when unknown.
func LanguageOf(p string) string {
	base := path.Base(strings.ReplaceAll(p, "\\", "/"))
	switch strings.ToLower(base) {
	case "dockerfile":
		return "dockerfile"
	case "makefile", "gnumakefile":
		return "makefile"
	}
	return languages[strings.ToLower(path.Ext(base))]
}
