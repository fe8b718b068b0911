package gateway

import (
	"fmt"
	"os"
	"syscall"
)

// ReserveFileTable grows the process's file table to hold n descriptors
// (at most the open-file limit) and reports the size asked of the kernel.
// Linux grows the table by doubling as descriptors are opened, and while it
// grows every thread that accepts a connection or opens a pipe waits for an
// RCU grace period, 10 to 20 ms. Grown once at start, it never grows under
// load. The table never shrinks, so a smaller n later does nothing.
func ReserveFileTable(n int) (int, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil && uint64(n) > lim.Cur {
		n = int(lim.Cur)
	}
	if n <= 0 {
		return 0, nil
	}
	f, err := os.Open(os.DevNull)
	if err != nil {
		return 0, fmt.Errorf("reserving the file table: %w", err)
	}
	defer f.Close()
	// F_DUPFD gives the lowest free descriptor at or above n-1, which the
	// table must then be able to hold.
	fd, _, errno := syscall.Syscall(syscall.SYS_FCNTL, f.Fd(), syscall.F_DUPFD_CLOEXEC, uintptr(n-1))
	if errno != 0 {
		return 0, fmt.Errorf("reserving a file table of %d: %w", n, errno)
	}
	syscall.Close(int(fd))
	return n, nil
}
