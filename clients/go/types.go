package convo

import (
	"bytes"
	"encoding/json"
	"errors"
)

// Role is a message's role.
type Role string

// The four roles.
const (
	RoleSystem    Role = "system"
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// Format names a provider's body format: for Export, Validate, CountTokens, Trim,
// FromDict and the runtime's payload, the request body; for AddResponse and a runtime
// answer, the response object; for Native, the turn's own form.
type Format string

// The provider formats convo converts to (InitializeResult's Capabilities.Formats lists
// them).
const (
	FormatOpenAIChat         Format = "openai_chat"      // Chat Completions
	FormatOpenAIResponses    Format = "openai_responses" // the Responses API
	FormatAnthropicMessages  Format = "anthropic_messages"
	FormatGeminiContents     Format = "gemini_contents"     // Gemini's generateContent
	FormatGeminiInteractions Format = "gemini_interactions" // Gemini's Interactions API
)

// Ptr returns a pointer to v: convo.Ptr(int64(3)) for an ExpectedRevision, convo.Ptr(false)
// for a Repair.
func Ptr[T any](v T) *T { return &v }

// Nullable is a parameter that can be left out, set to a value, or set to null: the zero
// value leaves the field alone, Value(v) sets it, Null[T]() clears it. UpdateSession
// uses it, where null and absent differ.
type Nullable[T any] struct {
	value T
	state uint8 // 0 absent, 1 value, 2 null
}

// Value is a Nullable set to v.
func Value[T any](v T) Nullable[T] { return Nullable[T]{value: v, state: 1} }

// Null is a Nullable set to null.
func Null[T any]() Nullable[T] { return Nullable[T]{state: 2} }

// IsSet reports whether the field is given (a value or null).
func (n Nullable[T]) IsSet() bool { return n.state != 0 }

// IsNull reports whether the field is null.
func (n Nullable[T]) IsNull() bool { return n.state == 2 }

// Get returns the value and whether there is one.
func (n Nullable[T]) Get() (T, bool) { return n.value, n.state == 1 }

// MarshalJSON writes the value, or null.
func (n Nullable[T]) MarshalJSON() ([]byte, error) {
	if n.state != 1 {
		return []byte("null"), nil
	}
	return json.Marshal(n.value)
}

// Content is a message's content as raw JSON: a string, null, or an array of content
// parts (objects with a string "type"). It is kept exactly as given, so big numbers and
// member order survive. Text and Parts make one; AsText reads a string back.
type Content json.RawMessage

// Text is string content.
func Text(s string) Content {
	b, _ := json.Marshal(s)
	return Content(b)
}

// Parts is content made of content parts, each marshalled as JSON (a map, a struct, or
// a json.RawMessage); each must be an object with a string "type".
func Parts(parts ...any) (Content, error) {
	if parts == nil {
		parts = []any{}
	}
	b, err := json.Marshal(parts)
	return Content(b), err
}

// IsNull reports whether the content is null (or empty).
func (c Content) IsNull() bool {
	t := bytes.TrimSpace(c)
	return len(t) == 0 || string(t) == "null"
}

// AsText returns the content as a string, when it is one.
func (c Content) AsText() (string, bool) {
	var s string
	t := bytes.TrimSpace(c)
	if len(t) == 0 || t[0] != '"' || json.Unmarshal(t, &s) != nil {
		return "", false
	}
	return s, true
}

// String returns string content as is, and any other content as its JSON.
func (c Content) String() string {
	if s, ok := c.AsText(); ok {
		return s
	}
	if len(c) == 0 {
		return "null"
	}
	return string(c)
}

// MarshalJSON writes the content as given (null when empty).
func (c Content) MarshalJSON() ([]byte, error) {
	if len(c) == 0 {
		return []byte("null"), nil
	}
	return c, nil
}

// UnmarshalJSON keeps a copy of the JSON.
func (c *Content) UnmarshalJSON(b []byte) error {
	*c = append((*c)[:0], b...)
	return nil
}

// ToolCall is one tool call of an assistant message, as raw JSON: an object with a
// non-empty string "id" whose other members are kept exactly as given. The shapes convo
// converts between providers are {id, name, arguments}, OpenAI's {id, type: "function",
// function: {name, arguments}} and Anthropic's {id, name, input}; NewToolCall makes the
// first.
type ToolCall json.RawMessage

// NewToolCall makes {"id": id, "name": name, "arguments": arguments}; arguments is
// marshalled as JSON (a map, a struct, or a json.RawMessage).
func NewToolCall(id, name string, arguments any) (ToolCall, error) {
	args, err := json.Marshal(arguments)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(struct {
		ID        string          `json:"id"`
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}{id, name, args})
	return ToolCall(b), err
}

// ID returns the call's "id" ("" when it has none).
func (t ToolCall) ID() string {
	var v struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(t, &v)
	return v.ID
}

// Name returns the call's tool name, from "name" or OpenAI's "function.name".
func (t ToolCall) Name() string {
	var v struct {
		Name     string `json:"name"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	_ = json.Unmarshal(t, &v)
	if v.Name != "" {
		return v.Name
	}
	return v.Function.Name
}

// MarshalJSON writes the call as given.
func (t ToolCall) MarshalJSON() ([]byte, error) {
	if len(t) == 0 {
		return nil, errors.New("convo: empty tool call")
	}
	return t, nil
}

// UnmarshalJSON keeps a copy of the JSON.
func (t *ToolCall) UnmarshalJSON(b []byte) error {
	*t = append((*t)[:0], b...)
	return nil
}

// Message is a stored message; every field is always present in the server's answer,
// null where unset.
type Message struct {
	// ID is the message's UUID: the MessageID it was appended with (this client gives
	// every append one, a v4, when the caller did not), else a v7 the server assigned;
	// nil only on the synthetic results of a repaired view.
	ID         *string    `json:"id"`
	Role       Role       `json:"role"`
	Content    Content    `json:"content"`
	Name       *string    `json:"name"`
	ToolCallID *string    `json:"tool_call_id"`
	ToolCalls  []ToolCall `json:"tool_calls"`
	// Images are base64 strings (nil when the reply shows images by reference).
	Images   []string        `json:"images"`
	Metadata json.RawMessage `json:"metadata"`
	// Native is the assistant turn in its provider's own form (from AddResponse, a
	// runtime's {format, response} answer, or an import with a format); nil otherwise.
	// Content and ToolCalls are derived from it.
	Native *Native `json:"native"`
	// Usage is what the response that made the message cost; nil when not known.
	Usage *Usage `json:"usage"`
	// CreatedAt is RFC 3339 in UTC with six digits of fraction, so stamps sort as text.
	CreatedAt string `json:"created_at"`
	// ImageRefs are the images of a reply asked for with Images: ImagesRef.
	ImageRefs []ImageRef `json:"-"`
}

// Native is an assistant turn exactly as its provider returned it, kept beside the
// common form (Content, ToolCalls) so that an export to the same format sends it back
// byte for byte: thinking blocks and their signatures, reasoning items, encrypted
// content, item ids, thought signatures and member order included.
type Native struct {
	Format Format `json:"format"`
	// Model is the model that produced it (Anthropic, Responses and Chat "model", Gemini
	// "modelVersion"); nil when unknown, as after an import.
	Model *string `json:"model"`
	// Body is the turn as raw JSON, as convo sent it (the client decodes none of it, so
	// member order, numbers and every opaque value come through): Anthropic the
	// Message's "content" array; the Responses API the response's "output" items; Chat
	// "choices[0].message"; Gemini candidate 0's "content" ({parts, role: "model"}).
	Body json.RawMessage `json:"body"`
}

// Usage is what one response cost, normalised across providers; a member is nil where
// the provider did not say. InputTokens counts cached input too; OutputTokens counts
// reasoning.
type Usage struct {
	InputTokens      *int64 `json:"input_tokens"`
	OutputTokens     *int64 `json:"output_tokens"`
	CacheReadTokens  *int64 `json:"cache_read_tokens"`
	CacheWriteTokens *int64 `json:"cache_write_tokens"`
	ReasoningTokens  *int64 `json:"reasoning_tokens"`
}

// UsageTotals is what a session has spent: each member the sum of the non-nil values of
// every message appended with a Usage since the session was created (0 when none).
// Trim, Rewind, Clear and Compact do not lower it; a fork starts at 0; FromDict sums the
// imported messages'. A plain runtime answer's usage stays in its message's metadata and
// is not summed.
type UsageTotals struct {
	InputTokens      int64 `json:"input_tokens"`
	OutputTokens     int64 `json:"output_tokens"`
	CacheReadTokens  int64 `json:"cache_read_tokens"`
	CacheWriteTokens int64 `json:"cache_write_tokens"`
	ReasoningTokens  int64 `json:"reasoning_tokens"`
}

// ImageRef is an image shown by reference: Ref is "sha256:" and the hex digest of its
// decoded bytes; Image gives the data back, and AddUser takes a ref as an image.
type ImageRef struct {
	Ref       string `json:"ref"`
	MediaType string `json:"media_type"`
	Bytes     int64  `json:"bytes"`
}

// ImagesRef asks History, ToDict and Export for images by reference.
const ImagesRef = "ref"

// UnmarshalJSON reads images as base64 strings into Images, or as references into
// ImageRefs.
func (m *Message) UnmarshalJSON(data []byte) error {
	type plain Message
	var raw struct {
		plain
		Images json.RawMessage `json:"images"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	*m = Message(raw.plain)
	if len(raw.Images) == 0 || string(raw.Images) == "null" {
		return nil
	}
	if err := json.Unmarshal(raw.Images, &m.Images); err == nil {
		return nil
	}
	m.Images = nil
	return json.Unmarshal(raw.Images, &m.ImageRefs)
}

// MessageInput is a message to append: a Message without id and created_at.
type MessageInput struct {
	Role    Role    `json:"role"`
	Content Content `json:"content,omitempty"`
	Name    *string `json:"name,omitempty"`
	// ToolCallID is required on a tool message and refused on the others.
	ToolCallID string `json:"tool_call_id,omitempty"`
	// ToolCalls only on an assistant message.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	Images    []string   `json:"images,omitempty"`
	// Metadata is marshalled as JSON (an object: a map, a struct or a json.RawMessage).
	Metadata any `json:"metadata,omitempty"`
	// Native, only on an assistant message, is the turn in its provider's own form:
	// Content and ToolCalls are then derived from it, and giving them beside it is
	// ErrInvalidParams (FromDict takes them when they are its common form).
	Native *Native `json:"native,omitempty"`
	// Usage is what the response that made the message cost; the session's usage sums it.
	Usage *Usage `json:"usage,omitempty"`
	// AllowEmpty stores an assistant message with neither text nor tool calls as given
	// instead of refusing it; Export leaves it out with a warning.
	AllowEmpty bool `json:"allow_empty,omitempty"`
	// MessageID is the message's id, a UUID (see AddUserParams.MessageID): AddMessages
	// takes one per message (a UUID v4 is chosen for each left empty), AddMessage here or
	// in AddMessageParams.MessageID; FromDict ignores it.
	MessageID string `json:"message_id,omitempty"`
}

// ForkedFrom says where a fork came from.
type ForkedFrom struct {
	SessionID string `json:"session_id"`
	// MessageID is the last copied message's id; nil when none was copied.
	MessageID *string `json:"message_id"`
}

// SessionInfo is a session's record.
type SessionInfo struct {
	SessionID    string          `json:"session_id"`
	System       *string         `json:"system"`
	Cwd          *string         `json:"cwd"`
	Title        *string         `json:"title"`
	Metadata     json.RawMessage `json:"metadata"`
	MessageCount int             `json:"message_count"`
	Revision     int64           `json:"revision"`
	CreatedAt    string          `json:"created_at"`
	UpdatedAt    string          `json:"updated_at"`
	ForkedFrom   *ForkedFrom     `json:"forked_from"`
	// Usage is what the session has spent on the responses appended to it.
	Usage UsageTotals `json:"usage"`
}

// InitializeParams are initialize's params.
type InitializeParams struct {
	// Runtime, when its Format is set, makes every runtime request carry a payload: the
	// provider-ready request body of its messages.
	Runtime *RuntimeConfig `json:"runtime,omitempty"`
}

// RuntimeConfig is what initialize says of the host's runtime.
type RuntimeConfig struct {
	Format Format `json:"format,omitempty"`
}

// InitializeResult is the server's info and capabilities.
type InitializeResult struct {
	ServerInfo struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	} `json:"server_info"`
	ProtocolVersion int `json:"protocol_version"`
	Capabilities    struct {
		Methods         []string `json:"methods"`
		Store           string   `json:"store"`
		MaxMessageBytes int64    `json:"max_message_bytes"`
		Framing         string   `json:"framing"`
		// Formats are the provider formats Export, Validate, CountTokens, Trim,
		// AddResponse and FromDict take.
		Formats []Format `json:"formats"`
		// ExactlyOnce: appends take a MessageID, and a retry is answered as the first
		// time instead of stored twice. Only then does this client give every append an
		// id and send it once more after ErrStorageUnavailable.
		ExactlyOnce bool `json:"exactly_once"`
		// Context lists the context options (spec section 17) Export and CountTokens
		// take: compaction, clear_thinking, clear_tool_results, fit, cache.
		Context []string `json:"context"`
	} `json:"capabilities"`
	// Store is the store as the server opened it.
	Store struct {
		// ReadOnly: opened for reading only (a file or file system the server cannot
		// write); reads are answered, every write is ErrStorageUnavailable.
		ReadOnly bool `json:"read_only"`
	} `json:"store"`
}

// CreateSessionParams are session/create's params; every field is optional.
type CreateSessionParams struct {
	// SessionID is 1-128 characters of A-Z a-z 0-9 . _ : -; a UUID v7 when empty.
	SessionID string `json:"session_id,omitempty"`
	System    string `json:"system,omitempty"`
	Cwd       string `json:"cwd,omitempty"`
	Title     string `json:"title,omitempty"`
	// Metadata is marshalled as JSON (an object).
	Metadata any `json:"metadata,omitempty"`
}

// GetSessionParams are session/get's params.
type GetSessionParams struct {
	SessionID string `json:"session_id"`
}

// ListSessionsParams are session/list's params.
type ListSessionsParams struct {
	// Limit is 1 to 1000; 100 when 0.
	Limit int `json:"limit,omitempty"`
	// Cursor is the previous page's NextCursor.
	Cursor string `json:"cursor,omitempty"`
	// UpdatedBefore (RFC 3339) keeps only sessions last updated strictly before it.
	UpdatedBefore string `json:"updated_before,omitempty"`
}

// SessionPage is a page of sessions, newest created first.
type SessionPage struct {
	Sessions []SessionInfo `json:"sessions"`
	// NextCursor is nil on the last page.
	NextCursor *string `json:"next_cursor"`
}

// UpdateSessionParams are session/update's params: a field left zero is left alone,
// Value(v) sets it, Null[T]() clears it.
type UpdateSessionParams struct {
	SessionID string           `json:"session_id"`
	System    Nullable[string] `json:"system"`
	Cwd       Nullable[string] `json:"cwd"`
	Title     Nullable[string] `json:"title"`
	// Metadata: Value[any](an object: a map, a struct, a json.RawMessage) or Null[any]().
	Metadata         Nullable[any] `json:"metadata"`
	ExpectedRevision *int64        `json:"expected_revision,omitempty"`
}

// MarshalJSON leaves out the fields that are not set.
func (p UpdateSessionParams) MarshalJSON() ([]byte, error) {
	m := make(map[string]any, 6)
	m["session_id"] = p.SessionID
	for name, f := range map[string]interface {
		IsSet() bool
		MarshalJSON() ([]byte, error)
	}{"system": p.System, "cwd": p.Cwd, "title": p.Title, "metadata": p.Metadata} {
		if f.IsSet() {
			m[name] = f
		}
	}
	if p.ExpectedRevision != nil {
		m["expected_revision"] = *p.ExpectedRevision
	}
	return json.Marshal(m)
}

// DeleteSessionParams are session/delete's params.
type DeleteSessionParams struct {
	SessionID        string `json:"session_id"`
	ExpectedRevision *int64 `json:"expected_revision,omitempty"`
}

// Deleted is session/delete's result.
type Deleted struct {
	Deleted bool `json:"deleted"`
}

// DeleteSessionsParams are session/delete_many's params: exactly one of SessionIDs
// (unknown ids are skipped) and UpdatedBefore (RFC 3339, strict).
type DeleteSessionsParams struct {
	SessionIDs    []string `json:"session_ids,omitempty"`
	UpdatedBefore string   `json:"updated_before,omitempty"`
}

// DeletedMany is session/delete_many's result: how many sessions were deleted.
type DeletedMany struct {
	Deleted int64 `json:"deleted"`
}

// AddUserParams are session/add_user's params.
type AddUserParams struct {
	SessionID string `json:"session_id"`
	Text      string `json:"text"`
	// Images are base64 strings.
	Images []string `json:"images,omitempty"`
	// MessageID is the new message's id: a UUID, stored in lower case. When empty the
	// client chooses a random UUID v4. The same id with the same message again (a retry)
	// is answered as the first time with Duplicate set, and nothing changes; with a
	// different message it is ErrMessageExists. The other appends take it the same way.
	MessageID        string `json:"message_id,omitempty"`
	ExpectedRevision *int64 `json:"expected_revision,omitempty"`
}

// AddAssistantParams are session/add_assistant's params: Text, ToolCalls or both.
type AddAssistantParams struct {
	SessionID string     `json:"session_id"`
	Text      string     `json:"text,omitempty"`
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// AllowEmpty stores an answer with neither text nor tool calls (an empty answer a
	// model gave) instead of refusing it; Export leaves it out with a warning.
	AllowEmpty       bool   `json:"allow_empty,omitempty"`
	MessageID        string `json:"message_id,omitempty"`
	ExpectedRevision *int64 `json:"expected_revision,omitempty"`
}

// AddToolResultParams are session/add_tool_result's params.
type AddToolResultParams struct {
	SessionID  string `json:"session_id"`
	ToolCallID string `json:"tool_call_id"`
	// Content: Text("…"), Parts(…), or nil for null.
	Content Content `json:"content"`
	// Images are what the tool returned as images (a screenshot, a plot), base64
	// strings: exported inside the result where the format carries them (Chat
	// Completions leaves them out, with a warning naming the call).
	Images           []string `json:"images,omitempty"`
	MessageID        string   `json:"message_id,omitempty"`
	ExpectedRevision *int64   `json:"expected_revision,omitempty"`
}

// AddMessageParams are session/add_message's params.
type AddMessageParams struct {
	SessionID string       `json:"session_id"`
	Message   MessageInput `json:"message"`
	// MessageID: as Message.MessageID (give one or the other).
	MessageID        string `json:"message_id,omitempty"`
	ExpectedRevision *int64 `json:"expected_revision,omitempty"`
}

// Added says where an appended message went.
type Added struct {
	MessageID string `json:"message_id"`
	// Index is the message's place in the stored history.
	Index    int   `json:"index"`
	Revision int64 `json:"revision"`
	// Duplicate: the append was a retry of one the history holds (its MessageID); this
	// is the first reply, and nothing changed.
	Duplicate bool `json:"duplicate,omitempty"`
}

// AddResponseParams are session/add_response's params.
type AddResponseParams struct {
	SessionID string `json:"session_id"`
	// Format names what Response is: FormatOpenAIChat a "chat.completion",
	// FormatOpenAIResponses a "response" (or the compact endpoint's
	// "response.compaction", stored as a compaction point), FormatAnthropicMessages a
	// "message", FormatGeminiContents a GenerateContentResponse (candidate 0 is stored),
	// FormatGeminiInteractions an Interaction (object "interaction", "completed" or
	// "requires_action"; no id when it was not stored; its steps are stored).
	Format Format `json:"format"`
	// Response is the provider's whole response object, the bytes of the HTTP body as
	// the host received them (a streaming host: the assembled object). It is sent as
	// it is (encoding/json only drops insignificant whitespace), so the turn is stored
	// with its members in the provider's order, which a replay must keep: pass the body
	// itself (json.RawMessage(body), or an SDK's RawJSON()), not a map or a struct made
	// from it, which would reorder or drop members.
	Response json.RawMessage `json:"response"`
	// Metadata (an object: a map, a struct or a json.RawMessage) is merged with
	// {response_id, stop_reason} into the message's metadata.
	Metadata         any    `json:"metadata,omitempty"`
	MessageID        string `json:"message_id,omitempty"`
	ExpectedRevision *int64 `json:"expected_revision,omitempty"`
}

// AddedResponse is session/add_response's result: where the message went, and
// ToolCallIDs, the ids of the calls the turn made, in order (empty for none), which
// their results must name (the Responses API's call_id, never the fc_ item id; a Gemini
// call without an id gets call_<n>).
type AddedResponse struct {
	Added
	ToolCallIDs []string `json:"tool_call_ids"`
}

// AddMessagesParams are session/add_messages's params.
type AddMessagesParams struct {
	SessionID        string         `json:"session_id"`
	Messages         []MessageInput `json:"messages"`
	ExpectedRevision *int64         `json:"expected_revision,omitempty"`
}

// AddedMany is session/add_messages's result.
type AddedMany struct {
	// MessageIDs are the given messages' ids (cancelled results the rules add are not
	// listed).
	MessageIDs []string `json:"message_ids"`
	Revision   int64    `json:"revision"`
	// Duplicate: every message was stored already, the same (a retry); nothing changed.
	Duplicate bool `json:"duplicate,omitempty"`
}

// HistoryParams are session/history's params.
type HistoryParams struct {
	SessionID string `json:"session_id"`
	// Repair (true when nil) adds synthetic results for the trailing group's
	// unanswered calls; Ptr(false) gives the stored messages exactly.
	Repair *bool `json:"repair,omitempty"`
	Offset int   `json:"offset,omitempty"`
	// Limit (0 to 100000): nil for all.
	Limit *int `json:"limit,omitempty"`
	// IncludeDraft asks for a running stream's draft.
	IncludeDraft bool `json:"include_draft,omitempty"`
	// Images is "inline" (when empty) or ImagesRef.
	Images string `json:"images,omitempty"`
}

// History is session/history's result.
type History struct {
	Messages []Message `json:"messages"`
	Revision int64     `json:"revision"`
	// Repaired counts the synthetic results the page holds.
	Repaired int `json:"repaired"`
	// Draft is a running stream's draft, when asked for and there is one.
	Draft *Draft `json:"draft,omitempty"`
}

// Draft is a stream's unfinished turn: the user message, then the partial answer.
type Draft struct {
	StreamID string    `json:"stream_id"`
	Messages []Message `json:"messages"`
}

// TrimParams are session/trim's params: exactly one of MaxTurns and MaxTokens.
type TrimParams struct {
	SessionID string `json:"session_id"`
	MaxTurns  *int   `json:"max_turns,omitempty"`
	MaxTokens *int   `json:"max_tokens,omitempty"`
	// Format, Model, Thinking and Store, with MaxTokens, say which body's tokens are
	// counted, as CountTokens counts them (Format is openai_chat when empty).
	Format           Format `json:"format,omitempty"`
	Model            string `json:"model,omitempty"`
	Thinking         *bool  `json:"thinking,omitempty"`
	Store            *bool  `json:"store,omitempty"`
	ExpectedRevision *int64 `json:"expected_revision,omitempty"`
}

// TrimResult is session/trim's result; Tokens and Fits only with MaxTokens.
type TrimResult struct {
	Removed  int   `json:"removed"`
	Revision int64 `json:"revision"`
	Tokens   *int  `json:"tokens,omitempty"`
	Fits     *bool `json:"fits,omitempty"`
}

// ForkParams are session/fork's params.
type ForkParams struct {
	SessionID    string `json:"session_id"`
	NewSessionID string `json:"new_session_id,omitempty"`
	// AtMessageID copies the history up to and including that message.
	AtMessageID string `json:"at_message_id,omitempty"`
}

// RewindParams are session/rewind's params.
type RewindParams struct {
	SessionID        string `json:"session_id"`
	ToMessageID      string `json:"to_message_id"`
	Archive          bool   `json:"archive,omitempty"`
	ExpectedRevision *int64 `json:"expected_revision,omitempty"`
}

// Rewound is session/rewind's result. ArchivedSessionID is nil unless Archive was set
// and something was dropped.
type Rewound struct {
	Removed           int64   `json:"removed"`
	Revision          int64   `json:"revision"`
	ArchivedSessionID *string `json:"archived_session_id"`
}

// PopParams are session/pop's params.
type PopParams struct {
	SessionID string `json:"session_id"`
	// ReplaceWith is stored in the popped message's place, under the conversation rules,
	// in the same step (so the rest of a grouped message is never lost to a crash).
	ReplaceWith      *MessageInput `json:"replace_with,omitempty"`
	ExpectedRevision *int64        `json:"expected_revision,omitempty"`
}

// Popped is session/pop's result: the message removed, nil (and the revision unchanged)
// when the session was empty.
type Popped struct {
	Message  *Message `json:"message"`
	Revision int64    `json:"revision"`
}

// ClearParams are session/clear's params.
type ClearParams struct {
	SessionID        string `json:"session_id"`
	ExpectedRevision *int64 `json:"expected_revision,omitempty"`
}

// Cleared is session/clear's result.
type Cleared struct {
	Removed  int   `json:"removed"`
	Revision int64 `json:"revision"`
}

// ToDictParams are session/to_dict's params.
type ToDictParams struct {
	SessionID string `json:"session_id"`
	// Images is "inline" (when empty) or ImagesRef.
	Images string `json:"images,omitempty"`
}

// Dict is a session as the generic agent library's to_dict gives it; FromDict takes it
// back.
type Dict struct {
	SessionID string    `json:"session_id"`
	System    *string   `json:"system"`
	Cwd       *string   `json:"cwd"`
	Messages  []Message `json:"messages"`
}

// FromDictParams are session/from_dict's params.
type FromDictParams struct {
	// Data is what ToDict returns (a *Dict), the generic agent library's to_dict, or any
	// value that marshals to such an object (a map, a json.RawMessage).
	Data any `json:"data"`
	// Replace replaces an existing session of that id (else 1002).
	Replace bool `json:"replace,omitempty"`
	// Repair drops tool results with no open call (else 1004).
	Repair           bool   `json:"repair,omitempty"`
	ExpectedRevision *int64 `json:"expected_revision,omitempty"`
	// Format reads Data as that provider's request body (FormatOpenAIChat,
	// FormatOpenAIResponses, FormatAnthropicMessages, FormatGeminiContents,
	// FormatGeminiInteractions): the inverse of Export. Each assistant turn is kept whole as a message with Native.
	Format string `json:"format,omitempty"`
	// SessionID names the imported session, with Format only.
	SessionID string `json:"session_id,omitempty"`
}

// Imported is session/from_dict's result: the session's record and what the import
// repaired.
type Imported struct {
	SessionInfo
	Repaired struct {
		Added   int `json:"added"`
		Dropped int `json:"dropped"`
	} `json:"repaired"`
}

// ExportParams are session/export's params.
type ExportParams struct {
	SessionID string `json:"session_id"`
	Format    Format `json:"format"`
	// Repair is true when nil.
	Repair *bool `json:"repair,omitempty"`
	// Images is "inline" (when empty) or ImagesRef ({ref} where base64 would be).
	Images string `json:"images,omitempty"`
	// Model is the model the request is for: only native bodies of that model (or that
	// model plus a -<date> suffix, either way round) are replayed verbatim; the others
	// are built from the common form, with a warning. Empty: every native body of the
	// format is replayed.
	Model string `json:"model,omitempty"`
	// Thinking (anthropic_messages): Ptr(false) leaves every thinking and
	// redacted_thinking block out; Ptr(true) makes Validate report thinking_required.
	// nil: as stored.
	Thinking *bool `json:"thinking,omitempty"`
	// Store (openai_responses) is true when nil; Ptr(false) says the request is
	// stateless, so a reasoning item without encrypted_content is left out (the ids of
	// the function calls after it dropped, their call_id kept), with a warning, and
	// Validate reports reasoning_not_replayable.
	Store *bool `json:"store,omitempty"`

	// The context options (spec section 17) edit the body on its way out, never the
	// stored history; they apply in the order Compaction, ClearThinking,
	// ClearToolResults, Fit, then Cache. Zero values leave them out (the server's
	// defaults). CountTokensParams take them too; ValidateParams take Cache.

	// Compaction is CompactionUse when empty: an export to the format of the latest
	// compaction point (an Anthropic compaction block, a Responses compaction item)
	// starts there, the messages before it left out (Exported.Context says where).
	// CompactionIgnore sends the whole history.
	Compaction Compaction `json:"compaction,omitempty"`
	// ClearThinking leaves out the reasoning of all but the last Keep assistant
	// messages that carry it (never the current turn's).
	ClearThinking *ClearThinking `json:"clear_thinking,omitempty"`
	// ClearToolResults sends the results of all but the last Keep tool calls with
	// their content replaced by a placeholder.
	ClearToolResults *ClearToolResults `json:"clear_tool_results,omitempty"`
	// Fit makes the body fit MaxTokens (Exported.Fit says how); one that cannot fit is
	// ErrTooLarge with ErrorData.Tokens and ErrorData.MaxTokens, and nothing is
	// exported.
	Fit *Fit `json:"fit,omitempty"`
	// Cache places Anthropic cache_control breakpoints, or OpenAI's prompt_cache_key
	// (and prompt_cache_retention); &convo.Cache{} sends true.
	Cache *Cache `json:"cache,omitempty"`
}

// Compaction says what an export does with a provider's compaction point.
type Compaction string

const (
	// CompactionUse (the default): the body starts at the latest compaction point of
	// the export's format.
	CompactionUse Compaction = "use"
	// CompactionIgnore: the whole history is sent.
	CompactionIgnore Compaction = "ignore"
)

// ClearToolResults is the clear_tool_results option: the results of all but the last
// Keep tool calls (counted in order over the history; the calls of ExcludeTools never
// cleared, nor counted) are sent with their content Placeholder and no images. The
// result stays, so its call is still answered.
type ClearToolResults struct {
	// Keep is 3 when nil; Ptr(0) clears every result.
	Keep         *int     `json:"keep,omitempty"`
	ExcludeTools []string `json:"exclude_tools,omitempty"`
	// Placeholder is "[tool result cleared to save context]" when empty.
	Placeholder string `json:"placeholder,omitempty"`
}

// ClearThinking is the clear_thinking option: the reasoning of all but the last Keep
// assistant messages that carry reasoning is left out, never the current turn's.
type ClearThinking struct {
	// Keep is 1 when nil; Ptr(0) keeps only the current turn's.
	Keep *int `json:"keep,omitempty"`
}

// Fit is the fit option: when the body is larger than MaxTokens, convo clears tool
// results oldest first, then leaves out the reasoning of older turns, then whole oldest
// turns, stopping as soon as it fits; never the system prompt, a compaction summary or
// point, or the last KeepTurns turns.
type Fit struct {
	MaxTokens int `json:"max_tokens"`
	// KeepTurns is 1 when 0.
	KeepTurns int `json:"keep_turns,omitempty"`
}

// Cache is the cache option. Every field empty sends `true`: convo's placement with the
// provider's default TTL (anthropic_messages), prompt_cache_key the session id
// (openai_chat, openai_responses). gemini_contents caches implicitly: nothing is added,
// with a warning.
type Cache struct {
	// TTL (anthropic_messages): "5m" or "1h", on every breakpoint (the system prompt's
	// too, without SystemTTL).
	TTL string `json:"ttl,omitempty"`
	// SystemTTL (anthropic_messages): the system prompt's; shorter than TTL is
	// ErrInvalidParams.
	SystemTTL string `json:"system_ttl,omitempty"`
	// Key (openai_chat, openai_responses): the prompt_cache_key; the session id when
	// empty.
	Key string `json:"key,omitempty"`
	// Retention (openai_chat, openai_responses): "in_memory" or "24h", sent as
	// prompt_cache_retention.
	Retention string `json:"retention,omitempty"`
}

// MarshalJSON sends `true` for a Cache with no field set, else the object.
func (c Cache) MarshalJSON() ([]byte, error) {
	if c == (Cache{}) {
		return []byte("true"), nil
	}
	type object Cache
	return json.Marshal(object(c))
}

// UnmarshalJSON takes `true` (every field empty) or the object; `false` is an error.
func (c *Cache) UnmarshalJSON(b []byte) error {
	switch string(bytes.TrimSpace(b)) {
	case "true":
		*c = Cache{}
		return nil
	case "false", "null":
		return errors.New("convo: cache is true or an object")
	}
	type object Cache
	return json.Unmarshal(b, (*object)(c))
}

// ContextLeftOut says where a body starts when the messages before a compaction point
// were left out: FromIndex is the history index of that point.
type ContextLeftOut struct {
	FromIndex int `json:"from_index"`
}

// Edits is what ClearToolResults and ClearThinking cleared, in tokens counted as
// CountTokens counts them.
type Edits struct {
	ClearedToolResults   int `json:"cleared_tool_results"`
	ClearedThinkingTurns int `json:"cleared_thinking_turns"`
	ClearedTokens        int `json:"cleared_tokens"`
}

// Fitted is what Fit did: the body's tokens before and after, and what it cleared or
// left out to get there.
type Fitted struct {
	TokensBefore         int `json:"tokens_before"`
	Tokens               int `json:"tokens"`
	ClearedToolResults   int `json:"cleared_tool_results"`
	ClearedThinkingTurns int `json:"cleared_thinking_turns"`
	TurnsLeftOut         int `json:"turns_left_out"`
}

// CompactParams are session/compact's params: exactly one of Summary and Summarize.
type CompactParams struct {
	SessionID        string  `json:"session_id"`
	KeepTurns        int     `json:"keep_turns"`
	Summary          *string `json:"summary,omitempty"`
	Summarize        bool    `json:"summarize,omitempty"`
	Archive          bool    `json:"archive,omitempty"`
	TimeoutMS        int64   `json:"timeout_ms,omitempty"`
	ExpectedRevision *int64  `json:"expected_revision,omitempty"`
	// MaxInputTokens, with Summarize, bounds every runtime/run convo sends: the turns
	// are summarised in parts (Part in the host's params), then merged.
	MaxInputTokens int64 `json:"max_input_tokens,omitempty"`
}

// Compacted is session/compact's result; SummaryMessageID is nil when nothing was
// compacted.
type Compacted struct {
	Removed           int64   `json:"removed"`
	Revision          int64   `json:"revision"`
	SummaryMessageID  *string `json:"summary_message_id"`
	ArchivedSessionID *string `json:"archived_session_id"`
}

// ImageParams are session/image's params.
type ImageParams struct {
	Ref string `json:"ref"`
}

// SearchParams are session/search's params. Limit 0 means the default (20); Cursor is
// the NextCursor of the previous page.
type SearchParams struct {
	Query     string `json:"query"`
	SessionID string `json:"session_id,omitempty"`
	Limit     int64  `json:"limit,omitempty"`
	Cursor    string `json:"cursor,omitempty"`
}

// SearchPage is session/search's result: NextCursor is nil on the last page.
type SearchPage struct {
	Hits       []SearchHit `json:"hits"`
	NextCursor *string     `json:"next_cursor"`
}

// SearchHit is a message found in one session: Index is its place in that session's
// history; Snippet shows up to 16 words around the first match, matches in [ ].
type SearchHit struct {
	SessionID string `json:"session_id"`
	MessageID string `json:"message_id"`
	Index     int64  `json:"index"`
	Role      Role   `json:"role"`
	Snippet   string `json:"snippet"`
}

// ImageData is session/image's result.
type ImageData struct {
	Data      string `json:"data"`
	MediaType string `json:"media_type"`
}

// Exported is a provider-ready request body and what export changed to make it one.
type Exported struct {
	// Payload: openai_chat {messages}; openai_responses {instructions?, input};
	// anthropic_messages {system?, messages}; gemini_contents {system_instruction?,
	// contents}; gemini_interactions {system_instruction?, input} (steps). A message
	// whose Native is of the format (and, with Model, of that model) is in it byte for
	// byte.
	Payload  json.RawMessage `json:"payload"`
	Warnings []Warning       `json:"warnings"`
	// Context is set when the messages before a compaction point were left out.
	Context *ContextLeftOut `json:"context,omitempty"`
	// Edits is set when ClearToolResults or ClearThinking was given.
	Edits *Edits `json:"edits,omitempty"`
	// Fit is set when Fit was given.
	Fit *Fitted `json:"fit,omitempty"`
}

// Warning is a change export made; Index is nil when it concerns no one message.
type Warning struct {
	Index   *int   `json:"index"`
	Message string `json:"message"`
}

// ValidateParams are session/validate's params; Model, Thinking, Store and Cache are
// ExportParams' (with Cache, the breakpoints export would place are checked too:
// cache_breakpoints, cache_ttl_order).
type ValidateParams struct {
	SessionID string `json:"session_id"`
	Format    Format `json:"format"`
	Model     string `json:"model,omitempty"`
	Thinking  *bool  `json:"thinking,omitempty"`
	Store     *bool  `json:"store,omitempty"`
	Cache     *Cache `json:"cache,omitempty"`
}

// Validated lists what the provider would refuse.
type Validated struct {
	Violations []Violation `json:"violations"`
}

// Violation is one provider rule the stored history breaks.
type Violation struct {
	Index         int    `json:"index"`
	Rule          string `json:"rule"`
	ProviderError string `json:"provider_error"`
}

// CountTokensParams are session/count_tokens's params.
type CountTokensParams struct {
	SessionID string `json:"session_id"`
	// Format is openai_chat when empty.
	Format Format `json:"format,omitempty"`
	// Model, Thinking, Store and the context options are ExportParams': the count is
	// of the body Export would send with them (Fit: a preview of the fitted body).
	Model            string            `json:"model,omitempty"`
	Thinking         *bool             `json:"thinking,omitempty"`
	Store            *bool             `json:"store,omitempty"`
	Compaction       Compaction        `json:"compaction,omitempty"`
	ClearThinking    *ClearThinking    `json:"clear_thinking,omitempty"`
	ClearToolResults *ClearToolResults `json:"clear_tool_results,omitempty"`
	Fit              *Fit              `json:"fit,omitempty"`
	Cache            *Cache            `json:"cache,omitempty"`
}

// TokenCount is session/count_tokens's result: Tokens, and Context, Edits and Fit as
// Exported has them.
type TokenCount struct {
	Tokens  int             `json:"tokens"`
	Context *ContextLeftOut `json:"context,omitempty"`
	Edits   *Edits          `json:"edits,omitempty"`
	Fit     *Fitted         `json:"fit,omitempty"`
}

// RunParams are session/run's and session/stream's params.
type RunParams struct {
	SessionID string `json:"session_id"`
	// Input is the new user message.
	Input  string   `json:"input"`
	Images []string `json:"images,omitempty"`
	// Temperature and MaxTokens are passed to the host as given (0 stays 0).
	Temperature *float64 `json:"temperature,omitempty"`
	MaxTokens   *int64   `json:"max_tokens,omitempty"`
	// Tools is passed to the host as given (marshalled as JSON).
	Tools any `json:"tools,omitempty"`
	// Metadata is stored on the user message.
	Metadata any `json:"metadata,omitempty"`
	// TimeoutMS bounds the wait for the host (600000 when nil).
	TimeoutMS        *int64 `json:"timeout_ms,omitempty"`
	ExpectedRevision *int64 `json:"expected_revision,omitempty"`
}

// JSONParams are session/json's params: RunParams plus a schema.
type JSONParams struct {
	SessionID   string   `json:"session_id"`
	Input       string   `json:"input"`
	Images      []string `json:"images,omitempty"`
	Temperature *float64 `json:"temperature,omitempty"`
	MaxTokens   *int64   `json:"max_tokens,omitempty"`
	Tools       any      `json:"tools,omitempty"`
	Metadata    any      `json:"metadata,omitempty"`
	TimeoutMS   *int64   `json:"timeout_ms,omitempty"`
	// Schema is a JSON Schema object (draft 2020-12) the answer must validate against.
	Schema any `json:"schema"`
	// Retries is how many more times to ask after a refused answer.
	Retries          int    `json:"retries,omitempty"`
	ExpectedRevision *int64 `json:"expected_revision,omitempty"`
}

// RunAnswer is session/run's and session/stream's result. For a runtime's
// {format, response} answer, Text is the text of its common form (its parts joined by
// newlines), ToolCalls its calls and Usage the normalised Usage.
type RunAnswer struct {
	Text      *string    `json:"text"`
	ToolCalls []ToolCall `json:"tool_calls"`
	// Usage is the runtime's usage as it gave it (nil when none).
	Usage json.RawMessage `json:"usage"`
	// MessageIDs are the stored user and assistant messages' ids.
	MessageIDs []string `json:"message_ids"`
	Revision   int64    `json:"revision"`
}

// JSONAnswer is session/json's result.
type JSONAnswer struct {
	// Value is the answer parsed (and validated), as JSON.
	Value      json.RawMessage `json:"value"`
	Text       string          `json:"text"`
	Usage      json.RawMessage `json:"usage"`
	MessageIDs []string        `json:"message_ids"`
	Revision   int64           `json:"revision"`
}
