package convo

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Sentinel errors, one per error code of the protocol. A call's error matches the
// sentinel of the code the server answered with:
//
//	if errors.Is(err, convo.ErrSessionNotFound) { ... }
//
// and errors.As gives the *RPCError itself, with the code, the message and the data.
var (
	// ErrSessionNotFound is code 1001: no such session.
	ErrSessionNotFound = errors.New("convo: session not found")
	// ErrSessionExists is code 1002: create, fork or from_dict onto a taken id.
	ErrSessionExists = errors.New("convo: session already exists")
	// ErrRevisionConflict is code 1003: expected_revision differs (nothing changed), or
	// the session changed while the host answered a run (the answer is in the data).
	ErrRevisionConflict = errors.New("convo: revision conflict")
	// ErrInvalidSequence is code 1004: a tool result the conversation rules refuse.
	ErrInvalidSequence = errors.New("convo: invalid sequence")
	// ErrTooLarge is code 1005: a frame, batch, request or reply over the limits.
	ErrTooLarge = errors.New("convo: too large")
	// ErrStorageUnavailable is code 1006: the store failed; the request took no effect.
	ErrStorageUnavailable = errors.New("convo: storage unavailable")
	// ErrMessageNotFound is code 1007: at_message_id is not in the session.
	ErrMessageNotFound = errors.New("convo: message not found")
	// ErrRuntimeFailed is code 1008: the host's runtime failed, timed out, is absent or
	// answered nonsense; see ErrorData.Reason.
	ErrRuntimeFailed = errors.New("convo: runtime failed")
	// ErrInvalidOutput is code 1009: session/json's last answer is not JSON or breaks
	// the schema; see ErrorData.Errors and ErrorData.Text.
	ErrInvalidOutput = errors.New("convo: invalid output")
	// ErrMessageExists is code 1010: a MessageID given to an append is held in the
	// session by a different message (ErrorData.MessageID), or an AddMessages retry
	// matches only some of its messages; nothing was stored.
	ErrMessageExists = errors.New("convo: message exists")
	// ErrCancelled is code -32800: the server ended the request after a
	// $/cancelRequest. (A call whose own ctx ends returns ctx.Err() instead.)
	ErrCancelled = errors.New("convo: request cancelled")

	// ErrInvalidParams is code -32602: a wrong type, a missing member, a bad id, …
	ErrInvalidParams = errors.New("convo: invalid params")
	// ErrInvalidRequest is code -32600: not a JSON-RPC request, or a request after shutdown.
	ErrInvalidRequest = errors.New("convo: invalid request")
	// ErrMethodNotFound is code -32601: the server has no such method.
	ErrMethodNotFound = errors.New("convo: method not found")
	// ErrParse is code -32700: the frame was not JSON.
	ErrParse = errors.New("convo: parse error")
	// ErrInternal is code -32603: a bug in the server (caught; the server goes on).
	ErrInternal = errors.New("convo: internal error")

	// ErrClosed is returned by calls on a closed client, and by calls that were in
	// flight when the convo process ended.
	ErrClosed = errors.New("convo: client closed")
	// ErrBinaryNotFound is returned by Start when no convo binary was found: neither
	// WithBinary, nor CONVO_BINARY, nor `convo` (`convo.exe` on Windows) on PATH.
	ErrBinaryNotFound = errors.New("convo: binary not found")
	// ErrNotStreaming is returned by RuntimeRequest.SendDelta on a runtime/run request,
	// which takes no deltas.
	ErrNotStreaming = errors.New("convo: not a runtime/stream request")
)

// Error codes of the protocol.
const (
	CodeSessionNotFound    = 1001
	CodeSessionExists      = 1002
	CodeRevisionConflict   = 1003
	CodeInvalidSequence    = 1004
	CodeTooLarge           = 1005
	CodeStorageUnavailable = 1006
	CodeMessageNotFound    = 1007
	CodeRuntimeFailed      = 1008
	CodeInvalidOutput      = 1009
	CodeMessageExists      = 1010
	CodeRequestCancelled   = -32800
	CodeParseError         = -32700
	CodeInvalidRequest     = -32600
	CodeMethodNotFound     = -32601
	CodeInvalidParams      = -32602
	CodeInternalError      = -32603
)

