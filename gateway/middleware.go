package gateway

import (
	"cmp"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/docstream/docstream/cluster"
	"github.com/docstream/docstream/runs"
	"github.com/labstack/echo/v4"
	"golang.org/x/time/rate"
)

// authenticator checks API keys, stored as SHA-256 digests and compared in
// constant time, and applies the per-key rate limit.
type authenticator struct {
	digests [][32]byte
	perMin  float64
	burst   int

	mu        sync.Mutex
	limiters  map[string]*limiterEntry
	nextSweep time.Time // when the limiters of idle clients may be swept again
}

// Past maxLimiters clients, those idle for limiterIdle are swept, at most
// once per limiterSweepEvery; past hardLimiters, the map starts over.
const (
	maxLimiters       = 10000
	hardLimiters      = 100000
	limiterIdle       = 10 * time.Minute
	limiterSweepEvery = 10 * time.Second
)

type limiterEntry struct {
	lim  *rate.Limiter
	seen time.Time
}

func newAuthenticator(cfg AuthConfig) *authenticator {
	a := &authenticator{perMin: cfg.RatePerMinute, burst: max(cfg.Burst, 1), limiters: map[string]*limiterEntry{}}
	for _, k := range cfg.APIKeys {
		k = strings.TrimSpace(k)
		if k == "" {
			continue
		}
		if h, ok := strings.CutPrefix(k, "sha256:"); ok {
			var d [32]byte
			if b, err := hex.DecodeString(h); err == nil && len(b) == 32 {
				copy(d[:], b)
				a.digests = append(a.digests, d)
			}
			continue
		}
		a.digests = append(a.digests, sha256.Sum256([]byte(k)))
	}
	return a
}

// enabled reports whether any key is configured.
func (a *authenticator) enabled() bool { return len(a.digests) > 0 }

// check returns the key's id, the first 16 hex digits of its SHA-256, and
// whether the key is valid.
func (a *authenticator) check(key string) (string, bool) {
	d := sha256.Sum256([]byte(key))
	ok := 0
	for i := range a.digests {
		ok |= subtle.ConstantTimeCompare(d[:], a.digests[i][:])
	}
	return hex.EncodeToString(d[:8]), ok == 1
}

