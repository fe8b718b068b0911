package cloud_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/docstream/docstream/cloud"
	"github.com/docstream/docstream/cloud/cloudtest"
)

func TestMe(t *testing.T) {
	srv := newFake(t)
	c, _ := newClient(t, srv)
	me, err := c.Me(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if me.APIKeyName != "Docstream test key" || me.UserEmail != "developer@example.com" || me.CreatedAt.Year() != 2024 {
		t.Fatalf("me = %+v", me)
	}
}

func TestModels(t *testing.T) {
	srv := newFake(t, cloudtest.WithModels([]string{"a", "b"}))
	c, _ := newClient(t, srv)
	models, err := c.Models(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(models, []string{"a", "b"}) {
		t.Fatalf("models = %v", models)
	}
}

func TestLaunchAgentConversation(t *testing.T) {
	srv := newFake(t)
	c, _ := newClient(t, srv)
	ctx := context.Background()
	no := false
	a, err := c.Launch(ctx, cloud.LaunchRequest{
		Prompt: cloud.Prompt{Text: "add a README", Images: []cloud.Image{{Data: "iVBORw0K", Dimension: cloud.Dimension{Width: 2, Height: 3}}}},
		Source: cloud.Source{Repository: "https://github.com/acme/shop", Ref: "main"},
		Target: cloud.Target{AutoCreatePR: true, OpenAsCursorGithubApp: true, SkipReviewerRequest: true, BranchName: "feature/readme", AutoBranch: &no},
		Model:  "gpt-5.2",
	})
	if err != nil {
		t.Fatal(err)
	}
	if a.ID == "" || a.Status != cloud.StatusCreating || a.Name != "add a README" {
		t.Fatalf("launched = %+v", a)
	}
	want := cloud.AgentTarget{
		BranchName: "feature/readme", URL: "https://cursor.com/agents?id=" + a.ID,
		AutoCreatePR: true, OpenAsCursorGithubApp: true, SkipReviewerRequest: true,
	}
	if a.Target != want {
		t.Fatalf("target = %+v, want %+v", a.Target, want)
	}
	if a.Source.Repository != "https://github.com/acme/shop" || a.Source.Ref != "main" || a.CreatedAt.IsZero() {
		t.Fatalf("source/createdAt = %+v %v", a.Source, a.CreatedAt)
	}

	got, err := c.Agent(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != a.ID || got.Status != cloud.StatusCreating {
		t.Fatalf("agent = %+v", got)
	}
	conv, err := c.Conversation(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	wantMsgs := []cloud.Message{{ID: "msg_001", Type: cloud.UserMessage, Text: "add a README"}}
	if conv.ID != a.ID || !reflect.DeepEqual(conv.Messages, wantMsgs) {
		t.Fatalf("conversation = %+v", conv)
	}
	if n := srv.Calls()[cloudtest.RouteLaunch]; n != 1 {
		t.Fatalf("launch calls = %d", n)
	}
}

// TestLaunchWireFormat checks the exact JSON field names and the auth header
// against the API reference, independently of the fake.
func TestLaunchWireFormat(t *testing.T) {
	var body map[string]any
	var auth string
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth = r.Header.Get("Authorization")
		body = nil
		raw, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(raw, &body); err != nil {
			t.Errorf("body: %v", err)
		}
		_, _ = io.WriteString(w, `{"id":"bc_1","name":"n","status":"CREATING","source":{"repository":"r"},"target":{"branchName":"b","url":"u","autoCreatePr":true,"openAsCursorGithubApp":false,"skipReviewerRequest":false},"createdAt":"2024-01-15T10:30:00Z"}`)
	}))
	defer ts.Close()
	c, err := cloud.New(ts.URL+"/v0/", "k3y-secret")
	if err != nil {
		t.Fatal(err)
	}
	yes := true
	_, err = c.Launch(context.Background(), cloud.LaunchRequest{
		Prompt: cloud.Prompt{Text: "t", Images: []cloud.Image{{Data: "d", Dimension: cloud.Dimension{Width: 1, Height: 2}}}},
		Source: cloud.Source{Repository: "r", Ref: "main", PRURL: "p"},
		Target: cloud.Target{AutoCreatePR: true, OpenAsCursorGithubApp: true, SkipReviewerRequest: true, BranchName: "b", AutoBranch: &yes},
		Model:  "m",
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := "Basic " + base64.StdEncoding.EncodeToString([]byte("k3y-secret:")); auth != want {
		t.Fatalf("Authorization = %q, want %q", auth, want)
	}
	want := map[string]any{
		"prompt": map[string]any{"text": "t", "images": []any{map[string]any{"data": "d", "dimension": map[string]any{"width": 1.0, "height": 2.0}}}},
		"source": map[string]any{"repository": "r", "ref": "main", "prUrl": "p"},
		"target": map[string]any{"autoCreatePr": true, "openAsCursorGithubApp": true, "skipReviewerRequest": true, "branchName": "b", "autoBranch": true},
		"model":  "m",
	}
	if !reflect.DeepEqual(body, want) {
		t.Fatalf("body = %#v\nwant  %#v", body, want)
	}

	// A minimal request leaves out target and model.
	if _, err := c.Launch(context.Background(), cloud.LaunchRequest{Prompt: cloud.Prompt{Text: "t"}, Source: cloud.Source{Repository: "r"}}); err != nil {
		t.Fatal(err)
	}
	want = map[string]any{"prompt": map[string]any{"text": "t"}, "source": map[string]any{"repository": "r"}}
	if !reflect.DeepEqual(body, want) {
		t.Fatalf("minimal body = %#v", body)
	}
}

func TestLaunchValidationSendsNothing(t *testing.T) {
	srv := newFake(t)
	c, _ := newClient(t, srv)
	repo := cloud.Source{Repository: "https://github.com/acme/shop"}
	six := make([]cloud.Image, cloud.MaxImages+1)
	cases := map[string]cloud.LaunchRequest{
		"six images":   {Prompt: cloud.Prompt{Text: "x", Images: six}, Source: repo},
		"empty prompt": {Prompt: cloud.Prompt{Text: "  "}, Source: repo},
		"no source":    {Prompt: cloud.Prompt{Text: "x"}},
	}
	for name, req := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := c.Launch(context.Background(), req)
			e := asError(t, err)
			if e.Code != cloud.CodeBadRequest || e.Status != 0 {
				t.Fatalf("error = %+v", e)
			}
		})
	}
	err := c.FollowUp(context.Background(), "bc_x", cloud.Prompt{Text: "x", Images: six})
	if asError(t, err).Code != cloud.CodeBadRequest {
		t.Fatalf("follow-up error = %v", err)
	}
	if calls := srv.Calls(); len(calls) != 0 {
		t.Fatalf("requests were sent: %v", calls)
	}
	// Five images are fine.
	_, err = c.Launch(context.Background(), cloud.LaunchRequest{
		Prompt: cloud.Prompt{Text: "x", Images: make([]cloud.Image, cloud.MaxImages)},
		Source: repo,
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestListAgentsPagination(t *testing.T) {
	srv := newFake(t)
	c, _ := newClient(t, srv)
	ctx := context.Background()
	var ids []string
	for i := range 5 {
		a, err := c.Launch(ctx, cloud.LaunchRequest{Prompt: cloud.Prompt{Text: fmt.Sprintf("task %d", i)}, Source: cloud.Source{Repository: "https://github.com/acme/shop"}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, a.ID)
	}
	slices.Reverse(ids) // newest first

	var got []string
	cursor := ""
	for page := 0; ; page++ {
		list, err := c.ListAgents(ctx, cloud.ListOptions{Limit: 2, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Agents) > 2 {
			t.Fatalf("page %d has %d agents", page, len(list.Agents))
		}
		for _, a := range list.Agents {
			got = append(got, a.ID)
		}
		if list.NextCursor == "" {
			break
		}
		cursor = list.NextCursor
	}
	if !slices.Equal(got, ids) {
		t.Fatalf("pages = %v, want %v", got, ids)
	}

	// Default page size holds all five.
	list, err := c.ListAgents(ctx, cloud.ListOptions{})
	if err != nil || len(list.Agents) != 5 || list.NextCursor != "" {
		t.Fatalf("default page = %+v, %v", list, err)
	}
}

func TestListAgentsPRURLFilter(t *testing.T) {
	srv := newFake(t)
	c, _ := newClient(t, srv)
	ctx := context.Background()
	pr := "https://github.com/acme/shop/pull/3"
	byPR, err := c.Launch(ctx, cloud.LaunchRequest{Prompt: cloud.Prompt{Text: "review"}, Source: cloud.Source{PRURL: pr}})
	if err != nil {
		t.Fatal(err)
	}
	if byPR.Source.Repository != "https://github.com/acme/shop" {
		t.Fatalf("source = %+v", byPR.Source)
	}
	launchReadme(t, c)
	list, err := c.ListAgents(ctx, cloud.ListOptions{PRURL: pr})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Agents) != 1 || list.Agents[0].ID != byPR.ID {
		t.Fatalf("filtered = %+v", list.Agents)
	}
}

func TestListAgentsLimitValidation(t *testing.T) {
	srv := newFake(t)
	c, _ := newClient(t, srv)
	for _, limit := range []int{-1, cloud.MaxListLimit + 1} {
		_, err := c.ListAgents(context.Background(), cloud.ListOptions{Limit: limit})
		if asError(t, err).Code != cloud.CodeBadRequest {
			t.Fatalf("limit %d: %v", limit, err)
		}
	}
	if len(srv.Calls()) != 0 {
		t.Fatalf("calls = %v", srv.Calls())
	}
}

func TestFollowUpStopDelete(t *testing.T) {
	srv := newFake(t)
	c, _ := newClient(t, srv)
	ctx := context.Background()
	a := launchReadme(t, c)

	if err := c.FollowUp(ctx, a.ID, cloud.Prompt{Text: "also add a licence"}); err != nil {
		t.Fatal(err)
	}
	conv, err := c.Conversation(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	last := conv.Messages[len(conv.Messages)-1]
	if last.Type != cloud.UserMessage || last.Text != "also add a licence" {
		t.Fatalf("last message = %+v", last)
	}

	if err := c.Stop(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	got, err := c.Agent(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != cloud.StatusStopped {
		t.Fatalf("status after stop = %s", got.Status)
	}
	// Stopping a stopped agent is refused upstream with a message.
	err = c.Stop(ctx, a.ID)
	if e := asError(t, err); e.Code != cloud.CodeBadRequest || e.Status != 400 || !strings.Contains(e.Message, "Agent is not running") {
		t.Fatalf("second stop = %+v", e)
	}

	if err := c.Delete(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	_, err = c.Agent(ctx, a.ID)
	if e := asError(t, err); e.Code != cloud.CodeNotFound || e.Message != "no such agent: "+a.ID {
		t.Fatalf("agent after delete = %+v", e)
	}
	_, err = c.Conversation(ctx, a.ID)
	if asError(t, err).Code != cloud.CodeNotFound {
		t.Fatalf("conversation after delete = %v", err)
	}
	if len(srv.AgentIDs()) != 0 {
		t.Fatalf("agents left: %v", srv.AgentIDs())
	}
}

func TestAgentIDValidation(t *testing.T) {
	srv := newFake(t)
	c, _ := newClient(t, srv)
	for _, id := range []string{"", "bc\n1"} {
		_, err := c.Agent(context.Background(), id)
		if asError(t, err).Code != cloud.CodeBadRequest {
			t.Fatalf("id %q: %v", id, err)
		}
	}
	// Path characters are escaped, not interpreted.
	_, err := c.Agent(context.Background(), "../me")
	if asError(t, err).Code != cloud.CodeNotFound {
		t.Fatalf("escaped id: %v", err)
	}
	if len(srv.Calls()) != 1 {
		t.Fatalf("calls = %v", srv.Calls())
	}
}

func TestNewBaseURL(t *testing.T) {
	for _, u := range []string{"", "https://api.cursor.com", "https://api.cursor.com/", "https://api.cursor.com/v0", "https://api.cursor.com/v0/"} {
		c, err := cloud.New(u, "k")
		if err != nil {
			t.Fatalf("%q: %v", u, err)
		}
		if got := c.String(); got != "cloud.Client{"+cloud.DefaultBaseURL+"}" {
			t.Fatalf("%q: client = %s", u, got)
		}
	}
	for _, u := range []string{"api.cursor.com", "ftp://x", "https://user:pw@api.cursor.com", "https://api.cursor.com?x=1", "::"} {
		if _, err := cloud.New(u, "k"); err == nil {
			t.Fatalf("%q accepted", u)
		}
	}
}

func TestClientStringHidesKey(t *testing.T) {
	srv := newFake(t)
	c, _ := newClient(t, srv)
	noKey(t, srv, fmt.Sprintf("%v %+v %#v %s", c, c, c, c))
}

func TestMissingKeySendsNothing(t *testing.T) {
	srv := newFake(t)
	c, err := cloud.New(srv.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Agent(context.Background(), "bc_1")
	if e := asError(t, err); e.Code != cloud.CodeUnauthorized || e.Status != 0 {
		t.Fatalf("error = %+v", e)
	}
	if len(srv.Calls()) != 0 {
		t.Fatalf("calls = %v", srv.Calls())
	}
}
