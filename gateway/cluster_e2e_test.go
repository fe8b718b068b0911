package gateway_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/jackc/pgx/v5"

	"github.com/docstream/docstream/documents"
	"github.com/docstream/docstream/store/pgtest"
)

// clusterSecret is the replicas' shared secret in these tests.
const clusterSecret = "a-cluster-secret-for-tests"

// startCluster starts n replicas of the binary on one PostgreSQL, each
// with its own workspace folder (named main on all) and simulator log.
func startCluster(t *testing.T, pg *pgtest.Server, n int, extra ...string) []*testServer {
	t.Helper()
	dsn := pg.DSN()
	var reps []*testServer
	for range n {
		s := newTestServer(t, nil)
		s.env = append(s.env, "DOCSTREAM_STORE_DRIVER=postgres", "DOCSTREAM_STORE_DSN="+dsn,
			"DOCSTREAM_CLUSTER_ADVERTISE_URL="+s.URL, "DOCSTREAM_CLUSTER_SECRET="+clusterSecret,
			"DOCSTREAM_CLUSTER_HEARTBEAT=200ms", "DOCSTREAM_CLUSTER_OWNER_TIMEOUT=2s", "DOCSTREAM_AUTH_RATE_PER_MINUTE=0", "DOCSTREAM_SERVER_SHUTDOWN_TIMEOUT=3s")
		s.env = append(s.env, extra...)
		s.start(t)
		t.Cleanup(func() { s.stop(t) })
		reps = append(reps, s)
	}
	return reps
}

// replicaOf returns the id of the replica that answered.
func replicaOf(resp *http.Response) string { return resp.Header.Get("X-Docstream-Replica") }

// checkEvents checks that a stream's events are numbered 1, 2, … without
// a gap or a repeat and end with one done.
func checkEvents(t *testing.T, evs []event) {
	t.Helper()
	for i, e := range evs {
		if e.ID != fmt.Sprint(i+1) {
			t.Fatalf("event %d has id %q", i+1, e.ID)
		}
		if (e.Name == documents.EventDone) != (i == len(evs)-1) {
			t.Fatalf("event %d of %d is %s", i+1, len(evs), e.Name)
		}
	}
}

// pgHolds reports whether the query's one boolean answer is true.
func pgHolds(pg *pgtest.Server, query string, args ...any) bool {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pg.DSN())
	if err != nil {
		return false
	}
	defer conn.Close(ctx)
	var ok bool
	return conn.QueryRow(ctx, query, args...).Scan(&ok) == nil && ok
}

// TestClusterReattachElsewhere re-attaches to a run through another
// replica, twice: every event arrives once and in order, the same bytes as
// from the owner; the finished response is then read from every replica.
func TestClusterReattachElsewhere(t *testing.T) {
	pg := pgtest.Start(t)
	// No replica stops here: a long owner timeout keeps a loaded database's
	// slow heartbeat from taking the owner for gone.
	reps := startCluster(t, pg, 3, e2ePaced, "DOCSTREAM_CLUSTER_OWNER_TIMEOUT=10s")
	a, b, c := reps[0], reps[1], reps[2]
	const n = 60
	st := a.e2eOpen(t, map[string]any{"prompt": fmt.Sprintf("long:%d", n)})
	id := st.Resp.Header.Get("X-Docstream-Response-Id")
	owner := replicaOf(st.Resp)
	all := st.Take(5)
	st.Close()
	// The other replicas know where the run is once its start is recorded.
	if !waitFor(10*time.Second, func() bool {
		return pgHolds(pg, `SELECT EXISTS (SELECT 1 FROM replica_runs WHERE response_id = $1)`, id)
	}) {
		t.Fatalf("the start of the run is not recorded")
	}
	for _, via := range []*testServer{b, c} {
		if len(all) > 0 && all[len(all)-1].Name == documents.EventDone {
			break
		}
		st = via.e2eReattach(t, id, len(all), false)
		if got := replicaOf(st.Resp); got != owner {
			t.Errorf("re-attach through another replica answered by %q; want the owner %q", got, owner)
		}
		if via == b {
			all = append(all, st.Take(20)...)
		} else {
			all = append(all, st.Rest()...)
		}
		st.Close()
	}
	checkEvents(t, all)
	e2eCheckParagraphs(t, fold(t, all), n)
	// Once the run's end is recorded, its replay is the same bytes from
	// the owner and through another replica.
	if !waitFor(10*time.Second, func() bool {
		return pgHolds(pg, `SELECT NOT live FROM replica_runs WHERE response_id = $1`, id)
	}) {
		t.Fatalf("the end of the run is not recorded")
	}
	replay := func(s *testServer) string {
		return string(readAll(t, s.e2eDo(t, http.MethodGet, "/v1/chat/"+id+"/stream", nil, "Last-Event-ID", "7")))
	}
	if got, want := replay(b), replay(a); got != want || !strings.Contains(want, "event: done") {
		t.Errorf("the replay through another replica differs from the owner's (%d and %d bytes)", len(got), len(want))
	}
	for _, s := range reps {
		if !waitFor(10*time.Second, func() bool { return s.e2eGetChat(t, id).Status == documents.StatusCompleted }) {
			t.Fatalf("the response is not completed on %s", s.URL)
		}
		e2eCheckParagraphs(t, s.e2eGetChat(t, id), n)
	}
}

