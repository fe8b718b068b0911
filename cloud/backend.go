package cloud

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/docstream/docstream/documents"
	"github.com/docstream/docstream/runs"
	"github.com/docstream/docstream/translate"
)

// Config configures the Cloud Agents API backend (the `cloud` section).
type Config struct {
	BaseURL      string        `yaml:"base_url"`
	APIKey       string        `yaml:"api_key"`
	PollInterval time.Duration `yaml:"poll_interval"`
	Default      bool          `yaml:"default"`
	// RequestTimeout bounds a pass-through route, launch or follow-up,
	// retries included (0: only the client's own).
	RequestTimeout time.Duration `yaml:"request_timeout"`
}

// RunSpec is the cloud part of a run: the agent it watches.
type RunSpec struct {
	AgentID    string
	Known      []Message
	FollowUp   bool
	Repository string
}

// Backend watches a launched cloud agent and streams its messages to a run.
type Backend struct {
	Client      *Client
	Interval    time.Duration // how often the agent is polled
	RunTimeout  time.Duration // agent.run_timeout (0: no limit)
	IdleTimeout time.Duration // agent.idle_timeout (0: no limit)
}

var _ runs.Backend = (*Backend)(nil)

// Run watches the agent until a terminal status, the run's time or silence limit.
func (b *Backend) Run(ctx context.Context, spec *runs.Spec, seg *translate.Segmenter) translate.End {
	start := time.Now()
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	if d := b.RunTimeout; d > 0 {
		t := time.AfterFunc(d, func() {
			stop(&runs.Stop{Reason: documents.StopTimeout, Msg: fmt.Sprintf("the run exceeded its time limit of %s", d)})
		})
		defer t.Stop()
	}
	var idle *time.Timer
	if d := b.IdleTimeout; d > 0 {
		idle = time.AfterFunc(d, func() {
			stop(&runs.Stop{Reason: documents.StopTimeout, Msg: fmt.Sprintf("the cloud agent said nothing new for %s", d)})
		})
		defer idle.Stop()
	}
	cs, _ := spec.Cloud.(*RunSpec)
	if cs == nil {
		return translate.End{Err: errors.New("cloud: the run names no cloud agent")}
	}
	info := documents.CloudInfo{AgentID: cs.AgentID, Repository: cs.Repository}
	seg.SetConversation(cs.AgentID)
	seg.SetCloud(info)
	msgs := cloudMessages{seg: seg, sent: map[string]string{}}
	for u := range b.Client.Watch(ctx, cs.AgentID, WatchOptions{Interval: b.Interval, Known: cs.Known, FollowUp: cs.FollowUp}) {
		if idle != nil && u.Kind != UpdateStatus {
			idle.Reset(b.IdleTimeout)
		}
		switch u.Kind {
		case UpdateMessage, UpdateMessageGrew:
			msgs.take(u.Message)
		case UpdateStatus:
			info.Status = string(u.Agent.Status)
		case UpdateDone:
			a := u.Agent
			seg.EndSegment()
			info.Status, info.Summary, info.BranchName, info.PRURL, info.URL = string(a.Status), a.Summary, a.Target.BranchName, a.Target.PRURL, a.Target.URL
			seg.SetCloud(info)
			el := time.Since(start).Milliseconds()
			switch a.Status {
			case StatusFinished:
				seg.Complete(el)
				return translate.End{}
			case StatusStopped:
				return translate.End{Reason: documents.StopCancelled, Message: "the cloud agent was stopped", Elapsed: el}
			default:
				return agentError(fmt.Sprintf("the cloud agent ended with status %s", a.Status), a.Summary, start)
			}
		case UpdateError:
			return agentError("the Cloud Agents API failed: "+u.Err.Error(), "", start)
		}
	}
	// The watch ended with ctx: the run was stopped.
	r, msg, _ := runs.StopCause(ctx)
	stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	_ = b.Client.Stop(stopCtx, cs.AgentID)
	cancel()
	return translate.End{Reason: r, Message: msg, Elapsed: time.Since(start).Milliseconds()}
}

// agentError ends a run that the cloud agent or its API failed.
func agentError(msg, stderr string, start time.Time) translate.End {
	return translate.End{Reason: documents.StopAgentError, Code: documents.CodeCloudAPIError, Source: "cloud-agents",
		Message: msg, Stderr: stderr, Elapsed: time.Since(start).Milliseconds()}
}

// cloudMessages streams a cloud agent's assistant messages as the segmenter's
// text, by id: an earlier message that grows adds only what is new, in a
// segment of its own.
type cloudMessages struct {
	seg     *translate.Segmenter
	current string            // the message the open segment holds
	base    int               // bytes of current's text sent in earlier segments
	sent    map[string]string // each message's text as streamed so far
}

// take streams what is new in m.
func (c *cloudMessages) take(m *Message) {
	if m.Type != AssistantMessage {
		c.seg.EndSegment()
		c.current = ""
		return
	}
	prev, seen := c.sent[m.ID]
	if m.ID != c.current {
		c.seg.EndSegment()
		c.current, c.base = m.ID, 0
		if seen && strings.HasPrefix(m.Text, prev) {
			c.base = len(prev)
		}
	} else if !strings.HasPrefix(m.Text, prev[:c.base]) {
		// Rewritten rather than grown: the segmenter sees a new text.
		c.base = 0
	}
	c.seg.Snapshot(m.Text[c.base:])
	c.sent[m.ID] = m.Text
	c.seg.SetTurnCount(len(c.sent)) // DESIGN §8: a cloud turn's steps are its assistant messages
}
