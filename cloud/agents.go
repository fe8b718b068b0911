package cloud

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// ListAgents returns one page of the key owner's agents (GET /v0/agents).
// Pass the page's NextCursor as opts.Cursor for the next page.
func (c *Client) ListAgents(ctx context.Context, opts ListOptions) (*AgentList, error) {
	if opts.Limit < 0 || opts.Limit > MaxListLimit {
		return nil, badRequest("list limit %d is outside 1..%d", opts.Limit, MaxListLimit)
	}
	q := url.Values{}
	if opts.Limit > 0 {
		q.Set("limit", strconv.Itoa(opts.Limit))
	}
	if opts.Cursor != "" {
		q.Set("cursor", opts.Cursor)
	}
	if opts.PRURL != "" {
		q.Set("prUrl", opts.PRURL)
	}
	return send[AgentList](ctx, c, &call{method: http.MethodGet, path: "/v0/agents", query: q, op: "list agents"})
}

// Agent returns an agent's status and results (GET /v0/agents/{id}).
func (c *Client) Agent(ctx context.Context, id string) (*Agent, error) {
	return send[Agent](ctx, c, &call{method: http.MethodGet, path: agentPath, op: "agent status", agentID: id})
}

// Conversation returns an agent's messages (GET /v0/agents/{id}/conversation).
// A deleted agent's conversation is gone (CodeNotFound).
func (c *Client) Conversation(ctx context.Context, id string) (*Conversation, error) {
	return send[Conversation](ctx, c, &call{method: http.MethodGet, path: agentPath + "/conversation", op: "conversation", agentID: id})
}

// Launch checks req and starts an agent (POST /v0/agents). It is retried only
// after a 429, since an agent may already have been started.
func (c *Client) Launch(ctx context.Context, req LaunchRequest) (*Agent, error) {
	if err := validatePrompt(req.Prompt); err != nil {
		return nil, err
	}
	if strings.TrimSpace(req.Source.Repository) == "" && strings.TrimSpace(req.Source.PRURL) == "" {
		return nil, badRequest("source.repository is required unless source.prUrl is given")
	}
	return send[Agent](ctx, c, &call{method: http.MethodPost, path: "/v0/agents", body: req, op: "launch",
		unsure: "an agent may have been started: list agents before launching again"})
}

// FollowUp sends another prompt to an agent (POST /v0/agents/{id}/followup).
func (c *Client) FollowUp(ctx context.Context, id string, prompt Prompt) error {
	if err := validatePrompt(prompt); err != nil {
		return err
	}
	r := &call{method: http.MethodPost, path: agentPath + "/followup", body: map[string]Prompt{"prompt": prompt}, op: "follow-up",
		agentID: id, unsure: "the follow-up may have been delivered: read the conversation before sending it again"}
	return c.do(ctx, r, new(struct{})) // an object naming the agent
}

// Stop pauses a running agent without deleting it (POST /v0/agents/{id}/stop).
func (c *Client) Stop(ctx context.Context, id string) error {
	return c.do(ctx, &call{method: http.MethodPost, path: agentPath + "/stop", op: "stop", agentID: id}, new(struct{}))
}

// Delete removes an agent and its conversation (DELETE /v0/agents/{id}).
func (c *Client) Delete(ctx context.Context, id string) error {
	return c.do(ctx, &call{method: http.MethodDelete, path: agentPath, op: "delete", agentID: id}, new(struct{}))
}

// Me describes the API key in use (GET /v0/me).
func (c *Client) Me(ctx context.Context) (*APIKeyInfo, error) {
	return send[APIKeyInfo](ctx, c, &call{method: http.MethodGet, path: "/v0/me", op: "API key info"})
}

// Models returns the recommended model names (GET /v0/models).
func (c *Client) Models(ctx context.Context) ([]string, error) {
	var out struct {
		Models []string `json:"models"`
	}
	if err := c.do(ctx, &call{method: http.MethodGet, path: "/v0/models", op: "list models"}, &out); err != nil {
		return nil, err
	}
	return out.Models, nil
}

// send sends r and decodes its answer into a new T.
func send[T any](ctx context.Context, c *Client, r *call) (*T, error) {
	var out T
	if err := c.do(ctx, r, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// validatePrompt checks a prompt before it is sent.
func validatePrompt(p Prompt) error {
	if strings.TrimSpace(p.Text) == "" {
		return badRequest("prompt.text is required")
	}
	if len(p.Images) > MaxImages {
		return badRequest("prompt has %d images; at most %d are allowed", len(p.Images), MaxImages)
	}
	return nil
}

// agentPath is the path of the agent a call names; the call's agentID takes
// the place of {id}.
const agentPath = "/v0/agents/{id}"

// checkAgentID refuses an empty or unprintable agent id.
func checkAgentID(id string) error {
	if id == "" {
		return badRequest("agent id is empty")
	}
	// "." and ".." would name another endpoint however they are escaped.
	if len(id) > 256 || id == "." || id == ".." || strings.ContainsFunc(id, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return badRequest("agent id is not valid")
	}
	return nil
}
