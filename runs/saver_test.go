package runs

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docstream/docstream/metrics"
	"github.com/docstream/docstream/store"

	"github.com/go-json-experiment/json"
	"github.com/rs/zerolog"

	"github.com/docstream/docstream/documents"
	"github.com/docstream/docstream/translate"
)

// gatedStore is a memory store whose writes wait while its gate is shut,
// as a store does that other writers keep busy.
type gatedStore struct {
	*store.MemoryStore
	mu         sync.Mutex
	cond       sync.Cond
	shut       bool
	waiting    int // writes waiting at the gate
	turnPuts   int
	convPuts   int
	lastStatus map[string]string
}

func newGatedStore() *gatedStore {
	s := &gatedStore{MemoryStore: store.NewMemoryStore(), shut: true, lastStatus: map[string]string{}}
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

func (s *gatedStore) open() { s.setShut(false) }

func (s *gatedStore) setShut(shut bool) {
	s.mu.Lock()
	s.shut = shut
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
		t.Fatal("no st write came")
	}
}

func (s *gatedStore) PutTurn(ctx context.Context, t store.Turn) error {
	s.pass()
	s.mu.Lock()
	s.turnPuts++
	s.lastStatus[t.ResponseID] = t.Status
	s.mu.Unlock()
	return s.MemoryStore.PutTurn(ctx, t)
}

func (s *gatedStore) PutConversation(ctx context.Context, c store.Conversation) error {
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

func (b stepBackend) Run(ctx context.Context, _ *Spec, seg *translate.Segmenter) translate.End {
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
	frames, _, _ := since(r.Log, 0)
	var names []string
	for _, f := range frames {
		names = append(names, f.Name)
	}
	return names
}

// waitLogged waits until r's log holds an event named name.
func waitLogged(t *testing.T, r *Run, name string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !slices.Contains(logged(r), name) {
		if time.Now().After(deadline) {
			t.Fatalf("no %s logged within %s; logged %v", name, within, logged(r))
		}
		time.Sleep(time.Millisecond)
	}
}

// waitFor waits until cond holds, or fails the test saying what it waited for.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 10s for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// awaitUrgent waits until the saver holds an urgent write of r: the run's
// goroutine has handed it an event that does not go out before the store
// has taken it.
func awaitUrgent(t *testing.T, g *Registry, r *Run) {
	t.Helper()
	s := g.saver
	waitFor(t, "an urgent write of the run", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return (s.pending[r]|s.busy[r])&saveUrgent != 0
	})
}

