package gateway_test

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/docstream/docstream/documents"
)

// e2ePaced runs the simulator with delays, so that a long run lasts a few
// seconds (long:60 makes about 3000 events in 2 to 4 s at this speed; long:200 at
// speed 1 would take a minute).
const e2ePaced = "DOCSTREAM_AGENT_ARGS_PREFIX=agent-sim,--sim-speed=10"

// e2eCheckParagraphs checks that a long:<n> answer holds each paragraph once.
func e2eCheckParagraphs(t testing.TB, cr documents.ChatResponse, n int) {
	t.Helper()
	var all strings.Builder
	for _, d := range cr.Documents {
		all.WriteString(str(d.Content))
	}
	for i := 1; i <= n; i++ {
		if c := strings.Count(all.String(), fmt.Sprintf("Paragraph %d of %d.", i, n)); c != 1 {
			t.Errorf("paragraph %d appears %d times", i, c)
		}
	}
}

// TestRunsReattach drops the connection mid-run and re-attaches to
// GET /v1/chat/{id}/stream: every event arrives exactly once, in order, and
// the stream ends with done.
func TestRunsReattach(t *testing.T) {
	t.Parallel()
	s := startE2E(t, e2ePaced)
	const n = 60
	run := func(t *testing.T, query bool, cuts func(i int) int) {
		st := s.e2eOpen(t, map[string]any{"prompt": fmt.Sprintf("long:%d", n)})
		id := st.Resp.Header.Get("X-Docstream-Response-Id")
		all := st.Take(cuts(0))
		st.Close()
		if cr := s.e2eGetChat(t, id); cr.Status != documents.StatusStreaming {
			t.Fatalf("the run was not mid-way at the first drop: %s", cr.Status)
		}
		for i := 1; ; i++ {
			if i > 50 {
				t.Fatalf("no done after 50 re-attaches")
			}
			last := len(all)
			if last > 0 && all[last-1].Name == documents.EventDone {
				break
			}
			st = s.e2eReattach(t, id, last, query)
			if k := cuts(i); k > 0 {
				all = append(all, st.Take(k)...)
				st.Close()
			} else {
				all = append(all, st.Rest()...)
			}
		}
		got := fold(t, all) // ids 1..n without gap or repeat, one done, last
		if got.Status != documents.StatusCompleted {
			t.Errorf("status %s", got.Status)
		}
		e2eCheckParagraphs(t, got, n)
		if final := s.e2eGetChat(t, id); !e2eSameJSON(t, final, got) {
			t.Errorf("the re-assembled stream differs from GET /v1/chat/%s", id)
		}
	}
	t.Run("Last-Event-ID", func(t *testing.T) {
		t.Parallel()
		run(t, false, func(i int) int { return []int{40, 0}[min(i, 1)] })
	})
	t.Run("lastEventId", func(t *testing.T) {
		t.Parallel()
		run(t, true, func(i int) int { return []int{25, 0}[min(i, 1)] })
	})
	t.Run("random points", func(t *testing.T) {
		t.Parallel()
		seed := uint64(time.Now().UnixNano())
		t.Logf("seed %d", seed)
		rnd := rand.New(rand.NewPCG(seed, seed))
		run(t, rnd.IntN(2) == 0, func(i int) int {
			if i >= 6 {
				return 0
			}
			return 1 + rnd.IntN(600)
		})
	})
	t.Run("id past the last event", func(t *testing.T) {
		t.Parallel()
		resp, evs := s.chatStream(t, map[string]any{"prompt": "long:2"})
		id := resp.Header.Get("X-Docstream-Response-Id")
		last := evs[len(evs)-1].ID
		if st := s.e2eReattach(t, id, len(evs), false); len(st.Rest()) != 0 {
			t.Errorf("a re-attach after done (id %s) got events", last)
		}
		resp = s.e2eDo(t, http.MethodGet, "/v1/chat/"+id+"/stream", nil, "Last-Event-ID", fmt.Sprint(len(evs)+1))
		if b := readAll(t, resp); resp.StatusCode != 400 || !strings.Contains(string(b), `"bad_last_event_id"`) {
			t.Errorf("Last-Event-ID past the last event: %d %s, want 400 bad_last_event_id", resp.StatusCode, b)
		}
	})
	t.Run("unknown id", func(t *testing.T) {
		t.Parallel()
		resp := s.e2eDo(t, http.MethodGet, "/v1/chat/chat_000000000000000000000000/stream", nil, "Last-Event-ID", "3")
		if b := readAll(t, resp); resp.StatusCode != http.StatusNoContent || len(b) != 0 {
			t.Errorf("unknown run: status %d body %q, want 204", resp.StatusCode, b)
		}
	})
}

