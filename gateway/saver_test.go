package gateway

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/rs/zerolog"

	"github.com/docstream/docstream/documents"
	"github.com/docstream/docstream/translate"
)

// gatedStore is a memory store whose writes wait while its gate is shut,
// as a store does that other writers keep busy.
type gatedStore struct {
	*MemoryStore
	mu         sync.Mutex
	cond       sync.Cond
	shut       bool
	waiting    int // writes waiting at the gate
	turnPuts   int
	convPuts   int
	lastStatus map[string]string
}

func newGatedStore() *gatedStore {
	s := &gatedStore{MemoryStore: NewMemoryStore(), shut: true, lastStatus: map[string]string{}}
	s.cond.L = &s.mu
	return s
}

func (s *gatedStore) pass() {
	s.mu.Lock()
	s.waiting++
	s.cond.Broadcast()
	for s.shut {
		s.cond.Wait()
	}
	s.waiting--
	s.mu.Unlock()
}

func (s *gatedStore) open() {
	s.mu.Lock()
	s.shut = false
	s.cond.Broadcast()
	s.mu.Unlock()
}

// awaitWaiting waits until a write waits at the gate.
func (s *gatedStore) awaitWaiting(t *testing.T) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		s.mu.Lock()
		for s.waiting == 0 {
			s.cond.Wait()
		}
		s.mu.Unlock()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("no store write came")
	}
}

func (s *gatedStore) PutTurn(ctx context.Context, t Turn) error {
	s.pass()
	s.mu.Lock()
	s.turnPuts++
	s.lastStatus[t.ResponseID] = t.Status
	s.mu.Unlock()
	return s.MemoryStore.PutTurn(ctx, t)
}

func (s *gatedStore) PutConversation(ctx context.Context, c Conversation) error {
	s.pass()
	s.mu.Lock()
	s.convPuts++
	s.mu.Unlock()
	return s.MemoryStore.PutConversation(ctx, c)
}

// stepBackend feeds its agent lines up to the first empty one, waits for
// its step channel, then feeds the rest.
type stepBackend struct {
	lines string
	step  chan struct{}
}

func (b stepBackend) Run(ctx context.Context, _ *RunSpec, seg *translate.Segmenter) translate.End {
	first, rest, _ := strings.Cut(b.lines, "\n\n")
	if err := translate.Pump(translate.NewDecoder(strings.NewReader(first+"\n"), 0), seg); err != nil {
		return translate.End{Reason: documents.StopAgentError, Message: err.Error()}
	}
	select {
	case <-b.step:
	case <-ctx.Done():
		return translate.End{Reason: documents.StopCancelled}
	}
	if err := translate.Pump(translate.NewDecoder(strings.NewReader(rest), 0), seg); err != nil {
		return translate.End{Reason: documents.StopAgentError, Message: err.Error()}
	}
	return translate.End{}
}

const saverLines = `{"type":"system","subtype":"init","cwd":"/w","session_id":"s-saver","model":"auto","permissionMode":"default"}
{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"Part one."}]},"session_id":"s-saver"}

{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":" Part two."}]},"session_id":"s-saver"}
{"type":"result","subtype":"success","duration_ms":5,"is_error":false,"result":"Part one. Part two.","session_id":"s-saver"}
`

// logged returns the names of the events in r's log.
func logged(r *Run) []string {
	frames, _, _ := r.Log.Read(0)
	var names []string
	for _, f := range frames {
		names = append(names, f.Name)
	}
	return names
}