// allow applies the rate limit of one client identity.
func (a *authenticator) allow(id string) (bool, time.Duration) {
	if a.perMin <= 0 {
		return true, 0
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	now := time.Now()
	e := a.limiters[id]
	if e == nil {
		if len(a.limiters) > maxLimiters && !now.Before(a.nextSweep) {
			a.nextSweep = now.Add(limiterSweepEvery)
			maps.DeleteFunc(a.limiters, func(_ string, e *limiterEntry) bool { return now.Sub(e.seen) > limiterIdle })
		}
		if len(a.limiters) > hardLimiters {
			// Forgetting all limits bounds the memory.
			clear(a.limiters)
		}
		e = &limiterEntry{lim: rate.NewLimiter(rate.Limit(a.perMin/60), a.burst)}
		a.limiters[id] = e
	}
	e.seen = now
	r := e.lim.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

// requireAuth checks the API key on the protected routes and applies the
// per-client rate limit. With no keys configured any bearer token passes.
func (s *Server) requireAuth(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if s.auth.enabled() {
			kid, err := s.checkKey(c)
			if err != nil {
				return err
			}
			// Handlers, and what runs on the request's context, know the key by its id.
			c.SetRequest(c.Request().WithContext(context.WithValue(c.Request().Context(), ownerCtxKey{}, kid)))
		}
		// A request another replica forwarded, signed with the cluster's
		// secret, was taken from the limit there.
		if r := c.Request(); s.cluster != nil && s.cluster.Authentic(r) {
			c.SetRequest(r.WithContext(context.WithValue(r.Context(), hopCtxKey{}, true)))
		} else if err := s.rateLimit(s.clientOf(c), "too many requests"); err != nil {
			return err
		}
		return next(c)
	}
}

// checkKey returns the id of the API key a request presents, or why it is refused.
func (s *Server) checkKey(c echo.Context) (string, error) {
	r := c.Request()
	q := r.URL.Query()
	if q.Has("api_key") || q.Has("key") || q.Has("token") || q.Has("access_token") {
		s.metrics.Rejected.WithLabelValues("unauthorized").Inc()
		return "", &HTTPError{Status: http.StatusUnauthorized, Code: "unauthorized",
			Message: "API keys are not accepted in the query string; send Authorization: Bearer <key>"}
	}
	// The key is a bearer token, or else X-Api-Key.
	key := strings.TrimSpace(r.Header.Get("X-Api-Key"))
	if h := r.Header.Get("Authorization"); h != "" {
		key = ""
		if scheme, k, _ := strings.Cut(h, " "); scheme == "Bearer" || scheme == "bearer" {
			key = strings.TrimSpace(k)
		}
	}
	if key == "" {
		s.metrics.Rejected.WithLabelValues("unauthorized").Inc()
		c.Response().Header().Set("WWW-Authenticate", `Bearer realm="docstream"`)
		return "", &HTTPError{Status: http.StatusUnauthorized, Code: "unauthorized", Message: "missing API key: send Authorization: Bearer <key> or X-Api-Key: <key>"}
	}
	kid, ok := s.auth.check(key)
	if !ok {
		// Guessing is limited like any client: per source address.
		if he := s.rateLimit("badkey:"+c.RealIP(), "too many requests with an invalid API key"); he != nil {
			return "", he
		}
		s.metrics.Rejected.WithLabelValues("unauthorized").Inc()
		c.Response().Header().Set("WWW-Authenticate", `Bearer realm="docstream", error="invalid_token"`)
		return "", &HTTPError{Status: http.StatusUnauthorized, Code: "unauthorized", Message: "invalid API key"}
	}
	return kid, nil
}

// clientOf returns a request's identity in the rate limit: its key, or address.
func (s *Server) clientOf(c echo.Context) string {
	if kid := ownerOf(c.Request().Context()); kid != "" {
		return "key:" + kid
	}
	return "ip:" + c.RealIP()
}

// rateLimit takes one request from id's rate limit, or answers why not,
// saying what was refused.
func (s *Server) rateLimit(id, what string) *HTTPError {
	if ok, wait := s.auth.allow(id); !ok {
		s.metrics.Rejected.WithLabelValues("rate_limited").Inc()
		secs := int(wait.Seconds()) + 1
		return &HTTPError{Status: http.StatusTooManyRequests, Code: "rate_limited",
			Message: what + "; try again in " + strconv.Itoa(secs) + "s", RetryAfter: secs}
	}
	return nil
}

// allowedHeader reports whether a browser may send the header.
func allowedHeader(h string) bool {
	h = strings.ToLower(strings.TrimSpace(h))
	switch h {
	case "authorization", "content-type", "accept", "last-event-id", "x-api-key", "x-request-id",
		"x-docstream-conversation-id", "x-docstream-route-key", "openai-organization", "openai-project", "openai-beta", "cache-control", "user-agent",
		"anthropic-version", "anthropic-beta", "anthropic-dangerous-direct-browser-access":
		return true
	}
	return strings.HasPrefix(h, "x-stainless-")
}

// corsCheck answers preflights, marks responses for the configured origins
// and refuses API requests from pages of other origins, reporting whether
// it answered the request.
func (s *Server) corsCheck(c echo.Context) (answered bool, err error) {
	origins := s.cfg.Server.CORSOrigins
	origin := c.Request().Header.Get("Origin")
	allowed := ""
	if i := slices.IndexFunc(origins, func(o string) bool { return o == "*" || strings.EqualFold(o, origin) }); origin != "" && i >= 0 {
		allowed = origin
		if origins[i] == "*" {
			allowed = "*"
		}
	}
	h := c.Response().Header()
	if allowed != "" {
		h.Set("Access-Control-Allow-Origin", allowed)
		h.Add("Vary", "Origin")
		h.Set("Access-Control-Expose-Headers", "X-Docstream-Response-Id, X-Docstream-Conversation-Id, X-Request-Id, Retry-After")
	}
	if c.Request().Method == http.MethodOptions && c.Request().Header.Get("Access-Control-Request-Method") != "" {
		if allowed == "" {
			return true, c.NoContent(http.StatusNoContent)
		}
		var ok []string
		for _, hd := range strings.Split(c.Request().Header.Get("Access-Control-Request-Headers"), ",") {
			if hd = strings.TrimSpace(hd); hd != "" && allowedHeader(hd) {
				ok = append(ok, hd)
			}
		}
		h.Set("Access-Control-Allow-Methods", "GET, POST, DELETE, OPTIONS")
		if len(ok) > 0 {
			h.Set("Access-Control-Allow-Headers", strings.Join(ok, ", "))
		}
		h.Set("Access-Control-Max-Age", "600")
		return true, c.NoContent(http.StatusNoContent)
	}
	req := c.Request()
	if allowed == "" && strings.HasPrefix(req.URL.Path, "/v1/") {
		if origin != "" && !sameOrigin(req, origin) {
			return true, &HTTPError{Status: http.StatusForbidden, Code: "origin_not_allowed",
				Message: fmt.Sprintf("requests from pages of origin %q are not allowed; list it in server.cors_origins", origin)}
		}
		browser := origin != "" || req.Header.Get("Sec-Fetch-Site") != "" || req.Header.Get("Sec-Fetch-Mode") != ""
		if browser && !s.auth.enabled() && !literalHosts(req, origin) {
			// Against DNS rebinding: without keys, only pages served under
			// an address or localhost may call the API.
			return true, &HTTPError{Status: http.StatusForbidden, Code: "origin_not_allowed",
				Message: fmt.Sprintf("pages served under %q need API keys (auth.api_keys) to call the API, or their origin listed in server.cors_origins", req.Host)}
		}
	}
	return false, nil
}

// sameOrigin reports whether origin's host and port are one of the
// request's requestHosts, which a page cannot set without a preflight.
func sameOrigin(r *http.Request, origin string) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return false
	}
	want := withPort(u.Host, u.Scheme)
	return slices.ContainsFunc(requestHosts(r), func(h string) bool { return strings.EqualFold(withPort(h, u.Scheme), want) })
}

