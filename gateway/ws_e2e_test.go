package gateway_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/docstream/docstream/documents"
)

// wsMsg is one message the server sends on /v1/chat/ws.
type wsMsg struct {
	Type string         `json:"type"`
	ID   int            `json:"id"`
	Data jsontext.Value `json:"data"`
}

type wsClient struct {
	t    *testing.T
	conn *websocket.Conn
	ctx  context.Context
	// pings gets a value for each ping the server sends (while a read is
	// under way), unless it is full.
	pings chan struct{}
}

func (s *testServer) dialWS(t *testing.T, headers ...string) *wsClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	h := http.Header{}
	for i := 0; i+1 < len(headers); i += 2 {
		h.Set(headers[i], headers[i+1])
	}
	pings := make(chan struct{}, 16)
	conn, resp, err := websocket.Dial(ctx, "ws://"+s.Addr+"/v1/chat/ws", &websocket.DialOptions{HTTPHeader: h,
		OnPingReceived: func(context.Context, []byte) bool {
			select {
			case pings <- struct{}{}:
			default:
			}
			return true
		}})
	if err != nil {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		t.Fatalf("dialing /v1/chat/ws: %v (status %d)", err, status)
	}
	conn.SetReadLimit(64 << 20)
	t.Cleanup(func() { conn.CloseNow() })
	return &wsClient{t: t, conn: conn, ctx: ctx, pings: pings}
}

func (c *wsClient) send(v any) {
	c.t.Helper()
	var b []byte
	switch v := v.(type) {
	case string:
		b = []byte(v)
	default:
		var err error
		if b, err = json.Marshal(v); err != nil {
			c.t.Fatal(err)
		}
	}
	if err := c.conn.Write(c.ctx, websocket.MessageText, b); err != nil {
		c.t.Fatalf("writing to the socket: %v", err)
	}
}

func (c *wsClient) read() wsMsg {
	c.t.Helper()
	typ, b, err := c.conn.Read(c.ctx)
	if err != nil {
		c.t.Fatalf("reading from the socket: %v", err)
	}
	if typ != websocket.MessageText {
		c.t.Fatalf("a %v message, want text", typ)
	}
	var m wsMsg
	if err := json.Unmarshal(b, &m); err != nil {
		c.t.Fatalf("message is not {type,id,data}: %v: %s", err, b)
	}
	return m
}

// turn reads one turn's accepted message, which names the run, then its
// events up to and including done.
func (c *wsClient) turn() []wsMsg {
	c.t.Helper()
	c.accepted()
	var out []wsMsg
	for {
		m := c.read()
		if m.Type == "error" {
			c.t.Fatalf("error message during a turn: %s", m.Data)
		}
		out = append(out, m)
		if m.Type == documents.EventDone {
			return out
		}
	}
}

// accepted reads the message that answers a chat and returns the run id.
func (c *wsClient) accepted() string {
	c.t.Helper()
	m := c.read()
	var a struct {
		ID string `json:"id"`
	}
	if m.Type != "accepted" || m.ID != 0 || json.Unmarshal(m.Data, &a) != nil || !strings.HasPrefix(a.ID, "chat_") {
		c.t.Fatalf("the answer to a chat: %s %d %s, want accepted with the run id", m.Type, m.ID, m.Data)
	}
	return a.ID
}

// wsFold checks the turn's ids and order and folds it into a response.
func wsFold(t *testing.T, msgs []wsMsg) documents.ChatResponse {
	t.Helper()
	evs := make([]event, len(msgs))
	for i, m := range msgs {
		evs[i] = event{ID: fmt.Sprint(m.ID), Name: m.Type, Data: string(m.Data)}
	}
	return fold(t, evs)
}

func wsError(t *testing.T, m wsMsg) (code string, status int) {
	t.Helper()
	if m.Type != "error" {
		t.Fatalf("got a %s message, want an error", m.Type)
	}
	var e struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Status  int    `json:"status"`
	}
	if err := json.Unmarshal(m.Data, &e); err != nil || e.Message == "" {
		t.Fatalf("error data %s: %v", m.Data, err)
	}
	return e.Code, e.Status
}