// TestRunsGetAndConversation checks GET /v1/chat/{id} while a run streams
// and after, and GET /v1/conversations/{id} after two turns.
func TestRunsGetAndConversation(t *testing.T) {
	t.Parallel()
	s := startE2E(t, e2ePaced)

	st := s.e2eOpen(t, map[string]any{"prompt": "long:30"})
	id := st.Resp.Header.Get("X-Docstream-Response-Id")
	evs := st.Until(documents.EventContentDelta)
	mid := s.e2eGetChat(t, id)
	if mid.Status != documents.StatusStreaming || mid.ID != id || mid.Mode != "agent" || mid.Model != "auto" || mid.Created == "" {
		t.Errorf("while running: %+v", mid)
	}
	evs = append(evs, st.Rest()...)
	got := fold(t, evs)
	if final := s.e2eGetChat(t, id); final.Status != documents.StatusCompleted || !e2eSameJSON(t, final, got) {
		t.Errorf("after the run GET differs from the stream: %s", final.Status)
	}

	first := s.chatJSON(t, map[string]any{"prompt": "echo turn one"})
	conv := *first.ConversationID
	second := s.chatJSON(t, map[string]any{"prompt": "echo turn two", "conversationId": conv})
	var ans struct {
		ID        string `json:"id"`
		Backend   string `json:"backend"`
		Workspace string `json:"workspace"`
		Model     string `json:"model"`
		Turns     []struct {
			ResponseID string                 `json:"responseId"`
			Prompt     string                 `json:"prompt"`
			Created    string                 `json:"created"`
			Status     string                 `json:"status"`
			Response   documents.ChatResponse `json:"response"`
		} `json:"turns"`
	}
	s.e2eGetJSON(t, "/v1/conversations/"+conv, 200, &ans)
	if ans.ID != conv || ans.Backend != "cli" || ans.Workspace != "main" || ans.Model != "auto" || len(ans.Turns) != 2 {
		t.Fatalf("conversation %+v", ans)
	}
	for i, want := range []documents.ChatResponse{first, second} {
		turn := ans.Turns[i]
		if turn.ResponseID != want.ID || turn.Status != "completed" || turn.Created == "" || !e2eSameJSON(t, turn.Response, want) {
			t.Errorf("turn %d: %s %s, want %s", i, turn.ResponseID, turn.Status, want.ID)
		}
	}
	if ans.Turns[0].Prompt != "echo turn one" || ans.Turns[1].Prompt != "echo turn two" {
		t.Errorf("turn prompts %q, %q", ans.Turns[0].Prompt, ans.Turns[1].Prompt)
	}
	e2eErrorBody(t, s.e2eDo(t, http.MethodGet, "/v1/conversations/no-such-conversation", nil), 404)
	e2eErrorBody(t, s.e2eDo(t, http.MethodGet, "/v1/chat/chat_000000000000000000000000", nil), 404)
}

