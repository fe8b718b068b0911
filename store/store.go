// Package store keeps conversations, their turns (each a stored
// ChatResponse) and OpenAI history fingerprints: in SQLite, PostgreSQL or
// memory.
package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/rs/zerolog"

	"github.com/docstream/docstream/documents"
)

// ErrNotFound is returned by a Store for an unknown id.
var ErrNotFound = errors.New("not found")

// Conversation is a conversation (an agent session) and what it runs with.
type Conversation struct {
	ID        string    `json:"id"`
	SessionID string    `json:"sessionId"`
	Backend   string    `json:"backend"`
	Workspace string    `json:"workspace"`
	Model     string    `json:"model"`
	Created   time.Time `json:"created"`
	Updated   time.Time `json:"updated"`
	Owner     string    `json:"-"` // the id of the API key that started it, kept by later puts
}

// Turn is one response of a conversation.
type Turn struct {
	ResponseID     string
	ConversationID string
	Prompt         string
	Status         string
	Created        time.Time
	Response       []byte // the ChatResponse JSON
	Owner          string // the id of the API key that sent it ("" when auth was off)
}

// Store keeps conversations, responses and OpenAI history fingerprints.
type Store interface {
	PutConversation(ctx context.Context, c Conversation) error
	Conversation(ctx context.Context, id string) (Conversation, []Turn, error)
	// ConversationInfo returns a conversation without its turns.
	ConversationInfo(ctx context.Context, id string) (Conversation, error)
	PutTurn(ctx context.Context, t Turn) error
	Turn(ctx context.Context, responseID string) (Turn, error)
	// MarkInterrupted marks the turns still "streaming" as interrupted.
	MarkInterrupted(ctx context.Context) (int, error)
	// PutFingerprint records the OpenAI history a conversation stands at.
	PutFingerprint(ctx context.Context, fingerprint, conversationID string) error
	// Fingerprint returns the conversation whose latest recorded history
	// it is; a history the conversation has moved past is ErrNotFound.
	Fingerprint(ctx context.Context, fingerprint string) (string, error)
	// HistoryConversation returns the conversation an OpenAI history was
	// recorded for, whether or not it still stands there.
	HistoryConversation(ctx context.Context, fingerprint string) (string, error)
	// Prune deletes the conversations and finished conversation-less turns
	// idle since before; it returns how many turns went.
	Prune(ctx context.Context, before time.Time) (int, error)
	// Conversations returns the conversations q selects without their
	// turns, the most recently active first.
	Conversations(ctx context.Context, q ListQuery) ([]Conversation, error)
	// DeleteConversation deletes a conversation with its turns and
	// fingerprints; an unknown id is ErrNotFound.
	DeleteConversation(ctx context.Context, id string) error
	// DeleteTurn deletes one turn, its conversation staying; an unknown id
	// is ErrNotFound.
	DeleteTurn(ctx context.Context, responseID string) error
	Ping(ctx context.Context) error
	Close() error
}

// ListQuery selects a page of conversations.
type ListQuery struct {
	Owner     string  // only this key id's; "" for every owner's
	Workspace string  // only this workspace's; "" for every one's
	After     *Cursor // the page starts after this place
	Limit     int     // the most returned; 0 or less: no limit
}

// Cursor is a place in the listing order: the conversation a page ended with.
type Cursor struct {
	Updated time.Time
	ID      string
}

// byActivity orders conversations as listed: the most recently active first.
func byActivity(a, b Conversation) int {
	if c := b.Updated.Compare(a.Updated); c != 0 {
		return c
	}
	return cmp.Compare(b.ID, a.ID)
}

// clock is the time conversations are put at; tests set it.
var clock = time.Now

// Config selects the conversation store.
type Config struct {
	Driver         string        `yaml:"driver"`
	Path           string        `yaml:"path"`
	DSN            string        `yaml:"dsn"`
	MaxAge         time.Duration `yaml:"max_age"`
	MemoryMaxBytes int64         `yaml:"memory_max_bytes"`
}

// Open opens the configured store.
func Open(ctx context.Context, cfg Config) (Store, error) {
	switch cfg.Driver {
	case "memory":
		m := NewMemoryStore()
		m.maxBytes = cfg.MemoryMaxBytes
		return m, nil
	case "sqlite", "":
		return OpenSQLite(ctx, cfg.Path)
	case "postgres":
		return OpenPostgres(ctx, cfg.DSN)
	}
	return nil, fmt.Errorf("unknown store driver %q", cfg.Driver)
}

