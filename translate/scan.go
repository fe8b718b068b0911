package translate

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"unicode/utf8"

	"github.com/docstream/docstream/documents"
)

// The scanner below validates and walks JSON without decoding it. It
// accepts what jsontext accepts with AllowDuplicateNames and
// AllowInvalidUTF8: strings are checked for control characters and escapes
// but not for valid UTF-8, and repeated member names are noted, not
// refused. Agent lines are mostly long strings (whole files in tool
// results), so strings are scanned eight bytes at a time, a line is
// validated once, and a value is read only when a member is wanted.

// maxDepth is the nesting limit of jsontext, which the scanner keeps.
const maxDepth = 10000

const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// skipWS returns the index of the first byte at or after i that is not
// JSON whitespace.
func skipWS(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// scanString reads the string whose opening quote is b[i]. It returns the
// index after the closing quote, or -1 when the string is not valid, and
// whether the string holds an escape.
func scanString(b []byte, i int) (end int, escaped bool) {
	i++
	for {
		for i+8 <= len(b) {
			if m := documents.StringStops(binary.LittleEndian.Uint64(b[i:])); m != 0 {
				i += bits.TrailingZeros64(m) >> 3
				break
			}
			i += 8
		}
		if i >= len(b) {
			return -1, escaped
		}
		switch c := b[i]; {
		case c == '"':
			return i + 1, escaped
		case c == '\\':
			escaped = true
			if i+1 >= len(b) {
				return -1, escaped
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if !isHex4(b, i+2) {
					return -1, escaped
				}
				i += 6
			default:
				return -1, escaped
			}
		case c < 0x20:
			return -1, escaped
		default:
			i++
		}
	}
}

func isHex4(b []byte, i int) bool {
	if i+4 > len(b) {
		return false
	}
	for _, c := range b[i : i+4] {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}

// scanNumber reads the number starting at b[i], or returns -1.
func scanNumber(b []byte, i int) int {
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		i = digits(b, i)
	default:
		return -1
	}
	if i < len(b) && b[i] == '.' {
		j := digits(b, i+1)
		if j == i+1 {
			return -1
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(b, i)
		if j == i {
			return -1
		}
		i = j
	}
	return i
}

func digits(b []byte, i int) int {
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		i++
	}
	return i
}

// scanLiteral reads lit at b[i], or returns -1.
func scanLiteral(b []byte, i int, lit string) int {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return -1
	}
	return i + len(lit)
}

// scanValue reads the value starting at b[i] (no leading whitespace) and
// returns the index after it, or -1 when it is not valid JSON.
func scanValue(b []byte, i, depth int, ls *lineScan) int {
	if i >= len(b) {
		return -1
	}
	switch c := b[i]; {
	case c == '"':
		end, _ := scanString(b, i)
		return end
	case c == '{':
		return scanObject(b, i, depth+1, nil, ls)
	case c == '[':
		return scanArray(b, i, depth+1, ls)
	case c == 't':
		return scanLiteral(b, i, "true")
	case c == 'f':
		return scanLiteral(b, i, "false")
	case c == 'n':
		return scanLiteral(b, i, "null")
	case c == '-' || '0' <= c && c <= '9':
		return scanNumber(b, i)
	}
	return -1
}

// lineMemberFunc receives one member of a line's object as the validating
// scan finds it: its name as written (quoted) and whether the name holds
// an escape, and its value.
type lineMemberFunc func(name, value []byte, escaped bool)

// memberFunc receives one object member: its name as it is written
// (quoted, escapes intact), its value, and where the member starts (its
// name's quote) and ends (after its value) in the scanned bytes.
type memberFunc func(name, value []byte, start, end int)

// lineScan is what a validating scan learns of a line beside its
// validity: whether an object in it may repeat a member name.
type lineScan struct {
	names [][]byte // the names read so far of the open objects
	// repeats is set when an object repeats a name, or when that is not
	// told cheaply: a name with an escape or invalid UTF-8 (U+FFFD to
	// jsontext), an object of many members.
	repeats bool
}

