package gateway_test

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/docstream/docstream/documents"
	"github.com/docstream/docstream/store"
)

// runOnce runs the docstream binary with env until it exits (or 20 s) and
// returns its output and error.
func runOnce(t *testing.T, env []string, launch ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	argv := append(launch, binary)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("docstream did not exit within 20 s:\n%s", out)
	}
	return string(out), err
}

// TestSecondGatewayOnDataDir: a second gateway on a live gateway's data
// directory took its running run for a crash's leftover, marked it
// interrupted and killed its agent. It is now refused at start, and the
// first gateway's run goes on.
func TestSecondGatewayOnDataDir(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	st := s.e2eOpen(t, map[string]any{"prompt": "fault:hang-mid", "workspace": "main"})
	defer st.Close()
	st.Until(documents.EventContentDelta)
	agents := len(s.agentProcesses())
	if agents == 0 {
		t.Fatal("no agent runs")
	}
	env := append(append([]string{}, s.env...), "DOCSTREAM_SERVER_ADDR="+freeAddr(t))
	out, err := runOnce(t, env)
	if err == nil || !strings.Contains(out, "is in use by docstream process "+strconv.Itoa(s.cmd.Process.Pid)) {
		t.Fatalf("a second gateway on the same data directory: %v\n%s", err, out)
	}
	// So is one whose store path is a link to the live gateway's store.
	other := filepath.Join(t.TempDir(), "docstream.db")
	if err := os.Symlink(filepath.Join(s.Dir, "data", "docstream.db"), other); err != nil {
		t.Fatal(err)
	}
	out, err = runOnce(t, append(env, "DOCSTREAM_STORE_PATH="+other))
	if err == nil || !strings.Contains(out, "is in use by docstream process "+strconv.Itoa(s.cmd.Process.Pid)) {
		t.Fatalf("a second gateway on a link to the same store: %v\n%s", err, out)
	}
	if n := len(s.agentProcesses()); n != agents {
		t.Fatalf("the first gateway's agents: %d after the second start, %d before", n, agents)
	}
	resp := s.post(t, "/v1/chat/"+st.Resp.Header.Get("X-Docstream-Response-Id")+"/cancel", nil)
	readAll(t, resp)
	evs := st.Rest()
	if len(evs) == 0 || evs[len(evs)-1].Name != documents.EventDone {
		t.Fatalf("the first gateway's run did not end with done after a cancel: %v", evs)
	}
	// A crash leaves the lock to the next start.
	s.kill()
	s.start(t)
}

// TestReadOnlyStoreRefused: a store file the gateway cannot write to used
// to open, report ready, and lose every response. The gateway now refuses
// to start and names the file.
func TestReadOnlyStoreRefused(t *testing.T) {
	t.Parallel()
	launch := []string{}
	if os.Getuid() == 0 {
		if _, err := exec.LookPath("setpriv"); err != nil {
			t.Skip("running as root without setpriv: file modes do not bind root")
		}
		launch = []string{"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"}
	}
	dir, err := os.MkdirTemp("", "docstream-ro-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o777); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{dir, data} {
		if err := os.Chmod(p, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	db := filepath.Join(data, "docstream.db")
	env := append(os.Environ(), "DOCSTREAM_STORE_PATH="+db, "DOCSTREAM_SERVER_ADDR="+freeAddr(t), "DOCSTREAM_AGENT_BINARY="+binary)
	// A first run (as the same user) creates the store; it is then made
	// read-only.
	srv, err := store.OpenSQLite(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	srv.Close()
	if err := os.Chmod(db, 0o444); err != nil {
		t.Fatal(err)
	}
	if launch != nil && os.Getuid() == 0 {
		if err := os.Chmod(filepath.Dir(binary), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	out, err := runOnce(t, env, launch...)
	if err == nil || !strings.Contains(out, "store "+db+" cannot be written") {
		t.Fatalf("a read-only store: %v\n%s", err, out)
	}
	// A store it can write, but an agents folder it cannot: the agents of
	// a crash would be left running, unrecorded.
	files, _ := filepath.Glob(db + "*") // the store, and its -wal and -shm
	for _, f := range files {
		if err := os.Chmod(f, 0o666); err != nil {
			t.Fatal(err)
		}
	}
	agents := filepath.Join(data, "agents")
	if err := os.MkdirAll(agents, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(agents, 0o555); err != nil {
		t.Fatal(err)
	}
	out, err = runOnce(t, env, launch...)
	if err == nil || !strings.Contains(out, "agents left running by a crash are recorded in "+agents) {
		t.Fatalf("an agents folder that cannot be written: %v\n%s", err, out)
	}
}

// TestStoreMaxAge checks that the gateway deletes conversations idle for
// store.max_age: their follow-ups are then unknown here.
func TestStoreMaxAge(t *testing.T) {
	t.Parallel()
	s := startE2E(t, "DOCSTREAM_STORE_MAX_AGE=2s", "DOCSTREAM_RUNS_KEEP_FINISHED=1s")
	cr := s.chatJSON(t, map[string]any{"prompt": "echo keep me"})
	if cr.ConversationID == nil || *cr.ConversationID == "" {
		t.Fatalf("no conversation id")
	}
	path := "/v1/conversations/" + *cr.ConversationID
	s.e2eGetJSON(t, path, http.StatusOK, nil)
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp := s.e2eDo(t, http.MethodGet, path, nil)
		readAll(t, resp)
		if resp.StatusCode == http.StatusNotFound {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s: %d 15 s after the turn, with max_age 2s", path, resp.StatusCode)
		}
		time.Sleep(200 * time.Millisecond)
	}
	resp := s.e2eDo(t, http.MethodPost, "/v1/chat", map[string]any{"prompt": "echo again", "conversationId": *cr.ConversationID})
	if code, _ := e2eErrorBody(t, resp, http.StatusNotFound); code != "unknown_conversation" {
		t.Errorf("a follow-up of a pruned conversation: %q", code)
	}
}