// PruneEvery deletes what is older than maxAge from the store now and then
// every hour (sooner for a short maxAge), until ctx ends.
func PruneEvery(ctx context.Context, store Store, maxAge time.Duration, log zerolog.Logger) {
	every := min(time.Hour, max(maxAge/4, time.Second))
	for {
		if n, err := store.Prune(ctx, time.Now().Add(-maxAge)); err != nil {
			log.Warn().Err(err).Msg("pruning the store")
		} else if n > 0 {
			log.Info().Int("turns", n).Dur("max_age", maxAge).Msg("pruned the store")
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
	}
}

// interruptedResponse rewrites a stored streaming response as interrupted.
func interruptedResponse(b []byte) []byte {
	var resp documents.ChatResponse
	if json.Unmarshal(b, &resp) != nil {
		return b
	}
	resp.Status = documents.StatusError
	resp.Metadata.StopReason = documents.StopInterrupted
	msg := "the gateway stopped while this run was in progress"
	meta, _ := json.Marshal(documents.ErrorMeta{ErrorCode: documents.CodeInterrupted, Source: "gateway", Details: "the run was interrupted by a restart of the gateway"})
	seq := len(resp.Documents) + 1
	resp.Documents = append(resp.Documents, documents.Document{ID: documents.DocID(seq), Type: documents.TypeError, Sequence: seq, Content: &msg, Metadata: meta})
	out, err := documents.EncodeResponse(&resp)
	if err != nil {
		return b
	}
	return out
}

// MemoryStore is a Store in memory, for --demo and tests. Past maxBytes of
// responses it forgets its oldest conversations.
type MemoryStore struct {
	mu       sync.Mutex
	convs    map[string]*Conversation
	turns    map[string]*Turn
	byConv   map[string][]string // the response ids of each conversation's turns
	fps      map[string]string
	convFP   map[string][]string // conversation → the fingerprints recorded for it
	heads    map[string]string   // conversation → its latest fingerprint
	order    []string            // response ids as first put, oldest first, some forgotten
	bytes    int64               // the size of the responses held
	maxBytes int64               // 0: no limit
}

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{convs: map[string]*Conversation{}, turns: map[string]*Turn{}, byConv: map[string][]string{}, fps: map[string]string{}, convFP: map[string][]string{}, heads: map[string]string{}}
}

// PutConversation creates or updates a conversation.
func (m *MemoryStore) PutConversation(_ context.Context, c Conversation) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := clock().UTC()
	c.Created, c.Updated = now, now
	if old, ok := m.convs[c.ID]; ok {
		c.Created, c.Owner = old.Created, old.Owner
	}
	m.convs[c.ID] = &c
	return nil
}

// ConversationInfo returns a conversation without its turns.
func (m *MemoryStore) ConversationInfo(_ context.Context, id string) (Conversation, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.convs[id]
	if !ok {
		return Conversation{}, ErrNotFound
	}
	return *c, nil
}

// Conversation returns a conversation and its turns, oldest first.
func (m *MemoryStore) Conversation(_ context.Context, id string) (Conversation, []Turn, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.convs[id]
	if !ok {
		return Conversation{}, nil, ErrNotFound
	}
	ts := make([]Turn, 0, len(m.byConv[id]))
	for _, rid := range m.byConv[id] {
		ts = append(ts, *m.turns[rid])
	}
	slices.SortStableFunc(ts, func(a, b Turn) int { return a.Created.Compare(b.Created) })
	return *c, ts, nil
}

// PutTurn creates or replaces a turn.
func (m *MemoryStore) PutTurn(_ context.Context, t Turn) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	old, ok := m.turns[t.ResponseID]
	moved := !ok || old.ConversationID != t.ConversationID
	if ok && moved {
		m.unindex(old.ConversationID, t.ResponseID)
	}
	if moved && t.ConversationID != "" {
		m.byConv[t.ConversationID] = append(m.byConv[t.ConversationID], t.ResponseID)
	}
	if ok {
		m.bytes -= int64(len(old.Response))
		*old = t
	} else {
		m.turns[t.ResponseID] = &t
		m.order = append(m.order, t.ResponseID)
	}
	m.bytes += int64(len(t.Response))
	for m.maxBytes > 0 && m.bytes > m.maxBytes {
		if !m.forgetOldest(t.ResponseID) {
			break
		}
	}
	return nil
}

// forgetOldest forgets the oldest finished turn but keep, and its conversation
// once it has no turn left, and reports whether there was one.
func (m *MemoryStore) forgetOldest(keep string) bool {
	for i, id := range m.order {
		t := m.turns[id]
		if t == nil && i == 0 {
			m.order = m.order[1:] // forgotten before
			return true
		}
		if t == nil || id == keep || t.Status == string(documents.StatusStreaming) {
			continue
		}
		if i == 0 {
			m.order = m.order[1:]
		} // else its id stays, forgotten, until it is the oldest
		conv := t.ConversationID
		m.forgetTurn(id)
		if conv != "" && len(m.byConv[conv]) == 0 {
			m.forgetConversation(conv)
		}
		return true
	}
	return false
}

