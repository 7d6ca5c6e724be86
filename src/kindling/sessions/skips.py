"""The one vocabulary of skip reasons every session reader counts under.

A reader that drops something malformed calls ``report.skip(REASON)`` with one of these names, so
the same problem reads the same in every format (a test checks that every ``skip`` call in
``kindling.sessions`` uses a name listed here, and docs/sessions.md documents each one).
"""

from __future__ import annotations

# Lines and files
MALFORMED_JSON = "malformed_json"
TRUNCATED_RECORD = "truncated_record"
TRUNCATED_FILE = "truncated_file"
INVALID_UTF8 = "invalid_utf8"
NOT_AN_OBJECT = "not_an_object"
UNREADABLE_FILE = "unreadable_file"
FILE_WITHOUT_SESSIONS = "file_without_sessions"
# Records (one session's worth)
MALFORMED_RECORD = "malformed_record"
# Messages and calls
MALFORMED_MESSAGE = "malformed_message"
UNKNOWN_ROLE = "unknown_role"
ORPHAN_TOOL_RESULT = "orphan_tool_result"
MALFORMED_TOOL_CALLS = "malformed_tool_calls"
MALFORMED_TOOL_CALL = "malformed_tool_call"
TOOL_CALL_WITHOUT_NAME = "tool_call_without_name"
# Databases
MESSAGE_WITHOUT_SESSION = "message_without_session"
DATABASE_ERROR = "database_error"
# Well formed, but stored twice or added by Hermes itself (see kindling.sessions.hermes)
COMPACTION_COPY = "compaction_copy"
COMPACTION_SUMMARY = "compaction_summary"
RECORDING_GAP = "recording_gap"
# Well formed, but not the user's words (see kindling.sessions.claudecode and codex)
AGENT_NOTE = "agent_note"
# Kept in the session, but never the agent's (see kindling.sessions.recorded)
UNVERIFIED_ASSISTANT_TURN = "unverified_assistant_turn"

#: Every skip reason, with what it means (the table in docs/sessions.md says the same).
SKIP_REASONS: dict[str, str] = {
    MALFORMED_JSON: "a line that is not JSON",
    TRUNCATED_RECORD: "the last line of a file, cut short",
    TRUNCATED_FILE: "the rest of a gzip stream or JSON document that ends early",
    INVALID_UTF8: "a line or database row holding bytes that are not UTF-8",
    NOT_AN_OBJECT: "a JSON line or array item that is not an object",
    UNREADABLE_FILE: "a file of a directory source that cannot be opened",
    FILE_WITHOUT_SESSIONS: "a JSON file of a directory source that holds no session (an index.json)",
    MALFORMED_RECORD: "an object without the format's messages/conversations/traj",
    MALFORMED_MESSAGE: "a message that is not an object",
    UNKNOWN_ROLE: "a message whose role is missing or not system/user/assistant/tool",
    ORPHAN_TOOL_RESULT: "a tool result that answers no call made before it",
    MALFORMED_TOOL_CALLS: "a tool_calls value that is not a JSON list",
    MALFORMED_TOOL_CALL: "one call that is not an object / not JSON",
    TOOL_CALL_WITHOUT_NAME: "one call with no function name",
    MESSAGE_WITHOUT_SESSION: "a Hermes message row whose session row is missing",
    DATABASE_ERROR: "a database that failed midway (what was read is kept; the read then stops with an error)",
    COMPACTION_COPY: "a Hermes call (or its result) that compaction repeated, already read",
    COMPACTION_SUMMARY: "a compaction summary (Hermes, Claude Code, Codex), the agent's note about earlier turns, and Claude Code's compaction sub-agent: no message",
    RECORDING_GAP: "messages missing from a proxy recording (a gap in its sequence numbers)",
    AGENT_NOTE: "text a coding agent put in the user's turn (a caveat, command output, an environment block, an interruption, a demonstration), no request",
    UNVERIFIED_ASSISTANT_TURN: "an assistant turn a client sent that kindling's proxy never relayed: kept, "
    "its calls never mined",
}
