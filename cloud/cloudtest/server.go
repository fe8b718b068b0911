// Package cloudtest is an in-memory fake of the Cursor Cloud Agents API (v0) for
// Docstream's tests.
//
// The fake serves every v0 endpoint with the API's JSON shapes, checks Basic
// auth, keeps agents in memory and moves each through a scripted run (see
// Script and DefaultScript). It counts calls per route, enforces the
// 1-per-minute and 30-per-hour limits of /v0/repositories, and can inject
// failures, rate limits and slow answers (see Fault). Request bodies are
// decoded strictly: an unknown field, or one spelt in another case, is a 400,
// so a misspelt field name in a client shows up in tests.
package cloudtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// DefaultAPIKey is the key the fake accepts unless WithAPIKey is given.
const DefaultAPIKey = "key_docstream_cloudtest"

// Route patterns, as used by Calls and Fault.Path.
const (
	RouteListAgents   = "GET /v0/agents"
	RouteLaunch       = "POST /v0/agents"
	RouteAgent        = "GET /v0/agents/{id}"
	RouteDelete       = "DELETE /v0/agents/{id}"
	RouteConversation = "GET /v0/agents/{id}/conversation"
	RouteFollowUp     = "POST /v0/agents/{id}/followup"
	RouteStop         = "POST /v0/agents/{id}/stop"
	RouteMe           = "GET /v0/me"
	RouteModels       = "GET /v0/models"
	RouteRepositories = "GET /v0/repositories"
)

const maxBody = 10 << 20

// Repository is one entry of GET /v0/repositories.
type Repository struct {
	Owner      string `json:"owner"`
	Name       string `json:"name"`
	Repository string `json:"repository"`
}

// DefaultRepositories is the fake's repository list unless WithRepositories is
// given.
var DefaultRepositories = []Repository{
	{Owner: "acme", Name: "shop", Repository: "https://github.com/acme/shop"},
	{Owner: "acme", Name: "docs", Repository: "https://github.com/acme/docs"},
	{Owner: "dev", Name: "playground", Repository: "https://github.com/dev/playground"},
}

// DefaultModels is the fake's model list unless WithModels is given.
var DefaultModels = []string{"claude-4-sonnet-thinking", "gpt-5.2", "claude-4.5-sonnet-thinking"}

// Fault changes how the fake answers the next matching requests.
type Fault struct {
	// Method and Path select requests: Path is a route pattern such as
	// "/v0/agents/{id}" or a concrete path such as "/v0/agents/bc_0001".
	Method string
	Path   string
	// Status is the status to answer with, without handling the request.
	// 0 handles the request normally (useful with Delay).
	Status int
	// RetryAfter, when positive, is sent as Retry-After in whole seconds
	// (rounded up).
	RetryAfter time.Duration
	// Header is added to the answer (for instance a Retry-After date).
	Header http.Header
	// Message is the "message" of the error body; a default one is used when
	// empty.
	Message string
	// Delay holds the answer back this long, or until the client goes away.
	// With Status 0 the request is handled first, so the agent exists even
	// when the client gives up waiting.
	Delay time.Duration
	// Times is how many matching requests the fault affects; default 1.
	Times int
}

// Server is the fake API. Its methods are safe for concurrent use.
type Server struct {
	// URL is the base URL to give a client (no /v0 suffix).
	URL string
	// APIKey is the key the fake accepts as Basic auth user name.
	APIKey string

	ts     *httptest.Server
	now    func() time.Time
	script Script
	manual bool

	mu        sync.Mutex
	agents    map[string]*agent
	seq       int
	calls     map[string]int
	faults    []*Fault
	repos     []Repository
	models    []string
	reposSent []time.Time
}

// agent is one stored agent.
type agent struct {
	seq       int
	id        string
	name      string
	status    string
	source    wireSource
	target    wireTarget
	summary   string
	createdAt time.Time
	messages  []wireMessage
	msgSeq    int
	steps     []Step
}

// Option configures a Server.
type Option func(*Server)

// WithAPIKey sets the accepted API key.
func WithAPIKey(key string) Option { return func(s *Server) { s.APIKey = key } }