// forgetTurn deletes a turn.
func (m *MemoryStore) forgetTurn(id string) {
	t := m.turns[id]
	if t == nil {
		return
	}
	m.bytes -= int64(len(t.Response))
	delete(m.turns, id)
	m.unindex(t.ConversationID, id)
}

// unindex takes turn id off conversation conv's turns.
func (m *MemoryStore) unindex(conv, id string) {
	if ids := m.byConv[conv]; conv != "" {
		if i := slices.Index(ids, id); i >= 0 {
			m.byConv[conv] = slices.Delete(ids, i, i+1)
		}
	}
}

// forgetConversation deletes a conversation, its turns and fingerprints.
func (m *MemoryStore) forgetConversation(id string) {
	for _, rid := range slices.Clone(m.byConv[id]) {
		m.forgetTurn(rid)
	}
	delete(m.byConv, id)
	delete(m.convs, id)
	delete(m.heads, id)
	for _, fp := range m.convFP[id] {
		if m.fps[fp] == id {
			delete(m.fps, fp)
		}
	}
	delete(m.convFP, id)
}

// Prune deletes what is older than before.
func (m *MemoryStore) Prune(_ context.Context, before time.Time) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := len(m.turns)
	old := func(t *Turn) bool {
		return t.Created.Before(before) && t.Status != string(documents.StatusStreaming)
	}
	for id, c := range m.convs {
		if c.Updated.Before(before) && !slices.ContainsFunc(m.byConv[id], func(rid string) bool { return !old(m.turns[rid]) }) {
			m.forgetConversation(id)
		}
	}
	for id, t := range m.turns {
		if t.ConversationID == "" && old(t) {
			m.forgetTurn(id)
		}
	}
	m.order = slices.DeleteFunc(m.order, func(id string) bool { return m.turns[id] == nil })
	return n - len(m.turns), nil
}

// Conversations returns a page of conversations, the most recently active first.
func (m *MemoryStore) Conversations(_ context.Context, q ListQuery) ([]Conversation, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := []Conversation{}
	for _, c := range m.convs {
		after := q.After == nil || byActivity(Conversation{ID: q.After.ID, Updated: q.After.Updated}, *c) < 0
		if after && (q.Owner == "" || c.Owner == q.Owner) && (q.Workspace == "" || c.Workspace == q.Workspace) {
			out = append(out, *c)
		}
	}
	slices.SortFunc(out, byActivity)
	if q.Limit > 0 && len(out) > q.Limit {
		out = out[:q.Limit]
	}
	return out, nil
}

// DeleteConversation deletes a conversation, its turns and fingerprints.
func (m *MemoryStore) DeleteConversation(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.convs[id]; !ok {
		return ErrNotFound
	}
	m.forgetConversation(id)
	return nil
}

// DeleteTurn deletes a turn.
func (m *MemoryStore) DeleteTurn(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.turns[id]; !ok {
		return ErrNotFound
	}
	m.forgetTurn(id)
	return nil
}

// Turn returns a turn by its response id.
func (m *MemoryStore) Turn(_ context.Context, id string) (Turn, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.turns[id]
	if !ok {
		return Turn{}, ErrNotFound
	}
	return *t, nil
}

// MarkInterrupted marks streaming turns as interrupted.
func (m *MemoryStore) MarkInterrupted(context.Context) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, t := range m.turns {
		if t.Status == string(documents.StatusStreaming) {
			t.Status = string(documents.StatusError)
			t.Response = interruptedResponse(t.Response)
			n++
		}
	}
	return n, nil
}

// PutFingerprint records where a conversation stands.
func (m *MemoryStore) PutFingerprint(_ context.Context, fp, conv string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fps[fp] != conv {
		m.fps[fp] = conv
		m.convFP[conv] = append(m.convFP[conv], fp)
	}
	m.heads[conv] = fp
	return nil
}

// Fingerprint returns the conversation that stands at an OpenAI history.
func (m *MemoryStore) Fingerprint(_ context.Context, fp string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.fps[fp]
	if !ok || m.heads[c] != fp {
		return "", ErrNotFound
	}
	return c, nil
}

// HistoryConversation returns the conversation a history was recorded for.
func (m *MemoryStore) HistoryConversation(_ context.Context, fp string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c, ok := m.fps[fp]; ok {
		return c, nil
	}
	return "", ErrNotFound
}

// Ping always succeeds.
func (m *MemoryStore) Ping(context.Context) error { return nil }

// Close does nothing.
func (m *MemoryStore) Close() error { return nil }
