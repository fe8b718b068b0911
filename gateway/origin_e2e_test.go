package gateway_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// TestCrossOriginRefused checks that, with no cors_origins configured, a
// page of another site cannot run the agent: not with a request a browser
// sends without a preflight (text/plain, a form), not over the WebSocket;
// while the gateway's own page, a proxy's forwarded host and clients that
// send no Origin go through.
func TestCrossOriginRefused(t *testing.T) {
	t.Parallel()
	s := startE2E(t)
	post := func(ctype, body string, headers ...string) *http.Response {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, s.URL+"/v1/chat", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", ctype)
		for i := 0; i+1 < len(headers); i += 2 {
			if headers[i] == "Host" {
				req.Host = headers[i+1]
				continue
			}
			req.Header.Set(headers[i], headers[i+1])
		}
		resp, err := e2eClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	for _, c := range []struct{ name, ctype, body string }{
		{"text/plain fetch", "text/plain", `{"prompt":"echo from evil"}`},
		{"form post", "application/x-www-form-urlencoded", `{"prompt":"echo from evil"}`},
		{"JSON", "application/json", `{"prompt":"echo from evil"}`},
	} {
		for _, origin := range []string{"https://evil.example", "null", "http://localhost:1"} {
			resp := post(c.ctype, c.body, "Origin", origin)
			if code, _ := e2eErrorBody(t, resp, http.StatusForbidden); code != "origin_not_allowed" {
				t.Errorf("%s from %s: code %q", c.name, origin, code)
			}
			if resp.Header.Get("Access-Control-Allow-Origin") != "" {
				t.Errorf("%s from %s: Access-Control-Allow-Origin %q", c.name, origin, resp.Header.Get("Access-Control-Allow-Origin"))
			}
		}
	}
	resp := s.e2eDo(t, http.MethodPost, "/v1/chat/completions", map[string]any{"messages": []any{userMsg("echo evil")}}, "Origin", "https://evil.example")
	checkOpenAIError(t, resp, readAll(t, resp), http.StatusForbidden, "invalid_request_error", "origin_not_allowed")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if conn, _, err := websocket.Dial(ctx, "ws://"+s.Addr+"/v1/chat/ws", &websocket.DialOptions{HTTPHeader: http.Header{"Origin": {"https://evil.example"}}}); err == nil {
		conn.CloseNow()
		t.Errorf("a WebSocket from another site's page was accepted")
	}
	if starts := s.simStarts(t); len(starts) != 0 {
		t.Fatalf("requests from another site started %d agents", len(starts))
	}
	// A page of a name made to point here (DNS rebinding) is of the same
	// origin by its Host; without keys it is refused all the same.
	rebind := strings.Replace(s.URL, "127.0.0.1", "rebind.attacker.example", 1)
	resp = post("text/plain", `{"prompt":"echo rebound"}`, "Host", strings.TrimPrefix(rebind, "http://"), "Origin", rebind)
	if code, _ := e2eErrorBody(t, resp, http.StatusForbidden); code != "origin_not_allowed" {
		t.Errorf("a rebound name: code %q", code)
	}
	if starts := s.simStarts(t); len(starts) != 0 {
		t.Fatalf("requests from another site started %d agents", len(starts))
	}
	// A browser sends a same-origin GET without an Origin; it still names
	// the rebound host, and says it is a browser's fetch. A client that
	// is no browser may reach the gateway by any name.
	host := strings.TrimPrefix(rebind, "http://")
	resp = s.e2eDo(t, http.MethodGet, "/v1/workspaces", nil, "Host", host, "Sec-Fetch-Site", "same-origin", "Sec-Fetch-Mode", "cors")
	if code, _ := e2eErrorBody(t, resp, http.StatusForbidden); code != "origin_not_allowed" {
		t.Errorf("a rebound page's GET: code %q", code)
	}
	resp = s.e2eDo(t, http.MethodGet, "/v1/workspaces", nil, "Host", host)
	if b := readAll(t, resp); resp.StatusCode != 200 {
		t.Errorf("a client by name: %d %s", resp.StatusCode, b)
	}
	// The gateway's own page, behind a proxy or not, and clients without
	// an Origin.
	for _, hd := range [][]string{
		{"Origin", s.URL},
		{"Origin", "http://127.0.0.1:9443", "X-Forwarded-Host", "127.0.0.1", "X-Forwarded-Port", "9443"},
		{"Origin", "http://localhost:9443", "Forwarded", `for=10.0.0.1;host="localhost:9443";proto=http`},
		nil,
	} {
		resp := post("application/json", `{"prompt":"echo same origin"}`, hd...)
		if b := readAll(t, resp); resp.StatusCode != 200 {
			t.Errorf("headers %q: %d %s", hd, resp.StatusCode, b)
		}
	}
	ws := s.dialWS(t, "Origin", s.URL)
	ws.conn.CloseNow()
	ws = s.dialWS(t, "Origin", "http://localhost:9443", "X-Forwarded-Host", "localhost:9443")
	ws.conn.CloseNow()

	// With API keys, a page served under a name, behind a proxy, is the
	// gateway's own.
	k := startE2E(t, "DOCSTREAM_AUTH_API_KEYS=key-1")
	for _, hd := range [][]string{
		{"Origin", "https://docstream.example", "X-Forwarded-Host", "docstream.example"},
		{"Origin", "https://docstream.example:8443", "X-Forwarded-Host", "docstream.example:8443, inner:80"},
		{"Origin", "https://docstream.example:8443", "Host", "docstream.example", "X-Forwarded-Port", "8443"},
	} {
		resp := k.e2eDo(t, http.MethodPost, "/v1/chat", map[string]any{"prompt": "echo proxied"}, append(hd, "Authorization", "Bearer key-1")...)
		if b := readAll(t, resp); resp.StatusCode != 200 {
			t.Errorf("with keys, headers %q: %d %s", hd, resp.StatusCode, b)
		}
	}
}
