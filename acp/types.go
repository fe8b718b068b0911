package acp

import "github.com/go-json-experiment/json/jsontext"

// ProtocolVersion is the ACP version spoken.
const ProtocolVersion = 1

// The methods used. The cursor/* ones are Cursor's extensions: its agent
// sends them to the client.
const (
	MethodInitialize        = "initialize"
	MethodAuthenticate      = "authenticate"
	MethodNewSession        = "session/new"
	MethodLoadSession       = "session/load"
	MethodSetMode           = "session/set_mode"
	MethodPrompt            = "session/prompt"
	MethodCancel            = "session/cancel"
	MethodUpdate            = "session/update"
	MethodRequestPermission = "session/request_permission"
	MethodAskQuestion       = "cursor/ask_question"
	MethodCreatePlan        = "cursor/create_plan"
	MethodUpdateTodos       = "cursor/update_todos"
)

// JSON-RPC error codes.
const (
	CodeMethodNotFound = -32601
	CodeInternal       = -32603
)

// InitializeParams opens the connection. Docstream serves neither files nor
// terminals (the capabilities stay false), so the agent uses its own tools.
type InitializeParams struct {
	ProtocolVersion    int `json:"protocolVersion"`
	ClientCapabilities struct {
		FS struct {
			ReadTextFile  bool `json:"readTextFile"`
			WriteTextFile bool `json:"writeTextFile"`
		} `json:"fs"`
		Terminal bool `json:"terminal"`
	} `json:"clientCapabilities"`
	ClientInfo Implementation `json:"clientInfo"`
}

// Implementation names a client or an agent.
type Implementation struct {
	Name    string `json:"name"`
	Version string `json:"version,omitzero"`
}

// InitializeResult is the agent's answer to initialize.
type InitializeResult struct {
	ProtocolVersion   int               `json:"protocolVersion"`
	AgentCapabilities AgentCapabilities `json:"agentCapabilities"`
	AuthMethods       []AuthMethod      `json:"authMethods"`
}

// AgentCapabilities says what the agent serves.
type AgentCapabilities struct {
	LoadSession bool `json:"loadSession"`
}

// AuthMethod is one way the agent authenticates.
type AuthMethod struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// AuthenticateParams picks an authentication method.
type AuthenticateParams struct {
	MethodID string `json:"methodId"`
}

// SessionParams opens (session/new) or loads (session/load) a session.
type SessionParams struct {
	SessionID  string `json:"sessionId,omitzero"`
	Cwd        string `json:"cwd"`
	MCPServers []any  `json:"mcpServers"`
}

// NewSessionResult is the answer to session/new.
type NewSessionResult struct {
	SessionID string `json:"sessionId"`
	Models    struct {
		CurrentModelID string `json:"currentModelId"`
	} `json:"models,omitzero"`
}

// SetModeParams switches a session's mode (agent, plan, ask).
type SetModeParams struct {
	SessionID string `json:"sessionId"`
	ModeID    string `json:"modeId"`
}

// PromptParams sends a prompt turn.
type PromptParams struct {
	SessionID string         `json:"sessionId"`
	Prompt    []ContentBlock `json:"prompt"`
}

// ContentBlock is a piece of content; Docstream reads and sends text.
type ContentBlock struct {
	Type string `json:"type"`
	Text string `json:"text,omitzero"`
}

// PromptResult ends a prompt turn.
type PromptResult struct {
	StopReason string `json:"stopReason"` // end_turn, max_tokens, max_turn_requests, refusal, cancelled
	Usage      *Usage `json:"usage,omitzero"`
}

// Usage is a turn's token usage, when the agent reports it.
type Usage struct {
	InputTokens       int64 `json:"inputTokens"`
	OutputTokens      int64 `json:"outputTokens"`
	TotalTokens       int64 `json:"totalTokens"`
	CachedReadTokens  int64 `json:"cachedReadTokens,omitzero"`
	CachedWriteTokens int64 `json:"cachedWriteTokens,omitzero"`
}

// CancelParams cancels a session's prompt turn (a notification).
type CancelParams struct {
	SessionID string `json:"sessionId"`
}

// Notification is the params of session/update.
type Notification struct {
	SessionID string `json:"sessionId"`
	Update    Update `json:"update"`
}