// TestWSTurns runs several turns on one socket: the tour, then follow-ups
// sent the moment the previous turn's done arrives.
func TestWSTurns(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.dialWS(t, "Authorization", "Bearer anything")

	c.send(map[string]any{"type": "chat", "prompt": "tour"})
	first := c.turn()
	got := wsFold(t, first)
	if got.Status != documents.StatusCompleted || got.ConversationID == nil {
		t.Fatalf("tour: status %s, conversation %v", got.Status, got.ConversationID)
	}
	seen := map[documents.Type]bool{}
	for _, d := range got.Documents {
		seen[d.Type] = true
	}
	for _, typ := range documents.Types {
		if typ != documents.TypeError && !seen[typ] {
			t.Errorf("no %s document over the socket", typ)
		}
	}
	// data is exactly the SSE data: the same response as stored.
	resp, b := s.oaGet(t, "/v1/chat/"+got.ID)
	var stored documents.ChatResponse
	if err := json.Unmarshal(b, &stored); err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /v1/chat/%s: %d %s", got.ID, resp.StatusCode, b)
	}
	if len(stored.Documents) != len(got.Documents) {
		t.Fatalf("stored %d documents, socket %d", len(stored.Documents), len(got.Documents))
	}
	for i := range stored.Documents {
		a, b := stored.Documents[i], got.Documents[i]
		if a.Type != b.Type || str(a.Content) != str(b.Content) || string(a.Metadata) != string(b.Metadata) {
			t.Errorf("document %d: stored %s %q, socket %s %q", i, a.Type, oaClip(str(a.Content)), b.Type, oaClip(str(b.Content)))
		}
	}

	// Follow-ups at once, resuming the conversation.
	conv := *got.ConversationID
	for i := range 3 {
		c.send(map[string]any{"type": "chat", "prompt": fmt.Sprintf("echo turn %d", i+2), "conversationId": conv})
		r := wsFold(t, c.turn())
		if r.Status != documents.StatusCompleted || r.ConversationID == nil || *r.ConversationID != conv || r.ID == got.ID {
			t.Fatalf("turn %d: status %s conversation %v id %s", i+2, r.Status, r.ConversationID, r.ID)
		}
	}
}

func TestWSBadMessages(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c := s.dialWS(t)
	for _, tt := range []struct {
		msg  any
		code string
	}{
		{"not json", "bad_json"},
		{map[string]any{"type": "dance"}, "bad_type"},
		{map[string]any{"type": "chat", "prompt": "hi", "bogus": 1}, "unknown_field"},
		{map[string]any{"type": "chat", "prompt": "hi", "mode": "yolo"}, ""},
		{map[string]any{"type": "chat", "prompt": "hi", "model": "gpt-nope"}, ""},
	} {
		c.send(tt.msg)
		code, status := wsError(t, c.read())
		if (tt.code != "" && code != tt.code) || status != 400 {
			t.Errorf("%v: error %s %d, want %s 400", tt.msg, code, status, tt.code)
		}
	}
	// A cancel with nothing running is ignored; the socket still works.
	c.send(map[string]any{"type": "cancel"})
	c.send(map[string]any{"type": "chat", "prompt": "hello"})
	if r := wsFold(t, c.turn()); r.Status != documents.StatusCompleted {
		t.Errorf("status %s after bad messages", r.Status)
	}
	// Each refused message counts as a request refused for bad input.
	if n := s.e2eMetrics(t)[`docstream_rejected_requests_total{reason="bad_request"}`]; n != 5 {
		t.Errorf("docstream_rejected_requests_total{reason=\"bad_request\"} is %v after 5 bad messages", n)
	}
}

