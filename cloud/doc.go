// Package cloud is Docstream's typed client for the Cursor Cloud Agents API (v0).
//
// A Client covers every v0 endpoint: listing, reading, launching, following up,
// stopping and deleting agents, reading an agent's conversation, and the API key,
// model and repository lists. Requests authenticate with HTTP Basic auth, the API
// key being the user name and the password empty. The key never appears in an
// error or log message.
//
// # Retries
//
// Reads (GET), DELETE and stop are retried on 429, on 5xx and on transport
// errors, with exponential backoff and full jitter, honouring Retry-After
// (seconds or an HTTP date). Retries are bounded by the attempt count (default
// 4), by the largest delay (default 30 s; a Retry-After beyond it ends the
// retries and is reported in Error.RetryAfter) and by the context deadline (a
// wait that would pass it is not started).
//
// Launch (POST /v0/agents) and FollowUp (POST /v0/agents/{id}/followup) are not
// idempotent: the API has no idempotency key, so repeating a request whose
// outcome is unknown can start a second billable agent or deliver a prompt twice.
// They are therefore retried only after a 429, which the API sends before doing
// anything. After a timeout, a transport error or a 5xx they fail at once, and
// the error says the outcome is unknown; the caller should list agents (or read
// the conversation) before trying again.
//
// # Repositories
//
// GET /v0/repositories is limited upstream to 1 request per minute and 30 per
// hour. Repositories caches its result (5 minutes by default, see
// WithRepositoriesTTL), shares one request between concurrent callers, keeps the
// limits locally and never sends a request that would exceed them: it answers
// with the cached value, even a stale one, or with an *Error of code
// CodeRateLimited that says when the list can be fetched again.
//
// # Errors
//
// Every failure reported by the API, and every request refused locally, is an
// *Error with a stable Code (see the Code constants); use errors.As. A canceled
// or expired context is returned as an error wrapping ctx.Err().
//
// # Watching an agent
//
// Watch polls an agent's status and conversation and sends Updates on a channel:
// status changes, new messages, messages whose text grew, and a final UpdateDone
// carrying the terminal status, summary, branch name and PR URL (or a final
// UpdateError). See Watch and Update.
package cloud
