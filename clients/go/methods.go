package convo

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
)

// The typed methods, one per method of protocol/openrpc.json (shutdown is sent by Close,
// and by Shutdown). Errors are *RPCError, matching the sentinels with errors.Is.

// Initialize asks for the server's info and capabilities, and sets (or, without
// params.Runtime, clears) the runtime format. Start has already sent it.
func (c *Client) Initialize(ctx context.Context, params InitializeParams) (*InitializeResult, error) {
	var r InitializeResult
	if err := c.Call(ctx, "initialize", params, &r); err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.info = &r
	c.mu.Unlock()
	return &r, nil
}

// Shutdown waits for every earlier request and makes every acknowledged write durable;
// convo refuses every later request. Close sends it, then exit; call Close after it.
func (c *Client) Shutdown(ctx context.Context) error {
	err := c.Call(ctx, "shutdown", nil, nil)
	if err == nil {
		c.shutDown.Store(true)
	}
	return err
}

// CreateSession creates an empty session (session/create); ErrSessionExists when the id
// is taken.
func (c *Client) CreateSession(ctx context.Context, params CreateSessionParams) (*SessionInfo, error) {
	return call[SessionInfo](ctx, c, "session/create", params)
}

// GetSession returns a session's record (session/get).
func (c *Client) GetSession(ctx context.Context, params GetSessionParams) (*SessionInfo, error) {
	return call[SessionInfo](ctx, c, "session/get", params)
}

// ListSessions returns a page of sessions, newest created first (session/list).
func (c *Client) ListSessions(ctx context.Context, params ListSessionsParams) (*SessionPage, error) {
	return call[SessionPage](ctx, c, "session/list", params)
}

// UpdateSession sets or clears a session's system prompt, cwd, title and metadata
// (session/update).
func (c *Client) UpdateSession(ctx context.Context, params UpdateSessionParams) (*SessionInfo, error) {
	return call[SessionInfo](ctx, c, "session/update", params)
}

// DeleteSession deletes a session; its forks keep their history (session/delete).
func (c *Client) DeleteSession(ctx context.Context, params DeleteSessionParams) (*Deleted, error) {
	return call[Deleted](ctx, c, "session/delete", params)
}

// DeleteSessions deletes the sessions named, or every session last updated before a
// time, in one atomic step; forks keep their history (session/delete_many).
func (c *Client) DeleteSessions(ctx context.Context, params DeleteSessionsParams) (*DeletedMany, error) {
	return call[DeletedMany](ctx, c, "session/delete_many", params)
}

// The appends (AddUser, AddAssistant, AddToolResult, AddResponse, AddMessage and
// AddMessages) are exactly once when the server says Capabilities.ExactlyOnce: every
// message gets an id (its MessageID, or a random UUID v4 chosen here when empty), and a
// call that failed with ErrStorageUnavailable is sent once more, the same. When the
// first attempt did commit after all, the retry is answered as it was, with Duplicate
// set. No other error is retried. A server without the capability would ignore the ids
// (a retry could store the message twice): to it the appends go as given, once.

// AddUser appends a user message (session/add_user). Unanswered calls of the trailing
// tool-call group are cancelled first.
func (c *Client) AddUser(ctx context.Context, params AddUserParams) (*Added, error) {
	once := c.exactlyOnce()
	params.MessageID = messageID(params.MessageID, once)
	return appendOnce[Added](ctx, c, "session/add_user", params, once)
}

// AddAssistant appends an assistant message, with text, tool calls or both
// (session/add_assistant).
func (c *Client) AddAssistant(ctx context.Context, params AddAssistantParams) (*Added, error) {
	once := c.exactlyOnce()
	params.MessageID = messageID(params.MessageID, once)
	return appendOnce[Added](ctx, c, "session/add_assistant", params, once)
}

// AddToolResult appends the result of an unanswered call of the trailing group
// (session/add_tool_result), with the images the tool returned, if any;
// ErrInvalidSequence when the rules refuse it.
func (c *Client) AddToolResult(ctx context.Context, params AddToolResultParams) (*Added, error) {
	once := c.exactlyOnce()
	params.MessageID = messageID(params.MessageID, once)
	return appendOnce[Added](ctx, c, "session/add_tool_result", params, once)
}