// WithClock sets the fake's clock (createdAt and the repositories limits).
func WithClock(now func() time.Time) Option { return func(s *Server) { s.now = now } }

// WithScript sets the plan agents follow.
func WithScript(script Script) Option { return func(s *Server) { s.script = script } }

// WithManualAdvance stops status reads from advancing agents; call Advance.
func WithManualAdvance() Option { return func(s *Server) { s.manual = true } }

// WithRepositories sets the repository list.
func WithRepositories(repos []Repository) Option {
	return func(s *Server) { s.repos = slices.Clone(repos) }
}

// WithModels sets the model list.
func WithModels(models []string) Option {
	return func(s *Server) { s.models = slices.Clone(models) }
}

// NewServer starts a fake. Close it when done.
func NewServer(opts ...Option) *Server {
	s := &Server{
		APIKey: DefaultAPIKey,
		now:    time.Now,
		script: DefaultScript,
		agents: map[string]*agent{},
		calls:  map[string]int{},
		repos:  slices.Clone(DefaultRepositories),
		models: slices.Clone(DefaultModels),
	}
	for _, o := range opts {
		o(s)
	}
	mux := http.NewServeMux()
	s.route(mux, RouteListAgents, s.listAgents)
	s.route(mux, RouteLaunch, s.launch)
	s.route(mux, RouteAgent, s.getAgent)
	s.route(mux, RouteDelete, s.deleteAgent)
	s.route(mux, RouteConversation, s.conversation)
	s.route(mux, RouteFollowUp, s.followUp)
	s.route(mux, RouteStop, s.stop)
	s.route(mux, RouteMe, s.me)
	s.route(mux, RouteModels, s.listModels)
	s.route(mux, RouteRepositories, s.repositories)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.calls[r.Method+" "+r.URL.Path]++
		s.mu.Unlock()
		writeError(w, http.StatusNotFound, "no such endpoint")
	})
	s.ts = httptest.NewServer(mux)
	s.URL = s.ts.URL
	return s
}

// Close shuts the fake down.
func (s *Server) Close() { s.ts.Close() }

// Calls returns how many requests each route received, keyed by route pattern
// such as "POST /v0/agents" (see the Route constants). Requests that matched no
// route are keyed "METHOD /path". Refused and faulted requests count too.
func (s *Server) Calls() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.calls))
	for k, v := range s.calls {
		out[k] = v
	}
	return out
}

// ResetCalls sets every call count back to zero.
func (s *Server) ResetCalls() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.calls)
}

// Fail queues a fault. Faults apply in the order they were queued.
func (s *Server) Fail(f Fault) {
	if f.Times <= 0 {
		f.Times = 1
	}
	f.Path = strings.TrimSpace(f.Path)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, &f)
}

// FailNext makes the next request matching method and path (a route pattern or
// a concrete path) answer status, with Retry-After in seconds when retryAfter is
// positive.
func (s *Server) FailNext(method, path string, status int, retryAfter time.Duration) {
	s.Fail(Fault{Method: method, Path: path, Status: status, RetryAfter: retryAfter})
}

// Hang makes the next request matching method and path be handled normally but
// answered only after d, or never if the client gives up first.
func (s *Server) Hang(method, path string, d time.Duration) {
	s.Fail(Fault{Method: method, Path: path, Delay: d})
}

// Advance applies the next scripted step of agent id; false when the agent
// does not exist or has no step left.
func (s *Server) Advance(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.agents[id]
	if !ok || len(a.steps) == 0 {
		return false
	}
	a.advance()
	return true
}

// SetStatus sets an agent's status (for instance "EXPIRED", which no script
// reaches by default) and drops its remaining steps; false when the agent does
// not exist.
func (s *Server) SetStatus(id, status string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.agents[id]
	if !ok {
		return false
	}
	a.status = status
	a.steps = nil
	return true
}

// AgentIDs returns the ids of the stored agents, oldest first.
func (s *Server) AgentIDs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	list := s.sortedLocked()
	ids := make([]string, len(list))
	for i, a := range list {
		ids[len(list)-1-i] = a.id
	}
	return ids
}