// TestRunsCancel cancels runs: the stream keeps what was sent, adds a
// CANCELLED error document and one done, and the agent is gone.
func TestRunsCancel(t *testing.T) {
	t.Parallel()
	s := startE2E(t, "DOCSTREAM_AGENT_KILL_GRACE=5s")

	// SIGTERM (the default).
	st := s.e2eOpen(t, map[string]any{"prompt": "fault:hang-mid"})
	id := st.Resp.Header.Get("X-Docstream-Response-Id")
	evs := st.Until(documents.EventContentDelta)
	sent := e2eData(t, evs[len(evs)-1])["delta"].(string)
	resp := s.e2eDo(t, http.MethodPost, "/v1/chat/"+id+"/cancel", nil)
	var ack map[string]string
	if b := readAll(t, resp); resp.StatusCode != http.StatusAccepted || json.Unmarshal(b, &ack) != nil || ack["id"] != id || ack["status"] != "cancelling" {
		t.Errorf("cancel: status %d body %s", resp.StatusCode, b)
	}
	evs = append(evs, st.Rest()...)
	got := fold(t, evs)
	e2eCheckCancelled(t, got, e2eData(t, evs[len(evs)-1]))
	// The agent may be stopped between two tokens: what the stream had sent
	// before the cancel is what must be kept.
	if text := str(got.Documents[0].Content); sent == "" || !strings.HasPrefix(text, sent) || !strings.HasPrefix("Working on it; this will take a moment.", text) {
		t.Errorf("the text sent before the cancel (%q) is gone: %q", sent, text)
	}
	s.waitNoAgents(t, 3*time.Second)

	// SIGKILL at once for an agent that ignores SIGTERM (the kill grace is 5 s).
	st = s.e2eOpen(t, map[string]any{"prompt": "fault:ignore-term"})
	id = st.Resp.Header.Get("X-Docstream-Response-Id")
	evs = st.Until(documents.EventContentDelta)
	start := time.Now()
	readAll(t, s.e2eDo(t, http.MethodPost, "/v1/chat/"+id+"/cancel", map[string]any{"signal": "KILL"}))
	evs = append(evs, st.Rest()...)
	if d := time.Since(start); d > 2500*time.Millisecond {
		t.Errorf("KILL took %s", d)
	}
	e2eCheckCancelled(t, fold(t, evs), e2eData(t, evs[len(evs)-1]))
	s.waitNoAgents(t, time.Second)

	// Unknown runs and bad signals.
	e2eErrorBody(t, s.e2eDo(t, http.MethodPost, "/v1/chat/chat_000000000000000000000000/cancel", nil), 404)
	st = s.e2eOpen(t, map[string]any{"prompt": "fault:hang-mid"})
	id = st.Resp.Header.Get("X-Docstream-Response-Id")
	st.Until(documents.EventContentDelta)
	e2eErrorBody(t, s.e2eDo(t, http.MethodPost, "/v1/chat/"+id+"/cancel", map[string]any{"signal": "HUP"}), 400)
	readAll(t, s.e2eDo(t, http.MethodPost, "/v1/chat/"+id+"/cancel", map[string]any{"signal": "KILL"}))
	e2eCheckCancelled(t, s.e2eWaitFinal(t, id, 3*time.Second), nil)
	st.Close()
	s.waitNoAgents(t, time.Second)
	// A run that already ended is not cancelled again, nor said to be.
	if code, _ := e2eErrorBody(t, s.e2eDo(t, http.MethodPost, "/v1/chat/"+id+"/cancel", nil), http.StatusConflict); code != "not_running" {
		t.Errorf("cancel of an ended run: %s, want not_running", code)
	}
	done := s.chatJSON(t, map[string]any{"prompt": "echo done"})
	if code, _ := e2eErrorBody(t, s.e2eDo(t, http.MethodPost, "/v1/chat/"+done.ID+"/cancel", nil), http.StatusConflict); code != "not_running" {
		t.Errorf("cancel of a completed run: %s, want not_running", code)
	}
	if cr := s.e2eGetChat(t, done.ID); cr.Status != documents.StatusCompleted {
		t.Errorf("a completed run is %s after a cancel", cr.Status)
	}

	if n := s.e2eWaitMetric(t, `docstream_runs_total{model="auto",outcome="cancelled"}`, 3)[`docstream_runs_total{model="auto",outcome="cancelled"}`]; n != 3 {
		t.Errorf("runs_total cancelled = %v, want 3", n)
	}
}

