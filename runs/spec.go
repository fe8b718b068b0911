// Package runs owns agent runs: the registry that admits, queues and starts
// them, each run's replayable event log, and the saver that writes their
// responses to the store off the event path.
package runs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/docstream/docstream/documents"
	"github.com/docstream/docstream/translate"
)

// Spec is everything a run needs.
type Spec struct {
	ResponseID     string
	Created        string
	Prompt         string // what the agent receives
	UserPrompt     string // what the client asked, as stored with the turn
	ConversationID string // a resumed conversation: response_start goes out at once
	SessionID      string // the agent session to resume
	Mode           string
	Model          string
	Workspace      string // the resolved directory
	WorkspaceName  string
	Backend        string // the backend's name: "cli" or "cloud"
	Thinking       bool
	IncludeRaw     bool
	// Interactive says that the client answers the agent's questions and
	// permission requests (ACP mode); other runs never wait for them.
	Interactive bool
	// Owner is the id of the API key that asked for the run ("" when auth
	// is off): a digest prefix, never the key. It is stored with the turn
	// and, for a new conversation, with the conversation.
	Owner string
	// Cloud is what the cloud backend needs beyond the fields above (a
	// *cloud.RunSpec).
	Cloud any
	// Surface is what the API that asked for the run keeps with it (the
	// Responses API's request fields, say); the run does not read it.
	Surface any
	// Kill, set by the registry, says when the run is to be killed at once,
	// also when it is already being stopped gracefully.
	Kill Killer
}

// Killer gives a channel that is closed when a run is to be killed at once.
type Killer interface{ KillNow() <-chan struct{} }

// Backend runs agents.
type Backend interface {
	// Run drives one run, feeding the agent's output to seg, until the agent
	// finishes or ctx ends (StopCause(ctx) says why), and says how it ended.
	Run(ctx context.Context, spec *Spec, seg *translate.Segmenter) translate.End
}

// Config bounds what the registry keeps of runs (the `runs` section).
type Config struct {
	DetachGrace  time.Duration `yaml:"detach_grace"`
	KeepFinished time.Duration `yaml:"keep_finished"`
	// KeepFinishedBytes bounds the logs of the finished runs kept, together.
	KeepFinishedBytes int `yaml:"keep_finished_bytes"`
	LogMaxEvents      int `yaml:"log_max_events"`
	LogMaxBytes       int `yaml:"log_max_bytes"`
}

// Limits bounds how many runs run and wait (the `limits` section).
type Limits struct {
	MaxConcurrentRuns int           `yaml:"max_concurrent_runs"`
	QueueSize         int           `yaml:"queue_size"`
	QueueTimeout      time.Duration `yaml:"queue_timeout"`
	SpawnPerSecond    float64       `yaml:"spawn_per_second"`
}

// Stop is the cause a run's context is cancelled with: why it stopped, and
// whether its agent is to be killed without a grace.
type Stop struct {
	Reason documents.StopReason
	Msg    string
	Kill   bool
}

func (e *Stop) Error() string { return e.Msg }

// StopCause says why ctx ended: the stop reason, a message, and whether the
// agent is to be killed without a grace.
func StopCause(ctx context.Context) (documents.StopReason, string, bool) {
	var se *Stop
	if errors.As(context.Cause(ctx), &se) {
		return se.Reason, se.Msg, se.Kill
	}
	return documents.StopCancelled, "the run was cancelled", false
}

// Errors the registry refuses a run with.
var (
	ErrOverloaded   = errors.New("every run slot is busy and the queue is full; try again shortly")
	ErrShuttingDown = errors.New("the gateway is shutting down")
	ErrRunning      = errors.New("the run has not finished")
)

// UnknownBackendError refuses a run for a backend that is not configured.
type UnknownBackendError struct{ Name string }

func (e *UnknownBackendError) Error() string {
	return fmt.Sprintf("backend %q is not configured", e.Name)
}

// BusyError refuses a turn sent while the conversation's last one, ID when
// known, still runs.
type BusyError struct{ ID string }

func (e *BusyError) Error() string {
	which := ""
	if e.ID != "" {
		which = " (" + e.ID + ")"
	}
	return "a turn of this conversation is still running" + which + ": send the next one after its done, or cancel it"
}