// route registers h for pattern with call counting, faults and auth.
func (s *Server) route(mux *http.ServeMux, pattern string, h http.HandlerFunc) {
	mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.calls[pattern]++
		f := s.takeFault(pattern, r)
		s.mu.Unlock()
		if f != nil && f.Status != 0 {
			if !wait(r, f.Delay) {
				return
			}
			for k, vs := range f.Header {
				for _, v := range vs {
					w.Header().Add(k, v)
				}
			}
			if f.RetryAfter > 0 {
				w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(f.RetryAfter.Seconds()))))
			}
			writeError(w, f.Status, f.Message)
			return
		}
		if user, pass, ok := r.BasicAuth(); !ok || user != s.APIKey || pass != "" {
			writeError(w, http.StatusUnauthorized, "Invalid API key")
			return
		}
		if f != nil && f.Delay > 0 {
			rec := httptest.NewRecorder()
			h(rec, r)
			if !wait(r, f.Delay) {
				return
			}
			for k, vs := range rec.Header() {
				w.Header()[k] = vs
			}
			w.WriteHeader(rec.Code)
			_, _ = w.Write(rec.Body.Bytes())
			return
		}
		h(w, r)
	})
}

// takeFault pops the first fault matching r. s.mu is held.
func (s *Server) takeFault(pattern string, r *http.Request) *Fault {
	_, routePath, _ := strings.Cut(pattern, " ")
	for i, f := range s.faults {
		if !strings.EqualFold(f.Method, r.Method) || (f.Path != routePath && f.Path != r.URL.Path) {
			continue
		}
		f.Times--
		if f.Times <= 0 {
			s.faults = slices.Delete(s.faults, i, i+1)
		}
		c := *f
		return &c
	}
	return nil
}

// wait holds for d or until the client leaves; false when it left.
func wait(r *http.Request, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		return false
	}
}

// wireSource and the types below are the API's JSON shapes.
type wireSource struct {
	Repository string `json:"repository,omitempty"`
	Ref        string `json:"ref,omitempty"`
	PRURL      string `json:"prUrl,omitempty"`
}

type wireTarget struct {
	BranchName            string `json:"branchName"`
	URL                   string `json:"url"`
	PRURL                 string `json:"prUrl,omitempty"`
	AutoCreatePR          bool   `json:"autoCreatePr"`
	OpenAsCursorGithubApp bool   `json:"openAsCursorGithubApp"`
	SkipReviewerRequest   bool   `json:"skipReviewerRequest"`
}

type wireAgent struct {
	ID        string     `json:"id"`
	Name      string     `json:"name"`
	Status    string     `json:"status"`
	Source    wireSource `json:"source"`
	Target    wireTarget `json:"target"`
	Summary   string     `json:"summary,omitempty"`
	CreatedAt string     `json:"createdAt"`
}

type wireMessage struct {
	ID   string `json:"id"`
	Type string `json:"type"`
	Text string `json:"text"`
}

type wireImage struct {
	Data      string `json:"data"`
	Dimension struct {
		Width  int `json:"width"`
		Height int `json:"height"`
	} `json:"dimension"`
}

type wirePrompt struct {
	Text   string      `json:"text"`
	Images []wireImage `json:"images,omitempty"`
}

type launchBody struct {
	Prompt *wirePrompt `json:"prompt"`
	Source *wireSource `json:"source"`
	Target *struct {
		AutoCreatePR          bool   `json:"autoCreatePr"`
		OpenAsCursorGithubApp bool   `json:"openAsCursorGithubApp"`
		SkipReviewerRequest   bool   `json:"skipReviewerRequest"`
		BranchName            string `json:"branchName"`
		AutoBranch            *bool  `json:"autoBranch"`
	} `json:"target"`
	Model   string `json:"model"`
	Webhook *struct {
		URL    string `json:"url"`
		Secret string `json:"secret"`
	} `json:"webhook"`
}

// wire returns a's API shape.
func (a *agent) wire() wireAgent {
	return wireAgent{
		ID: a.id, Name: a.name, Status: a.status, Source: a.source, Target: a.target,
		Summary: a.summary, CreatedAt: a.createdAt.UTC().Format(time.RFC3339),
	}
}

