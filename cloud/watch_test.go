package cloud_test

import (
	"context"
	"iter"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/docstream/docstream/cloud"
	"github.com/docstream/docstream/cloud/cloudtest"
)

const interval = 10 * time.Millisecond

// collect reads every update until the watch ends.
func collect(t *testing.T, updates iter.Seq[cloud.Update]) []cloud.Update {
	t.Helper()
	done := make(chan []cloud.Update)
	go func() { done <- slices.Collect(updates) }()
	select {
	case out := <-done:
		return out
	case <-time.After(10 * time.Second):
		t.Fatal("watch did not end")
		return nil
	}
}

// describe renders updates as short lines for comparison.
func describe(us []cloud.Update) []string {
	var out []string
	for _, u := range us {
		switch u.Kind {
		case cloud.UpdateStatus, cloud.UpdateDone:
			out = append(out, string(u.Kind)+" "+string(u.Agent.Status))
		case cloud.UpdateMessage, cloud.UpdateMessageGrew:
			out = append(out, string(u.Kind)+" "+u.Message.ID+" "+string(u.Message.Type)+" "+u.Message.Text)
		case cloud.UpdateError:
			out = append(out, "error "+cloud.ErrorCode(u.Err))
		}
	}
	return out
}

func TestWatchFullRun(t *testing.T) {
	srv := newFake(t)
	c, rec := newClient(t, srv)
	a := launchReadme(t, c)
	us := collect(t, c.Watch(context.Background(), a.ID, cloud.WatchOptions{Interval: interval}))

	first := cloudtest.DefaultFirstMessage
	grown := first + cloudtest.DefaultFencedBlock
	final := "README.md is on the branch " + a.Target.BranchName + "."
	want := []string{
		"status CREATING",
		"message msg_001 user_message add a README",
		"status RUNNING",
		"message msg_002 assistant_message " + first,
		"message_grew msg_002 assistant_message " + grown,
		"message msg_003 assistant_message " + final,
		"done FINISHED",
	}
	if got := describe(us); !slices.Equal(got, want) {
		t.Fatalf("updates:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if !strings.Contains(grown, "```markdown\n# Shop\n\nA tiny shop.\n```") {
		t.Fatalf("grown text = %q", grown)
	}
	grew := us[4]
	if grew.Previous != first || !strings.HasPrefix(grew.Message.Text, grew.Previous) {
		t.Fatalf("grew.Previous = %q", grew.Previous)
	}
	done := us[len(us)-1].Agent
	if !strings.HasSuffix(done.Target.PRURL, "/pull/7") || done.Target.PRURL != "https://github.com/acme/shop/pull/7" {
		t.Fatalf("PR url = %q", done.Target.PRURL)
	}
	if done.Summary != cloudtest.DefaultSummary || done.Target.BranchName == "" || !strings.HasPrefix(done.Target.BranchName, "cursor/") {
		t.Fatalf("done agent = %+v", done)
	}
	for _, d := range rec.Sleeps() {
		if d != interval {
			t.Fatalf("sleeps = %v", rec.Sleeps())
		}
	}
	// Four polls: status then conversation each; the last conversation read
	// follows the terminal status.
	calls := srv.Calls()
	if calls[cloudtest.RouteAgent] != 4 || calls[cloudtest.RouteConversation] != 4 {
		t.Fatalf("calls = %v", calls)
	}
}

func TestWatchFollowUpThenWatchAgain(t *testing.T) {
	srv := newFake(t)
	c, _ := newClient(t, srv)
	ctx := context.Background()
	a := launchReadme(t, c)
	collect(t, c.Watch(ctx, a.ID, cloud.WatchOptions{Interval: interval}))

	before, err := c.Conversation(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.FollowUp(ctx, a.ID, cloud.Prompt{Text: "also add a licence"}); err != nil {
		t.Fatal(err)
	}
	us := collect(t, c.Watch(ctx, a.ID, cloud.WatchOptions{Interval: interval, Known: before.Messages, FollowUp: true}))
	want := []string{
		"status RUNNING",
		"message msg_004 user_message also add a licence",
		"message msg_005 assistant_message " + cloudtest.DefaultFollowUpMessage,
		"done FINISHED",
	}
	if got := describe(us); !slices.Equal(got, want) {
		t.Fatalf("updates:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if s := us[len(us)-1].Agent.Summary; s != cloudtest.DefaultFollowUpSummary {
		t.Fatalf("summary = %q", s)
	}
}

func TestWatchFollowUpWaitsOutStaleTerminalStatus(t *testing.T) {
	clk := newClock()
	srv := newFake(t)
	rec := &recorder{}
	c, err := cloud.New(srv.URL, srv.APIKey, cloud.WithClock(clk.Now), cloud.WithSleep(func(ctx context.Context, d time.Duration) error {
		clk.Advance(d)
		return rec.sleep(ctx, d)
	}))
	if err != nil {
		t.Fatal(err)
	}
	a := launchReadme(t, c)
	collect(t, c.Watch(context.Background(), a.ID, cloud.WatchOptions{Interval: interval}))
	srv.ResetCalls()

	// No follow-up actually reaches the agent: it stays FINISHED, and the
	// watch ends only when the grace has passed.
	us := collect(t, c.Watch(context.Background(), a.ID, cloud.WatchOptions{Interval: time.Second, FollowUp: true, FollowUpGrace: 5 * time.Second}))
	if got := describe(us); len(got) == 0 || got[len(got)-1] != "done FINISHED" {
		t.Fatalf("updates = %v", got)
	}
	for _, u := range us {
		if u.Kind == cloud.UpdateStatus {
			t.Fatalf("a stale terminal status was reported as a change: %v", describe(us))
		}
	}
	if n := srv.Calls()[cloudtest.RouteAgent]; n != 6 {
		t.Fatalf("status polls = %d, want 6 (0 s .. 5 s)", n)
	}
}

func TestWatchStop(t *testing.T) {
	srv := newFake(t)
	rec := &recorder{}
	c, err := cloud.New(srv.URL, srv.APIKey, cloud.WithSleep(rec.sleep))
	if err != nil {
		t.Fatal(err)
	}
	a := launchReadme(t, c)
	stopped := make(chan error, 1)
	rec.onSleep = func(n int) {
		if n == 2 { // after the poll that saw RUNNING and the first message
			stopped <- c.Stop(context.Background(), a.ID)
		}
	}
	us := collect(t, c.Watch(context.Background(), a.ID, cloud.WatchOptions{Interval: interval}))
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	want := []string{
		"status CREATING",
		"message msg_001 user_message add a README",
		"status RUNNING",
		"message msg_002 assistant_message " + cloudtest.DefaultFirstMessage,
		"done STOPPED",
	}
	if got := describe(us); !slices.Equal(got, want) {
		t.Fatalf("updates = %q", got)
	}
}

func TestWatchFailedRun(t *testing.T) {
	srv := newFake(t)
	c, _ := newClient(t, srv)
	a, err := c.Launch(context.Background(), cloud.LaunchRequest{Prompt: cloud.Prompt{Text: "make it fail"}, Source: cloud.Source{Repository: "https://github.com/acme/shop"}})
	if err != nil {
		t.Fatal(err)
	}
	us := collect(t, c.Watch(context.Background(), a.ID, cloud.WatchOptions{Interval: interval}))
	last := us[len(us)-1]
	if last.Kind != cloud.UpdateDone || last.Agent.Status != cloud.StatusError || last.Agent.Summary != cloudtest.DefaultFailSummary {
		t.Fatalf("last = %v", describe(us))
	}
}

func TestWatchExpired(t *testing.T) {
	srv := newFake(t)
	c, _ := newClient(t, srv)
	a := launchReadme(t, c)
	srv.SetStatus(a.ID, "EXPIRED")
	us := collect(t, c.Watch(context.Background(), a.ID, cloud.WatchOptions{Interval: interval}))
	want := []string{"message msg_001 user_message add a README", "done EXPIRED"}
	if got := describe(us); !slices.Equal(got, want) {
		t.Fatalf("updates = %q", got)
	}
}

func TestWatchUnknownStatusKeepsPolling(t *testing.T) {
	srv := newFake(t, cloudtest.WithScript(func(in cloudtest.ScriptInput) []cloudtest.Step {
		return []cloudtest.Step{
			{Status: "CREATING"},
			{Status: "WAITING_FOR_SOMETHING_NEW"},
			{Status: "WAITING_FOR_SOMETHING_NEW"},
			{Status: "RUNNING", Say: "ok"},
			{Status: "FINISHED"},
		}
	}))
	c, _ := newClient(t, srv)
	a := launchReadme(t, c)
	us := collect(t, c.Watch(context.Background(), a.ID, cloud.WatchOptions{Interval: interval}))
	want := []string{
		"status CREATING",
		"message msg_001 user_message add a README",
		"status WAITING_FOR_SOMETHING_NEW",
		"status RUNNING",
		"message msg_002 assistant_message ok",
		"done FINISHED",
	}
	if got := describe(us); !slices.Equal(got, want) {
		t.Fatalf("updates = %q", got)
	}
}

func TestWatchGrowthReportedOncePerGrowth(t *testing.T) {
	srv := newFake(t, cloudtest.WithScript(func(in cloudtest.ScriptInput) []cloudtest.Step {
		return []cloudtest.Step{
			{Status: "RUNNING", Say: "a"},
			{Grow: "b"},
			{}, // no change
			{Grow: "c"},
			{Status: "FINISHED"},
		}
	}))
	c, _ := newClient(t, srv)
	a := launchReadme(t, c)
	var grew []string
	for _, u := range collect(t, c.Watch(context.Background(), a.ID, cloud.WatchOptions{Interval: interval})) {
		if u.Kind == cloud.UpdateMessageGrew {
			grew = append(grew, u.Previous+"→"+u.Message.Text)
		}
	}
	if want := []string{"a→ab", "ab→abc"}; !reflect.DeepEqual(grew, want) {
		t.Fatalf("growth = %q, want %q", grew, want)
	}
}

func TestWatchNotFoundEnds(t *testing.T) {
	srv := newFake(t)
	c, _ := newClient(t, srv)
	us := collect(t, c.Watch(context.Background(), "bc_missing", cloud.WatchOptions{Interval: interval}))
	if got := describe(us); !slices.Equal(got, []string{"error not_found"}) {
		t.Fatalf("updates = %q", got)
	}
}

func TestWatchBacksOffOnRetryableErrors(t *testing.T) {
	srv := newFake(t)
	c, rec := newClient(t, srv, cloud.WithRetry(1, 0))
	a := launchReadme(t, c)
	srv.Fail(cloudtest.Fault{Method: http.MethodGet, Path: "/v0/agents/{id}", Status: http.StatusServiceUnavailable, Times: 3})
	us := collect(t, c.Watch(context.Background(), a.ID, cloud.WatchOptions{Interval: interval, MaxBackoff: 25 * time.Millisecond}))
	if last := us[len(us)-1]; last.Kind != cloud.UpdateDone || last.Agent.Status != cloud.StatusFinished {
		t.Fatalf("updates = %q", describe(us))
	}
	want := []time.Duration{10 * time.Millisecond, 20 * time.Millisecond, 25 * time.Millisecond}
	if got := rec.Sleeps(); len(got) < 3 || !slices.Equal(got[:3], want) {
		t.Fatalf("sleeps = %v, want prefix %v", got, want)
	}
}

func TestWatchGivesUpAfterMaxErrors(t *testing.T) {
	srv := newFake(t)
	c, _ := newClient(t, srv, cloud.WithRetry(1, 0))
	a := launchReadme(t, c)
	srv.Fail(cloudtest.Fault{Method: http.MethodGet, Path: "/v0/agents/{id}", Status: http.StatusTooManyRequests, Times: 100})
	us := collect(t, c.Watch(context.Background(), a.ID, cloud.WatchOptions{Interval: interval, MaxErrors: 3}))
	if got := describe(us); !slices.Equal(got, []string{"error rate_limited"}) {
		t.Fatalf("updates = %q", got)
	}
	if n := srv.Calls()[cloudtest.RouteAgent]; n != 3 {
		t.Fatalf("status calls = %d, want 3", n)
	}
}

func TestWatchEndsWithContext(t *testing.T) {
	srv := newFake(t, cloudtest.WithManualAdvance())
	c, _ := newClient(t, srv)
	a := launchReadme(t, c)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	us := collect(t, func(yield func(cloud.Update) bool) {
		for u := range c.Watch(ctx, a.ID, cloud.WatchOptions{Interval: interval}) {
			cancel() // once the first update is in
			if !yield(u) {
				return
			}
		}
	})
	if len(us) == 0 || us[0].Kind != cloud.UpdateStatus {
		t.Fatalf("updates = %q", describe(us))
	}
	for _, u := range us[1:] {
		if u.Kind == cloud.UpdateDone || u.Kind == cloud.UpdateError {
			t.Fatalf("unexpected final update after cancel: %+v", u)
		}
	}
}
