// Package runs owns agent runs: the registry that admits, queues and starts
// them, their replayable event logs, and the saver that stores them.
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
	Interactive    bool            // the client answers the agent's questions and permission requests (ACP mode)
	Owner          string          // the id of the API key that asked ("" when auth is off)
	Cloud          any             // a *cloud.RunSpec for the cloud backend
	Surface        any             // what the API that asked keeps with the run; the run does not read it
	Killed         <-chan struct{} // closed when the agent is to be killed at once; set by the registry
}

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

// Stop is the cause a run's context is cancelled with.
type Stop struct {
	Reason documents.StopReason
	Msg    string
	Kill   bool
}

func (e *Stop) Error() string { return e.Msg }

// StopCause says why ctx ended, and whether the agent is to be killed at once.
func StopCause(ctx context.Context) (documents.StopReason, string, bool) {
	if se, ok := errors.AsType[*Stop](context.Cause(ctx)); ok {
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

// BusyError refuses a turn sent while the conversation's last one still runs.
type BusyError struct{ ID string }

func (e *BusyError) Error() string {
	which := ""
	if e.ID != "" {
		which = " (" + e.ID + ")"
	}
	return "a turn of this conversation is still running" + which + ": send the next one after its done, or cancel it"
}
