package documents

import "github.com/go-json-experiment/json/jsontext"

// EventDocumentUpdate is the SSE name of a DocumentUpdate.
const EventDocumentUpdate = "document_update"

// DocumentUpdate replaces an open document's metadata: a tool call that
// waits for the client's approval, a clarification that waits for its
// answers, and the answer when it comes.
type DocumentUpdate struct {
	DocumentID string         `json:"documentId"`
	Metadata   jsontext.Value `json:"metadata"`
}

// Name returns "document_update".
func (DocumentUpdate) Name() string { return EventDocumentUpdate }

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