// requestHosts returns the names the request was sent to: its Host and
// those a proxy in front gives (X-Forwarded-Host, Forwarded host=), and
// each of them with X-Forwarded-Port when it names no port.
func requestHosts(r *http.Request) []string {
	hosts := []string{r.Host}
	if h := firstValue(r.Header.Get("X-Forwarded-Host")); h != "" {
		hosts = append(hosts, h)
	}
	for _, kv := range strings.Split(firstValue(r.Header.Get("Forwarded")), ";") {
		if k, v, ok := strings.Cut(strings.TrimSpace(kv), "="); ok && strings.EqualFold(k, "host") && v != "" {
			hosts = append(hosts, strings.Trim(v, `"`))
		}
	}
	if port := firstValue(r.Header.Get("X-Forwarded-Port")); port != "" {
		for _, h := range hosts {
			if _, _, err := net.SplitHostPort(h); err != nil {
				hosts = append(hosts, net.JoinHostPort(strings.Trim(h, "[]"), port))
			}
		}
	}
	return hosts
}

// firstValue returns the first of a header's comma-separated values.
func firstValue(v string) string {
	v, _, _ = strings.Cut(v, ",")
	return strings.TrimSpace(v)
}

// literalHosts reports whether every name the request was sent to
// (requestHosts) and the origin of its page is an address or localhost.
func literalHosts(r *http.Request, origin string) bool {
	for _, h := range requestHosts(r) {
		if !literalHost("http://" + h) {
			return false
		}
	}
	return origin == "" || literalHost(origin)
}