// AddResponse appends a provider's whole response object, as the host received it, as
// one assistant message (session/add_response): the turn kept as its Native form, its
// content and tool calls derived, its Usage normalised and summed into the session's,
// and params.Metadata merged with {response_id, stop_reason}. The rules of AddAssistant
// apply. ToolCallIDs are the ids the turn's results must name. A response not of
// params.Format, or with no assistant output (failed, refused with no content, stopped by
// the content filter with no content, no candidate), is ErrInvalidParams, and nothing is
// stored.
func (c *Client) AddResponse(ctx context.Context, params AddResponseParams) (*AddedResponse, error) {
	once := c.exactlyOnce()
	params.MessageID = messageID(params.MessageID, once)
	return appendOnce[AddedResponse](ctx, c, "session/add_response", params, once)
}

// AddMessage appends any message under the same rules (session/add_message); its id is
// params.MessageID or params.Message.MessageID.
func (c *Client) AddMessage(ctx context.Context, params AddMessageParams) (*Added, error) {
	once := c.exactlyOnce()
	if params.Message.MessageID == "" {
		params.MessageID = messageID(params.MessageID, once)
	}
	return appendOnce[Added](ctx, c, "session/add_message", params, once)
}

// AddMessages appends messages in order, all or nothing, in one revision
// (session/add_messages); each message's id is its MessageID.
func (c *Client) AddMessages(ctx context.Context, params AddMessagesParams) (*AddedMany, error) {
	once := c.exactlyOnce()
	if once && len(params.Messages) > 0 {
		// A copy: the caller's messages are left as they are.
		messages := make([]MessageInput, len(params.Messages))
		copy(messages, params.Messages)
		for i := range messages {
			messages[i].MessageID = messageID(messages[i].MessageID, once)
		}
		params.Messages = messages
	}
	return appendOnce[AddedMany](ctx, c, "session/add_messages", params, once)
}

// History returns the messages, repaired unless Repair is Ptr(false) (session/history).
func (c *Client) History(ctx context.Context, params HistoryParams) (*History, error) {
	return call[History](ctx, c, "session/history", params)
}

// Trim drops the oldest whole turns, to MaxTurns turns or until the history fits
// MaxTokens tokens (session/trim).
func (c *Client) Trim(ctx context.Context, params TrimParams) (*TrimResult, error) {
	return call[TrimResult](ctx, c, "session/trim", params)
}

// Fork copies a session, up to AtMessageID when given, into a new one (session/fork).
func (c *Client) Fork(ctx context.Context, params ForkParams) (*SessionInfo, error) {
	return call[SessionInfo](ctx, c, "session/fork", params)
}

// Rewind drops every message after ToMessageID, keeping a tool-call group whole; with
// Archive the history as it was is first kept as a new session (session/rewind).
func (c *Client) Rewind(ctx context.Context, params RewindParams) (*Rewound, error) {
	return call[Rewound](ctx, c, "session/rewind", params)
}

// Pop removes the last stored message, whatever its role (a tool result included: its
// call is then open again), and returns it; ReplaceWith is stored in its place in the
// same step (session/pop). Watchers see ChangeRewound.
func (c *Client) Pop(ctx context.Context, params PopParams) (*Popped, error) {
	return call[Popped](ctx, c, "session/pop", params)
}

// Compact replaces the turns before the last KeepTurns with one summary message,
// given or (Summarize) asked of the host's runtime (session/compact).
func (c *Client) Compact(ctx context.Context, params CompactParams) (*Compacted, error) {
	return call[Compacted](ctx, c, "session/compact", params)
}

// Image returns the image a ref names (session/image).
func (c *Client) Image(ctx context.Context, params ImageParams) (*ImageData, error) {
	return call[ImageData](ctx, c, "session/image", params)
}

// Search finds messages by their text (words, prefix*, "phrases", all required), best
// match first, a page at a time (NextCursor); a message shared by forks is a hit in each
// session holding it (session/search).
func (c *Client) Search(ctx context.Context, params SearchParams) (*SearchPage, error) {
	return call[SearchPage](ctx, c, "session/search", params)
}

// Clear drops every message, keeping the system prompt, cwd and metadata
// (session/clear).
func (c *Client) Clear(ctx context.Context, params ClearParams) (*Cleared, error) {
	return call[Cleared](ctx, c, "session/clear", params)
}