// advance applies the next step.
func (a *agent) advance() {
	if len(a.steps) == 0 {
		return
	}
	st := a.steps[0]
	a.steps = a.steps[1:]
	if st.Grow != "" {
		last := -1
		for i := len(a.messages) - 1; i >= 0; i-- {
			if a.messages[i].Type == "assistant_message" {
				last = i
				break
			}
		}
		if last < 0 {
			a.say("")
			last = len(a.messages) - 1
		}
		a.messages[last].Text += st.Grow
	}
	if st.Say != "" {
		a.say(st.Say)
	}
	if st.Summary != "" {
		a.summary = st.Summary
	}
	if st.PRURL != "" {
		a.target.PRURL = st.PRURL
	}
	if st.Status != "" {
		a.status = st.Status
	}
}

// say appends an assistant message.
func (a *agent) say(text string) { a.add("assistant_message", text) }

// add appends a message with the next id.
func (a *agent) add(typ, text string) {
	a.msgSeq++
	a.messages = append(a.messages, wireMessage{ID: fmt.Sprintf("msg_%03d", a.msgSeq), Type: typ, Text: text})
}

// sortedLocked returns the agents newest first. s.mu is held.
func (s *Server) sortedLocked() []*agent {
	list := make([]*agent, 0, len(s.agents))
	for _, a := range s.agents {
		list = append(list, a)
	}
	slices.SortFunc(list, func(x, y *agent) int { return y.seq - x.seq })
	return list
}

// listAgents serves GET /v0/agents: newest first, cursor = id of the next page's first agent.
func (s *Server) listAgents(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit := 20
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			writeError(w, http.StatusBadRequest, "limit must be a positive number")
			return
		}
		limit = min(n, 100)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	list := s.sortedLocked()
	if pr := q.Get("prUrl"); pr != "" {
		list = slices.DeleteFunc(list, func(a *agent) bool { return a.target.PRURL != pr && a.source.PRURL != pr })
	}
	start := 0
	if cur := q.Get("cursor"); cur != "" {
		start = slices.IndexFunc(list, func(a *agent) bool { return a.id == cur })
		if start < 0 {
			writeError(w, http.StatusBadRequest, "invalid cursor")
			return
		}
	}
	end := min(start+limit, len(list))
	out := struct {
		Agents     []wireAgent `json:"agents"`
		NextCursor string      `json:"nextCursor,omitempty"`
	}{Agents: []wireAgent{}}
	for _, a := range list[start:end] {
		out.Agents = append(out.Agents, a.wire())
	}
	if end < len(list) {
		out.NextCursor = list[end].id
	}
	writeJSON(w, http.StatusOK, out)
}

