package gateway

import (
	"net"
	"syscall"
	"testing"
	"time"
)

// TestSendRoomForget fills a connection's send buffer with writes that
// were not taken from its room, until a write waits: after forget, the room
// is measured again and has none, where the budget of the first take would
// have said yes.
func TestSendRoomForget(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	// A client with a 4 KiB receive buffer that never reads: a stalled
	// client.
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) {
			_ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		})
	}}
	client, err := d.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close() // never read
	server, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	room := newSendRoom(server)
	if room == nil {
		t.Skip("SO_MEMINFO is not available")
	}
	if !room.take(100) {
		t.Fatal("an empty send buffer has no room for 100 bytes")
	}
	// Fill the buffer behind the room's back.
	_ = server.SetWriteDeadline(time.Now().Add(300 * time.Millisecond))
	chunk := make([]byte, 1<<10)
	for {
		if _, err := server.Write(chunk); err != nil {
			break
		}
	}
	room.forget()
	if room.take(100) {
		t.Error("room for 100 bytes in a send buffer filled by other writes")
	}
}