// maxCheckedNames is how many names of one object a lineScan compares.
const maxCheckedNames = 16

// name notes a member name (quoted) of the object whose names start at
// names[from]; seen has a bit set for each of those names (see nameBit),
// so that most names are told new without comparing them with the others.
func (ls *lineScan) name(name []byte, escaped bool, from int, seen *uint64) {
	if ls.repeats {
		return
	}
	if escaped || len(ls.names)-from >= maxCheckedNames || !asciiName(name) {
		ls.repeats = true
		return
	}
	bit := nameBit(name)
	if *seen&bit != 0 {
		for _, x := range ls.names[from:] {
			if string(x) == string(name) {
				ls.repeats = true
				return
			}
		}
	}
	*seen |= bit
	ls.names = append(ls.names, name)
}

// nameBit is one of 64 bits for a quoted name, from its length and its
// first and last bytes: names with different bits differ.
func nameBit(name []byte) uint64 {
	n := len(name)
	return 1 << ((uint(n)*7 + uint(name[1]) + uint(name[n-2])*3) & 63)
}

// asciiName reports whether a quoted name holds only ASCII bytes.
func asciiName(name []byte) bool {
	for ; len(name) >= 8; name = name[8:] {
		if binary.LittleEndian.Uint64(name)&highs != 0 {
			return false
		}
	}
	for _, c := range name {
		if c >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// scanObject reads the object whose '{' is b[i], calling fn for each member
// when fn is not nil, and returns the index after it, or -1.
func scanObject(b []byte, i, depth int, fn lineMemberFunc, ls *lineScan) int {
	if depth > maxDepth {
		return -1
	}
	from := len(ls.names)
	var seen uint64
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return -1
		}
		start := i
		nameEnd, escaped := scanString(b, i)
		if nameEnd < 0 {
			return -1
		}
		ls.name(b[start:nameEnd], escaped, from, &seen)
		i = skipWS(b, nameEnd)
		if i >= len(b) || b[i] != ':' {
			return -1
		}
		i = skipWS(b, i+1)
		valStart := i
		i = scanValue(b, i, depth, ls)
		if i < 0 {
			return -1
		}
		if fn != nil {
			fn(b[start:nameEnd], b[valStart:i], escaped)
		}
		i = skipWS(b, i)
		if i >= len(b) {
			return -1
		}
		switch b[i] {
		case ',':
			i = skipWS(b, i+1)
		case '}':
			// A failed scan leaves names behind; the next line starts over.
			ls.names = ls.names[:from]
			return i + 1
		default:
			return -1
		}
	}
}

// scanArray reads the array whose '[' is b[i] and returns the index after
// it, or -1.
func scanArray(b []byte, i, depth int, ls *lineScan) int {
	if depth > maxDepth {
		return -1
	}
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == ']' {
		return i + 1
	}
	for {
		i = scanValue(b, i, depth, ls)
		if i < 0 {
			return -1
		}
		i = skipWS(b, i)
		if i >= len(b) {
			return -1
		}
		switch b[i] {
		case ',':
			i = skipWS(b, i+1)
		case ']':
			return i + 1
		default:
			return -1
		}
	}
}

// The walkers below read values cut from a line that isObjectLine has
// validated, so they do not validate again: strings are skipped with
// bytes.IndexByte. On malformed input they stop (reporting false) and
// never panic.

// skipStringFast returns the index after the string whose quote is b[i],
// or -1.
func skipStringFast(b []byte, i int) int {
	j := i + 1
	// Most strings are short names and values: look at a few bytes before
	// calling IndexByte, and go on from where this stops.
	for end := min(j+16, len(b)); j < end; j++ {
		if c := b[j]; c == '"' {
			return j + 1
		} else if c == '\\' {
			break
		}
	}
	for {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			return -1
		}
		j += k
		n := 0
		for p := j - 1; p > i && b[p] == '\\'; p-- {
			n++
		}
		if n%2 == 0 {
			return j + 1
		}
		j++
	}
}