func e2eCheckCancelled(t testing.TB, cr documents.ChatResponse, done map[string]any) {
	t.Helper()
	if cr.Status != documents.StatusError || cr.Metadata.StopReason != documents.StopCancelled {
		t.Errorf("status %s stopReason %q, want error cancelled", cr.Status, cr.Metadata.StopReason)
	}
	errs, metas := e2eErrorDocs(t, cr)
	if len(errs) != 1 || metas[0].ErrorCode != documents.CodeCancelled || errs[0].ID != cr.Documents[len(cr.Documents)-1].ID {
		t.Errorf("want one CANCELLED error document, last; got %+v", metas)
	}
	if done != nil {
		if m, _ := done["metadata"].(map[string]any); done["status"] != "error" || m["stopReason"] != "cancelled" {
			t.Errorf("done %v", done)
		}
	}
}

// TestRunsDetachGrace disconnects and re-attaches within the detach grace:
// the run went on meanwhile and completes.
func TestRunsDetachGrace(t *testing.T) {
	t.Parallel()
	s := startE2E(t, e2ePaced, "DOCSTREAM_RUNS_DETACH_GRACE=3s")
	const n = 100
	st := s.e2eOpen(t, map[string]any{"prompt": fmt.Sprintf("long:%d", n)})
	id := st.Resp.Header.Get("X-Docstream-Response-Id")
	all := st.Take(50)
	st.Close()
	// Once the gateway has seen the client leave, the response grows while
	// it is still streaming.
	s.e2eWaitDetached(t)
	size := func() int {
		cr := s.e2eGetChat(t, id)
		if cr.Status != documents.StatusStreaming {
			t.Fatalf("status %s while the client is away, within the grace", cr.Status)
		}
		n := 0
		for _, d := range cr.Documents {
			n += len(str(d.Content))
		}
		return n
	}
	left := size()
	if !waitFor(10*time.Second, func() bool { return size() > left }) {
		t.Fatalf("the run wrote nothing more in the 10 s after its client left")
	}
	st = s.e2eReattach(t, id, len(all), false)
	first, _ := st.Next()
	if first.ID != fmt.Sprint(len(all)+1) {
		t.Errorf("the re-attached stream starts at %s, want %d", first.ID, len(all)+1)
	}
	all = append(append(all, first), st.Rest()...)
	got := fold(t, all)
	if got.Status != documents.StatusCompleted {
		t.Fatalf("status %s stopReason %q", got.Status, got.Metadata.StopReason)
	}
	e2eCheckParagraphs(t, got, n)
	if len(s.simStarts(t)) != 1 {
		t.Errorf("the agent was started %d times", len(s.simStarts(t)))
	}
}

