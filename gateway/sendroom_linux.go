package gateway

import (
	"net"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The entries of the kernel's SO_MEMINFO answer (linux/sock_diag.h).
const (
	skMeminfoSndbuf     = 3
	skMeminfoWmemQueued = 5
	skMeminfoVars       = 9
)

// skbOverhead is what the kernel may charge a write beyond its bytes (the
// socket buffer's own structures), counted against the room for each take.
const skbOverhead = 1024

// tcpRoom tracks the room in a TCP connection's send buffer: a write that
// fits in it is queued by the kernel without blocking.
type tcpRoom struct {
	rc     syscall.RawConn
	budget int
}

// newSendRoom returns the send room of a TCP connection, nil for others.
func newSendRoom(c net.Conn) sendRoom {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return nil
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return nil
	}
	r := &tcpRoom{rc: rc}
	if _, ok := r.measure(); !ok {
		return nil
	}
	return r
}

// take reports whether a write of n bytes fits in what is known to be free
// and counts it. When the budget from the last measure is spent it
// measures again: half of what the kernel says is free, as the client may
// have read more since.
func (r *tcpRoom) take(n int) bool {
	n += skbOverhead
	if n > r.budget {
		free, ok := r.measure()
		if !ok {
			return false
		}
		r.budget = free / 2
		if n > r.budget {
			return false
		}
	}
	r.budget -= n
	return true
}

// forget makes the next take measure again.
func (r *tcpRoom) forget() { r.budget = 0 }

// measure returns the bytes the send buffer can surely still queue. The
// kernel charges a write by the packets it fills, not its bytes, and a
// writer can wait while up to a tenth of the buffer is nominally free (258
// and 350 KB of 3.9 MB, 1 KiB writes to a client that does not read), so a
// quarter of the buffer is kept in reserve.
func (r *tcpRoom) measure() (int, bool) {
	var info [skMeminfoVars]uint32
	var errno syscall.Errno
	err := r.rc.Control(func(fd uintptr) {
		l := uint32(unsafe.Sizeof(info))
		_, _, errno = syscall.Syscall6(syscall.SYS_GETSOCKOPT, fd, unix.SOL_SOCKET, unix.SO_MEMINFO,
			uintptr(unsafe.Pointer(&info[0])), uintptr(unsafe.Pointer(&l)), 0)
	})
	if err != nil || errno != 0 {
		return 0, false
	}
	sndbuf := int(info[skMeminfoSndbuf])
	return max(sndbuf-sndbuf/4-int(info[skMeminfoWmemQueued]), 0), true
}
