package gateway

import (
	"errors"
	"os"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// epollParker waits for the files of quiet runs with one goroutine and one
// epoll instance: a parked file is registered one-shot, and when it becomes
// readable (or hangs up) its wake function is called.
type epollParker struct {
	epfd int
	mu   sync.Mutex
	next uint32
	wake map[uint32]func()
}

var (
	parkerOnce sync.Once
	theParker  parker
)

// defaultParker returns the process's parker, started on first use; nil
// when epoll is not available.
func defaultParker() parker {
	parkerOnce.Do(func() {
		fd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
		if err != nil {
			return
		}
		p := &epollParker{epfd: fd, wake: map[uint32]func(){}}
		go p.loop()
		theParker = p
	})
	return theParker
}

// park registers f; wake is called once f is readable, unless cancel comes
// first.
func (p *epollParker) park(f *os.File, wake func()) (uint32, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return 0, err
	}
	p.mu.Lock()
	p.next++
	if p.next == 0 {
		p.next = 1
	}
	tok := p.next
	p.wake[tok] = wake
	p.mu.Unlock()
	ev := syscall.EpollEvent{Events: syscall.EPOLLIN | syscall.EPOLLRDHUP | syscall.EPOLLONESHOT, Fd: int32(tok)}
	var cerr error
	// Control holds the descriptor open while it is registered.
	err = rc.Control(func(fd uintptr) {
		cerr = syscall.EpollCtl(p.epfd, syscall.EPOLL_CTL_MOD, int(fd), &ev)
		if errors.Is(cerr, syscall.ENOENT) {
			cerr = syscall.EpollCtl(p.epfd, syscall.EPOLL_CTL_ADD, int(fd), &ev)
		}
	})
	if err == nil {
		err = cerr
	}
	if err != nil {
		p.cancel(tok)
		return 0, err
	}
	return tok, nil
}

// cancel forgets a parked file; it reports whether its wake was still to
// come (and now never comes).
func (p *epollParker) cancel(tok uint32) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.wake[tok]
	delete(p.wake, tok)
	return ok
}

func (p *epollParker) loop() {
	evs := make([]syscall.EpollEvent, 128)
	for {
		n, err := syscall.EpollWait(p.epfd, evs, -1)
		if err != nil {
			if errors.Is(err, syscall.EINTR) {
				continue
			}
			panic("gateway: epoll_wait: " + err.Error())
		}
		for i := 0; i < n; i++ {
			tok := uint32(evs[i].Fd)
			p.mu.Lock()
			wake := p.wake[tok]
			delete(p.wake, tok)
			p.mu.Unlock()
			if wake != nil {
				wake()
			}
		}
	}
}

// pipeEmpty reports whether nothing is waiting to be read from f (true
// when that cannot be told).
func pipeEmpty(f *os.File) bool {
	rc, err := f.SyscallConn()
	if err != nil {
		return true
	}
	n := 0
	cerr := rc.Control(func(fd uintptr) {
		n, err = unix.IoctlGetInt(int(fd), unix.TIOCINQ) // FIONREAD
	})
	return cerr != nil || err != nil || n == 0
}