// Update is one session update; which fields are set depends on its kind
// (SessionUpdate): agent_message_chunk and agent_thought_chunk carry
// Content as a ContentBlock, tool_call and tool_call_update the ToolCall
// fields with Content as a list of ToolCallContent, plan the Entries.
type Update struct {
	SessionUpdate string `json:"sessionUpdate,omitzero"`
	ToolCall      `json:",inline"`
	Entries       []PlanEntry `json:"entries,omitzero"`
}

// ToolCall is a tool call or an update of one; an update's fields replace
// the call's, and the fields it leaves out keep their values.
type ToolCall struct {
	ToolCallID string         `json:"toolCallId,omitzero"`
	Title      string         `json:"title,omitzero"`
	Kind       string         `json:"kind,omitzero"`   // read, edit, delete, move, search, execute, think, fetch, other
	Status     string         `json:"status,omitzero"` // pending, in_progress, completed, failed
	Content    jsontext.Value `json:"content,omitzero"`
	Locations  []Location     `json:"locations,omitzero"`
	RawInput   jsontext.Value `json:"rawInput,omitzero"`
	RawOutput  jsontext.Value `json:"rawOutput,omitzero"`
}

// ToolCallContent is one item of a tool call's content.
type ToolCallContent struct {
	Type    string        `json:"type"` // content, diff, terminal
	Content *ContentBlock `json:"content,omitzero"`
	Path    string        `json:"path,omitzero"`
	OldText *string       `json:"oldText,omitzero"`
	NewText string        `json:"newText,omitzero"`
}

// Location is a file a tool call touches.
type Location struct {
	Path string `json:"path"`
	Line int    `json:"line,omitzero"`
}

// PlanEntry is one entry of an ACP plan.
type PlanEntry struct {
	Content  string `json:"content"`
	Priority string `json:"priority,omitzero"`
	Status   string `json:"status"`
}

// PermissionParams is the params of session/request_permission.
type PermissionParams struct {
	SessionID string             `json:"sessionId"`
	ToolCall  ToolCall           `json:"toolCall"`
	Options   []PermissionOption `json:"options"`
}

// PermissionOption is one answer offered to a permission request.
type PermissionOption struct {
	OptionID string `json:"optionId"`
	Name     string `json:"name"`
	Kind     string `json:"kind"` // allow_once, allow_always, reject_once, reject_always
}

// Reply is the result of session/request_permission and of Cursor's
// blocking requests.
type Reply struct {
	Outcome Outcome `json:"outcome"`
}

// Outcome is how a blocking request was answered: "selected" (OptionID)
// or "cancelled" for a permission; "answered" (Answers), "skipped" or
// "cancelled" for a question; "accepted", "rejected" or "cancelled" for a
// plan.
type Outcome struct {
	Outcome  string           `json:"outcome"`
	OptionID string           `json:"optionId,omitzero"`
	Answers  []QuestionAnswer `json:"answers,omitzero"`
	Reason   string           `json:"reason,omitzero"`
}

// AskQuestionParams is the params of cursor/ask_question.
type AskQuestionParams struct {
	ToolCallID string     `json:"toolCallId"`
	Title      string     `json:"title,omitzero"`
	Questions  []Question `json:"questions"`
}

// Question is one question of cursor/ask_question.
type Question struct {
	ID            string           `json:"id"`
	Prompt        string           `json:"prompt"`
	Options       []QuestionOption `json:"options"`
	AllowMultiple bool             `json:"allowMultiple"`
}

// QuestionOption is one answer a question offers.
type QuestionOption struct {
	ID    string `json:"id"`
	Label string `json:"label"`
}

// QuestionAnswer answers one question; Text is a free answer.
type QuestionAnswer struct {
	QuestionID        string   `json:"questionId"`
	SelectedOptionIDs []string `json:"selectedOptionIds"`
	Text              string   `json:"text,omitzero"`
}

// PlanParams is the params of cursor/create_plan.
type PlanParams struct {
	ToolCallID string `json:"toolCallId"`
	Name       string `json:"name,omitzero"`
	Overview   string `json:"overview,omitzero"`
	Plan       string `json:"plan"`
	Todos      []Todo `json:"todos"`
}

// TodosParams is the params of cursor/update_todos.
type TodosParams struct {
	ToolCallID string `json:"toolCallId"`
	Todos      []Todo `json:"todos"`
	Merge      bool   `json:"merge"`
}

// Todo is one task of a plan or of a todo update.
type Todo struct {
	ID           string   `json:"id"`
	Content      string   `json:"content"`
	Status       string   `json:"status"` // pending, in_progress, completed, cancelled
	Dependencies []string `json:"dependencies,omitzero"`
}