// TestRunsRestart kills the gateway mid-run and starts it again on the same
// store: finished responses and the conversation are kept, the interrupted
// runs are marked as such and never left streaming.
func TestRunsRestart(t *testing.T) {
	t.Parallel()
	s := startE2E(t)
	s.e2eKillAgentsAtCleanup(t)

	first := s.chatJSON(t, map[string]any{"prompt": "echo before the crash"})
	conv := *first.ConversationID
	resumed := s.e2eOpen(t, map[string]any{"prompt": "fault:hang-mid resumed", "conversationId": conv})
	resumedID := resumed.Resp.Header.Get("X-Docstream-Response-Id")
	resumed.Until(documents.EventContentDelta)
	fresh := s.e2eOpen(t, map[string]any{"prompt": "fault:hang-mid fresh"})
	freshID := fresh.Resp.Header.Get("X-Docstream-Response-Id")
	fresh.Until(documents.EventContentDelta)

	s.kill()
	resumed.Close()
	fresh.Close()
	if len(s.agentProcesses()) == 0 {
		t.Fatalf("the hanging agents should outlive the killed gateway")
	}
	s.start(t)
	// The restarted gateway ends the agents the crash left running.
	s.waitNoAgents(t, 10*time.Second)

	if got := s.e2eGetChat(t, first.ID); !e2eSameJSON(t, got, first) {
		t.Errorf("the finished response changed across the restart")
	}
	for _, id := range []string{resumedID, freshID} {
		cr := s.e2eGetChat(t, id)
		e2eCheckInterrupted(t, id, cr)
		resp := s.e2eDo(t, http.MethodGet, "/v1/chat/"+id+"/stream", nil)
		if readAll(t, resp); resp.StatusCode != http.StatusNoContent {
			t.Errorf("stream of the interrupted run %s: status %d, want 204", id, resp.StatusCode)
		}
	}

	var ans struct {
		Turns []struct {
			ResponseID string                 `json:"responseId"`
			Status     string                 `json:"status"`
			Response   documents.ChatResponse `json:"response"`
		} `json:"turns"`
	}
	s.e2eGetJSON(t, "/v1/conversations/"+conv, 200, &ans)
	if len(ans.Turns) != 2 || ans.Turns[0].ResponseID != first.ID || ans.Turns[1].ResponseID != resumedID {
		t.Fatalf("conversation turns %+v", ans.Turns)
	}
	if ans.Turns[0].Status != "completed" || !e2eSameJSON(t, ans.Turns[0].Response, first) {
		t.Errorf("turn 1: %s", ans.Turns[0].Status)
	}
	if ans.Turns[1].Status != "error" {
		t.Errorf("turn 2 status %s", ans.Turns[1].Status)
	}
	e2eCheckInterrupted(t, resumedID, ans.Turns[1].Response)

	// The conversation goes on after the restart.
	next := s.chatJSON(t, map[string]any{"prompt": "echo after the restart", "conversationId": conv})
	if next.Status != documents.StatusCompleted || e2eEchoOf(t, next).Resume != conv {
		t.Errorf("after the restart: status %s", next.Status)
	}
}

func e2eCheckInterrupted(t testing.TB, id string, cr documents.ChatResponse) {
	t.Helper()
	if cr.ID != id || cr.Status != documents.StatusError || cr.Metadata.StopReason != documents.StopInterrupted {
		t.Errorf("%s after the restart: status %s stopReason %q", id, cr.Status, cr.Metadata.StopReason)
	}
	errs, metas := e2eErrorDocs(t, cr)
	if len(errs) != 1 || metas[0].ErrorCode != documents.CodeInterrupted || errs[0].ID != cr.Documents[len(cr.Documents)-1].ID {
		t.Errorf("%s: want one INTERRUPTED error document, last; got %+v", id, metas)
	}
}

// e2eCompletion is the part of a chat.completion these tests read.
type e2eCompletion struct {
	Choices []struct {
		Message struct {
			Content string `json:"content"`
		} `json:"message"`
	} `json:"choices"`
}