var sentinels = map[int]error{
	CodeSessionNotFound:    ErrSessionNotFound,
	CodeSessionExists:      ErrSessionExists,
	CodeRevisionConflict:   ErrRevisionConflict,
	CodeInvalidSequence:    ErrInvalidSequence,
	CodeTooLarge:           ErrTooLarge,
	CodeStorageUnavailable: ErrStorageUnavailable,
	CodeMessageNotFound:    ErrMessageNotFound,
	CodeRuntimeFailed:      ErrRuntimeFailed,
	CodeInvalidOutput:      ErrInvalidOutput,
	CodeMessageExists:      ErrMessageExists,
	CodeRequestCancelled:   ErrCancelled,
	CodeParseError:         ErrParse,
	CodeInvalidRequest:     ErrInvalidRequest,
	CodeMethodNotFound:     ErrMethodNotFound,
	CodeInvalidParams:      ErrInvalidParams,
	CodeInternalError:      ErrInternal,
}

// RPCError is a JSON-RPC error object: the server's answer to a call that failed, or
// what a runtime handler returns to answer convo with a specific error.
type RPCError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *RPCError) Error() string {
	return fmt.Sprintf("convo: %s (code %d)", e.Message, e.Code)
}

// Is reports whether target is the sentinel error of e's code (ErrSessionNotFound for
// 1001, …), so that errors.Is works on any error that wraps an *RPCError.
func (e *RPCError) Is(target error) bool {
	s, ok := sentinels[e.Code]
	return ok && s == target
}

// Kind is data.kind: "session_not_found", "revision_conflict", … ("" when absent).
func (e *RPCError) Kind() string {
	return e.Details().Kind
}

// Details decodes Data into the members the protocol defines for application errors;
// members the error does not carry stay zero.
func (e *RPCError) Details() ErrorData {
	var d ErrorData
	if len(e.Data) > 0 {
		_ = json.Unmarshal(e.Data, &d)
	}
	return d
}

// DecodeData decodes Data into v.
func (e *RPCError) DecodeData(v any) error {
	if len(e.Data) == 0 {
		return errors.New("convo: the error has no data")
	}
	return json.Unmarshal(e.Data, v)
}

// ErrorData holds the members of an error's data, for every application error code.
type ErrorData struct {
	// Kind names the error: session_not_found, session_exists, revision_conflict,
	// invalid_sequence, too_large, storage_unavailable, message_not_found,
	// runtime_failed, invalid_output, message_exists, request_cancelled.
	Kind string `json:"kind"`
	// SessionID: 1001, 1002.
	SessionID string `json:"session_id,omitempty"`
	// CurrentRevision and ExpectedRevision: 1003.
	CurrentRevision  *int64 `json:"current_revision,omitempty"`
	ExpectedRevision *int64 `json:"expected_revision,omitempty"`
	// Response: 1003 from Run, JSON and Stream: the host's answer, not stored because
	// the session changed meanwhile.
	Response json.RawMessage `json:"response,omitempty"`
	// Reason: 1004 (duplicate_result, unknown_tool_call_id, no_pending_tool_calls) and
	// 1008 (error, no_runtime, timeout, disconnected, invalid_response).
	Reason string `json:"reason,omitempty"`
	// ToolCallID: 1004.
	ToolCallID string `json:"tool_call_id,omitempty"`
	// Size and Limit: 1005.
	Size  *int64 `json:"size,omitempty"`
	Limit *int64 `json:"limit,omitempty"`
	// Tokens and MaxTokens: 1005 from a Fit that cannot be met (Tokens the smallest
	// body convo could make, MaxTokens the budget asked for).
	Tokens    *int64 `json:"tokens,omitempty"`
	MaxTokens *int64 `json:"max_tokens,omitempty"`
	// MessageID: 1007, 1010.
	MessageID string `json:"message_id,omitempty"`
	// Detail and Error: 1008 (Error: the host's error object).
	Detail string          `json:"detail,omitempty"`
	Error  json.RawMessage `json:"error,omitempty"`
	// Errors and Text: 1009.
	Errors []OutputError `json:"errors,omitempty"`
	Text   string        `json:"text,omitempty"`
	// MessageIDs: -32800, what a cancelled stream kept.
	MessageIDs []string `json:"message_ids,omitempty"`
}

// OutputError is one reason session/json refused an answer.
type OutputError struct {
	// Path is a JSON pointer into the answer, empty for the whole.
	Path    string `json:"path"`
	Message string `json:"message"`
}