// storedTurn reads r's turn from the store.
func storedTurn(t *testing.T, st store.Store, r *Run) (store.Turn, documents.ChatResponse, string) {
	t.Helper()
	turn, err := st.Turn(context.Background(), r.ID)
	if err != nil {
		t.Fatalf("turn %s: %v", r.ID, err)
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
	return turn, resp, text
}

// TestSaverKeepsStoreOffTheEventPath checks where a run waits for the
// store and where it does not: its first event goes out once the store has
// the turn and its conversation (a crash marks it interrupted; the next
// turn finds the conversation), its deltas go out while the store is busy,
// and done goes out once the store has the final response.
func TestSaverKeepsStoreOffTheEventPath(t *testing.T) {
	st := newGatedStore()
	step := make(chan struct{})
	g := NewRegistry(Config{KeepFinished: time.Minute}, Limits{MaxConcurrentRuns: 2, QueueSize: 2}, Deps{Backends: map[string]Backend{"cli": stepBackend{lines: saverLines, step: step}}, Store: st, Metrics: metrics.New(), Log: zerolog.Nop()})
	defer g.Shutdown(context.Background())
	defer st.open() // a failure below leaves no write waiting
	r, err := g.Prepare(&Spec{ResponseID: NewResponseID(), Backend: "cli", Mode: "agent", Model: "auto", Prompt: "go"})
	if err != nil {
		t.Fatal(err)
	}
	detach := r.Attach()
	defer detach()
	r.Launch()
	st.awaitWaiting(t)
	awaitUrgent(t, g, r) // response_start, which waits for the store
	if names := logged(r); len(names) != 0 {
		t.Fatalf("events went out before the store had the turn: %v", names)
	}
	st.open()
	waitLogged(t, r, "response_start", 10*time.Second)
	if _, err := st.ConversationInfo(context.Background(), "s-saver"); err != nil {
		t.Fatalf("response_start went out before the conversation was stored: %v", err)
	}
	if turn, _, _ := storedTurn(t, st, r); turn.Status != string(documents.StatusStreaming) {
		t.Fatalf("stored turn status %q, want streaming", turn.Status)
	}

	// The store is busy again: deltas go on, done waits for it.
	st.setShut(true)
	close(step)
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(deltaText(r), "Part two.") {
		if time.Now().After(deadline) {
			t.Fatalf("the deltas stopped while the store was busy: %q", deltaText(r))
		}
		time.Sleep(time.Millisecond)
	}
	awaitUrgent(t, g, r) // done, which waits for the store
	if slices.Contains(logged(r), "done") {
		t.Fatal("done went out before the store had the final response")
	}
	st.open()
	select {
	case <-r.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the run did not finish once the store took writes")
	}
	turn, resp, text := storedTurn(t, st, r)
	if turn.Status != string(documents.StatusCompleted) || resp.Status != documents.StatusCompleted ||
		!strings.Contains(text, "Part one.") || !strings.Contains(text, "Part two.") {
		t.Fatalf("stored turn: status %q, response %+v", turn.Status, resp)
	}
	st.mu.Lock()
	puts, convs := st.turnPuts, st.convPuts
	st.mu.Unlock()
	// The start's write, the first event's (the two may fold into one),
	// then the final: the document that ended within a second of the
	// first event added no snapshot.
	if puts > 3 || convs != 1 {
		t.Errorf("turn writes %d (want at most 3), conversation writes %d (want 1)", puts, convs)
	}
	detach()
	if !r.Released() {
		t.Error("the finished run kept its response though the store has it")
	}
}

// deltaText is the text of the content deltas in r's log.
func deltaText(r *Run) string {
	frames, _, _ := since(r.Log, 0)
	var b strings.Builder
	for _, f := range frames {
		if f.Name == "content_delta" {
			b.Write(f.Data)
		}
	}
	return b.String()
}

// TestSaverStuckStore checks that a store that takes no write holds a
// run back by at most storeWait at its start and at its end, and that the
// final response is written, and the run let go of it, once the store
// takes writes again.
func TestSaverStuckStore(t *testing.T) {
	st := newGatedStore()
	g := NewRegistry(Config{KeepFinished: time.Minute}, Limits{MaxConcurrentRuns: 2, QueueSize: 2}, Deps{Backends: map[string]Backend{"cli": stepBackend{lines: saverLines, step: closedChan()}}, Store: st, Metrics: metrics.New(), Log: zerolog.Nop()})
	defer g.Shutdown(context.Background())
	defer st.open()
	began := time.Now()
	r, resp, detach := runToEnd(t, g, "go")
	took := time.Since(began)
	if resp.Status != documents.StatusCompleted {
		t.Fatalf("status %s", resp.Status)
	}
	// It waited at its start, and was not held: the store never answers.
	if took < storeWait || took > 10*storeWait {
		t.Errorf("the run took %s with the store stuck; want between %s and %s", took, storeWait, 10*storeWait)
	}
	detach()
	if r.Released() {
		t.Fatal("released before the store had the final response")
	}
	st.open()
	deadline := time.Now().Add(10 * time.Second)
	for !r.Released() {
		if time.Now().After(deadline) {
			t.Fatal("the run kept its response after the store took the final one")
		}
		time.Sleep(time.Millisecond)
	}
	if turn, _, text := storedTurn(t, st, r); turn.Status != string(documents.StatusCompleted) || !strings.Contains(text, "Part two.") {
		t.Fatalf("stored turn %q: %q", turn.Status, text)
	}
}

func closedChan() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}

// TestSaverShutdownWritesPending checks that the saves still pending when
// the registry shuts down are written before Shutdown returns, and that a
// save asked for after it is written at once.
func TestSaverShutdownWritesPending(t *testing.T) {
	st := newGatedStore()
	g := NewRegistry(Config{KeepFinished: time.Minute}, Limits{MaxConcurrentRuns: 2, QueueSize: 2}, Deps{Backends: map[string]Backend{"cli": textBackend{}}, Store: st, Metrics: metrics.New(), Log: zerolog.Nop()})
	bare := func() *Run {
		id := NewResponseID()
		return &Run{ID: id, Spec: &Spec{ResponseID: id, Mode: "agent", Model: "auto"}, reg: g, started: time.Now()}
	}
	var runs []*Run
	for range 3 {
		r := bare()
		runs = append(runs, r)
		g.save(r, saveTurn)
	}
	st.awaitWaiting(t)
	shut := make(chan struct{})
	go func() {
		g.Shutdown(context.Background())
		close(shut)
	}()
	waitFor(t, "Shutdown to close the saver", func() bool {
		g.saver.mu.Lock()
		defer g.saver.mu.Unlock()
		return g.saver.closed
	})
	select {
	case <-shut:
		t.Fatal("Shutdown returned with saves pending")
	default:
	}
	st.open()
	select {
	case <-shut:
	case <-time.After(10 * time.Second):
		t.Fatal("Shutdown did not return once the store took writes")
	}
	for _, r := range runs {
		if _, err := st.Turn(context.Background(), r.ID); err != nil {
			t.Errorf("run %s: %v", r.ID, err)
		}
	}
	late := bare()
	g.save(late, saveTurn)
	if _, err := st.Turn(context.Background(), late.ID); err != nil {
		t.Errorf("a save after shutdown was not written at once: %v", err)
	}
}

