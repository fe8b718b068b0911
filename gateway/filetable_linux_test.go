package gateway_test

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/docstream/docstream/gateway"
)

// fdSize is the size of a process's file table ("self" or a pid), from
// /proc.
func fdSize(t *testing.T, pid string) int {
	t.Helper()
	b, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		t.Skipf("no /proc/%s/status: %v", pid, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "FDSize:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				t.Fatalf("FDSize %q: %v", v, err)
			}
			return n
		}
	}
	t.Skipf("no FDSize in /proc/%s/status", pid)
	return 0
}

func TestReserveFileTableGrowsTheTable(t *testing.T) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	before := fdSize(t, "self")
	want := before * 4
	if uint64(want) > lim.Cur {
		t.Skipf("the open-file limit %d is below %d", lim.Cur, want)
	}
	n, err := gateway.ReserveFileTable(want)
	if err != nil || n != want {
		t.Fatalf("gateway.ReserveFileTable(%d) = %d, %v", want, n, err)
	}
	if got := fdSize(t, "self"); got < want {
		t.Fatalf("file table holds %d descriptors after reserving %d (before: %d)", got, want, before)
	}
	// Beyond the open-file limit it reserves up to the limit, without error.
	if lim.Cur <= 1<<16 {
		if n, err := gateway.ReserveFileTable(int(lim.Cur) + 1000); err != nil || uint64(n) != lim.Cur {
			t.Fatalf("gateway.ReserveFileTable(limit+1000) = %d, %v; want %d", n, err, lim.Cur)
		}
	}
	if n, err := gateway.ReserveFileTable(0); n != 0 || err != nil {
		t.Fatalf("gateway.ReserveFileTable(0) = %d, %v", n, err)
	}
}

// TestServerReservesItsFileTable checks that the gateway sizes its file
// table at start as server.file_table_size says, and leaves it alone at 0.
func TestServerReservesItsFileTable(t *testing.T) {
	const size = 5000
	on := startServer(t, "DOCSTREAM_SERVER_FILE_TABLE_SIZE=5000")
	if got := fdSize(t, strconv.Itoa(on.cmd.Process.Pid)); got < size {
		t.Errorf("with file_table_size %d the table holds %d descriptors", size, got)
	}
	off := startServer(t, "DOCSTREAM_SERVER_FILE_TABLE_SIZE=0")
	if got := fdSize(t, strconv.Itoa(off.cmd.Process.Pid)); got >= size {
		t.Errorf("with file_table_size 0 the table holds %d descriptors, as if reserved", got)
	}
}