// e2eComplete posts a /v1/chat/completions request and returns the reply and
// the response id. With stream it reads the chunks up to [DONE].
func (s *testServer) e2eComplete(t testing.TB, msgs []map[string]any, stream bool) (string, string) {
	t.Helper()
	resp := s.e2eDo(t, http.MethodPost, "/v1/chat/completions", map[string]any{"model": "auto", "messages": msgs, "stream": stream})
	defer resp.Body.Close()
	rid := resp.Header.Get("X-Docstream-Response-Id")
	if resp.StatusCode != 200 {
		t.Fatalf("completion: status %d: %s", resp.StatusCode, readAll(t, resp))
	}
	if !stream {
		var ans e2eCompletion
		if err := json.Unmarshal(readAll(t, resp), &ans); err != nil || len(ans.Choices) != 1 {
			t.Fatalf("completion: %v %+v", err, ans)
		}
		return ans.Choices[0].Message.Content, rid
	}
	var content strings.Builder
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if line == "[DONE]" {
			return content.String(), rid
		}
		var chunk struct {
			Choices []struct {
				Delta struct {
					Content *string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(line), &chunk); err != nil {
			t.Fatalf("chunk %q: %v", line, err)
		}
		for _, c := range chunk.Choices {
			if c.Delta.Content != nil {
				content.WriteString(*c.Delta.Content)
			}
		}
	}
	t.Fatalf("the chunk stream ended without [DONE]")
	return "", ""
}

// TestRunsOpenAIResume checks that an OpenAI client resending its history
// resumes the agent session with only the new message, and that a history
// that does not match is flattened into a new session.
func TestRunsOpenAIResume(t *testing.T) {
	t.Parallel()
	s := startE2E(t)
	user := func(text string) map[string]any { return map[string]any{"role": "user", "content": text} }
	assistant := func(text string) map[string]any { return map[string]any{"role": "assistant", "content": text} }

	a := e2eMarker("echo A")
	replyA, rid := s.e2eComplete(t, []map[string]any{user(a)}, false)
	conv := s.e2eGetChat(t, rid).ConversationID
	if conv == nil || replyA == "" {
		t.Fatalf("first answer %q, conversation %v", replyA, conv)
	}
	startA := s.e2eSimStart(t, func(p string) bool { return strings.Contains(p, a) })
	if startA["prompt"] != a || e2eResume(e2eArgv(startA)) != "" {
		t.Errorf("first start: prompt %q argv %v", startA["prompt"], e2eArgv(startA))
	}

	// The history as the client got it, plus a new message: resumed, and
	// only the new message is sent.
	b := e2eMarker("echo B")
	replyB, _ := s.e2eComplete(t, []map[string]any{user(a), assistant(replyA), user(b)}, false)
	startB := s.e2eSimStart(t, func(p string) bool { return strings.Contains(p, b) })
	if startB["prompt"] != b || e2eResume(e2eArgv(startB)) != *conv {
		t.Errorf("second start: prompt %q argv %v, want prompt %q and --resume %s", startB["prompt"], e2eArgv(startB), b, *conv)
	}

	// The chain goes on, streamed this time.
	c := e2eMarker("echo C")
	replyC, _ := s.e2eComplete(t, []map[string]any{user(a), assistant(replyA), user(b), assistant(replyB), user(c)}, true)
	startC := s.e2eSimStart(t, func(p string) bool { return strings.Contains(p, c) })
	if startC["prompt"] != c || e2eResume(e2eArgv(startC)) != *conv {
		t.Errorf("third start: prompt %q argv %v, want prompt %q and --resume %s", startC["prompt"], e2eArgv(startC), c, *conv)
	}

	// An edited history matches no session, nor does one the session has
	// moved past (the second question asked again, edited): a new one,
	// with the history folded into the prompt.
	b2 := e2eMarker("echo B edited")
	s.e2eComplete(t, []map[string]any{user(a), assistant(replyA), user(b2)}, false)
	startB2 := s.e2eSimStart(t, func(p string) bool { return strings.Contains(p, b2) })
	if p := startB2["prompt"].(string); e2eResume(e2eArgv(startB2)) != "" || !strings.HasSuffix(p, b2) || !strings.Contains(p, a) {
		t.Errorf("an edited second question: prompt %q argv %v, want a new session with the history", p, e2eArgv(startB2))
	}
	d := e2eMarker("echo D")
	s.e2eComplete(t, []map[string]any{user(a), assistant(replyA + " (edited)"), user(d)}, false)
	startD := s.e2eSimStart(t, func(p string) bool { return strings.Contains(p, d) })
	p := startD["prompt"].(string)
	if e2eResume(e2eArgv(startD)) != "" || p == d || !strings.HasSuffix(p, d) || !strings.Contains(p, a) || !strings.Contains(p, "(edited)") {
		t.Errorf("edited history: prompt %q argv %v", p, e2eArgv(startD))
	}

	// The same history sent while a turn of its session still runs (a
	// reply and a title asked for at once) goes to a session of its own,
	// with the history folded in: one session takes one turn at a time.
	head := []map[string]any{user(a), assistant(replyA), user(b), assistant(replyB), user(c), assistant(replyC)}
	h := e2eMarker("fault:hang-mid h")
	resp := s.e2eDo(t, http.MethodPost, "/v1/chat/completions", map[string]any{"model": "auto", "stream": true,
		"messages": append(slices.Clone(head), user(h))})
	defer resp.Body.Close()
	hid := resp.Header.Get("X-Docstream-Response-Id")
	for br := bufio.NewReader(resp.Body); ; { // until the agent writes
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("the hanging turn ended: %v", err)
		}
		if strings.Contains(line, `"content":"`) && !strings.Contains(line, `"content":""`) {
			break
		}
	}
	if startH := s.e2eSimStart(t, func(p string) bool { return strings.Contains(p, h) }); e2eResume(e2eArgv(startH)) != *conv {
		t.Errorf("the hanging turn does not resume %s: %v", *conv, e2eArgv(startH))
	}
	f := e2eMarker("echo F")
	if reply, _ := s.e2eComplete(t, append(slices.Clone(head), user(f)), false); reply == "" {
		t.Errorf("no answer while the session was busy")
	}
	startF := s.e2eSimStart(t, func(p string) bool { return strings.Contains(p, f) })
	if p := startF["prompt"].(string); e2eResume(e2eArgv(startF)) != "" || !strings.HasSuffix(p, f) || !strings.Contains(p, a) {
		t.Errorf("while the session was busy: prompt %q argv %v, want a new session with the history", p, e2eArgv(startF))
	}
	readAll(t, s.e2eDo(t, http.MethodPost, "/v1/chat/"+hid+"/cancel", map[string]any{"signal": "KILL"}))
}

