package gateway

import (
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/docstream/docstream/gateway/playground"
)

// routes builds the echo router: every route of the gateway is here.
func (s *Server) routes() *echo.Echo {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = s.handleError
	e.IPExtractor = ipExtractor(s.cfg.Server.TrustedProxies)
	e.Use(s.front)

	// Public: health, readiness, metrics and the playground page. HEAD is
	// answered as GET where a GET only reads.
	getHead := []string{http.MethodGet, http.MethodHead}
	e.Match(getHead, "/healthz", s.handleHealth)
	e.Match(getHead, "/readyz", s.handleReady)
	e.Match(getHead, "/metrics", echo.WrapHandler(promhttp.HandlerFor(s.metrics.Registry, promhttp.HandlerOpts{})))
	page := echo.WrapHandler(playground.Handler())
	e.Match(getHead, "/", page)
	e.Match(getHead, "/assets/*", page)

	// The API, behind the API keys when any are configured.
	api := e.Group("/v1", s.requireAuth)
	api.POST("/chat", s.handleChat)
	api.GET("/chat/ws", s.handleWS)
	api.Match(getHead, "/chat/:id", s.handleGetChat)
	api.GET("/chat/:id/stream", s.handleStream)
	api.POST("/chat/:id/cancel", s.handleCancel)
	api.POST("/chat/:id/respond", s.handleRespond)
	api.Match(getHead, "/conversations", s.handleConversations)
	api.Match(getHead, "/conversations/:id", s.handleConversation)
	api.DELETE("/conversations/:id", s.handleDeleteConversation)
	api.Match(getHead, "/workspaces", s.handleWorkspaces)

	// OpenAI-compatible surface.
	api.POST("/chat/completions", s.handleCompletions)
	api.Match(getHead, "/models", s.handleModels)
	api.Match(getHead, "/models/:id", s.handleModel)
	api.POST("/responses", s.handleResponses)
	api.Match(getHead, "/responses/:id", s.handleGetResponse)
	api.DELETE("/responses/:id", s.handleDeleteResponse)
	api.POST("/responses/:id/cancel", s.handleCancelResponse)

	// Anthropic-compatible surface.
	api.POST("/messages", s.handleMessages)
	api.POST("/messages/count_tokens", s.handleCountTokens)

	// Cloud Agents pass-through management.
	cl := api.Group("/cloud")
	cl.GET("/agents", s.handleCloudList)
	cl.GET("/agents/:id", cloudCall(s, s.cloud.Agent), s.ownCloudAgent)
	cl.GET("/agents/:id/conversation", cloudCall(s, s.cloud.Conversation), s.ownCloudAgent)
	cl.POST("/agents/:id/stop", cloudCall(s, s.cloudStop), s.ownCloudAgent)
	cl.DELETE("/agents/:id", cloudCall(s, s.cloudDelete), s.ownCloudAgent)
	cl.GET("/me", cloudCall(s, s.cloudMe))
	cl.GET("/models", cloudCall(s, s.cloudModels))
	cl.GET("/repositories", cloudCall(s, s.cloudRepositories))

	// The other methods on each /v1 path are a 405 naming the ones it
	// serves; OPTIONS (but a CORS preflight) names them with a 204.
	served := map[string][]string{}
	for _, r := range e.Routes() {
		if strings.HasPrefix(r.Path, "/v1/") && slices.Contains(routeMethods, r.Method) {
			served[r.Path] = append(served[r.Path], r.Method)
		}
	}
	refuse := map[string]echo.HandlerFunc{}
	for path, methods := range served {
		slices.Sort(methods)
		refuse[path] = onlyMethods(methods...)
		others := slices.DeleteFunc(slices.Clone(routeMethods), func(m string) bool { return slices.Contains(methods, m) })
		e.Match(others, path, refuse[path], s.requireAuth)
	}
	// A method no route names reaches its group's catch-all: a 405 when its
	// path is one of the above, else a 404.
	unrouted := func(c echo.Context) error {
		path := routeOf(e, c.Request())
		if h, ok := refuse[path]; ok {
			c.SetPath(path)
			return h(c)
		}
		return echo.ErrNotFound
	}
	api.RouteNotFound("/*", unrouted)
	cl.RouteNotFound("/*", unrouted)
	return e
}

// routeOf returns the /v1 route whose path a request's path matches,
// whatever the request's method ("" or a catch-all when none does).
func routeOf(e *echo.Echo, r *http.Request) string {
	// Every /v1 path answers GET, if only with a 405: a GET finds its route.
	probe := e.NewContext(r, nil)
	e.Router().Find(http.MethodGet, echo.GetPath(r), probe)
	return probe.Path()
}

// isOpenAIRoute reports whether a request path answers errors in OpenAI's
// shape.
func isOpenAIRoute(path string) bool {
	return path == "/v1/chat/completions" || path == "/v1/models" || strings.HasPrefix(path, "/v1/models/") ||
		path == "/v1/responses" || strings.HasPrefix(path, "/v1/responses/")
}

// routeMethods are the methods routes serve or refuse with a 405 (OPTIONS,
// but a CORS preflight, with a 204).
var routeMethods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
	http.MethodDelete, http.MethodTrace, http.MethodOptions}

// onlyMethods answers 405 for a path that serves only the given methods,
// and OPTIONS with a 204 naming them.
func onlyMethods(methods ...string) echo.HandlerFunc {
	allow := strings.Join(methods, ", ")
	return func(c echo.Context) error {
		switch {
		case c.Request().Method == http.MethodOptions:
			c.Response().Header().Set("Allow", allow+", OPTIONS")
			return c.NoContent(http.StatusNoContent)
		case c.IsWebSocket():
			// A client that tries a WebSocket first takes this as "use HTTP".
			return &HTTPError{Status: http.StatusUpgradeRequired, Code: "websocket_unsupported",
				Message: fmt.Sprintf("%s is not served over a WebSocket; use %s", c.Request().URL.Path, allow)}
		}
		c.Response().Header().Set("Allow", allow)
		return &HTTPError{Status: http.StatusMethodNotAllowed, Code: "method_not_allowed",
			Message: fmt.Sprintf("%s %s is not served; use %s", c.Request().Method, c.Request().URL.Path, allow)}
	}
}

// ipExtractor takes the client IP from X-Forwarded-For only when the
// connection comes from a trusted proxy.
func ipExtractor(trusted []string) echo.IPExtractor {
	if len(trusted) == 0 {
		return echo.ExtractIPDirect()
	}
	opts := []echo.TrustOption{echo.TrustLoopback(false), echo.TrustLinkLocal(false), echo.TrustPrivateNet(false)}
	for _, t := range trusted {
		if !strings.Contains(t, "/") {
			if ip := net.ParseIP(t); ip != nil && ip.To4() != nil {
				t += "/32"
			} else {
				t += "/128"
			}
		}
		if _, n, err := net.ParseCIDR(t); err == nil {
			opts = append(opts, echo.TrustIPRange(n))
		}
	}
	return echo.ExtractIPFromXFFHeader(opts...)
}