// TestClusterCancelElsewhere cancels a run through another replica: the
// owner cancels it, and its stream ends with done. Meanwhile the other
// replica refuses to delete its conversation.
func TestClusterCancelElsewhere(t *testing.T) {
	pg := pgtest.Start(t)
	reps := startCluster(t, pg, 2, e2ePaced)
	st := reps[0].e2eOpen(t, map[string]any{"prompt": "long:200"})
	defer st.Close()
	id := st.Resp.Header.Get("X-Docstream-Response-Id")
	var start documents.ResponseStart
	upTo := st.Until(documents.EventResponseStart)
	if err := json.Unmarshal([]byte(upTo[len(upTo)-1].Data), &start); err != nil || start.ConversationID == nil {
		t.Fatalf("response_start: %+v, %v", start, err)
	}
	st.Take(2)
	// Nor can another replica delete the conversation meanwhile.
	del := reps[1].e2eDo(t, http.MethodDelete, "/v1/conversations/"+*start.ConversationID, nil)
	if b := readAll(t, del); del.StatusCode != http.StatusConflict {
		t.Errorf("deleting the running conversation through another replica: %d %s", del.StatusCode, b)
	}
	resp := reps[1].e2eDo(t, http.MethodPost, "/v1/chat/"+id+"/cancel", nil)
	body := readAll(t, resp)
	if resp.StatusCode != 200 && resp.StatusCode != 202 {
		t.Fatalf("cancel through another replica: %d %s", resp.StatusCode, body)
	}
	rest := st.Rest()
	var done documents.Done
	if err := json.Unmarshal([]byte(rest[len(rest)-1].Data), &done); err != nil || done.Metadata.StopReason != documents.StopCancelled {
		t.Fatalf("the run ended %+v, %v; want cancelled", done, err)
	}
}

// TestClusterFollowUpElsewhere sends a follow-up turn through another
// replica: it runs on the replica that holds the agent session, resuming
// it.
func TestClusterFollowUpElsewhere(t *testing.T) {
	pg := pgtest.Start(t)
	reps := startCluster(t, pg, 3)
	a, b := reps[0], reps[1]
	first := a.chatJSON(t, map[string]any{"prompt": "hello"})
	conv := *first.ConversationID
	resp, evs := b.chatStream(t, map[string]any{"prompt": "and again", "conversationId": conv})
	if got, want := replicaOf(resp), replicaOf(a.e2eDo(t, http.MethodGet, "/healthz", nil)); got != want {
		t.Errorf("the follow-up was answered by %q; want the session's replica %q", got, want)
	}
	checkEvents(t, evs)
	if got := fold(t, evs); got.Status != documents.StatusCompleted || *got.ConversationID != conv {
		t.Fatalf("follow-up: %s in %v", got.Status, got.ConversationID)
	}
	starts := a.simStarts(t)
	if len(starts) != 2 || !slices.Contains(argv(starts[1]), "--resume") || !slices.Contains(argv(starts[1]), conv) {
		t.Fatalf("the owner's agent starts: %v; want the second to resume %s", starts, conv)
	}
	if n := len(b.simStarts(t)); n != 0 {
		t.Errorf("the forwarding replica started %d agents", n)
	}
	// The conversation reads the same from every replica.
	for _, s := range reps {
		var got struct {
			Turns []struct {
				Status string `json:"status"`
			} `json:"turns"`
		}
		if !waitFor(10*time.Second, func() bool {
			s.e2eGetJSON(t, "/v1/conversations/"+conv, 200, &got)
			return len(got.Turns) == 2 && got.Turns[1].Status == "completed"
		}) {
			t.Fatalf("%s: conversation %+v", s.URL, got)
		}
	}
}