// TestWSCancel cancels a long run at realistic pace from the socket.
func TestWSCancel(t *testing.T) {
	t.Parallel()
	s := startServer(t, "DOCSTREAM_AGENT_ARGS_PREFIX=agent-sim,--sim-speed=1", "DOCSTREAM_AUTH_API_KEYS=k1")

	// The same auth as HTTP.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if conn, resp, err := websocket.Dial(ctx, "ws://"+s.Addr+"/v1/chat/ws", nil); err == nil {
		conn.CloseNow()
		t.Errorf("dialed without a key")
	} else if resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("dial without a key: %v, want 401", err)
	}

	c := s.dialWS(t, "Authorization", "Bearer k1")
	c.send(map[string]any{"type": "chat", "prompt": "long:400"})
	id := c.accepted()
	var msgs []wsMsg
	for {
		m := c.read()
		msgs = append(msgs, m)
		if m.Type == documents.EventContentDelta {
			break
		}
		if m.Type == documents.EventDone || m.Type == "error" {
			t.Fatalf("the run ended before any text: %s %s", m.Type, m.Data)
		}
	}
	// One turn at a time per socket.
	c.send(map[string]any{"type": "chat", "prompt": "hello"})
	c.send(map[string]any{"type": "cancel"})
	cancelled := time.Now()
	busy := false
	for {
		m := c.read()
		if m.Type == "error" {
			if code, status := wsError(t, m); code != "busy" || status != http.StatusConflict {
				t.Errorf("second chat during a turn: %s %d, want busy 409", code, status)
			}
			busy = true
			continue
		}
		msgs = append(msgs, m)
		if m.Type == documents.EventDone {
			break
		}
	}
	if !busy {
		t.Errorf("a second chat during a turn was not refused")
	}
	if d := time.Since(cancelled); d > 8*time.Second {
		t.Errorf("done came %v after the cancel", d)
	}
	r := wsFold(t, msgs)
	if r.ID != id {
		t.Errorf("the run is %s; accepted said %s", r.ID, id)
	}
	if r.Status != documents.StatusError || r.Metadata.StopReason != "cancelled" {
		t.Errorf("status %s stopReason %q, want error cancelled", r.Status, r.Metadata.StopReason)
	}
	last := r.Documents[len(r.Documents)-1]
	var em documents.ErrorMeta
	_ = json.Unmarshal(last.Metadata, &em)
	if last.Type != documents.TypeError || em.ErrorCode != "CANCELLED" {
		t.Errorf("last document %s %s, want an error CANCELLED", last.Type, last.Metadata)
	}
	if text := r.Documents[0]; text.Type != documents.TypeText || strings.TrimSpace(str(text.Content)) == "" {
		t.Errorf("the text streamed before the cancel is not kept: %+v", text)
	}
	s.waitNoAgents(t, 10*time.Second)

	// The socket takes the next turn.
	c.send(map[string]any{"type": "chat", "prompt": "echo after cancel"})
	if r := wsFold(t, c.turn()); r.Status != documents.StatusCompleted {
		t.Errorf("turn after the cancel: %s", r.Status)
	}
}

// TestWSLimitsAndKeepalive checks what the socket shares with HTTP and
// what it adds: every chat after the first is taken from the key's rate
// limit (the socket used to run any number), a request that is not a
// handshake is answered in the gateway's JSON error shape, and the server
// pings the client every heartbeat interval.
func TestWSLimitsAndKeepalive(t *testing.T) {
	t.Parallel()
	t.Run("rate limit", func(t *testing.T) {
		t.Parallel()
		s := startServer(t, "DOCSTREAM_AUTH_API_KEYS=k1", "DOCSTREAM_AUTH_RATE_PER_MINUTE=6", "DOCSTREAM_AUTH_BURST=3")
		// The handshake takes one of the 3 and covers the first chat.
		c := s.dialWS(t, "Authorization", "Bearer k1")
		for i := range 3 {
			c.send(map[string]any{"type": "chat", "prompt": "echo " + fmt.Sprint(i)})
			if r := wsFold(t, c.turn()); r.Status != documents.StatusCompleted {
				t.Fatalf("turn %d: %s", i, r.Status)
			}
		}
		c.send(map[string]any{"type": "chat", "prompt": "echo over the limit"})
		if code, status := wsError(t, c.read()); code != "rate_limited" || status != http.StatusTooManyRequests {
			t.Errorf("a chat over the rate limit: %s %d, want rate_limited 429", code, status)
		}
		resp := s.post(t, "/v1/chat", map[string]any{"prompt": "echo"}, "Authorization", "Bearer k1")
		if readAll(t, resp); resp.StatusCode != http.StatusTooManyRequests {
			t.Errorf("an HTTP request after the socket used the limit: %d, want 429", resp.StatusCode)
		}
	})
	s := startServer(t, "DOCSTREAM_AUTH_API_KEYS=k1", "DOCSTREAM_SERVER_HEARTBEAT=200ms")
	t.Run("not a handshake", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			headers []string
			status  int
			code    string
		}{
			{nil, http.StatusUpgradeRequired, "upgrade_required"},
			{[]string{"Connection", "Upgrade", "Upgrade", "websocket", "Sec-WebSocket-Version", "8", "Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="}, 400, "bad_websocket_version"},
			{[]string{"Connection", "keep-alive, Upgrade", "Upgrade", "WebSocket", "Sec-WebSocket-Version", "13"}, 400, "bad_websocket_key"},
		} {
			resp := s.e2eDo(t, http.MethodGet, "/v1/chat/ws", nil, append([]string{"Authorization", "Bearer k1"}, tc.headers...)...)
			b := readAll(t, resp)
			if resp.StatusCode != tc.status || resp.Header.Get("Content-Type") != "application/json" || !strings.Contains(string(b), `"`+tc.code+`"`) {
				t.Errorf("%v: %d %s %s, want %d %s", tc.headers, resp.StatusCode, resp.Header.Get("Content-Type"), b, tc.status, tc.code)
			}
		}
	})
	t.Run("ping", func(t *testing.T) {
		t.Parallel()
		conn, err := net.Dial("tcp", s.Addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		fmt.Fprintf(conn, "GET /v1/chat/ws HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer k1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"+
			"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		br := bufio.NewReader(conn)
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
			t.Fatalf("handshake: %v %v", resp, err)
		}
		start := time.Now()
		head := make([]byte, 2)
		if _, err := io.ReadFull(br, head); err != nil {
			t.Fatalf("no frame from an idle socket: %v", err)
		}
		if op := head[0] & 0x0f; op != 0x9 {
			t.Errorf("the first frame on an idle socket has opcode %#x, want a ping", op)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("the first ping came after %s; the heartbeat is 200ms", d)
		}
	})
}

