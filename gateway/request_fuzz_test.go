package gateway

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/docstream/docstream/agent"
	"github.com/docstream/docstream/metrics"
	"github.com/docstream/docstream/openai"
	"github.com/docstream/docstream/runs"
	"github.com/docstream/docstream/store"
	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/rs/zerolog"
)

// fuzzServer is a Server whose agent binary does not exist, with two
// workspaces (one configured through a symlink); nothing it does in chatSpec
// starts a process that could run.
func fuzzServer(t testing.TB) *Server {
	t.Helper()
	dir := t.TempDir()
	main, other := filepath.Join(dir, "main"), filepath.Join(dir, "other-target")
	for _, d := range []string{main, other} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(other, filepath.Join(dir, "other")); err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		Server: ServerConfig{MaxBodyBytes: 4 << 20, MaxPromptBytes: 4 << 10, Heartbeat: time.Second},
		OpenAI: openai.Config{Render: "markdown", Reasoning: "reasoning_content"},
		Agent: agent.Config{Binary: filepath.Join(dir, "no-such-agent"), Trust: true, DefaultWorkspace: "main",
			Workspaces: map[string]string{"main": main, "other": filepath.Join(dir, "other")}},
	}
	m := metrics.New()
	cli := agent.New(cfg.Agent, nil, m)
	st := store.NewMemoryStore()
	reg := runs.NewRegistry(runs.Config{}, runs.Limits{MaxConcurrentRuns: 1}, runs.Deps{Backends: map[string]runs.Backend{"cli": cli}, Store: st, Metrics: m, Log: zerolog.Nop()})
	s, err := NewServer(Deps{Config: cfg, Logger: zerolog.Nop(), Registry: reg, Store: st, Metrics: m, Agent: cli})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// checkRequestError fails unless err is an *HTTPError with a 4xx status.
func checkRequestError(t *testing.T, what string, err error) {
	t.Helper()
	var he *HTTPError
	if !errors.As(err, &he) {
		t.Fatalf("%s: error %T %v is not an *HTTPError", what, err, err)
	}
	if he.Status < 400 || he.Status > 499 {
		t.Fatalf("%s: status %d (%s), want 4xx", what, he.Status, he)
	}
	if he.Code == "" || he.Message == "" {
		t.Fatalf("%s: error without code or message: %+v", what, he)
	}
}

// checkSpec checks what a valid request may turn into: a prompt within the
// limits, a configured workspace, well-formed ids, and an argv whose prompt
// is the one argument after `--`, with no flag taken from the request.
func checkSpec(t *testing.T, s *Server, spec *runs.Spec) {
	t.Helper()
	if strings.IndexByte(spec.Prompt, 0) >= 0 || len(spec.Prompt) > s.cfg.Server.MaxPromptBytes || strings.TrimSpace(spec.Prompt) == "" {
		t.Fatalf("accepted prompt of %d bytes (limit %d): %q", len(spec.Prompt), s.cfg.Server.MaxPromptBytes, openai.Clip(spec.Prompt, 80))
	}
	if dir, ok := s.workspaces[spec.WorkspaceName]; !ok || dir != spec.Workspace {
		t.Fatalf("workspace %q → %q is not a configured one (%v)", spec.WorkspaceName, spec.Workspace, s.workspaces)
	}
	if real, err := filepath.EvalSymlinks(spec.Workspace); err != nil || real != spec.Workspace {
		t.Fatalf("workspace %q is not resolved through its symlinks (%q, %v)", spec.Workspace, real, err)
	}
	if spec.SessionID != "" && !idPattern.MatchString(spec.SessionID) {
		t.Fatalf("accepted resume id %q", spec.SessionID)
	}
	if spec.Model != "auto" && !modelPattern.MatchString(spec.Model) {
		t.Fatalf("accepted model %q", spec.Model)
	}
	switch spec.Mode {
	case "agent", "plan", "ask":
	default:
		t.Fatalf("accepted mode %q", spec.Mode)
	}
	args := s.cli.Args(spec)
	n := len(args)
	if n < 2 || args[n-2] != "--" || args[n-1] != spec.Prompt {
		t.Fatalf("argv does not end with -- and the prompt: %q", args)
	}
	flags := map[string]bool{"--print": true, "--output-format": true, "--stream-partial-output": true, "--model": true,
		"--mode": true, "--resume": true, "--workspace": true, "--force": true, "--trust": true, "--approve-mcps": true, "-H": true}
	valued := map[string]bool{"--output-format": true, "--model": true, "--mode": true, "--resume": true, "--workspace": true, "-H": true}
	for i := 0; i < n-2; i++ {
		a := args[i]
		if a == "--" {
			t.Fatalf("a second -- in argv: %q", args)
		}
		if !flags[a] {
			t.Fatalf("argument %d %q is not a known flag: %q", i, a, args)
		}
		if valued[a] {
			i++
			if i >= n-2 || strings.HasPrefix(args[i], "-") {
				t.Fatalf("flag %s has no proper value: %q", a, args)
			}
		}
	}
}

