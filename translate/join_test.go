package translate

import (
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// jsQuote quotes s the way a JavaScript agent that escapes everything
// outside ASCII would: each UTF-16 code unit as \uXXXX. A unit slice of a
// string, as JavaScript cuts it, can hold half a surrogate pair.
func jsQuote(units []uint16) jsontext.Value {
	var b strings.Builder
	b.WriteByte('"')
	for _, u := range units {
		switch {
		case u == '"' || u == '\\':
			b.WriteByte('\\')
			b.WriteByte(byte(u))
		case u >= 0x20 && u < 0x7F:
			b.WriteByte(byte(u))
		default:
			b.WriteString(`\u`)
			h := strconv.FormatUint(uint64(u), 16)
			b.WriteString(strings.Repeat("0", 4-len(h)) + h)
		}
	}
	b.WriteByte('"')
	return jsontext.Value(b.String())
}

// rawQuote quotes s as JSON with its bytes outside ASCII left raw, and a
// newline escaped, as agents write it: a piece cut within a character
// holds part of its bytes.
func rawQuote(s string) jsontext.Value {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20:
			b.WriteString(`\u00`)
			b.WriteString(strconv.FormatUint(uint64(c)>>4, 16) + strconv.FormatUint(uint64(c)&15, 16))
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return jsontext.Value(b.String())
}

// FuzzJoin cuts a text into pieces two ways an agent can: between UTF-16
// code units, each piece a JSON string of escapes (so a surrogate pair can
// be cut), and between UTF-8 bytes. Joined, the pieces give the text back.
func FuzzJoin(f *testing.F) {
	for _, s := range []string{"Smile 😀 done", "🚀🎉", "a\"b\\c", "日本語のテキスト", "é", "x𝄞y", "Done\n😀 ok"} {
		f.Add(s, uint8(3), uint8(1))
	}
	f.Add("Done\n😀 ok", uint8(7), uint8(7))       // within the emoji's bytes, after an escape
	f.Add("Smile 😀 and go", uint8(11), uint8(11)) // in WTF-8, within the low surrogate's bytes
	f.Add("🚀", uint8(3), uint8(4))                // in WTF-8, a piece of one byte after the high surrogate
	f.Fuzz(func(t *testing.T, s string, cut1, cut2 uint8) {
		if !utf8.ValidString(s) {
			return
		}
		units := utf16.Encode([]rune(s))
		cuts := []int{int(cut1) % (len(units) + 1), int(cut2) % (len(units) + 1)}
		if cuts[0] > cuts[1] {
			cuts[0], cuts[1] = cuts[1], cuts[0]
		}
		var j joiner
		var got strings.Builder
		last := 0
		for _, c := range append(cuts, len(units)) {
			got.WriteString(j.join(textStr(jsQuote(units[last:c])), false))
			last = c
		}
		got.WriteString(j.flush())
		if got.String() != s {
			t.Fatalf("in UTF-16 pieces cut at %v: joined %q, want %q", cuts, got.String(), s)
		}

		b1, b2 := int(cut1)%(len(s)+1), int(cut2)%(len(s)+1)
		if b1 > b2 {
			b1, b2 = b2, b1
		}
		got.Reset()
		for _, p := range []string{s[:b1], s[b1:b2], s[b2:]} {
			piece := j.join(textStr(rawQuote(p)), false)
			if !utf8.ValidString(piece) {
				t.Fatalf("in UTF-8 pieces cut at %d, %d: piece %q is not valid UTF-8", b1, b2, piece)
			}
			got.WriteString(piece)
		}
		got.WriteString(j.flush())
		if got.String() != s {
			t.Fatalf("in UTF-8 pieces cut at %d, %d: joined %q, want %q", b1, b2, got.String(), s)
		}

		// In WTF-8, as a text in which each half of a pair arrived escaped
		// becomes, cut between any two bytes.
		w := toWTF8(units)
		b1, b2 = int(cut1)%(len(w)+1), int(cut2)%(len(w)+1)
		if b1 > b2 {
			b1, b2 = b2, b1
		}
		got.Reset()
		for _, p := range []string{w[:b1], w[b1:b2], w[b2:]} {
			got.WriteString(j.join(p, false))
		}
		got.WriteString(j.flush())
		if got.String() != s {
			t.Fatalf("in WTF-8 pieces cut at %d, %d: joined %q, want %q", b1, b2, got.String(), s)
		}
	})
}

// toWTF8 writes UTF-16 units as WTF-8: each surrogate on its own, as three
// bytes.
func toWTF8(units []uint16) string {
	var b []byte
	for _, u := range units {
		if u >= 0xD800 && u <= 0xDFFF {
			b = append(b, wtf8(rune(u))...)
		} else {
			b = utf8.AppendRune(b, rune(u))
		}
	}
	return string(b)
}

func TestJoinSnapshot(t *testing.T) {
	var j joiner
	if got := j.join(textStr(jsontext.Value(`"Smile \ud83d"`)), false); got != "Smile " {
		t.Fatalf("first piece: %q", got)
	}
	// The flush repeats the character whole: the held half is dropped.
	if got := j.join("😀 done", true); got != "😀 done" {
		t.Fatalf("after the snapshot: %q", got)
	}
	if got := j.join("\xf0\x9f", false); got != "" {
		t.Fatalf("a cut UTF-8 sequence: %q", got)
	}
	if got := j.join("🚀!", true); got != "🚀!" {
		t.Fatalf("after the snapshot: %q", got)
	}
	for in, want := range map[string]string{
		`"\ude00 lone"`:      "\uFFFD lone",
		`"lone \ud800 half"`: "lone \uFFFD half",
		`"x\\ud83d"`:         `x\ud83d`,
	} {
		var j joiner
		if got := j.join(textStr(jsontext.Value(in)), false) + j.flush(); got != want {
			t.Errorf("%s: %q, want %q", in, got, want)
		}
	}
}
