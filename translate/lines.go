package translate

import (
	"bufio"
	"bytes"
	"io"
)

// lineReader is a buffered reader of newline-terminated lines whose buffer
// starts small and doubles, up to its maximum, when a line does not fit or
// a read fills it, so that a quiet run holds a few kilobytes and a busy one
// reads in large blocks.
type lineReader struct {
	rd   io.Reader
	buf  []byte
	r, w int // buf[r:w] is read but not yet returned
	max  int
	err  error
	full bool // the last read filled the buffer
}

// newLineReader returns a lineReader starting with size bytes and growing to
// max bytes.
func newLineReader(rd io.Reader, size, max int) *lineReader {
	size = min(size, max)
	return &lineReader{rd: rd, buf: make([]byte, size), max: max}
}

// Buffered returns how many bytes are read but not yet returned.
func (b *lineReader) Buffered() int { return b.w - b.r }

// ReadSlice returns the next line including its newline. The slice is valid
// until the next call. Like bufio.Reader.ReadSlice it returns
// bufio.ErrBufferFull with the whole buffer when a line is longer than the
// largest buffer, and what is left before the error at the end of the input.
func (b *lineReader) ReadSlice(delim byte) ([]byte, error) {
	scanned := 0
	for {
		if i := bytes.IndexByte(b.buf[b.r+scanned:b.w], delim); i >= 0 {
			line := b.buf[b.r : b.r+scanned+i+1]
			b.r += scanned + i + 1
			return line, nil
		}
		scanned = b.w - b.r
		if b.err != nil {
			line := b.buf[b.r:b.w]
			b.r = b.w
			err := b.err
			b.err = nil
			return line, err
		}
		if scanned == len(b.buf) {
			if !b.grow() {
				b.r = b.w
				return b.buf, bufio.ErrBufferFull
			}
		}
		b.fill()
	}
}

// grow doubles the buffer (up to max), keeping the unread bytes; it reports
// false when the buffer is at its maximum.
func (b *lineReader) grow() bool {
	if len(b.buf) >= b.max {
		return false
	}
	nb := make([]byte, min(2*len(b.buf), b.max))
	b.w = copy(nb, b.buf[b.r:b.w])
	b.r = 0
	b.buf = nb
	return true
}

// fill reads once into the free end of the buffer, first moving the unread
// bytes to its start; a read that filled the buffer lets the next fill grow
// it.
func (b *lineReader) fill() {
	if b.full {
		b.full = false
		b.grow()
	}
	if b.r > 0 {
		b.w = copy(b.buf, b.buf[b.r:b.w])
		b.r = 0
	}
	free := len(b.buf) - b.w
	for i := 0; i < 100; i++ {
		n, err := b.rd.Read(b.buf[b.w:])
		if n < 0 {
			panic("translate: reader returned a negative count")
		}
		b.w += n
		if err != nil {
			b.err = err
			return
		}
		if n > 0 {
			b.full = n == free
			return
		}
	}
	b.err = io.ErrNoProgress
}

// Reset discards the buffer and reads from rd.
func (b *lineReader) Reset(rd io.Reader) {
	b.rd, b.r, b.w, b.err, b.full = rd, 0, 0, nil, false
}