// TestSaverKeepsStoreOffTheEventPath checks that a run's events reach its
// log while the store cannot take a write, that done waits for the
// conversation row (a client may send the next turn the moment it reads
// done), and that the turn the store ends with is the final one.
func TestSaverKeepsStoreOffTheEventPath(t *testing.T) {
	store := newGatedStore()
	step := make(chan struct{})
	g := NewRegistry(RunsConfig{KeepFinished: time.Minute}, LimitsConfig{MaxConcurrentRuns: 2, QueueSize: 2},
		map[string]Backend{"cli": stepBackend{lines: saverLines, step: step}}, store, NewMetrics(), zerolog.Nop())
	defer g.Shutdown(context.Background())
	defer store.open() // a failure below leaves no write waiting
	r, err := g.Prepare(&RunSpec{ResponseID: NewResponseID(), Backend: "cli", Mode: "agent", Model: "auto", Prompt: "go"})
	if err != nil {
		t.Fatal(err)
	}
	detach := r.Attach()
	defer detach()
	r.Launch()
	store.awaitWaiting(t)

	// The store holds its first write; the run's events go on regardless.
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(strings.Join(logged(r), ","), "content_delta") {
		if time.Now().After(deadline) {
			t.Fatalf("no delta logged while the store was busy; logged %v", logged(r))
		}
		time.Sleep(time.Millisecond)
	}
	close(step)
	time.Sleep(50 * time.Millisecond)
	if names := logged(r); names[len(names)-1] == "done" {
		t.Fatalf("done went out before the store had the conversation: %v", names)
	}
	select {
	case <-r.Done():
		t.Fatal("the run finished before its final turn was written")
	default:
	}

	store.open()
	select {
	case <-r.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the run did not finish once the store took writes")
	}
	if names := logged(r); names[len(names)-1] != "done" {
		t.Fatalf("the log does not end with done: %v", names)
	}
	if _, err := store.ConversationInfo(context.Background(), "s-saver"); err != nil {
		t.Fatalf("the conversation is not stored: %v", err)
	}
	turn, err := store.Turn(context.Background(), r.ID)
	if err != nil {
		t.Fatal(err)
	}
	var resp documents.ChatResponse
	if err := json.Unmarshal(turn.Response, &resp); err != nil {
		t.Fatal(err)
	}
	var text string
	for _, d := range resp.Documents {
		if d.Content != nil {
			text += *d.Content
		}
	}
	if turn.Status != string(documents.StatusCompleted) || resp.Status != documents.StatusCompleted ||
		!strings.Contains(text, "Part one.") || !strings.Contains(text, "Part two.") {
		t.Fatalf("stored turn: status %q, response %+v", turn.Status, resp)
	}
	store.mu.Lock()
	puts, convs := store.turnPuts, store.convPuts
	store.mu.Unlock()
	// The start's snapshot was at the gate; the conversation, its
	// snapshot and the run's later saves fold into at most two more.
	if puts > 3 || convs != 1 {
		t.Errorf("turn writes %d (want at most 3), conversation writes %d (want 1)", puts, convs)
	}
	detach()
	if !r.Released() {
		t.Error("the finished run kept its response though the store has it")
	}
}

// TestSaverShutdownWritesPending checks that the saves still pending when
// the registry shuts down are written before Shutdown returns, and that a
// save asked for after it is written at once.
func TestSaverShutdownWritesPending(t *testing.T) {
	store := newGatedStore()
	g := NewRegistry(RunsConfig{KeepFinished: time.Minute}, LimitsConfig{MaxConcurrentRuns: 2, QueueSize: 2},
		map[string]Backend{"cli": textBackend{}}, store, NewMetrics(), zerolog.Nop())
	bare := func() *Run {
		id := NewResponseID()
		return &Run{ID: id, Spec: &RunSpec{ResponseID: id, Mode: "agent", Model: "auto"}, reg: g, started: time.Now()}
	}
	var runs []*Run
	for range 3 {
		r := bare()
		runs = append(runs, r)
		g.save(r, saveTurn)
	}
	store.awaitWaiting(t)
	shut := make(chan struct{})
	go func() {
		g.Shutdown(context.Background())
		close(shut)
	}()
	select {
	case <-shut:
		t.Fatal("Shutdown returned with saves pending")
	case <-time.After(50 * time.Millisecond):
	}
	store.open()
	select {
	case <-shut:
	case <-time.After(10 * time.Second):
		t.Fatal("Shutdown did not return once the store took writes")
	}
	for _, r := range runs {
		if _, err := store.Turn(context.Background(), r.ID); err != nil {
			t.Errorf("run %s: %v", r.ID, err)
		}
	}
	late := bare()
	g.save(late, saveTurn)
	if _, err := store.Turn(context.Background(), late.ID); err != nil {
		t.Errorf("a save after shutdown was not written at once: %v", err)
	}
}