// argv returns the arguments of a simulator start.
func argv(start map[string]any) []string {
	var out []string
	list, _ := start["argv"].([]any)
	for _, a := range list {
		s, _ := a.(string)
		out = append(out, s)
	}
	return out
}

// TestClusterOwnerKilled kills the replica that runs a turn (kill -9)
// while another relays its stream: the relayed stream ends with an error
// document and done, the run is marked interrupted, and the next turn runs
// on another replica with the conversation so far folded into a new agent
// session, which later turns resume there.
func TestClusterOwnerKilled(t *testing.T) {
	pg := pgtest.Start(t)
	reps := startCluster(t, pg, 3, e2ePaced)
	a, b, c := reps[0], reps[1], reps[2]
	first := a.chatJSON(t, map[string]any{"prompt": "hello"})
	conv := *first.ConversationID
	st := b.e2eOpen(t, map[string]any{"prompt": "long:400", "conversationId": conv})
	defer st.Close()
	id := st.Resp.Header.Get("X-Docstream-Response-Id")
	evs := st.Take(5)
	a.kill()
	evs = append(evs, st.Rest()...)
	checkEvents(t, evs)
	relayed := fold(t, evs)
	last := relayed.Documents[len(relayed.Documents)-1]
	if relayed.Status != documents.StatusError || last.Type != documents.TypeError || relayed.Metadata.StopReason != documents.StopInterrupted {
		t.Fatalf("the relayed stream ended %s (%s), last document %s", relayed.Status, relayed.Metadata.StopReason, last.Type)
	}
	if !waitFor(20*time.Second, func() bool {
		cr := c.e2eGetChat(t, id)
		return cr.Status == documents.StatusError && cr.Metadata.StopReason == documents.StopInterrupted
	}) {
		t.Fatalf("the killed replica's run is not marked interrupted: %+v", c.e2eGetChat(t, id).Status)
	}
	next := c.chatJSON(t, map[string]any{"prompt": "after the takeover", "conversationId": conv})
	if next.Status != documents.StatusCompleted || *next.ConversationID != conv {
		t.Fatalf("the turn after the owner died: %s in %v", next.Status, next.ConversationID)
	}
	starts := c.simStarts(t)
	took := starts[len(starts)-1]
	prompt, _ := took["prompt"].(string)
	if slices.Contains(argv(took), "--resume") || !strings.Contains(prompt, "hello") || !strings.Contains(prompt, "after the takeover") {
		t.Fatalf("the takeover started %v with prompt %q; want a new session given the history", argv(took), prompt)
	}
	// The conversation now lives on c: a turn through b resumes c's session.
	again := b.chatJSON(t, map[string]any{"prompt": "once more", "conversationId": conv})
	if again.Status != documents.StatusCompleted {
		t.Fatalf("the turn after the move: %s", again.Status)
	}
	starts = c.simStarts(t)
	if got := argv(starts[len(starts)-1]); !slices.Contains(got, "--resume") || slices.Contains(got, conv) {
		t.Fatalf("the turn after the move started %v; want it to resume the new session", got)
	}
}

// TestClusterPostgresRestart stops PostgreSQL under load and starts it
// again: the runs go on, /readyz says degraded meanwhile, and every
// response is whole on every replica once it is back.
func TestClusterPostgresRestart(t *testing.T) {
	pg := pgtest.Start(t)
	reps := startCluster(t, pg, 3, e2ePaced)
	const runs, n = 9, 60
	ids := make([]string, runs)
	var wg sync.WaitGroup
	started := make(chan struct{}, runs)
	for i := range runs {
		wg.Go(func() {
			st := reps[i%3].e2eOpen(t, map[string]any{"prompt": fmt.Sprintf("long:%d", n)})
			defer st.Close()
			ids[i] = st.Resp.Header.Get("X-Docstream-Response-Id")
			evs := st.Take(3)
			started <- struct{}{}
			evs = append(evs, st.Rest()...)
			checkEvents(t, evs)
		})
	}
	for range runs {
		<-started
	}
	pg.Stop()
	if !waitFor(10*time.Second, func() bool {
		var ready struct {
			Status string `json:"status"`
		}
		reps[0].e2eGetJSON(t, "/readyz", 200, &ready)
		return ready.Status == "degraded"
	}) {
		t.Errorf("/readyz does not say degraded while PostgreSQL is away")
	}
	pg.Restart(t)
	wg.Wait()
	for _, s := range reps {
		for _, id := range ids {
			if !waitFor(20*time.Second, func() bool { return s.e2eGetChat(t, id).Status == documents.StatusCompleted }) {
				t.Fatalf("%s: response %s is %s after PostgreSQL came back", s.URL, id, s.e2eGetChat(t, id).Status)
			}
			e2eCheckParagraphs(t, s.e2eGetChat(t, id), n)
		}
	}
}