// skipFast returns the index after the value starting at b[i], or -1.
func skipFast(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return skipStringFast(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				if i = skipStringFast(b, i); i < 0 {
					return -1
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return -1
	}
	j := i
	for j < len(b) {
		switch b[j] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return j
		}
		j++
	}
	return j
}

// eachMember calls fn for each member of obj, a JSON object cut from a
// validated line, and reports whether it read the whole object.
func eachMember(obj []byte, fn memberFunc) bool {
	if len(obj) == 0 || obj[0] != '{' {
		return false
	}
	i := skipWS(obj, 1)
	if i < len(obj) && obj[i] == '}' {
		return i+1 == len(obj)
	}
	for i < len(obj) && obj[i] == '"' {
		start := i
		nameEnd := skipStringFast(obj, i)
		if nameEnd < 0 {
			return false
		}
		i = skipWS(obj, nameEnd)
		if i >= len(obj) || obj[i] != ':' {
			return false
		}
		i = skipWS(obj, i+1)
		valStart := i
		if i = skipFast(obj, i); i <= valStart {
			return false
		}
		fn(obj[start:nameEnd], obj[valStart:i], start, i)
		i = skipWS(obj, i)
		if i >= len(obj) {
			return false
		}
		switch obj[i] {
		case '}':
			return i+1 == len(obj)
		case ',':
			i = skipWS(obj, i+1)
		default:
			return false
		}
	}
	return false
}

// walkObject calls fn for each member of the object whose '{' is b[i], cut
// from a validated line, with the member's name as written (quoted) and
// where its value starts; fn reads the value and returns where it ends, or
// -1 to stop. walkObject returns the index after the object, or -1. Where
// eachMember finds a value's end before its callback reads the value, here
// the value is read once.
func walkObject(b []byte, i int, fn func(name []byte, vs int) int) int {
	if i >= len(b) || b[i] != '{' {
		return -1
	}
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1
	}
	for i < len(b) && b[i] == '"' {
		start := i
		nameEnd := skipStringFast(b, i)
		if nameEnd < 0 {
			return -1
		}
		i = skipWS(b, nameEnd)
		if i >= len(b) || b[i] != ':' {
			return -1
		}
		vs := skipWS(b, i+1)
		if vs >= len(b) {
			return -1
		}
		if i = fn(b[start:nameEnd], vs); i <= vs {
			return -1
		}
		if i = skipWS(b, i); i >= len(b) {
			return -1
		}
		switch b[i] {
		case '}':
			return i + 1
		case ',':
			i = skipWS(b, i+1)
		default:
			return -1
		}
	}
	return -1
}

// eachElement calls fn for each element of arr, a JSON array cut from a
// validated line, and reports whether it read the whole array.
func eachElement(arr []byte, fn func(elem []byte)) bool {
	if len(arr) == 0 || arr[0] != '[' {
		return false
	}
	i := skipWS(arr, 1)
	if i < len(arr) && arr[i] == ']' {
		return i+1 == len(arr)
	}
	for i < len(arr) {
		start := i
		if i = skipFast(arr, i); i <= start {
			return false
		}
		fn(arr[start:i])
		i = skipWS(arr, i)
		if i >= len(arr) {
			return false
		}
		switch arr[i] {
		case ']':
			return i+1 == len(arr)
		case ',':
			i = skipWS(arr, i+1)
		default:
			return false
		}
	}
	return false
}

// isObjectLine reports whether line is exactly one JSON object, with its
// members reported to fn and what else the scan learns in ls.
func isObjectLine(line []byte, fn lineMemberFunc, ls *lineScan) bool {
	ls.names, ls.repeats = ls.names[:0], false
	if len(line) == 0 || line[0] != '{' {
		return false
	}
	end := scanObject(line, 0, 1, fn, ls)
	return end >= 0 && skipWS(line, end) == len(line)
}

// nameSet finds repeated member names. JSON allows them and the decoder
// accepts them, but jsontext's encoder refuses them, so the JSON that
// leaves the package is checked. Its buffers are reused.
type nameSet struct {
	names  [][]byte    // the names of the open objects, innermost last
	levels []nameLevel // the open objects and arrays
}

