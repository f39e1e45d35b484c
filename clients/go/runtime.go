package convo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// RuntimeFunc answers convo's requests for a model answer: runtime/run (for Run and
// JSON) and runtime/stream (for Stream). The host owns the model; convo owns the
// conversation. req.Messages is the repaired history followed by the new user message.
//
// For a stream, send the answer's pieces with req.SendText or req.SendDelta while it
// arrives, then return the final answer: that is what convo stores. The answer may be
// the provider's whole response (ResponseAnswer), which convo stores as AddResponse
// does.
//
// ctx ends when convo stops waiting (a timeout, or the caller cancelled the request
// that asked) or the client closes. An error is sent to convo as the answer's error
// (an *RPCError as it is, any other error as code -32000 with its text); convo reports
// it to the caller as ErrRuntimeFailed with reason "error".
//
// Each request is answered on its own goroutine, so f must be safe for concurrent use.
type RuntimeFunc func(ctx context.Context, req *RuntimeRequest) (*RuntimeAnswer, error)

// RuntimeRequest is the params of runtime/run and runtime/stream.
type RuntimeRequest struct {
	SessionID string `json:"session_id"`
	// Purpose is "run", "json" or "summarize" (Compact with Summarize).
	Purpose string  `json:"purpose"`
	System  *string `json:"system"`
	// Messages are the repaired history, then the new user message.
	Messages    []Message `json:"messages"`
	Temperature *float64  `json:"temperature"`
	MaxTokens   *int64    `json:"max_tokens"`
	// Tools and Metadata are the caller's, as given (null when not given).
	Tools    json.RawMessage `json:"tools"`
	Metadata json.RawMessage `json:"metadata"`
	// Payload is the provider-ready body of Messages, when the client was started
	// WithRuntimeFormat.
	Payload json.RawMessage `json:"payload,omitempty"`
	// ResponseFormat, for purpose "json": {"type": "json_schema", "schema": …}.
	ResponseFormat json.RawMessage `json:"response_format,omitempty"`
	// StreamID is set on runtime/stream.
	StreamID string `json:"stream_id,omitempty"`

	client *Client
}

// Streaming reports whether this is a runtime/stream request, which takes deltas.
func (r *RuntimeRequest) Streaming() bool { return r.StreamID != "" }

// Schema is the JSON Schema the answer must meet, for purpose "json" (nil otherwise).
func (r *RuntimeRequest) Schema() json.RawMessage {
	var f struct {
		Schema json.RawMessage `json:"schema"`
	}
	if len(r.ResponseFormat) == 0 || json.Unmarshal(r.ResponseFormat, &f) != nil {
		return nil
	}
	return f.Schema
}

// Delta is a piece of a streamed answer.
type Delta struct {
	Text      string     `json:"text,omitempty"`
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
}

// SendDelta sends convo a piece of the answer (runtime/delta); text pieces make the
// stream's draft. ErrNotStreaming on a runtime/run request.
func (r *RuntimeRequest) SendDelta(ctx context.Context, d Delta) error {
	if !r.Streaming() {
		return ErrNotStreaming
	}
	return r.client.Notify(ctx, "runtime/delta", struct {
		StreamID string `json:"stream_id"`
		Delta
	}{r.StreamID, d})
}

// SendText sends a piece of the answer's text.
func (r *RuntimeRequest) SendText(ctx context.Context, text string) error {
	return r.SendDelta(ctx, Delta{Text: text})
}

// RuntimeAnswer is the host's answer, in one of two forms:
//   - Text, ToolCalls or both: Usage, Model and StopReason are stored in the assistant
//     message's metadata;
//   - the provider's whole response: Format and Response, as AddResponseParams takes
//     them (the other fields left empty; ResponseAnswer makes one). convo stores it as
//     AddResponse does: the turn as its Native form, its Usage normalised and summed into
//     the session's. A response AddResponse would refuse fails the call with
//     ErrRuntimeFailed, reason "invalid_response".
type RuntimeAnswer struct {
	Text      string     `json:"text,omitempty"`
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// Usage is marshalled as JSON (an object).
	Usage      any    `json:"usage,omitempty"`
	Model      string `json:"model,omitempty"`
	StopReason string `json:"stop_reason,omitempty"`
	// Format names what Response is.
	Format Format `json:"format,omitempty"`
	// Response is the provider's response object, the bytes the host received: see
	// AddResponseParams.Response.
	Response json.RawMessage `json:"response,omitempty"`
}

// ResponseAnswer is the answer that hands convo the provider's whole response: the bytes
// the host received, sent as they are.
func ResponseAnswer(format Format, response json.RawMessage) *RuntimeAnswer {
	return &RuntimeAnswer{Format: format, Response: response}
}

// serve answers one of convo's requests. It runs on the reader, which must never wait
// on the writer (convo may be waiting for its replies to be read), so every answer is
// written from another goroutine.
func (c *Client) serve(env envelope) {
	if (env.Method != "runtime/run" && env.Method != "runtime/stream") || c.runtime == nil {
		go c.reply(env.ID, nil, &RPCError{Code: CodeMethodNotFound, Message: "method not found: " + env.Method})
		return
	}
	req := &RuntimeRequest{client: c}
	if err := json.Unmarshal(env.Params, req); err != nil {
		go c.reply(env.ID, nil, &RPCError{Code: CodeInvalidParams, Message: "invalid params: " + err.Error()})
		return
	}
	if env.Method == "runtime/run" {
		req.StreamID = ""
	}
	key := idKey(env.ID)
	ctx, cancel := context.WithCancel(c.base)
	c.mu.Lock()
	c.handlers[key] = cancel
	c.mu.Unlock()
	go func() {
		defer func() {
			c.mu.Lock()
			delete(c.handlers, key)
			c.mu.Unlock()
			cancel()
		}()
		answer, err := c.runHandler(ctx, req)
		if err != nil {
			c.reply(env.ID, nil, handlerError(err))
			return
		}
		if answer == nil {
			answer = &RuntimeAnswer{}
		}
		c.reply(env.ID, answer, nil)
	}()
}

func (c *Client) runHandler(ctx context.Context, req *RuntimeRequest) (answer *RuntimeAnswer, err error) {
	defer func() {
		if p := recover(); p != nil {
			answer, err = nil, &RPCError{Code: CodeInternalError, Message: fmt.Sprintf("the runtime handler panicked: %v", p)}
		}
	}()
	return c.runtime(ctx, req)
}

func handlerError(err error) *RPCError {
	var rpc *RPCError
	if errors.As(err, &rpc) {
		return rpc
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return &RPCError{Code: CodeRequestCancelled, Message: "request cancelled: " + err.Error()}
	}
	return &RPCError{Code: -32000, Message: err.Error()}
}