// FuzzDecodeStrict feeds arbitrary bodies to the /v1/chat decoder and, when
// they decode, to the request validation. Errors must be *HTTPError with a
// 4xx status; an accepted body names only known fields.
func FuzzDecodeStrict(f *testing.F) {
	for _, b := range []string{
		`{"prompt":"hello"}`,
		`{"prompt":"x","stream":true,"mode":"plan","model":"sim-fast","workspace":"other","thinking":true}`,
		`{"messages":[{"role":"system","content":"be brief"},{"role":"user","content":[{"type":"text","text":"hi"}]}]}`,
		`{"prompt":"x","conversationId":"abc-123","answers":[{"questionId":"q1","optionId":"jwt"}]}`,
		`{"prompt":"x","args":["--force"]}`,
		`{"prompt":"x"} {"prompt":"y"}`,
		`{"prompt":"x"}garbage`,
		`{"prompt":"x","prompt":"y"}`,
		`{"prompt":1}`,
		`{"Prompt":"x"}`,
		`{"prompt":"\u0000"}`,
		"{\"prompt\":\"\xff\"}",
		`{"prompt":"--help","workspace":"../x"}`,
		`{"prompt":"x","conversationId":"--force"}`,
		`{"prompt":"x","model":"--yolo"}`,
		`{"prompt":"x","backend":"cloud","images":[{}]}`,
		`[]`, `null`, ``, `{`, `{"prompt":`, `  {"prompt":"x"}  `,
	} {
		f.Add([]byte(b))
	}
	s := fuzzServer(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		var req ChatRequest
		err := decodeStrict(body, &req, chatFields)
		if err != nil {
			checkRequestError(t, "decodeStrict", err)
			return
		}
		// Accepted: one JSON object of known names, nothing after it.
		dec := jsontext.NewDecoder(bytes.NewReader(body))
		if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
			t.Fatalf("accepted a body that is not an object: %q", body)
		}
		for dec.PeekKind() == '"' {
			name, err := dec.ReadToken()
			if err != nil {
				t.Fatalf("accepted invalid JSON %q: %v", body, err)
			}
			if !chatFields[name.String()] {
				t.Fatalf("accepted unknown field %q", name.String())
			}
			if err := dec.SkipValue(); err != nil {
				t.Fatalf("accepted invalid JSON %q: %v", body, err)
			}
		}
		if _, err := dec.ReadToken(); err != nil {
			t.Fatalf("accepted invalid JSON %q: %v", body, err)
		}
		if _, err := dec.ReadToken(); err == nil {
			t.Fatalf("accepted trailing data after the object: %q", body)
		}
		spec, err := s.chatSpec(context.Background(), &req)
		if err != nil {
			checkRequestError(t, "chatSpec", err)
			return
		}
		checkSpec(t, s, spec)
	})
}