// nameLevel is an open object or array of the value being checked.
type nameLevel struct {
	object bool
	from   int                 // the object's names are names[from:]
	set    map[string]struct{} // the names of a large object
}

// repeated reports whether an object in v, a valid JSON value, repeats a
// member name (compared unquoted). It reads v once, front to back.
func (ns *nameSet) repeated(v []byte) bool {
	ns.names, ns.levels = ns.names[:0], ns.levels[:0]
	expectName := false
	for i := 0; i < len(v); {
		switch v[i] {
		case '{':
			ns.levels = append(ns.levels, nameLevel{object: true, from: len(ns.names)})
			expectName = true
		case '[':
			ns.levels = append(ns.levels, nameLevel{from: len(ns.names)})
			expectName = false
		case '}', ']':
			if n := len(ns.levels); n > 0 {
				ns.names = ns.names[:ns.levels[n-1].from]
				ns.levels = ns.levels[:n-1]
			}
			expectName = false
		case ',':
			expectName = len(ns.levels) > 0 && ns.levels[len(ns.levels)-1].object
		case '"':
			end := skipStringFast(v, i)
			if end < 0 {
				return false
			}
			if expectName && len(ns.levels) > 0 {
				if ns.add(&ns.levels[len(ns.levels)-1], unquoteName(v[i:end])) {
					return true
				}
				expectName = false
			}
			i = end
			continue
		}
		i++
	}
	return false
}

// add records a name of the object l and reports whether it repeats one.
// Most objects are small enough for a linear search.
func (ns *nameSet) add(l *nameLevel, name []byte) bool {
	if l.set != nil {
		if _, ok := l.set[string(name)]; ok {
			return true
		}
		l.set[string(name)] = struct{}{}
		return false
	}
	for _, x := range ns.names[l.from:] {
		if string(x) == string(name) {
			return true
		}
	}
	ns.names = append(ns.names, name)
	if len(ns.names)-l.from == 32 {
		l.set = make(map[string]struct{}, 64)
		for _, x := range ns.names[l.from:] {
			l.set[string(x)] = struct{}{}
		}
	}
	return false
}

// dedupe returns v without repeated member names, keeping the last member
// of each name where it stands; v is valid JSON. Without repeats it
// returns v itself.
func (ns *nameSet) dedupe(v []byte) []byte {
	if !ns.repeated(v) {
		return v
	}
	return appendDeduped(make([]byte, 0, len(v)), v)
}

func appendDeduped(out, v []byte) []byte {
	switch v[0] {
	case '{':
		type member struct{ name, value []byte }
		var ms []member
		last := map[string]int{}
		eachMember(v, func(name, value []byte, _, _ int) {
			last[string(unquoteName(name))] = len(ms)
			ms = append(ms, member{name, value})
		})
		out = append(out, '{')
		n := 0
		for i, m := range ms {
			if last[string(unquoteName(m.name))] != i {
				continue
			}
			if n > 0 {
				out = append(out, ',')
			}
			n++
			out = append(out, m.name...)
			out = append(out, ':')
			out = appendDeduped(out, m.value)
		}
		return append(out, '}')
	case '[':
		out = append(out, '[')
		n := 0
		eachElement(v, func(elem []byte) {
			if n > 0 {
				out = append(out, ',')
			}
			n++
			out = appendDeduped(out, elem)
		})
		return append(out, ']')
	}
	return append(out, v...)
}

// nameIs reports whether a quoted member name (escapes intact) is s.
func nameIs(name []byte, s string) bool {
	if len(name) == len(s)+2 && string(name[1:len(name)-1]) == s {
		return true
	}
	if len(name) < len(s)+2 || !hasByte(name, '\\') {
		return false
	}
	return string(unquoteName(name)) == s
}

func hasByte(b []byte, c byte) bool {
	for _, x := range b {
		if x == c {
			return true
		}
	}
	return false
}
