package translate

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"sync"
)

// lineReader is a buffered reader of newline-terminated lines whose buffer
// starts small and doubles, up to its maximum, when a line does not fit or
// a read fills it, so that a quiet run holds a few kilobytes and a busy one
// reads in large blocks.
type lineReader struct {
	rd      io.Reader
	held    *lineBuf // the buffer, nil while idle (see idle)
	buf     []byte   // held.b
	r, w    int      // buf[r:w] is read but not yet returned
	nl      int      // when > r, buf[r:nl] is the next line (hasLine found it)
	first   int
	max     int
	err     error
	full    bool // the last read filled the buffer
	pending bool // the last read returned ErrPending
}

// newLineReader returns a lineReader starting with size bytes and growing to
// max bytes.
func newLineReader(rd io.Reader, size, max int) *lineReader {
	return &lineReader{rd: rd, first: min(size, max), max: max}
}

// lineBuf holds a read buffer while it is in a pool.
type lineBuf struct{ b []byte }

// bufPools keep the buffers that lineReaders gave back, for the next reader
// that needs one of that size: pool i holds buffers of firstBufSize<<i
// bytes, up to the largest read buffer.
var bufPools [6]sync.Pool

// getBuf returns a buffer of size bytes; its contents are undefined.
func getBuf(size int) *lineBuf {
	if i := poolIndex(size); i >= 0 {
		if lb, _ := bufPools[i].Get().(*lineBuf); lb != nil {
			return lb
		}
	}
	return &lineBuf{b: make([]byte, size)}
}

// putBuf gives a buffer back; sizes without a pool are left to the GC.
func putBuf(lb *lineBuf) {
	if i := poolIndex(len(lb.b)); i >= 0 {
		bufPools[i].Put(lb)
	}
}

func poolIndex(size int) int {
	for i := range bufPools {
		if firstBufSize<<i == size {
			return i
		}
	}
	return -1
}

// take gives the reader its first buffer.
func (b *lineReader) take() {
	b.held = getBuf(b.first)
	b.buf = b.held.b
}

// idle gives the buffer back when nothing is buffered; the next read takes
// a first-size buffer again. It reports whether it did.
func (b *lineReader) idle() bool {
	if b.r != b.w || b.buf == nil {
		return false
	}
	b.release()
	return true
}

// release gives the buffer back whatever it holds: the lines it returned
// are no longer valid.
func (b *lineReader) release() {
	if b.held != nil {
		putBuf(b.held)
	}
	b.held, b.buf, b.r, b.w, b.nl, b.full = nil, nil, 0, 0, 0, false
}

// hasLine reports whether a whole line is read but not yet returned.
func (b *lineReader) hasLine() bool {
	if b.nl > b.r {
		return true
	}
	i := bytes.IndexByte(b.buf[b.r:b.w], '\n')
	if i < 0 {
		return false
	}
	b.nl = b.r + i + 1 // ReadSlice returns it without looking again
	return true
}

// Buffered returns how many bytes are read but not yet returned.
func (b *lineReader) Buffered() int { return b.w - b.r }

// ReadSlice returns the next line including its newline. The slice is valid
// until the next call. Like bufio.Reader.ReadSlice it returns
// bufio.ErrBufferFull with the whole buffer when a line is longer than the
// largest buffer, and what is left before the error at the end of the input.
func (b *lineReader) ReadSlice(delim byte) ([]byte, error) {
	if b.buf == nil {
		b.take()
	}
	if b.nl > b.r && delim == '\n' {
		line := b.buf[b.r:b.nl]
		b.r = b.nl
		return line, nil
	}
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
		if b.pending {
			b.pending = false
			return nil, ErrPending
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
	nb := getBuf(min(2*len(b.buf), b.max))
	b.w = copy(nb.b, b.buf[b.r:b.w])
	b.r, b.nl = 0, 0
	putBuf(b.held)
	b.held, b.buf = nb, nb.b
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
		b.r, b.nl = 0, 0
	}
	free := len(b.buf) - b.w
	for i := 0; i < 100; i++ {
		n, err := b.rd.Read(b.buf[b.w:])
		if n < 0 {
			panic("translate: reader returned a negative count")
		}
		b.w += n
		if errors.Is(err, ErrPending) {
			b.pending = true
			return
		}
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