// TestSaverTakesUrgentFirst checks the order of a batch: the runs waiting
// for their first or last write, then at most saveLater snapshots, each
// run once however often it asked.
func TestSaverTakesUrgentFirst(t *testing.T) {
	s := &saver{pending: map[*Run]saveWant{}, busy: map[*Run]saveWant{}}
	var later, urgent []*Run
	for range 40 {
		r := &Run{}
		later = append(later, r)
		s.enqueue(r, saveTurn)
		s.enqueue(r, saveTurn) // asked twice, written once
	}
	for range 3 {
		r := &Run{}
		urgent = append(urgent, r)
		s.enqueue(r, saveTurn|saveConversation|saveUrgent)
	}
	s.enqueue(later[5], saveUrgent) // made urgent while it waits
	jobs := s.take(nil)
	want := append(append([]*Run{}, urgent...), later[5])
	for _, r := range later {
		if r != later[5] && len(want) < 4+saveLater {
			want = append(want, r)
		}
	}
	var got []*Run
	for _, j := range jobs {
		got = append(got, j.r)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("took %d runs in the wrong order or number (want %d)", len(got), len(want))
	}
	if jobs[0].want != saveTurn|saveConversation|saveUrgent || jobs[3].want != saveTurn|saveUrgent || jobs[4].want != saveTurn {
		t.Errorf("wants %v %v %v", jobs[0].want, jobs[3].want, jobs[4].want)
	}
	if n := len(s.take(nil)); n != saveLater {
		t.Errorf("second batch: %d runs, want %d", n, saveLater)
	}
	if n := len(s.take(nil)); n != 40-1-2*saveLater {
		t.Errorf("third batch: %d runs, want %d", n, 40-1-2*saveLater)
	}
	if n := len(s.take(nil)); n != 0 || len(s.pending) != 0 {
		t.Errorf("after all: %d taken, %d pending", n, len(s.pending))
	}
}

// TestSaverRetriesRefusedWrites checks that what the store refuses is
// written once it takes writes again: the conversation row and the final
// response of a run that ended meanwhile.
func TestSaverRetriesRefusedWrites(t *testing.T) {
	st := &brokenStore{MemoryStore: store.NewMemoryStore()}
	st.broken.Store(true)
	g := NewRegistry(Config{KeepFinished: time.Minute}, Limits{MaxConcurrentRuns: 2, QueueSize: 2}, Deps{Backends: map[string]Backend{"cli": stepBackend{lines: saverLines, step: closedChan()}}, Store: st, Metrics: metrics.New(), Log: zerolog.Nop()})
	defer g.Shutdown(context.Background())
	r, resp, detach := runToEnd(t, g, "go")
	detach()
	if resp.Status != documents.StatusCompleted {
		t.Fatalf("status %s", resp.Status)
	}
	if g.StoreError() == nil {
		t.Fatal("the refused writes were not reported")
	}
	st.broken.Store(false)
	deadline := time.Now().Add(10 * time.Second)
	for !r.Released() {
		if time.Now().After(deadline) {
			t.Fatal("the final response was not written once the store took writes again")
		}
		time.Sleep(5 * time.Millisecond)
	}
	// The conversation row may have been refused by a write that began
	// before the store recovered: it is retried after the final response.
	for {
		_, err := st.ConversationInfo(context.Background(), "s-saver")
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the conversation row was not written again: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if turn, _, text := storedTurn(t, st, r); turn.Status != string(documents.StatusCompleted) || !strings.Contains(text, "Part two.") {
		t.Fatalf("stored turn %q: %q", turn.Status, text)
	}
	if err := g.StoreError(); err != nil {
		t.Fatalf("the store still reported failing: %v", err)
	}
}
