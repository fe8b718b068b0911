package cloudtest

import "strings"

// Step is one point of an agent's scripted run. The fake applies the next step
// each time the agent's status is read (GET /v0/agents/{id}) unless
// WithManualAdvance is set, in which case Server.Advance applies it. Within a
// step, Grow is applied before Say.
type Step struct {
	// Status is the agent's status after the step; empty keeps it.
	Status string
	// Grow is appended to the text of the last assistant message (one is
	// created when there is none).
	Grow string
	// Say adds a new assistant message with this text.
	Say string
	// Summary sets the agent's summary.
	Summary string
	// PRURL sets target.prUrl.
	PRURL string
}

// ScriptInput is what a Script knows about the run it plans.
type ScriptInput struct {
	AgentID    string
	Prompt     string
	FollowUp   bool
	Repository string // source repository, or the one a source PR URL belongs to
	BranchName string // target.branchName
}

// Script returns the steps of a run: after a launch, or after a follow-up
// (FollowUp true; the fake appends them to any steps left).
type Script func(in ScriptInput) []Step

// Texts of the default script.
const (
	DefaultFirstMessage    = "I'll add the README."
	DefaultFencedBlock     = "\n\n```markdown\n# Shop\n\nA tiny shop.\n```"
	DefaultSummary         = "Added README.md with a short description of the shop."
	DefaultFollowUpMessage = "Follow-up done."
	DefaultFollowUpSummary = "Applied the follow-up."
	DefaultFailMessage     = "I'll try."
	DefaultFailSummary     = "The run failed."
	DefaultPRNumber        = "7"
)

// DefaultScript is the fake's default plan.
//
// A launch whose prompt does not contain "fail": the first status read stays
// CREATING; the second is RUNNING with the assistant message
// "I'll add the README."; the third grows that same message by a fenced
// markdown block; the fourth adds "README.md is on the branch <branch>." and is
// FINISHED with a summary and target.prUrl = <repository>/pull/7.
//
// A launch whose prompt contains "fail" (any case): CREATING, then RUNNING with
// "I'll try.", then ERROR with a summary.
//
// A follow-up (the agent is set RUNNING when it arrives): the next read adds
// "Follow-up done.", the one after is FINISHED.
func DefaultScript(in ScriptInput) []Step {
	if in.FollowUp {
		return []Step{
			{Status: "RUNNING", Say: DefaultFollowUpMessage},
			{Status: "FINISHED", Summary: DefaultFollowUpSummary},
		}
	}
	if strings.Contains(strings.ToLower(in.Prompt), "fail") {
		return []Step{
			{Status: "CREATING"},
			{Status: "RUNNING", Say: DefaultFailMessage},
			{Status: "ERROR", Summary: DefaultFailSummary},
		}
	}
	return []Step{
		{Status: "CREATING"},
		{Status: "RUNNING", Say: DefaultFirstMessage},
		{Grow: DefaultFencedBlock},
		{
			Status:  "FINISHED",
			Say:     "README.md is on the branch " + in.BranchName + ".",
			Summary: DefaultSummary,
			PRURL:   strings.TrimRight(in.Repository, "/") + "/pull/" + DefaultPRNumber,
		},
	}
}