// FuzzChatSpec builds well-formed bodies from fuzzed field values, so that
// the validation of each field is reached.
func FuzzChatSpec(f *testing.F) {
	f.Add("hello", "", "", "", "", "")
	f.Add("--help", "agent", "auto", "", "main", "")
	f.Add("-", "plan", "sim-smart", "abc-123", "other", "")
	f.Add("$(touch pwned); rm -rf x `id`", "ask", "gpt-5[high]", "bc_1", "", "")
	f.Add("x", "debug", "--yolo", "--force", "../x", "")
	f.Add("x", "", "m", "a\nb", "/etc", "")
	f.Add("x\x00y", "", "", "", "main/..", "")
	f.Add(strings.Repeat("p", 5000), "", "", "", "", "")
	f.Add("", "", "", "", "", `[{"role":"system","content":"s"},{"role":"user","content":"u"}]`)
	f.Add("", "", "", "", "", `[{"role":"assistant","content":"a"}]`)
	f.Add("", "", "", "", "", `[{"role":"user","content":[{"type":"text","text":"--x"},{"type":"image_url"}]}]`)
	s := fuzzServer(f)
	f.Fuzz(func(t *testing.T, prompt, mode, model, conv, workspace, messages string) {
		body := map[string]any{}
		if prompt != "" || messages == "" {
			body["prompt"] = prompt
		}
		for k, v := range map[string]string{"mode": mode, "model": model, "conversationId": conv, "workspace": workspace} {
			if v != "" {
				body[k] = v
			}
		}
		if messages != "" {
			if !jsontext.Value(messages).IsValid() {
				return
			}
			body["messages"] = jsontext.Value(messages)
		}
		b, err := json.Marshal(body, jsontext.AllowInvalidUTF8(true))
		if err != nil {
			return
		}
		var req ChatRequest
		if err := decodeStrict(b, &req, chatFields); err != nil {
			checkRequestError(t, "decodeStrict", err)
			// Only known fields are sent at the top: an unknown one can be
			// only inside a message, and not one of a message's own.
			var he *HTTPError
			if utf8.Valid(b) && errors.As(err, &he) && he.Code == "unknown_field" {
				q, _ := strconv.QuotedPrefix(he.Message[max(strings.IndexByte(he.Message, '"'), 0):])
				name, _ := strconv.Unquote(q)
				field := name[strings.LastIndexByte(name, '/')+1:]
				if !strings.HasPrefix(name, "messages/") || field == "role" || field == "content" || field == "name" {
					t.Fatalf("a known field was refused: %v (%s)", err, b)
				}
			}
			return
		}
		spec, err := s.chatSpec(context.Background(), &req)
		if err != nil {
			checkRequestError(t, "chatSpec", err)
			return
		}
		checkSpec(t, s, spec)
		if req.Prompt != nil && len(req.Answers) == 0 && spec.Prompt != *req.Prompt {
			t.Fatalf("the prompt changed on its way to the agent: %q → %q", *req.Prompt, spec.Prompt)
		}
	})
}

// FuzzAuthCheck checks the key comparison: every configured key (plain or
// as sha256:<hex>) passes, and nothing else does.
func FuzzAuthCheck(f *testing.F) {
	f.Add("k1,k2", "k1")
	f.Add("key-marker", "key-marker ")
	f.Add("sha256:2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae", "foo")
	f.Add("a", "")
	f.Fuzz(func(t *testing.T, keys, presented string) {
		a := newAuthenticator(AuthConfig{APIKeys: strings.Split(keys, ",")})
		want := false
		for _, k := range strings.Split(keys, ",") {
			k = strings.TrimSpace(k)
			if k == "" {
				continue
			}
			if _, hashed := strings.CutPrefix(k, "sha256:"); !hashed {
				if _, ok := a.check(k); !ok {
					t.Fatalf("configured key %q does not pass", k)
				}
				if k == presented {
					want = true
				}
			}
		}
		_, ok := a.check(presented)
		if ok && !want && !strings.Contains(keys, "sha256:") {
			t.Fatalf("key %q passes against %q", presented, keys)
		}
		if !ok && want {
			t.Fatalf("key %q refused against %q", presented, keys)
		}
	})
}