// launch serves POST /v0/agents.
func (s *Server) launch(w http.ResponseWriter, r *http.Request) {
	var body launchBody
	if !decode(w, r, launchSchema, &body) {
		return
	}
	if msg := checkPrompt(body.Prompt); msg != "" {
		writeError(w, http.StatusBadRequest, msg)
		return
	}
	if body.Source == nil || (body.Source.Repository == "" && body.Source.PRURL == "") {
		writeError(w, http.StatusBadRequest, "source.repository is required unless source.prUrl is provided")
		return
	}
	if body.Webhook != nil {
		if body.Webhook.URL == "" {
			writeError(w, http.StatusBadRequest, "webhook.url is required")
			return
		}
		if body.Webhook.Secret != "" && len(body.Webhook.Secret) < 32 {
			writeError(w, http.StatusBadRequest, "webhook.secret must be at least 32 characters")
			return
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	id := fmt.Sprintf("bc_%04d", s.seq)
	src := *body.Source
	repo := src.Repository
	if src.PRURL != "" {
		if before, _, ok := strings.Cut(src.PRURL, "/pull/"); ok {
			repo = before
		}
		src.Repository = repo
	}
	a := &agent{
		seq:       s.seq,
		id:        id,
		name:      nameOf(body.Prompt.Text),
		status:    "CREATING",
		source:    src,
		createdAt: s.now(),
	}
	a.target = wireTarget{
		BranchName: fmt.Sprintf("cursor/%s-%04d", slug(body.Prompt.Text), s.seq),
		URL:        "https://cursor.com/agents?id=" + id,
	}
	if t := body.Target; t != nil {
		a.target.AutoCreatePR = t.AutoCreatePR
		a.target.OpenAsCursorGithubApp = t.OpenAsCursorGithubApp
		a.target.SkipReviewerRequest = t.SkipReviewerRequest
		if t.BranchName != "" {
			a.target.BranchName = t.BranchName
		}
	}
	a.add("user_message", body.Prompt.Text)
	a.steps = s.script(ScriptInput{AgentID: id, Prompt: body.Prompt.Text, Repository: repo, BranchName: a.target.BranchName})
	s.agents[id] = a
	writeJSON(w, http.StatusOK, a.wire())
}

// getAgent serves GET /v0/agents/{id}, applying the next step unless advance is manual.
func (s *Server) getAgent(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.agents[r.PathValue("id")]
	if !ok {
		writeError(w, http.StatusNotFound, "Agent not found")
		return
	}
	if !s.manual {
		a.advance()
	}
	writeJSON(w, http.StatusOK, a.wire())
}

// conversation serves GET /v0/agents/{id}/conversation.
func (s *Server) conversation(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.agents[r.PathValue("id")]
	if !ok {
		writeError(w, http.StatusNotFound, "Agent not found")
		return
	}
	writeJSON(w, http.StatusOK, struct {
		ID       string        `json:"id"`
		Messages []wireMessage `json:"messages"`
	}{a.id, slices.Clone(a.messages)})
}

// followUp serves POST /v0/agents/{id}/followup: a user message, RUNNING, and the follow-up steps.
func (s *Server) followUp(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Prompt *wirePrompt `json:"prompt"`
	}
	if !decode(w, r, followUpSchema, &body) {
		return
	}
	if msg := checkPrompt(body.Prompt); msg != "" {
		writeError(w, http.StatusBadRequest, msg)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.agents[r.PathValue("id")]
	if !ok {
		writeError(w, http.StatusNotFound, "Agent not found")
		return
	}
	a.add("user_message", body.Prompt.Text)
	a.status = "RUNNING"
	a.steps = append(a.steps, s.script(ScriptInput{
		AgentID: a.id, Prompt: body.Prompt.Text, FollowUp: true,
		Repository: a.source.Repository, BranchName: a.target.BranchName,
	})...)
	writeJSON(w, http.StatusOK, map[string]string{"id": a.id})
}

// stop serves POST /v0/agents/{id}/stop: CREATING or RUNNING becomes STOPPED.
func (s *Server) stop(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.agents[r.PathValue("id")]
	if !ok {
		writeError(w, http.StatusNotFound, "Agent not found")
		return
	}
	if a.status != "CREATING" && a.status != "RUNNING" {
		writeError(w, http.StatusBadRequest, "Agent is not running")
		return
	}
	a.status = "STOPPED"
	a.steps = nil
	writeJSON(w, http.StatusOK, map[string]string{"id": a.id})
}

// deleteAgent serves DELETE /v0/agents/{id}.
func (s *Server) deleteAgent(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := r.PathValue("id")
	if _, ok := s.agents[id]; !ok {
		writeError(w, http.StatusNotFound, "Agent not found")
		return
	}
	delete(s.agents, id)
	writeJSON(w, http.StatusOK, map[string]string{"id": id})
}

// me serves GET /v0/me.
func (s *Server) me(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{
		"apiKeyName": "Docstream test key",
		"createdAt":  "2024-01-15T10:30:00Z",
		"userEmail":  "developer@example.com",
	})
}

// listModels serves GET /v0/models.
func (s *Server) listModels(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	models := slices.Clone(s.models)
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string][]string{"models": models})
}

// repositories serves GET /v0/repositories within 1 request per minute and 30 per hour.
func (s *Server) repositories(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	hourAgo := now.Add(-time.Hour)
	s.reposSent = slices.DeleteFunc(s.reposSent, func(t time.Time) bool { return !t.After(hourAgo) })
	var until time.Time
	if n := len(s.reposSent); n > 0 {
		until = s.reposSent[n-1].Add(time.Minute)
		if n >= 30 {
			if t := s.reposSent[n-30].Add(time.Hour); t.After(until) {
				until = t
			}
		}
	}
	if until.After(now) {
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(until.Sub(now).Seconds()))))
		writeError(w, http.StatusTooManyRequests, "")
		return
	}
	s.reposSent = append(s.reposSent, now)
	writeJSON(w, http.StatusOK, map[string][]Repository{"repositories": slices.Clone(s.repos)})
}