// TestClusterWSElsewhere sends follow-up turns over a WebSocket on another
// replica: each runs on the replica of the conversation's session, its
// events relayed in order, and a cancel sent on the socket reaches it.
func TestClusterWSElsewhere(t *testing.T) {
	pg := pgtest.Start(t)
	reps := startCluster(t, pg, 2, e2ePaced)
	a, b := reps[0], reps[1]
	first := a.chatJSON(t, map[string]any{"prompt": "hello"})
	conv := *first.ConversationID
	ws := b.dialWS(t)
	ws.send(map[string]any{"type": "chat", "prompt": "long:3", "conversationId": conv})
	turn := ws.turn()
	if got := wsFold(t, turn); got.Status != documents.StatusCompleted || *got.ConversationID != conv {
		t.Fatalf("relayed turn: %s in %v", got.Status, got.ConversationID)
	}
	for i, m := range turn {
		if m.ID != i+1 {
			t.Fatalf("message %d has id %d", i+1, m.ID)
		}
	}
	ws.send(map[string]any{"type": "chat", "prompt": "long:300", "conversationId": conv})
	ws.accepted()
	for ws.read().Type != documents.EventDocumentStart { // the agent runs
	}
	ws.send(map[string]any{"type": "cancel"})
	var last wsMsg
	for last.Type != documents.EventDone {
		last = ws.read()
	}
	var done documents.Done
	if err := json.Unmarshal(last.Data, &done); err != nil || done.Metadata.StopReason != documents.StopCancelled {
		t.Fatalf("the cancelled turn ended %s", last.Data)
	}
	starts := a.simStarts(t)
	if len(starts) != 3 || !slices.Contains(argv(starts[2]), "--resume") {
		t.Fatalf("the session's replica started %d agents; want 3, resuming", len(starts))
	}
	if n := len(b.simStarts(t)); n != 0 {
		t.Errorf("the socket's replica started %d agents", n)
	}
}