// TestRunsKeptWithinBytes runs more than runs.keep_finished_bytes holds:
// the runs that finished first are let go early, so a re-attach to the
// first answers 204, while GET /v1/chat/{id} still answers its whole
// response from the store and the last run can still be re-attached.
func TestRunsKeptWithinBytes(t *testing.T) {
	t.Parallel()
	s := startE2E(t, "DOCSTREAM_RUNS_KEEP_FINISHED_BYTES=120000") // a long:20 log is about 84 KB
	var ids []string
	var folded []documents.ChatResponse
	for range 3 {
		resp, evs := s.chatStream(t, map[string]any{"prompt": "long:20"})
		ids = append(ids, resp.Header.Get("X-Docstream-Response-Id"))
		folded = append(folded, fold(t, evs))
	}
	// A run ends once its agent has exited, which can come a little after
	// the stream's done.
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp := s.e2eDo(t, http.MethodGet, "/v1/chat/"+ids[0]+"/stream", nil)
		readAll(t, resp)
		if resp.StatusCode == http.StatusNoContent {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("re-attach to the first run: %d, want 204 once later runs filled keep_finished_bytes", resp.StatusCode)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for i, id := range ids {
		if got := s.e2eGetChat(t, id); got.Status != documents.StatusCompleted || !e2eSameJSON(t, got, folded[i]) {
			t.Errorf("GET run %d differs from its stream", i)
		}
	}
	st := s.e2eReattach(t, ids[2], 0, false)
	if last := fold(t, st.Rest()); !e2eSameJSON(t, last, folded[2]) {
		t.Errorf("re-attach to the last run differs from its stream")
	}
}

// TestRunsAnswers answers a clarification: a known option goes to the
// agent as a follow-up naming the question and the option's label; an
// unknown option, or any answer in a conversation that asked nothing, is a
// 400 unknown_answer.
func TestRunsAnswers(t *testing.T) {
	t.Parallel()
	s := startE2E(t)
	asked := s.chatJSON(t, map[string]any{"prompt": "ask"})
	conv := *asked.ConversationID
	answered := s.chatJSON(t, map[string]any{"conversationId": conv, "answers": []map[string]string{{"questionId": "q1", "optionId": "jwt"}}})
	if answered.Status != documents.StatusCompleted {
		t.Fatalf("the answered turn: %s", answered.Status)
	}
	starts := s.simStarts(t)
	if p, _ := starts[len(starts)-1]["prompt"].(string); !strings.HasPrefix(p, "Answers to your questions:\n- ") || !strings.Contains(p, ": JSON Web Tokens") {
		t.Errorf("the agent got %q", p)
	}
	e2eErrorBody(t, s.e2eDo(t, http.MethodPost, "/v1/chat", map[string]any{"conversationId": conv,
		"answers": []map[string]string{{"questionId": "q1", "optionId": "nope"}}}), 400)

	plain := s.chatJSON(t, map[string]any{"prompt": "echo hi"})
	resp := s.e2eDo(t, http.MethodPost, "/v1/chat", map[string]any{"conversationId": *plain.ConversationID,
		"answers": []map[string]string{{"questionId": "q9", "optionId": "zz"}}})
	if b := readAll(t, resp); resp.StatusCode != 400 || !strings.Contains(string(b), `"unknown_answer"`) {
		t.Errorf("answers in a conversation that asked nothing: %d %s", resp.StatusCode, b)
	}
}

// TestRunsOneTurnAtATime sends a turn of a conversation while the previous
// one still runs: two agents would resume the same session at once, so it
// is a 409 conversation_busy naming the running turn, and the next turn
// runs once that one is over.
func TestRunsOneTurnAtATime(t *testing.T) {
	t.Parallel()
	s := startE2E(t)
	first := s.chatJSON(t, map[string]any{"prompt": "echo one"})
	conv := *first.ConversationID
	st := s.e2eOpen(t, map[string]any{"prompt": "fault:hang-mid two", "conversationId": conv})
	running := st.Resp.Header.Get("X-Docstream-Response-Id")
	st.Until(documents.EventContentDelta)
	resp := s.e2eDo(t, http.MethodPost, "/v1/chat", map[string]any{"prompt": "echo three", "conversationId": conv})
	if b := readAll(t, resp); resp.StatusCode != http.StatusConflict || !strings.Contains(string(b), `"conversation_busy"`) || !strings.Contains(string(b), running) {
		t.Fatalf("a turn while another runs: %d %s, want 409 conversation_busy naming %s", resp.StatusCode, b, running)
	}
	readAll(t, s.e2eDo(t, http.MethodPost, "/v1/chat/"+running+"/cancel", map[string]any{"signal": "KILL"}))
	st.Rest()
	if next := s.chatJSON(t, map[string]any{"prompt": "echo three", "conversationId": conv}); next.Status != documents.StatusCompleted {
		t.Errorf("the turn after: %s", next.Status)
	}

	// A new conversation's first turn holds it once the agent has named
	// its session: a second turn sent to it is refused too.
	st = s.e2eOpen(t, map[string]any{"prompt": "fault:hang-mid four"})
	running = st.Resp.Header.Get("X-Docstream-Response-Id")
	var started struct {
		ConversationID string `json:"conversationId"`
	}
	if err := json.Unmarshal([]byte(st.Until(documents.EventResponseStart)[0].Data), &started); err != nil || started.ConversationID == "" {
		t.Fatalf("response_start: %v %+v", err, started)
	}
	st.Until(documents.EventContentDelta)
	resp = s.e2eDo(t, http.MethodPost, "/v1/chat", map[string]any{"prompt": "echo five", "conversationId": started.ConversationID})
	if b := readAll(t, resp); resp.StatusCode != http.StatusConflict || !strings.Contains(string(b), running) {
		t.Fatalf("a turn while the conversation's first runs: %d %s, want 409 conversation_busy naming %s", resp.StatusCode, b, running)
	}
	readAll(t, s.e2eDo(t, http.MethodPost, "/v1/chat/"+running+"/cancel", map[string]any{"signal": "KILL"}))
	st.Rest()
}
