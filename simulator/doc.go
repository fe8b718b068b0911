// Package simulator is Docstream's built-in cursor-agent simulator, run as the
// hidden subcommand `docstream agent-sim`. The gateway's demo mode, the
// end-to-end tests and the benchmarks use it in place of the real CLI: it takes
// the same command line and writes the same `--output-format stream-json`
// NDJSON as the current cursor-agent, with realistic pacing and fault modes. It
// never contacts a model, reads or writes workspace files, or runs tools; every
// run is scripted.
//
// # Command line
//
//	docstream agent-sim [--sim-speed=<float>] [--print|-p] [--output-format stream-json]
//	    [--stream-partial-output] [--model M] [--mode plan|ask|debug] [--resume ID]
//	    [--workspace DIR] [--force] [--trust] [--approve-mcps] [-H 'Name: Value']...
//	    [--] prompt...
//
// The prompt is the words after `--` joined by spaces, else the positional
// words, else stdin read to EOF (stdin is not read when the arguments hold the
// prompt). Unknown options print `error: unknown option '<flag>'` on stderr
// and exit 1. `models` or `--list-models` lists the models (auto, sim-fast,
// sim-smart); `--model` with any other name fails with `Cannot use this model:
// X. Available models: ...` and exit 1, leaving stdout empty. `--resume` takes
// ids made of [A-Za-z0-9_-] and reuses them as session_id; other ids exit 1.
// `--workspace` must be an existing directory and becomes the init cwd.
// `--help` and `--version` print help and a version containing "simulator".
// The output formats text and json print only the final text or the result
// object.
//
// # Pacing
//
// Delays are realistic by default (a few milliseconds between deltas, tens to
// hundreds of milliseconds around tools). The factor comes from `--sim-speed`
// (accepted anywhere before `--`, usually first) or the environment variable
// DOCSTREAM_SIM_SPEED: 0 removes every delay, 1 is the default, 2 runs twice
// as fast. A paced process runs on one processor unless GOMAXPROCS is set.
//
// # Output
//
// Every run starts with system/init (session_id = the --resume id or a new
// UUID; cwd; the model's display name; permissionMode bypassPermissions with
// --force, else default) and the user echo. Thinking comes as thinking/delta
// events and thinking/completed. Assistant text follows the CLI's two forms:
//
//   - with --stream-partial-output: token deltas with timestamp_ms and no
//     model_call_id; before each tool call a flush repeating the whole
//     segment with model_call_id and timestamp_ms; at the end a flush of the
//     last segment with neither;
//   - without it: one event per segment, mid-turn segments with
//     model_call_id and timestamp_ms, the last one without.
//
// Tool calls use the current layout: tool_call/started and tool_call/completed
// with `{"<kind>ToolCall":{"args":…,"result":…},"hookAdditionalContexts":[],
// "toolCallId":…,"startedAtMs":"…","completedAtMs":"…"}` and call ids of the
// form "call-<uuid>-<n>\nfc_<uuid>_<n>" (with a literal newline). Parallel
// calls share a model_call_id and complete in order of their duration. A
// rejected shell call completes with only result.rejected and no args. Runs
// end with result/success carrying duration_ms, duration_api_ms, the
// concatenated segments, session_id, request_id and usage whose numbers depend
// only on the scripted content.
//
// # Scenarios
//
// The first word of the prompt (case does not matter) picks the scenario; the
// environment variable DOCSTREAM_SIM_SCENARIO overrides it. With --mode plan a
// prompt that names no scenario plays plan; any other prompt plays default.
//
//   - default: thinking, then a short markdown reply quoting the prompt with a
//     fenced ```go block.
//   - tour: every document type in one run: text; a ```python and a ```bash
//     block; a code reference fenced as ```12:14:src/main.py; editToolCall
//     creating a file (diff from /dev/null) and editing one (a real hunk,
//     before and after contents, line counts); deleteToolCall; a shell success
//     and a rejected shell; readToolCall, globToolCall, grepToolCall,
//     lsToolCall, mcpToolCall and webFetchToolCall; createPlanToolCall with
//     todos and dependencies; updateTodosToolCall; askQuestionToolCall; two
//     parallel shell calls completing out of order; thinking; a final text.
//   - plan: thinking, no text, one createPlanToolCall (todos with dependencies).
//   - ask: an askQuestionToolCall with stable ids (q1: jwt, session; q2:
//     postgres, sqlite), then text.
//   - permissions: two shell commands outside the CLI's allow list (npm
//     test, rm -rf build/), rejected in print mode; asked for in ACP mode.
//   - echo: the assistant text is a JSON object {argv, prompt, resume, stdin,
//     model, mode, workspace, force, trust, approveMcps, streamPartialOutput}.
//   - tools: shell, read, glob, grep, ls, semantic search, read lints, web
//     search, web fetch and MCP calls in a row.
//   - long:<n>: n paragraphs streamed as deltas (default 5).
//   - bench:<n>: n deltas whose text is exactly "[ts:<unix nanoseconds at
//     emit>] ", then the final flush and result; no thinking, no tools.
//   - fault:crash: output and an open tool call, then "Error: simulated crash"
//     on stderr, exit 1, no result.
//   - fault:hang-mid: init and some text, then silence until killed.
//   - fault:hang-after: a complete run with result, then silence until killed.
//   - fault:oversize: a 10 MiB readToolCall completed line mid-run, then a
//     normal end.
//   - fault:garbage: `T: [internal] retrying`, a truncated JSON line, a
//     {"type":"mystery"} event and an error text line mixed into a normal run.
//   - fault:stderr-flood: 20 MiB on stderr during a normal run; the result
//     follows once the flood is written.
//   - fault:ignore-term: ignores SIGTERM, writes some text, hangs.
//   - fault:grandchild: starts `sleep 3600` holding stdout and stderr, writes a
//     complete run and exits 0.
//   - fault:no-result: a normal run without result, exit 0.
//   - fault:error-event: {"type":"error","message":"upstream hiccup"} mid-run,
//     then a normal end.
//   - fault:is-error: ends with result subtype error, is_error true and result
//     "simulated agent error"; exit 0.
//   - fault:exit-signal: SIGKILLs itself mid-stream.
//   - fault:reconnect: connection/retry events mid-turn, then success.
//   - fault:retry-exhausted: three reconnect rounds, a `T:` line, stderr text,
//     exit 1 without result.
//   - fault:auth: the CLI's authentication error on stderr, exit 1, no output.
//
// Scenarios returns the same list for documentation.
//
// # ACP
//
// `agent-sim [options] acp` speaks the Agent Client Protocol on stdin and
// stdout instead, as `agent acp` does: initialize, authenticate,
// session/new, session/load (which replays a short history first),
// session/set_mode, session/prompt and session/cancel. Each prompt plays
// the scenario it names: text and thinking come as chunks, tool calls as
// tool_call and tool_call_update (shell output in rawOutput, edits as diff
// content); a command print mode rejects asks with
// session/request_permission (allow-once, allow-always, reject-once) and
// waits; questions and plans are cursor/ask_question and cursor/create_plan
// requests that wait for the client, todos cursor/update_todos; the prompt
// ends with its stopReason and usage. The faults fail the same way; an
// error event is a JSON-RPC error without id.
//
// # Signals and logging
//
// SIGTERM (or cancelling the context) stops the run at once with exit code
// 143 and no result; SIGINT prints "Aborting operation..." and exits 130. If
// DOCSTREAM_SIM_LOG names a file, every start appends one JSON line
// {"argv", "prompt", "cwd", "env" (sorted variable names only), "pid"}.
// Simulators share no state, so any number can run in parallel.
package simulator
