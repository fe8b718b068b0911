package translate

import (
	"strings"
	"unsafe"
)

// docText is the open document's content: a view of the segment's text
// while its deltas lie there one after another, else a copy of them.
type docText struct {
	src      string // the text the view is cut from
	from, to int    // the view: src[from:to]
	buf      strings.Builder
}

func (d *docText) reset() { *d = docText{} }

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
