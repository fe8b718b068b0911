package translate

import (
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// An agent that streams text can split a character between two pieces:
// within its UTF-8 bytes, or, in JSON, between the two escapes of a
// surrogate pair (as JavaScript strings are cut). textStr keeps a lone
// surrogate at either end of a string as its three WTF-8 bytes, instead of
// U+FFFD, and a joiner puts the halves back together, so that the character
// is emitted whole and a later snapshot of the text still matches it.

// textStr is str for agent text: a lone surrogate escape at the start or
// the end of the string is kept as its WTF-8 bytes, and raw bytes of a
// UTF-8 sequence cut at either end are kept as they are (unquoting would
// make them U+FFFD).
func textStr(v jsontext.Value) string {
	if len(v) < 2 {
		return str(v)
	}
	var lead, trail []byte
	i := 1
	for i < len(v)-1 && i <= 3 && v[i] >= 0x80 && v[i] < 0xC0 {
		i++
	}
	if i > 1 {
		lead = v[1:i]
		v = append(jsontext.Value{'"'}, v[i:]...)
	} else if r, ok := surrogateEscape(v[1:]); ok && r >= 0xDC00 {
		lead = wtf8(r)
		v = append(jsontext.Value{'"'}, v[7:]...)
	}
	n := len(v)
	from := max(1, n-4)
	if k := from + incompleteTail(string(v[from:n-1])); k < n-1 {
		trail = v[k : n-1]
		v = append(v[:k:k], '"')
	} else if n >= 8 {
		if r, ok := surrogateEscape(v[n-7:]); ok && r < 0xDC00 && escaped(v, n-7) {
			trail = wtf8(r)
			v = append(v[:n-7:n-7], '"')
		}
	}
	if lead == nil && trail == nil {
		return str(v)
	}
	return string(lead) + str(v) + string(trail)
}

// surrogateEscape reads a \uXXXX escape of a surrogate at the start of b.
func surrogateEscape(b []byte) (rune, bool) {
	if len(b) < 6 || b[0] != '\\' || b[1] != 'u' {
		return 0, false
	}
	u, err := strconv.ParseUint(string(b[2:6]), 16, 16)
	if err != nil || u < 0xD800 || u > 0xDFFF {
		return 0, false
	}
	return rune(u), true
}

// escaped reports whether the backslash at v[i] starts an escape: it is
// not itself escaped by an odd run of backslashes before it.
func escaped(v []byte, i int) bool {
	n := 0
	for j := i - 1; j >= 0 && v[j] == '\\'; j-- {
		n++
	}
	return n%2 == 0
}

// wtf8 encodes a surrogate as UTF-8 would encode any code point of its
// size (WTF-8): three bytes that are not valid UTF-8.
func wtf8(r rune) []byte {
	return []byte{0xE0 | byte(r>>12), 0x80 | byte(r>>6)&0x3F, 0x80 | byte(r)&0x3F}
}

// surrogate reads a surrogate in WTF-8 at the start of s.
func surrogate(s string) (rune, bool) {
	if len(s) < 3 || s[0] != 0xED || s[1] < 0xA0 || s[1] > 0xBF || s[2] < 0x80 || s[2] > 0xBF {
		return 0, false
	}
	return 0xD000 | rune(s[1]&0x3F)<<6 | rune(s[2]&0x3F), true
}

// joiner holds the start of a character split at the end of one piece of
// streamed text until the next piece completes it.
type joiner struct {
	// held is a cut character (at most 3 of its bytes), or a high surrogate
	// and the cut start of what follows it (3 + 3).
	held [6]byte
	n    uint8
}

// join returns what of the next piece can be emitted: a held start that the
// piece completes goes first, and an incomplete character at its end is
// held. Surrogates left alone become U+FFFD. repeat says that the piece
// continues a snapshot of the text, which may repeat what is held whole.
func (j *joiner) join(t string, repeat bool) string {
	if t == "" {
		return ""
	}
	if j.n > 0 {
		t = j.complete(t, repeat)
	}
	if k := incompleteTail(t); k < len(t) {
		j.n = uint8(copy(j.held[:], t[k:]))
		t = t[:k]
	}
	return pairSurrogates(t)
}

// complete puts what is held before t, or drops it when t repeats it or
// the whole character it starts.
func (j *joiner) complete(t string, repeat bool) string {
	h := string(j.held[:j.n])
	j.n = 0
	if repeat && strings.HasPrefix(t, h) {
		return t
	}
	hi, ok := surrogate(h)
	if !ok || len(h) > 3 || incompleteEnd(t) == 0 {
		// A UTF-8 start, or a high surrogate and the start of what follows,
		// which t completes; or a high surrogate and a piece too short to
		// tell what follows it, held again with it.
		return h + t
	}
	if lo, ok := surrogate(t); ok && lo >= 0xDC00 {
		return string(utf16.DecodeRune(hi, lo)) + t[3:]
	}
	if r, size := utf8.DecodeRuneInString(t); repeat && size == 4 {
		if h1, _ := utf16.EncodeRune(r); h1 == hi {
			return t
		}
	}
	return "\uFFFD" + t
}

// flush returns what is held, as it is (a lone surrogate as U+FFFD), when
// no more text follows.
func (j *joiner) flush() string {
	h := string(j.held[:j.n])
	j.n = 0
	return pairSurrogates(h)
}

// incompleteTail returns where an incomplete character at the end of t
// starts (a high surrogate, the start of one, or the start of a UTF-8
// sequence that runs past the end), or len(t). A high surrogate before
// the start of another goes with it.
func incompleteTail(t string) int {
	k := incompleteEnd(t)
	if k < len(t) && k >= 3 {
		if r, ok := surrogate(t[k-3 : k]); ok && r < 0xDC00 {
			return k - 3
		}
	}
	return k
}

// incompleteEnd is incompleteTail without the look back.
func incompleteEnd(t string) int {
	n := len(t)
	if n >= 3 {
		if r, ok := surrogate(t[n-3:]); ok && r < 0xDC00 {
			return n - 3
		}
	}
	if n >= 2 && t[n-2] == 0xED && t[n-1] >= 0xA0 && t[n-1] <= 0xBF {
		return n - 2
	}
	for i := n - 1; i >= 0 && i >= n-3; i-- {
		switch c := t[i]; {
		case c < utf8.RuneSelf:
			return n
		case c >= 0xC0: // a leading byte
			if !utf8.FullRuneInString(t[i:]) {
				return i
			}
			return n
		}
	}
	return n
}

// pairSurrogatesBut is pairSurrogates for all of t but a high surrogate at
// its end, which a joiner holds.
func pairSurrogatesBut(t string) string {
	if n := len(t); n >= 3 {
		if r, ok := surrogate(t[n-3:]); ok && r < 0xDC00 {
			return pairSurrogates(t[:n-3]) + t[n-3:]
		}
	}
	return pairSurrogates(t)
}

// pairSurrogates replaces a high and low surrogate in WTF-8 that follow
// each other with their character, and a lone one with U+FFFD.
func pairSurrogates(t string) string {
	i := strings.IndexByte(t, 0xED)
	if i < 0 {
		return t
	}
	var b []byte
	last := 0
	for i < len(t) {
		r, ok := surrogate(t[i:])
		if !ok {
			k := strings.IndexByte(t[i+1:], 0xED)
			if k < 0 {
				break
			}
			i += 1 + k
			continue
		}
		b = append(b, t[last:i]...)
		size := 3
		if lo, ok := surrogate(t[i+3:]); ok && r < 0xDC00 && lo >= 0xDC00 {
			b = utf8.AppendRune(b, utf16.DecodeRune(r, lo))
			size = 6
		} else {
			b = append(b, "\uFFFD"...)
		}
		i += size
		last = i
	}
	if b == nil {
		return t
	}
	return string(append(b, t[last:]...))
}