// checkPrompt returns why a prompt is invalid, or "".
func checkPrompt(p *wirePrompt) string {
	switch {
	case p == nil || strings.TrimSpace(p.Text) == "":
		return "prompt.text is required"
	case len(p.Images) > 5:
		return "prompt.images allows at most 5 images"
	}
	return ""
}

// object and array describe the keys a request body may hold, spelt exactly.
type (
	object map[string]any // key → schema of its value (nil: any scalar)
	array  struct{ elem any }
)

var (
	promptSchema = object{
		"text":   nil,
		"images": array{object{"data": nil, "dimension": object{"width": nil, "height": nil}}},
	}
	launchSchema = object{
		"prompt": promptSchema,
		"source": object{"repository": nil, "ref": nil, "prUrl": nil},
		"target": object{
			"autoCreatePr": nil, "openAsCursorGithubApp": nil, "skipReviewerRequest": nil,
			"branchName": nil, "autoBranch": nil,
		},
		"model":   nil,
		"webhook": object{"url": nil, "secret": nil},
	}
	followUpSchema = object{"prompt": promptSchema}
)

// checkKeys reports the first key of v that schema does not name exactly.
func checkKeys(v, schema any, path string) string {
	switch sc := schema.(type) {
	case object:
		m, ok := v.(map[string]any)
		if !ok {
			if v == nil {
				return ""
			}
			return path + " must be an object"
		}
		for k, sub := range m {
			want, ok := sc[k]
			if !ok {
				return "unknown field " + strings.TrimPrefix(path+"."+k, ".")
			}
			if msg := checkKeys(sub, want, path+"."+k); msg != "" {
				return msg
			}
		}
	case array:
		list, ok := v.([]any)
		if !ok {
			if v == nil {
				return ""
			}
			return strings.TrimPrefix(path, ".") + " must be an array"
		}
		for i, e := range list {
			if msg := checkKeys(e, sc.elem, fmt.Sprintf("%s[%d]", path, i)); msg != "" {
				return msg
			}
		}
	}
	return ""
}

// decode reads a JSON body strictly: one value, every key spelt as the API
// names it; false after answering 400.
func decode(w http.ResponseWriter, r *http.Request, schema object, v any) bool {
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid request body: "+err.Error())
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	var generic any
	if err := dec.Decode(&generic); err != nil {
		writeError(w, http.StatusBadRequest, "invalid request body: "+err.Error())
		return false
	}
	if _, err := dec.Token(); err != io.EOF {
		writeError(w, http.StatusBadRequest, "invalid request body: trailing data")
		return false
	}
	if msg := checkKeys(generic, schema, ""); msg != "" {
		writeError(w, http.StatusBadRequest, "invalid request body: "+msg)
		return false
	}
	if err := json.Unmarshal(raw, v); err != nil {
		writeError(w, http.StatusBadRequest, "invalid request body: "+err.Error())
		return false
	}
	return true
}

// writeJSON answers status with v as JSON.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeError answers {"error": <status text>, "message": msg}.
func writeError(w http.ResponseWriter, status int, msg string) {
	if msg == "" {
		switch status {
		case http.StatusTooManyRequests:
			msg = "Rate limit exceeded. Please try again later."
		default:
			msg = http.StatusText(status)
		}
	}
	writeJSON(w, status, map[string]string{"error": http.StatusText(status), "message": msg})
}

// nameOf makes an agent name from its prompt.
func nameOf(prompt string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(prompt), "\n")
	if r := []rune(line); len(r) > 60 {
		line = string(r[:60])
	}
	return line
}

// slug makes a branch-safe word list from a prompt.
func slug(prompt string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(prompt) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
			dash = false
		} else if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
		if b.Len() >= 30 {
			break
		}
	}
	s := strings.Trim(b.String(), "-")
	if s == "" {
		s = "agent"
	}
	return s
}
