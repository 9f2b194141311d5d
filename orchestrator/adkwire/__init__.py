"""ADK's wire conventions on toolfleet's sessions, shared by `toolfleet.adk` (ADK's Python
API) and the HTTP API's ADK routes: confirmations as `adk_request_confirmation` calls,
FunctionResponse parts that complete pending calls, and session operations outside an
invocation."""