// ToDict returns the session as the generic agent library's to_dict does
// (session/to_dict).
func (c *Client) ToDict(ctx context.Context, params ToDictParams) (*Dict, error) {
	return call[Dict](ctx, c, "session/to_dict", params)
}

// FromDict imports a session from ToDict's (or the agent library's) dict
// (session/from_dict).
func (c *Client) FromDict(ctx context.Context, params FromDictParams) (*Imported, error) {
	return call[Imported](ctx, c, "session/from_dict", params)
}

// Export returns the provider-ready request body of the history (session/export): a
// message whose Native is of the format (and, with Model, of that model) is replayed
// from its body verbatim; every other message is built from its common form, what the
// format cannot carry left out with a warning. The context options (Compaction,
// ClearThinking, ClearToolResults, Fit, Cache) edit the body on its way out, never the
// stored history; Exported.Context, Edits and Fit say what they did. A Fit that cannot
// be met is ErrTooLarge (RPCError.Details().Tokens and MaxTokens).
func (c *Client) Export(ctx context.Context, params ExportParams) (*Exported, error) {
	return call[Exported](ctx, c, "session/export", params)
}

// Validate lists what a provider would refuse in the stored history (session/validate).
func (c *Client) Validate(ctx context.Context, params ValidateParams) (*Validated, error) {
	return call[Validated](ctx, c, "session/validate", params)
}

// CountTokens counts the tokens of the body Export would send with the same options
// (session/count_tokens): the system prompt and the repaired history, from the latest
// compaction point, edited and fitted. TokenCount.Context, Edits and Fit are set as
// Exported's are; with Fit it previews the fitted body.
func (c *Client) CountTokens(ctx context.Context, params CountTokensParams) (*TokenCount, error) {
	return call[TokenCount](ctx, c, "session/count_tokens", params)
}

// Run asks the host's runtime (WithRuntime) for an answer to Input and stores the user
// message and the answer in one step (session/run).
func (c *Client) Run(ctx context.Context, params RunParams) (*RunAnswer, error) {
	return call[RunAnswer](ctx, c, "session/run", params)
}

// JSON is Run for an answer that must be JSON meeting Schema (session/json).
func (c *Client) JSON(ctx context.Context, params JSONParams) (*JSONAnswer, error) {
	return call[JSONAnswer](ctx, c, "session/json", params)
}

// Stream is Run through runtime/stream: the runtime sends deltas, which convo keeps as
// a draft until the final answer (session/stream). When ctx ends first, convo keeps
// what was said (the user message and the partial answer, with metadata
// {"partial": true, "reason": "cancelled"}).
func (c *Client) Stream(ctx context.Context, params RunParams) (*RunAnswer, error) {
	return call[RunAnswer](ctx, c, "session/stream", params)
}

// exactlyOnce reports whether the server's initialize said Capabilities.ExactlyOnce.
func (c *Client) exactlyOnce() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.info != nil && c.info.Capabilities.ExactlyOnce
}

// appendOnce is call for an append: when once holds (the params carry their ids), a call
// that failed with ErrStorageUnavailable is sent once more, the same.
func appendOnce[T any](ctx context.Context, c *Client, method string, params any, once bool) (*T, error) {
	r, err := call[T](ctx, c, method, params)
	if err != nil && once && errors.Is(err, ErrStorageUnavailable) {
		return call[T](ctx, c, method, params)
	}
	return r, err
}

// messageID is id, or when it is empty and once holds, a new random UUID v4 (RFC 9562).
func messageID(id string, once bool) string {
	if id != "" || !once {
		return id
	}
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		// As Go 1.24's crypto/rand does itself: without randomness there is no safe id.
		panic(fmt.Sprintf("convo: crypto/rand failed: %v", err))
	}
	b[6] = b[6]&0x0f | 0x40 // version 4
	b[8] = b[8]&0x3f | 0x80 // variant 10
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// call is Call for the typed methods: the result, or nil and the error.
func call[T any](ctx context.Context, c *Client, method string, params any) (*T, error) {
	var r T
	if err := c.Call(ctx, method, params, &r); err != nil {
		return nil, err
	}
	return &r, nil
}
