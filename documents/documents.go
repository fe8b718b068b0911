// Package documents holds the document model that Docstream serves: a
// ChatResponse made of typed documents, the stream events that build it, and
// the Builder that folds those events back into a ChatResponse.
//
// The package holds types and pure functions only; it does no I/O.
package documents

import (
	"fmt"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// Type names one of the ten document types.
type Type string

// The ten document types of the document model.
const (
	TypeText            Type = "text"
	TypeCodeReference   Type = "code_reference"
	TypeCodeBlock       Type = "code_block"
	TypeFileEdit        Type = "file_edit"
	TypeToolCall        Type = "tool_call"
	TypeTerminalCommand Type = "terminal_command"
	TypePlan            Type = "plan"
	TypeClarification   Type = "clarification"
	TypeError           Type = "error"
	TypeTodoUpdate      Type = "todo_update"
)

// Types lists every document type in the order of the specification.
var Types = []Type{
	TypeText, TypeCodeReference, TypeCodeBlock, TypeFileEdit, TypeToolCall,
	TypeTerminalCommand, TypePlan, TypeClarification, TypeError, TypeTodoUpdate,
}

// IsText reports whether documents of type t stream their content as
// content_delta events (text, code_block, code_reference, error).
func (t Type) IsText() bool {
	switch t {
	case TypeText, TypeCodeBlock, TypeCodeReference, TypeError:
		return true
	}
	return false
}

// Status is the state of a ChatResponse: completed, streaming or error.
type Status string

// The response statuses of the specification.
const (
	StatusCompleted Status = "completed"
	StatusStreaming Status = "streaming"
	StatusError     Status = "error"
)

// StopReason says why a response ended with status error.
type StopReason string

// The stop reasons recorded in metadata.stopReason.
const (
	StopCancelled   StopReason = "cancelled"
	StopInterrupted StopReason = "interrupted"
	StopShutdown    StopReason = "shutdown"
	StopTimeout     StopReason = "timeout"
	StopAgentExit   StopReason = "agent_exit"
	StopAgentError  StopReason = "agent_error"
)

// Error codes carried by error documents in metadata.errorCode.
const (
	CodeAgentExited   = "AGENT_EXITED"
	CodeAgentError    = "AGENT_ERROR"
	CodeNoResult      = "NO_RESULT"
	CodeLineTooLong   = "LINE_TOO_LONG"
	CodeSpawnFailed   = "SPAWN_FAILED"
	CodeTimeout       = "TIMEOUT"
	CodeCancelled     = "CANCELLED"
	CodeInterrupted   = "INTERRUPTED"
	CodeShutdown      = "SHUTDOWN"
	CodeCloudAPIError = "CLOUD_API_ERROR"
	CodeToolFailed    = "TOOL_FAILED"
)

// ChatResponse is the whole answer to one chat request.
type ChatResponse struct {
	ID             string           `json:"id"`
	ConversationID *string          `json:"conversationId"`
	Model          string           `json:"model"`
	Mode           string           `json:"mode"`
	Created        string           `json:"created"`
	Status         Status           `json:"status"`
	Documents      []Document       `json:"documents"`
	Usage          Usage            `json:"usage"`
	Metadata       ResponseMetadata `json:"metadata"`
}

// Document is one typed part of a response.
type Document struct {
	ID       string         `json:"id"`
	Type     Type           `json:"type"`
	Sequence int            `json:"sequence"`
	Content  *string        `json:"content"`
	Metadata jsontext.Value `json:"metadata"`
}

// Usage is the token usage of a response. Counts are the agent's own; they
// are never estimated. Reported is false when the agent reported none.
type Usage struct {
	PromptTokens     int64 `json:"promptTokens"`
	CompletionTokens int64 `json:"completionTokens"`
	TotalTokens      int64 `json:"totalTokens"`
	CacheReadTokens  int64 `json:"cacheReadTokens,omitzero"`
	CacheWriteTokens int64 `json:"cacheWriteTokens,omitzero"`
	Reported         bool  `json:"reported"`
}

// ResponseMetadata is the metadata of a whole response.
type ResponseMetadata struct {
	DurationMs    int64      `json:"duration_ms"`
	ToolCallCount int        `json:"toolCallCount"`
	TurnCount     int        `json:"turnCount"`
	StopReason    StopReason `json:"stopReason,omitzero"`
	Agent         *AgentInfo `json:"agent,omitzero"`
	Cloud         *CloudInfo `json:"cloud,omitzero"`
	SkippedLines  int        `json:"skippedLines,omitzero"`
}

// AgentInfo describes the cursor-agent session behind a response.
type AgentInfo struct {
	SessionID      string `json:"sessionId,omitzero"`
	Cwd            string `json:"cwd,omitzero"`
	Model          string `json:"model,omitzero"`
	PermissionMode string `json:"permissionMode,omitzero"`
	RequestID      string `json:"requestId,omitzero"`
	DurationAPIMs  int64  `json:"duration_api_ms,omitzero"`
}

// CloudInfo describes the cloud agent behind a response.
type CloudInfo struct {
	AgentID    string `json:"agentId,omitzero"`
	Status     string `json:"status,omitzero"`
	Summary    string `json:"summary,omitzero"`
	BranchName string `json:"branchName,omitzero"`
	PRURL      string `json:"prUrl,omitzero"`
	URL        string `json:"url,omitzero"`
	Repository string `json:"repository,omitzero"`
}

// TextMeta is the metadata of a text document.
type TextMeta struct {
	Format string `json:"format"`
}

// CodeReferenceMeta is the metadata of a code_reference document.
type CodeReferenceMeta struct {
	FilePath  string `json:"filePath"`
	StartLine int    `json:"startLine"`
	EndLine   int    `json:"endLine"`
	Language  string `json:"language"`
}

// CodeBlockMeta is the metadata of a code_block document.
type CodeBlockMeta struct {
	Language string `json:"language"`
	Purpose  string `json:"purpose"`
}

// Diff is the first changed region of an edited file.
type Diff struct {
	OldString string `json:"oldString"`
	NewString string `json:"newString"`
	StartLine int    `json:"startLine"`
	EndLine   int    `json:"endLine"`
}

// FileEditMeta is the metadata of a file_edit document.
type FileEditMeta struct {
	FilePath     string `json:"filePath"`
	Operation    string `json:"operation"`
	Language     string `json:"language"`
	Diff         *Diff  `json:"diff"`
	UnifiedDiff  string `json:"unifiedDiff,omitzero"`
	LinesAdded   *int   `json:"linesAdded,omitzero"`
	LinesRemoved *int   `json:"linesRemoved,omitzero"`
	NewPath      string `json:"newPath,omitzero"`
	ToolCallID   string `json:"toolCallId,omitzero"`
	DurationMs   int64  `json:"duration_ms,omitzero"`
	Rejected     bool   `json:"rejected,omitzero"`
	Reason       string `json:"reason,omitzero"`
	Error        string `json:"error,omitzero"`
	Approval     `json:",inline"`
}

// ToolResult is the outcome of a tool call.
type ToolResult struct {
	Status string         `json:"status"`
	Data   jsontext.Value `json:"data"`
}

// ToolCallMeta is the metadata of a tool_call document.
type ToolCallMeta struct {
	ToolName   string         `json:"toolName"`
	ToolCallID string         `json:"toolCallId"`
	Arguments  jsontext.Value `json:"arguments"`
	Result     *ToolResult    `json:"result"`
	DurationMs int64          `json:"duration_ms"`
	RawKind    string         `json:"rawKind,omitzero"`
	Rejected   bool           `json:"rejected,omitzero"`
	Reason     string         `json:"reason,omitzero"`
	Approval   `json:",inline"`
}

// TerminalCommandMeta is the metadata of a terminal_command document.
type TerminalCommandMeta struct {
	Command          string   `json:"command"`
	WorkingDirectory string   `json:"workingDirectory"`
	ExitCode         *int     `json:"exitCode"`
	Output           string   `json:"output"`
	DurationMs       int64    `json:"duration_ms"`
	Permissions      []string `json:"permissions"`
	ToolCallID       string   `json:"toolCallId,omitzero"`
	Signal           string   `json:"signal,omitzero"`
	Background       bool     `json:"isBackground,omitzero"`
	Rejected         bool     `json:"rejected,omitzero"`
	Reason           string   `json:"reason,omitzero"`
	Error            string   `json:"error,omitzero"`
	Approval         `json:",inline"`
}

// PlanTodo is one task of a plan.
type PlanTodo struct {
	ID           string   `json:"id"`
	Content      string   `json:"content"`
	Status       string   `json:"status"`
	Dependencies []string `json:"dependencies"`
}

// PlanMeta is the metadata of a plan document.
type PlanMeta struct {
	Title      string     `json:"title"`
	Overview   string     `json:"overview"`
	Todos      []PlanTodo `json:"todos"`
	Format     string     `json:"format"`
	ToolCallID string     `json:"toolCallId,omitzero"`
}

// Option is one answer a clarification offers.
type Option struct {
	ID    string `json:"id"`
	Label string `json:"label"`
}

// Question is one question of a clarification.
type Question struct {
	ID            string   `json:"id"`
	Text          string   `json:"text"`
	Options       []Option `json:"options"`
	AllowMultiple bool     `json:"allowMultiple,omitzero"`
}

// ClarificationMeta is the metadata of a clarification document.
type ClarificationMeta struct {
	Questions  []Question       `json:"questions"`
	ToolCallID string           `json:"toolCallId,omitzero"`
	Rejected   bool             `json:"rejected,omitzero"`
	Reason     string           `json:"reason,omitzero"`
	Awaiting   bool             `json:"awaiting,omitzero"`
	Answers    []QuestionAnswer `json:"answers,omitzero"`
}

// ErrorMeta is the metadata of an error document.
type ErrorMeta struct {
	ErrorCode string `json:"errorCode"`
	Source    string `json:"source"`
	Details   string `json:"details"`
}

// TodoStatus is one changed task of a todo_update.
type TodoStatus struct {
	ID      string `json:"id"`
	Status  string `json:"status"`
	Content string `json:"content,omitzero"`
}

// TodoUpdateMeta is the metadata of a todo_update document.
type TodoUpdateMeta struct {
	Todos      []TodoStatus `json:"todos"`
	Merge      bool         `json:"merge,omitzero"`
	ToolCallID string       `json:"toolCallId,omitzero"`
}

// DocID returns the id of the n-th document of a response: doc_001, doc_002, ….
func DocID(n int) string { return fmt.Sprintf("doc_%03d", n) }

// The approval states of a tool-derived document (Approval.Status).
const (
	StatusAwaitingApproval = "awaiting_approval"
	StatusApproved         = "approved"
	StatusRejected         = "rejected"
)

// Approval is what a tool call that needed the agent's permission carries
// in its metadata: the state, the options offered, and the answer.
type Approval struct {
	Status  string             `json:"status,omitzero"`
	Options []PermissionOption `json:"options,omitzero"`
	Answer  *PermissionAnswer  `json:"answer,omitzero"`
}

// PermissionOption is one answer the agent offers to a permission request.
type PermissionOption struct {
	OptionID string `json:"optionId"`
	Name     string `json:"name"`
	Kind     string `json:"kind"` // allow_once, allow_always, reject_once, reject_always
}

// PermissionAnswer is the option chosen and who chose it: "client",
// "policy" (agent.permissions), "timeout" or "cancel".
type PermissionAnswer struct {
	OptionID string `json:"optionId,omitzero"`
	By       string `json:"by"`
}

// QuestionAnswer is the answer to one question of a clarification.
type QuestionAnswer struct {
	QuestionID string   `json:"questionId"`
	OptionIDs  []string `json:"optionIds"`
	Text       string   `json:"text,omitzero"`
	By         string   `json:"by"`
}

// EncodeResponse returns the JSON of r. Agent text that is not valid UTF-8
// does not fail it (it becomes U+FFFD); metadata that is not valid JSON does.
func EncodeResponse(r *ChatResponse) ([]byte, error) {
	return json.Marshal(r, jsontext.AllowInvalidUTF8(true))
}