// TestClusterOwnerStalls stops the replica that runs a re-attached stream
// (SIGSTOP: its connections stay open, nothing comes): the relaying replica
// ends the client's stream with an error document and done once the owner
// has missed its heartbeat for cluster.owner_timeout.
func TestClusterOwnerStalls(t *testing.T) {
	pg := pgtest.Start(t)
	reps := startCluster(t, pg, 2, e2ePaced)
	a, b := reps[0], reps[1]
	st := a.e2eOpen(t, map[string]any{"prompt": "long:400"})
	id := st.Resp.Header.Get("X-Docstream-Response-Id")
	evs := st.Take(3)
	st.Close()
	re := b.e2eReattach(t, id, len(evs), false)
	defer re.Close()
	evs = append(evs, re.Take(2)...)
	if err := syscall.Kill(-a.cmd.Process.Pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(-a.cmd.Process.Pid, syscall.SIGCONT)
	evs = append(evs, re.Rest()...)
	checkEvents(t, evs)
	if got := fold(t, evs); got.Status != documents.StatusError || got.Metadata.StopReason != documents.StopInterrupted {
		t.Fatalf("the relayed stream ended %s (%s)", got.Status, got.Metadata.StopReason)
	}
}

// TestClusterOpenAIElsewhere resends an OpenAI history through another
// replica: the turn resumes the session on the replica that ran the first.
func TestClusterOpenAIElsewhere(t *testing.T) {
	pg := pgtest.Start(t)
	reps := startCluster(t, pg, 2)
	a, b := reps[0], reps[1]
	complete := func(s *testServer, msgs ...any) string {
		t.Helper()
		resp := s.post(t, "/v1/chat/completions", map[string]any{"model": "auto", "messages": msgs})
		body := readAll(t, resp)
		if resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
		var out struct {
			Choices []struct {
				Message struct {
					Content string `json:"content"`
				} `json:"message"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(body, &out); err != nil || len(out.Choices) != 1 {
			t.Fatalf("%v: %s", err, body)
		}
		return out.Choices[0].Message.Content
	}
	reply := complete(a, userMsg("hello"))
	complete(b, userMsg("hello"), map[string]any{"role": "assistant", "content": reply}, userMsg("and again"))
	starts := a.simStarts(t)
	if len(starts) != 2 || !slices.Contains(argv(starts[1]), "--resume") {
		t.Fatalf("the first turn's replica started %d agents; want 2, the second resuming", len(starts))
	}
	if n := len(b.simStarts(t)); n != 0 {
		t.Errorf("the forwarding replica started %d agents", n)
	}
}

// TestClusterReplicaRestarts kills a replica mid-run (kill -9) and starts
// it again at the same address: it is the same replica (its id follows
// from its URL), it marks the run its last life left interrupted, and the
// conversation's next turn, sent through another replica, resumes the
// agent session it kept.
func TestClusterReplicaRestarts(t *testing.T) {
	pg := pgtest.Start(t)
	// The restart waits out the owner timeout; a longer one than the other
	// tests' keeps a loaded database's slow heartbeat from taking b or the
	// restarted a for gone.
	reps := startCluster(t, pg, 2, e2ePaced, "DOCSTREAM_CLUSTER_OWNER_TIMEOUT=5s")
	a, b := reps[0], reps[1]
	id := replicaOf(a.e2eDo(t, http.MethodGet, "/healthz", nil))
	first := a.chatJSON(t, map[string]any{"prompt": "hello"})
	conv := *first.ConversationID
	st := a.e2eOpen(t, map[string]any{"prompt": "long:400", "conversationId": conv})
	run := st.Resp.Header.Get("X-Docstream-Response-Id")
	st.Take(5)
	// The store has the turn and the cluster the run as a's before a dies.
	if !waitFor(10*time.Second, func() bool {
		return pgHolds(pg, `SELECT EXISTS (SELECT 1 FROM turns JOIN replica_runs USING (response_id) WHERE response_id = $1 AND live)`, run)
	}) {
		t.Fatalf("the run is not recorded")
	}
	a.kill()
	st.Close()
	a.start(t)
	if got := replicaOf(a.e2eDo(t, http.MethodGet, "/healthz", nil)); got != id {
		t.Fatalf("the restarted replica is %q; want %q, as before", got, id)
	}
	if cr := b.e2eGetChat(t, run); cr.Status != documents.StatusError || cr.Metadata.StopReason != documents.StopInterrupted {
		t.Fatalf("the run of the killed replica: %s (%s); want interrupted", cr.Status, cr.Metadata.StopReason)
	}
	next := b.chatJSON(t, map[string]any{"prompt": "after the restart", "conversationId": conv})
	if next.Status != documents.StatusCompleted {
		t.Fatalf("the turn after the restart: %s", next.Status)
	}
	starts := a.simStarts(t)
	if got := argv(starts[len(starts)-1]); len(starts) != 3 || !slices.Contains(got, "--resume") || !slices.Contains(got, conv) {
		t.Fatalf("the restarted replica's agent starts: %d, the last %v; want it to resume %s", len(starts), got, conv)
	}
}

// TestClusterRespondElsewhere answers an interactive run's permissions
// through another replica: one by POST /v1/chat/{id}/respond, one over a
// WebSocket on that replica; the owner's run takes both.
func TestClusterRespondElsewhere(t *testing.T) {
	pg := pgtest.Start(t)
	reps := startCluster(t, pg, 2, "DOCSTREAM_AGENT_PROTOCOL=acp", "DOCSTREAM_AGENT_IDLE_TIMEOUT=3s")
	st := reps[0].acpOpen(t, map[string]any{"prompt": "permissions", "interactive": true})
	defer st.Close()
	id := st.Resp.Header.Get("X-Docstream-Response-Id")
	m := st.waiting(t)
	reps[1].respond(t, id, map[string]any{"toolCallId": m["toolCallId"], "optionId": "maybe"}, http.StatusBadRequest)
	if got := reps[1].respond(t, id, map[string]any{"toolCallId": m["toolCallId"], "optionId": "allow-once"}, 200); got["status"] != documents.StatusApproved {
		t.Fatalf("respond through another replica: %v", got)
	}
	m = st.waiting(t)
	c := reps[1].dialWS(t)
	c.send(map[string]any{"type": "respond", "id": id, "toolCallId": m["toolCallId"], "optionId": "reject-once"})
	if r := c.read(); r.Type != "responded" || !strings.Contains(string(r.Data), documents.StatusRejected) {
		t.Fatalf("respond over a WebSocket on another replica: %s %s", r.Type, r.Data)
	}
	cr := fold(t, st.all())
	cmds := acpDocs(cr, documents.TypeTerminalCommand)
	var ran, refused documents.TerminalCommandMeta
	_ = json.Unmarshal(cmds[0].Metadata, &ran)
	_ = json.Unmarshal(cmds[1].Metadata, &refused)
	if ran.Status != documents.StatusApproved || refused.Status != documents.StatusRejected {
		t.Fatalf("the commands: %+v, %+v", ran, refused)
	}
}