// literalHost reports whether origin's host is an IP address or localhost,
// names that no other site's DNS can make point here.
func literalHost(origin string) bool {
	u, err := url.Parse(origin)
	if err != nil {
		return false
	}
	h := u.Hostname()
	return net.ParseIP(h) != nil || strings.EqualFold(h, "localhost")
}

// withPort returns host with the scheme's default port when it has none.
func withPort(host, scheme string) string {
	if _, _, err := net.SplitHostPort(host); err == nil {
		return host
	}
	port := "80"
	if scheme == "https" {
		port = "443"
	}
	return net.JoinHostPort(strings.Trim(host, "[]"), port)
}

// trackedBody is a request body that knows whether it was read to its end.
type trackedBody struct {
	io.ReadCloser
	done bool
}

func (b *trackedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.done = true
	}
	return n, err
}

// methodLabel is a request method as a metrics label: the methods the
// routes know, and "other", so that made-up methods make no new series.
func methodLabel(m string) string {
	if slices.Contains(routeMethods, m) {
		return m
	}
	return "other"
}

// front is the middleware of every route: the request's id, the body's
// deadline, CORS, a panic as a 500, metrics and the log line (no body or key).
func (s *Server) front(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start, req, h := time.Now(), c.Request(), c.Response().Header()
		// The request's id is the client's X-Request-Id when it is a fit one.
		rid := req.Header.Get("X-Request-Id")
		if rid == "" || len(rid) > 128 || !idPattern.MatchString(rid) {
			rid = runs.NewRequestID()
		}
		h.Set("X-Request-Id", rid)
		if s.cluster != nil {
			h.Set(cluster.ReplicaHeader, s.cluster.ID)
		}
		err := s.guard(c, next)
		if err != nil {
			c.Error(err)
		}
		route, status, d := cmp.Or(c.Path(), "unmatched"), c.Response().Status, time.Since(start)
		method := methodLabel(req.Method)
		s.metrics.Requests.WithLabelValues(route, method, strconv.Itoa(status)).Inc()
		s.metrics.RequestDuration.WithLabelValues(route, method).Observe(d.Seconds())
		ev := s.log.Info()
		switch {
		case status == http.StatusServiceUnavailable && err != nil && asHTTPError(err).Code == "overloaded":
			ev = s.log.Warn() // load shed on purpose
		case status >= 500:
			ev = s.log.Error()
		}
		ev = ev.Str("request_id", rid).Str("method", req.Method).Str("route", route).Int("status", status).
			Dur("duration", d).Int64("bytes", c.Response().Size).Str("remote_ip", c.RealIP())
		if id := h.Get("X-Docstream-Response-Id"); id != "" {
			ev = ev.Str("response_id", id)
		}
		if err != nil && status >= 400 {
			ev = ev.Str("error", asHTTPError(err).Code)
		}
		ev.Msg("request")
		return nil
	}
}

// guard runs next behind the body's deadline and the CORS policy, and
// turns its panic into a 500.
func (s *Server) guard(c echo.Context, next echo.HandlerFunc) (err error) {
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			s.log.Error().Interface("panic", p).Str("route", c.Path()).Msg("handler panicked")
			err = &HTTPError{Status: http.StatusInternalServerError, Code: "internal", Message: "internal error"}
		}
	}()
	// The body gets server.read_body_timeout to arrive; readBody lifts the
	// deadline once the body is read.
	req, wait := c.Request(), s.cfg.Server.ReadBodyTimeout
	if req.ContentLength != 0 && req.Body != nil && req.Body != http.NoBody && wait > 0 {
		_ = http.NewResponseController(c.Response().Writer).SetReadDeadline(time.Now().Add(wait))
		req.Body = &trackedBody{ReadCloser: req.Body}
	}
	if answered, err := s.corsCheck(c); answered {
		return err
	}
	return next(c)
}
