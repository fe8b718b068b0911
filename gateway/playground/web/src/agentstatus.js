// The notice a turn shows while the agent reconnects to its service: the
// stream's status events ({"state","attempt"}) set it, and it goes once the
// agent is back (reconnected) or its work shows again.

/** Events that show the agent working again: the notice goes. */
const RESUMING = new Set(['document_start', 'content_delta', 'tool_call_start', 'tool_call_arguments', 'tool_result', 'document_end', 'thinking_delta', 'done']);

/** The notice's text for a status event's data, or null for none. */
export function statusNotice(data) {
  const attempt = data && Number.isInteger(data.attempt) && data.attempt > 0 ? ` (attempt ${data.attempt})` : '';
  switch (data && data.state) {
    case 'reconnecting':
      return `Reconnecting${attempt}…`;
    case 'retrying':
      return `Retrying${attempt}…`;
    default:
      return null; // reconnected, or a state this page does not know
  }
}

/**
 * The notice after one stream event: a status event sets or clears it,
 * an event of the agent's work clears it, any other keeps it.
 */
export function nextNotice(current, name, data) {
  if (name === 'status') return statusNotice(data);
  if (RESUMING.has(name)) return null;
  return current;
}