// TestWSNoWriteTimeout: server.write_timeout 0 sets no deadline on a
// WebSocket, as on an SSE stream; the socket was closed at the first ping.
func TestWSNoWriteTimeout(t *testing.T) {
	t.Parallel()
	s := startServer(t, "DOCSTREAM_SERVER_WRITE_TIMEOUT=0s", "DOCSTREAM_SERVER_HEARTBEAT=100ms")
	c := s.dialWS(t)
	c.send(map[string]any{"type": "chat", "prompt": "fault:hang-mid"})
	c.accepted()
	for m := c.read(); m.Type != documents.EventContentDelta; m = c.read() {
	}
	// Pings are answered while a read is under way; the server sends one
	// once the last has its pong. Six of them, then the turn still ends.
	type read struct {
		typ string
		err error
	}
	reads := make(chan read, 64)
	go func() {
		for {
			_, b, err := c.conn.Read(c.ctx)
			var m wsMsg
			if err == nil {
				err = json.Unmarshal(b, &m)
			}
			reads <- read{m.Type, err}
			if err != nil {
				return
			}
		}
	}()
	for len(c.pings) > 0 {
		<-c.pings // only the pings from here on count
	}
	done := false
	for n := 0; n < 6; {
		select {
		case <-c.pings:
			n++
		case r := <-reads:
			if r.err != nil {
				t.Fatalf("the socket failed after %d pings: %v", n, r.err)
			}
			done = done || r.typ == documents.EventDone
		case <-time.After(10 * time.Second):
			t.Fatalf("no ping for 10 s after %d, with a heartbeat of 100ms", n)
		}
	}
	c.send(map[string]any{"type": "cancel"})
	for !done {
		r := <-reads
		if r.err != nil {
			t.Fatalf("the socket failed before done: %v", r.err)
		}
		done = r.typ == documents.EventDone
	}
}

// TestWSShutdownGoingAway: at shutdown an idle socket is closed with "going
// away" at once, and a socket whose turn runs gets the turn's shutdown
// error and done first (both were dropped without a close frame).
func TestWSShutdownGoingAway(t *testing.T) {
	t.Parallel()
	s := startServer(t, "DOCSTREAM_SERVER_SHUTDOWN_TIMEOUT=2s")
	idle, busy := s.dialWS(t), s.dialWS(t)
	busy.send(map[string]any{"type": "chat", "prompt": "fault:hang-mid"})
	busy.accepted()
	for m := busy.read(); m.Type != documents.EventContentDelta; m = busy.read() {
	}
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, _, err := idle.conn.Read(idle.ctx); websocket.CloseStatus(err) != websocket.StatusGoingAway {
		t.Errorf("the idle socket ended with %v, want going away", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("the idle socket was closed %s after SIGTERM", d)
	}
	sawError := false
	for {
		m := busy.read()
		if m.Type == documents.EventDocumentEnd && strings.Contains(string(m.Data), documents.CodeShutdown) {
			sawError = true
		}
		if m.Type == documents.EventDone {
			break
		}
	}
	if !sawError {
		t.Errorf("the running turn got no SHUTDOWN error")
	}
	if _, _, err := busy.conn.Read(busy.ctx); websocket.CloseStatus(err) != websocket.StatusGoingAway {
		t.Errorf("after done the socket ended with %v, want going away", err)
	}
}
