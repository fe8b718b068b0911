package cloud

import (
	"encoding/json"
	"slices"
	"time"
)

// Limits of the API's requests.
const (
	MaxImages    = 5   // images in a prompt
	MaxListLimit = 100 // the largest page of ListAgents
)

// Status is an agent's status as the API reports it, such as "RUNNING".
type Status string

// Statuses named by the API. Others may appear; Watch keeps polling on them.
const (
	StatusCreating Status = "CREATING"
	StatusRunning  Status = "RUNNING"
	StatusFinished Status = "FINISHED"
	StatusError    Status = "ERROR"
	StatusFailed   Status = "FAILED"
	StatusExpired  Status = "EXPIRED"
	StatusStopped  Status = "STOPPED"
)

// Terminal reports whether the status ends a run.
func (s Status) Terminal() bool {
	return slices.Contains([]Status{StatusFinished, StatusError, StatusFailed, StatusExpired, StatusStopped}, s)
}

// Source is where an agent starts from: a repository and ref, or a PR URL.
type Source struct {
	Repository string `json:"repository,omitempty"`
	Ref        string `json:"ref,omitempty"`
	PRURL      string `json:"prUrl,omitempty"`
}

// AgentTarget is where an agent's work goes, as reported in an Agent.
type AgentTarget struct {
	BranchName            string `json:"branchName"`
	URL                   string `json:"url"`
	PRURL                 string `json:"prUrl,omitempty"`
	AutoCreatePR          bool   `json:"autoCreatePr"`
	OpenAsCursorGithubApp bool   `json:"openAsCursorGithubApp"`
	SkipReviewerRequest   bool   `json:"skipReviewerRequest"`
}

// Agent is a cloud agent: the answer of Agent, Launch and each ListAgents item.
type Agent struct {
	ID        string      `json:"id"`
	Name      string      `json:"name"`
	Status    Status      `json:"status"`
	Source    Source      `json:"source"`
	Target    AgentTarget `json:"target"`
	Summary   string      `json:"summary,omitempty"`
	CreatedAt Time        `json:"createdAt"`
}

// Time is a time the API reports: ISO 8601 read as RFC 3339, or zero.
type Time struct{ time.Time }

// UnmarshalJSON reads a JSON string, leaving the time zero when it is not
// RFC 3339.
func (t *Time) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	t.Time, _ = time.Parse(time.RFC3339Nano, s)
	return nil
}

// AgentList is one page of ListAgents. NextCursor is empty on the last page.
type AgentList struct {
	Agents     []Agent `json:"agents"`
	NextCursor string  `json:"nextCursor,omitempty"`
}

// ListOptions selects a page of agents.
type ListOptions struct {
	Limit  int    // 1..MaxListLimit; 0 leaves the API default
	Cursor string // a previous page's NextCursor
	PRURL  string // only agents for this pull request
}

// MessageType is the type of a conversation message.
type MessageType string

// Message types named by the API.
const (
	UserMessage      MessageType = "user_message"
	AssistantMessage MessageType = "assistant_message"
)

// Message is one message of an agent's conversation.
type Message struct {
	ID   string      `json:"id"`
	Type MessageType `json:"type"`
	Text string      `json:"text"`
}

// Conversation is an agent's conversation, oldest message first.
type Conversation struct {
	ID       string    `json:"id"`
	Messages []Message `json:"messages"`
}

// Dimension is an image's size in pixels.
type Dimension struct {
	Width  int `json:"width"`
	Height int `json:"height"`
}

// Image is a prompt image: base64-encoded data and its size.
type Image struct {
	Data      string    `json:"data"`
	Dimension Dimension `json:"dimension"`
}

// Prompt is the text, and at most MaxImages images, given to an agent.
type Prompt struct {
	Text   string  `json:"text"`
	Images []Image `json:"images,omitempty"`
}

// Target says where a launched agent's work goes.
type Target struct {
	AutoCreatePR          bool   `json:"autoCreatePr,omitempty"`
	OpenAsCursorGithubApp bool   `json:"openAsCursorGithubApp,omitempty"`
	SkipReviewerRequest   bool   `json:"skipReviewerRequest,omitempty"`
	BranchName            string `json:"branchName,omitempty"`
	AutoBranch            *bool  `json:"autoBranch,omitempty"`
}

// LaunchRequest is the body of Launch; an empty Model lets the API choose.
type LaunchRequest struct {
	Prompt Prompt `json:"prompt"`
	Source Source `json:"source"`
	Target Target `json:"target,omitzero"`
	Model  string `json:"model,omitempty"`
}

// APIKeyInfo describes the API key in use (GET /v0/me).
type APIKeyInfo struct {
	APIKeyName string `json:"apiKeyName"`
	CreatedAt  Time   `json:"createdAt"`
	UserEmail  string `json:"userEmail"`
}

// Repository is a GitHub repository the API key can reach.
type Repository struct {
	Owner      string `json:"owner"`
	Name       string `json:"name"`
	Repository string `json:"repository"`
}
