// Package gateway is Docstream's HTTP server: the routes, the handlers, the
// middleware (auth, limits, CORS, logging, metrics) and the error shape.
package gateway

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/rs/zerolog"

	"github.com/docstream/docstream/agent"
	"github.com/docstream/docstream/cloud"
	"github.com/docstream/docstream/cluster"
	"github.com/docstream/docstream/metrics"
	"github.com/docstream/docstream/openai"
	"github.com/docstream/docstream/runs"
	"github.com/docstream/docstream/store"
)

// Config is what the HTTP server is configured with: its own sections and
// what its handlers need to know of the others'.
type Config struct {
	Server ServerConfig
	Auth   AuthConfig
	OpenAI openai.Config
	Agent  agent.Config // the workspaces requests may name
	// CloudDefault sends requests that name no backend to the cloud.
	CloudDefault bool
	// CloudRequestTimeout bounds a request's upstream calls (0: none).
	CloudRequestTimeout time.Duration
	// Demo is set by --demo: the built-in simulator is the agent.
	Demo bool
}

// Deps are what a Server is built from.
type Deps struct {
	Config   Config
	Logger   zerolog.Logger
	Registry *runs.Registry
	Store    store.Store
	Metrics  *metrics.Metrics
	Agent    *agent.Backend
	Cloud    *cloud.Client // nil when the cloud backend is not configured
	// Cluster is this replica's membership; nil without a shared store.
	Cluster *cluster.Cluster
}

// Server is the gateway's http.Handler.
type Server struct {
	cfg              Config
	log              zerolog.Logger
	store            store.Store
	metrics          *metrics.Metrics
	reg              *runs.Registry
	cli              *agent.Backend
	cloud            *cloud.Client
	workspaces       map[string]string
	defaultWorkspace string
	models           *modelCache
	auth             *authenticator
	echo             *echo.Echo
	cluster          *cluster.Cluster
	peers            *http.Client // forwards to other replicas
	// stopping is closed when the gateway starts to shut down.
	stopping chan struct{}
	stopOnce sync.Once
}

// NewServer builds the gateway from its dependencies.
func NewServer(d Deps) (*Server, error) {
	s := &Server{cfg: d.Config, log: d.Logger, store: d.Store, metrics: d.Metrics, reg: d.Registry, cli: d.Agent,
		cloud: d.Cloud, cluster: d.Cluster, stopping: make(chan struct{}),
		peers: &http.Client{Transport: &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 32}}}
	ws, def, err := resolveWorkspaces(d.Config.Agent)
	if err != nil {
		return nil, err
	}
	s.workspaces, s.defaultWorkspace = ws, def
	s.models = &modelCache{cli: s.cli, metrics: d.Metrics, demo: d.Config.Demo, aliases: d.Config.OpenAI.Aliases}
	s.auth = newAuthenticator(d.Config.Auth)
	s.echo = s.routes()
	return s, nil
}

// ServeHTTP serves a request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.echo.ServeHTTP(w, r) }

// Shutdown drains the runs (see Registry.Shutdown).
func (s *Server) Shutdown(ctx context.Context) {
	s.stopOnce.Do(func() { close(s.stopping) })
	s.reg.Shutdown(ctx)
	s.cli.WaitSweeps() // what the last agents left in sessions of their own
}

// resolveWorkspaces resolves the configured workspace directories through
// their symlinks; without any, the current directory is "default".
func resolveWorkspaces(cfg agent.Config) (map[string]string, string, error) {
	out := map[string]string{}
	ws := cfg.Workspaces
	if len(ws) == 0 {
		wd, err := os.Getwd()
		if err != nil {
			return nil, "", fmt.Errorf("finding the current directory: %w", err)
		}
		ws = map[string]string{"default": wd}
	}
	for name, dir := range ws {
		if !namePattern.MatchString(name) {
			return nil, "", fmt.Errorf("workspace name %q: use letters, digits, '.', '_' and '-'", name)
		}
		if strings.TrimSpace(dir) == "" {
			return nil, "", fmt.Errorf("workspace %s: the directory is empty", name)
		}
		abs, err := filepath.Abs(dir)
		if err != nil {
			return nil, "", fmt.Errorf("workspace %s: %w", name, err)
		}
		real, err := filepath.EvalSymlinks(abs)
		if err != nil {
			return nil, "", fmt.Errorf("workspace %s: %w", name, err)
		}
		st, err := os.Stat(real)
		if err != nil || !st.IsDir() {
			return nil, "", fmt.Errorf("workspace %s: %s is not a directory", name, real)
		}
		out[name] = real
	}
	def := cfg.DefaultWorkspace
	if names := slices.Collect(maps.Keys(out)); def == "" && len(names) == 1 {
		def = names[0]
	} else if _, ok := out["default"]; def == "" && ok {
		def = "default"
	}
	if _, ok := out[def]; def != "" && !ok {
		return nil, "", fmt.Errorf("agent.default_workspace %q is not among agent.workspaces", def)
	}
	return out, def, nil
}

// workspaceNames lists the workspace names, sorted.
func (s *Server) workspaceNames() []string {
	return slices.Sorted(maps.Keys(s.workspaces))
}

// handleHealth serves /healthz: the process is alive.
func (s *Server) handleHealth(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
}

// handleReady serves /readyz: the agent binary runs and the store answers.
func (s *Server) handleReady(c echo.Context) error {
	status, code := "ready", http.StatusOK
	agent := map[string]any{"binary": s.cli.Binary(), "simulator": s.cfg.Demo, "protocol": cmp.Or(s.cfg.Agent.Protocol, "print")}
	if err := s.cli.Ready(); err != nil {
		agent["error"] = err.Error()
		status, code = "not_ready", http.StatusServiceUnavailable
	}
	storeStatus := "ok"
	if err := s.store.Ping(c.Request().Context()); err != nil && s.cluster != nil {
		// A shared database that is away: runs go on, their writes retried.
		storeStatus = "unreachable, writes are retried: " + err.Error()
		if status == "ready" {
			status = "degraded"
		}
	} else if err != nil {
		storeStatus = err.Error()
		status, code = "not_ready", http.StatusServiceUnavailable
	} else if err := s.reg.StoreError(); err != nil {
		// Runs are served, but what they answer is not kept.
		storeStatus = "the last write failed: " + err.Error()
		if status == "ready" {
			status = "degraded"
		}
	}
	if s.reg.Closing() {
		status, code = "shutting_down", http.StatusServiceUnavailable
	}
	body := map[string]any{"status": status, "agent": agent, "store": storeStatus}
	if s.cfg.Demo {
		body["note"] = "demo mode: the agent is Docstream's built-in cursor-agent simulator"
	}
	return c.JSON(code, body)
}

// handleWorkspaces serves GET /v1/workspaces.
func (s *Server) handleWorkspaces(c echo.Context) error {
	type ws struct {
		Name    string `json:"name"`
		Default bool   `json:"default"`
	}
	out := []ws{}
	for _, n := range s.workspaceNames() {
		out = append(out, ws{Name: n, Default: n == s.defaultWorkspace})
	}
	return c.JSON(http.StatusOK, map[string]any{"workspaces": out})
}

var errNoCloud = &HTTPError{Status: http.StatusBadRequest, Code: "cloud_not_configured",
	Message: "the cloud backend is not configured: set cloud.api_key (DOCSTREAM_CLOUD_API_KEY)"}
