package playground

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

func get(t *testing.T, h http.Handler, method, target string, header map[string]string) *http.Response {
	t.Helper()
	req := httptest.NewRequest(method, target, nil)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Result()
}

func body(t *testing.T, res *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// assetRefs returns the /assets/ URLs the page references.
func assetRefs(t *testing.T, page string) []string {
	t.Helper()
	refs := regexp.MustCompile(`(?:src|href)="(/assets/[^"]+)"`).FindAllStringSubmatch(page, -1)
	var out []string
	for _, m := range refs {
		out = append(out, m[1])
	}
	if len(out) < 2 {
		t.Fatalf("index.html references %d assets, want a script and a stylesheet", len(out))
	}
	return out
}

func TestIndex(t *testing.T) {
	h := Handler()
	const target = "/"
	res := get(t, h, http.MethodGet, target, nil)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: status %d", target, res.StatusCode)
	}
	if ct := res.Header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
		t.Errorf("GET %s: Content-Type %q", target, ct)
	}
	if cc := res.Header.Get("Cache-Control"); cc != "no-cache" {
		t.Errorf("GET %s: Cache-Control %q, want no-cache", target, cc)
	}
	if res.Header.Get("Content-Security-Policy") == "" {
		t.Errorf("GET %s: no Content-Security-Policy", target)
	}
	page := body(t, res)
	if !strings.Contains(page, "<title>Docstream playground</title>") {
		t.Errorf("GET %s: the page is not the playground", target)
	}
}

func TestAssets(t *testing.T) {
	h := Handler()
	page := body(t, get(t, h, http.MethodGet, "/", nil))
	wantType := map[string]string{
		".js":  "text/javascript; charset=utf-8",
		".css": "text/css; charset=utf-8",
	}
	for _, ref := range assetRefs(t, page) {
		res := get(t, h, http.MethodGet, ref, nil)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: status %d", ref, res.StatusCode)
		}
		ext := ref[strings.LastIndex(ref, "."):]
		if want, ok := wantType[ext]; ok && res.Header.Get("Content-Type") != want {
			t.Errorf("GET %s: Content-Type %q, want %q", ref, res.Header.Get("Content-Type"), want)
		}
		if cc := res.Header.Get("Cache-Control"); cc != "public, max-age=31536000, immutable" {
			t.Errorf("GET %s: Cache-Control %q, want a long cache for a hashed name", ref, cc)
		}
		if res.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: no X-Content-Type-Options: nosniff", ref)
		}
		if n := len(body(t, res)); n == 0 {
			t.Errorf("GET %s: empty body", ref)
		}

		etag := res.Header.Get("ETag")
		if etag == "" {
			t.Fatalf("GET %s: no ETag", ref)
		}
		again := get(t, h, http.MethodGet, ref, map[string]string{"If-None-Match": etag})
		if again.StatusCode != http.StatusNotModified {
			t.Errorf("GET %s with If-None-Match: status %d, want 304", ref, again.StatusCode)
		}

		head := get(t, h, http.MethodHead, ref, nil)
		if head.StatusCode != http.StatusOK || body(t, head) != "" {
			t.Errorf("HEAD %s: status %d", ref, head.StatusCode)
		}
	}
}

func TestNotFound(t *testing.T) {
	h := Handler()
	for _, target := range []string{
		"/index.html", // the gateway does not route it here
		"/assets/",
		"/assets/missing.js",
		"/assets/../index.html",
		"/assets/%2e%2e/index.html",
		"/dist/index.html",
		"/favicon.ico",
		"/v1/unknown",
	} {
		res := get(t, h, http.MethodGet, target, nil)
		if res.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: status %d, want 404", target, res.StatusCode)
		}
	}
}

func TestMethodNotAllowed(t *testing.T) {
	res := get(t, Handler(), http.MethodPost, "/", nil)
	if res.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("POST /: status %d, want 405", res.StatusCode)
	}
	if allow := res.Header.Get("Allow"); allow != "GET, HEAD" {
		t.Errorf("POST /: Allow %q", allow)
	}
}
