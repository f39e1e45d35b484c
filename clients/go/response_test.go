package convo_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	convo "github.com/convo-dev/convo/clients/go"
)

// The provider responses in testdata/providers are byte-identical copies of
// tests/fixtures/providers (that folder's README says where each comes from): whole
// response bodies as each provider's API returns them, member order included.

// fixture is a provider response, as its bytes.
func fixture(t *testing.T, name string) json.RawMessage {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "providers", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// pick is the member at path (object members by name, array elements by index), as the
// bytes it has in raw.
func pick(t *testing.T, raw json.RawMessage, path ...string) json.RawMessage {
	t.Helper()
	for _, step := range path {
		if i, err := strconv.Atoi(step); err == nil {
			var a []json.RawMessage
			if err := json.Unmarshal(raw, &a); err != nil || i >= len(a) {
				t.Fatalf("%s: no element %d in %.80s", strings.Join(path, "."), i, raw)
			}
			raw = a[i]
			continue
		}
		var o map[string]json.RawMessage
		if err := json.Unmarshal(raw, &o); err != nil || o[step] == nil {
			t.Fatalf("%s: no member %q in %.80s", strings.Join(path, "."), step, raw)
		}
		raw = o[step]
	}
	return raw
}

// nativeBody is where a response of the format holds the turn that Native.Body keeps.
func nativeBody(t *testing.T, format convo.Format, response json.RawMessage) json.RawMessage {
	t.Helper()
	switch format {
	case convo.FormatAnthropicMessages:
		return pick(t, response, "content")
	case convo.FormatOpenAIResponses:
		return pick(t, response, "output")
	case convo.FormatOpenAIChat:
		return pick(t, response, "choices", "0", "message")
	case convo.FormatGeminiContents:
		return pick(t, response, "candidates", "0", "content")
	case convo.FormatGeminiInteractions:
		return pick(t, response, "steps")
	}
	t.Fatalf("format %q", format)
	return nil
}

func usage(in, out, cacheRead, cacheWrite, reasoning int64) convo.UsageTotals {
	return convo.UsageTotals{InputTokens: in, OutputTokens: out, CacheReadTokens: cacheRead, CacheWriteTokens: cacheWrite, ReasoningTokens: reasoning}
}

// TestAddResponse runs each provider's tool loop with the responses as the providers
// sent them: AddResponse for each turn, a result for each call it names. The stored turns
// keep their bodies byte for byte, an export to the same format sends them back byte for
// byte (and reads back to the same body), and the session's usage is the sum of the
// responses', normalised.
func TestAddResponse(t *testing.T) {
	loops := []struct {
		name   string
		format convo.Format
		model  string
		turns  []string
		calls  [][]string // tool_call_ids, per turn
		// usage: normalised as protocol/README.md's table says (Anthropic input counts
		// cache creation and cache reads; Gemini output counts thoughts; a member the
		// provider leaves out is null, summed as 0).
		usage convo.UsageTotals
	}{
		{"anthropic", convo.FormatAnthropicMessages, "claude-opus-4-6",
			[]string{"anthropic_thinking_tool_use.json", "anthropic_final_answer.json"},
			[][]string{{"toolu_01NRrZKi33evThhcqajiJafW", "toolu_01EbfuYLS2mb2ixXokwVJmU7"}, {}},
			usage(38+1912+0+12+356+1912, 214+173, 0+1912, 1912+356, 131+58)},
		{"anthropic redacted thinking", convo.FormatAnthropicMessages, "claude-opus-4-7",
			[]string{"anthropic_redacted_thinking.json"},
			[][]string{{}},
			usage(29+402+2310, 486, 2310, 402, 421)},
		{"responses", convo.FormatOpenAIResponses, "gpt-5.4-2026-03-05",
			[]string{"openai_responses_reasoning_calls.json", "openai_responses_final.json"},
			[][]string{{"call_NMMoQkOVhAvFRMrYYMH4J2HD", "call_lUybIJbnarepQGqc34N5vUxx"}, {}},
			usage(412+1490, 238+142, 0+1024, 0+0, 164+71)},
		{"responses without encrypted_content", convo.FormatOpenAIResponses, "gpt-5.4-2026-03-05",
			[]string{"openai_responses_reasoning_no_encrypted.json"},
			[][]string{{"call_LtOiVVfDoN8SEQlDmhauevev"}},
			usage(356, 97, 0, 0, 64)},
		{"chat", convo.FormatOpenAIChat, "gpt-4.1-2025-04-14",
			[]string{"openai_chat_tool_calls.json"},
			[][]string{{"call_xNvnWeOXqz5VQYmSQt9a61m8", "call_QhPDZIse59W8BwS2Pg6KyS60"}},
			usage(187, 56, 0, 0, 0)},
		{"deepseek reasoning_content", convo.FormatOpenAIChat, "deepseek-reasoner",
			[]string{"deepseek_chat_reasoning_content.json"},
			[][]string{{"call_00_jqy2kSoF3rjMej7K4pL2En8z"}},
			usage(2312, 214, 1920, 0, 151)},
		{"gemini", convo.FormatGeminiContents, "gemini-3-pro-preview",
			[]string{"gemini_thought_signatures.json", "gemini_final.json"},
			[][]string{{"call_1", "call_2"}, {}}, // Gemini gave no ids: call_<n>
			usage(5210+5402, 96+412+88+230, 4096+5120, 0, 412+230)},
		{"gemini interactions", convo.FormatGeminiInteractions, "gemini-3.1-pro-preview",
			[]string{"gemini_interactions_thought_calls.json", "gemini_interactions_final.json"},
			[][]string{{"isykdkwf", "obimjy3p"}, {}},
			usage(96+231, 58+212+47+64, 0, 0, 212+64)}, // output counts thoughts
	}
	c := start(t)
	ctx := ctxT(t)
	info := c.ServerInfo()
	if got := info.Capabilities.Formats; len(got) != 5 || !containsFormat(got, convo.FormatGeminiInteractions) {
		t.Fatalf("initialize: formats %v", got)
	}
	for i, loop := range loops {
		t.Run(loop.name, func(t *testing.T) {
			id := "loop-" + strconv.Itoa(i)
			must[*convo.SessionInfo](t)(c.CreateSession(ctx, convo.CreateSessionParams{SessionID: id, System: "You are a concise travel assistant."}))
			must[*convo.Added](t)(c.AddUser(ctx, convo.AddUserParams{SessionID: id, Text: "What should I pack for Paris and London tomorrow?"}))
			index := 1
			for k, name := range loop.turns {
				got := must[*convo.AddedResponse](t)(c.AddResponse(ctx, convo.AddResponseParams{
					SessionID: id, Format: loop.format, Response: fixture(t, name),
					Metadata: map[string]string{"trace_id": name}, ExpectedRevision: convo.Ptr(int64(index)),
				}))
				if got.Index != index || got.Revision != int64(index+1) || got.MessageID == "" || !reflect.DeepEqual(got.ToolCallIDs, loop.calls[k]) {
					t.Fatalf("add_response %s: %+v, want index %d, tool_call_ids %q", name, got, index, loop.calls[k])
				}
				index++
				for _, call := range got.ToolCallIDs {
					must[*convo.Added](t)(c.AddToolResult(ctx, convo.AddToolResultParams{SessionID: id, ToolCallID: call, Content: convo.Text("result of " + call)}))
					index++
				}
			}

			// Each turn as stored: its body byte for byte, its model, its metadata, its
			// common form (the calls its results answer).
			h := must[*convo.History](t)(c.History(ctx, convo.HistoryParams{SessionID: id, Repair: convo.Ptr(false)}))
			var bodies []json.RawMessage
			for _, m := range h.Messages {
				if m.Native == nil {
					if m.Role == convo.RoleAssistant {
						t.Fatalf("an assistant message without native: %+v", m)
					}
					continue
				}
				k := len(bodies)
				response := fixture(t, loop.turns[k])
				body := nativeBody(t, loop.format, response)
				if m.Role != convo.RoleAssistant || m.Native.Format != loop.format || str(m.Native.Model) != loop.model {
					t.Fatalf("turn %d: %s, native %s %s", k, m.Role, m.Native.Format, str(m.Native.Model))
				}
				if got, want := compact(t, m.Native.Body), compact(t, body); got != want {
					t.Fatalf("turn %d: the body came back as\n  %s\nnot\n  %s", k, got, want)
				}
				var ids []string
				for _, call := range m.ToolCalls {
					ids = append(ids, call.ID())
				}
				if len(ids) != len(loop.calls[k]) || (len(ids) > 0 && !reflect.DeepEqual(ids, loop.calls[k])) {
					t.Fatalf("turn %d: tool calls %s", k, m.ToolCalls)
				}
				var meta struct {
					TraceID    string `json:"trace_id"`
					ResponseID string `json:"response_id"`
					StopReason string `json:"stop_reason"`
				}
				if err := json.Unmarshal(m.Metadata, &meta); err != nil || meta.TraceID != loop.turns[k] || meta.ResponseID == "" || meta.StopReason == "" {
					t.Fatalf("turn %d: metadata %s", k, m.Metadata)
				}
				if m.Usage == nil || m.Usage.InputTokens == nil || m.Usage.OutputTokens == nil {
					t.Fatalf("turn %d: usage %+v", k, m.Usage)
				}
				bodies = append(bodies, body)
			}
			if len(bodies) != len(loop.turns) {
				t.Fatalf("%d native messages, %d responses", len(bodies), len(loop.turns))
			}

			// The session's usage: the sum of the responses'.
			s := must[*convo.SessionInfo](t)(c.GetSession(ctx, convo.GetSessionParams{SessionID: id}))
			if s.Usage != loop.usage || s.MessageCount != len(h.Messages) {
				t.Fatalf("usage %+v, want %+v", s.Usage, loop.usage)
			}

			// Exported to the same format, each turn is in the body byte for byte (the
			// Responses API's output items and the Interaction's steps spliced into
			// input), with nothing to warn of.
			ex := must[*convo.Exported](t)(c.Export(ctx, convo.ExportParams{SessionID: id, Format: loop.format, Model: loop.model}))
			payload := compact(t, ex.Payload)
			for k, body := range bodies {
				want := compact(t, body)
				if loop.format == convo.FormatOpenAIResponses || loop.format == convo.FormatGeminiInteractions {
					want = want[1 : len(want)-1]
				}
				if !strings.Contains(payload, want) {
					t.Fatalf("turn %d is not in the export byte for byte:\n  %s\nin\n  %s", k, want, payload)
				}
			}
			if len(ex.Warnings) != 0 {
				t.Fatalf("export warnings: %+v", ex.Warnings)
			}
			if v := must[*convo.Validated](t)(c.Validate(ctx, convo.ValidateParams{SessionID: id, Format: loop.format, Model: loop.model})); len(v.Violations) != 0 {
				t.Fatalf("validate: %+v", v.Violations)
			}

			// The body read back as that provider's request keeps each turn whole:
			// exported again, it is the same bytes.
			imp := must[*convo.Imported](t)(c.FromDict(ctx, convo.FromDictParams{Data: ex.Payload, Format: string(loop.format), SessionID: id + "-import"}))
			if imp.Usage != (convo.UsageTotals{}) {
				t.Fatalf("an import from a request body has usage %+v", imp.Usage)
			}
			again := must[*convo.Exported](t)(c.Export(ctx, convo.ExportParams{SessionID: id + "-import", Format: loop.format}))
			if compact(t, again.Payload) != payload {
				t.Fatalf("export, import, export:\n  %s\nnot\n  %s", again.Payload, payload)
			}
		})
	}
}

func containsFormat(formats []convo.Format, f convo.Format) bool {
	for _, g := range formats {
		if g == f {
			return true
		}
	}
	return false
}

// TestAddResponseUsage: Usage keeps what the provider did not say as nil, and the
// session's totals count it as 0.
func TestAddResponseUsage(t *testing.T) {
	c := start(t)
	ctx := ctxT(t)
	must[*convo.SessionInfo](t)(c.CreateSession(ctx, convo.CreateSessionParams{SessionID: "u"}))
	must[*convo.Added](t)(c.AddUser(ctx, convo.AddUserParams{SessionID: "u", Text: "Plans for Saturday?"}))
	must[*convo.AddedResponse](t)(c.AddResponse(ctx, convo.AddResponseParams{SessionID: "u", Format: convo.FormatOpenAIResponses, Response: fixture(t, "openai_responses_reasoning_no_encrypted.json")}))
	h := must[*convo.History](t)(c.History(ctx, convo.HistoryParams{SessionID: "u", Repair: convo.Ptr(false)}))
	u := h.Messages[1].Usage
	// input_tokens_details has no cache_write_tokens in this response.
	if u == nil || *u.InputTokens != 356 || *u.OutputTokens != 97 || *u.CacheReadTokens != 0 || u.CacheWriteTokens != nil || *u.ReasoningTokens != 64 {
		t.Fatalf("usage %+v", u)
	}
	if h.Messages[0].Usage != nil || h.Messages[0].Native != nil {
		t.Fatalf("the user message has usage %+v, native %+v", h.Messages[0].Usage, h.Messages[0].Native)
	}
	if s := must[*convo.SessionInfo](t)(c.GetSession(ctx, convo.GetSessionParams{SessionID: "u"})); s.Usage != usage(356, 97, 0, 0, 64) {
		t.Fatalf("session usage %+v", s.Usage)
	}
	// Spent is spent: clearing the messages does not lower it; a fork starts at 0.
	must[*convo.Cleared](t)(c.Clear(ctx, convo.ClearParams{SessionID: "u"}))
	if s := must[*convo.SessionInfo](t)(c.GetSession(ctx, convo.GetSessionParams{SessionID: "u"})); s.Usage != usage(356, 97, 0, 0, 64) {
		t.Fatalf("session usage after clear %+v", s.Usage)
	}
	if f := must[*convo.SessionInfo](t)(c.Fork(ctx, convo.ForkParams{SessionID: "u"})); f.Usage != (convo.UsageTotals{}) {
		t.Fatalf("fork usage %+v", f.Usage)
	}
}

// TestAddResponseRefused: a response that is not of the named format, or that carries no
// assistant output, is -32602 and nothing is stored; so is one for a revision the session
// no longer has (1003).
func TestAddResponseRefused(t *testing.T) {
	c := start(t)
	ctx := ctxT(t)
	must[*convo.SessionInfo](t)(c.CreateSession(ctx, convo.CreateSessionParams{SessionID: "r"}))
	must[*convo.Added](t)(c.AddUser(ctx, convo.AddUserParams{SessionID: "r", Text: "Hello?"}))
	before := must[*convo.SessionInfo](t)(c.GetSession(ctx, convo.GetSessionParams{SessionID: "r"}))

	for _, tc := range []struct {
		format   convo.Format
		response json.RawMessage
		says     string
	}{
		{convo.FormatOpenAIResponses, fixture(t, "openai_responses_failed.json"), "no assistant output"},
		{convo.FormatAnthropicMessages, fixture(t, "anthropic_refusal_empty.json"), "no assistant output"},
		{convo.FormatGeminiContents, fixture(t, "gemini_no_candidates.json"), "no assistant output"},
		{convo.FormatGeminiInteractions, fixture(t, "gemini_interactions_failed.json"), "its status is failed"},
		{convo.FormatOpenAIChat, fixture(t, "openai_chat_content_filter.json"), "content filter"},
		{convo.FormatGeminiInteractions, fixture(t, "gemini_final.json"), "Interaction"},
		{convo.FormatOpenAIChat, fixture(t, "anthropic_final_answer.json"), "chat.completion"},
		{convo.FormatAnthropicMessages, fixture(t, "openai_chat_tool_calls.json"), "response"},
		{convo.FormatAnthropicMessages, json.RawMessage(`"not an object"`), "response"},
		{"openai_completions", fixture(t, "openai_chat_tool_calls.json"), "format"},
	} {
		_, err := c.AddResponse(ctx, convo.AddResponseParams{SessionID: "r", Format: tc.format, Response: tc.response})
		var rpc *convo.RPCError
		if !errors.Is(err, convo.ErrInvalidParams) || !errors.As(err, &rpc) || rpc.Code != -32602 || !strings.Contains(rpc.Message, tc.says) {
			t.Fatalf("%s %.40s: %v", tc.format, tc.response, err)
		}
	}
	// nil Response is sent as null.
	if _, err := c.AddResponse(ctx, convo.AddResponseParams{SessionID: "r", Format: convo.FormatOpenAIChat}); !errors.Is(err, convo.ErrInvalidParams) {
		t.Fatalf("no response: %v", err)
	}
	ok := fixture(t, "openai_chat_tool_calls.json")
	if _, err := c.AddResponse(ctx, convo.AddResponseParams{SessionID: "r", Format: convo.FormatOpenAIChat, Response: ok, ExpectedRevision: convo.Ptr(int64(0))}); !errors.Is(err, convo.ErrRevisionConflict) {
		t.Fatalf("a stale expected_revision: %v", err)
	}
	if _, err := c.AddResponse(ctx, convo.AddResponseParams{SessionID: "nope", Format: convo.FormatOpenAIChat, Response: ok}); !errors.Is(err, convo.ErrSessionNotFound) {
		t.Fatalf("no such session: %v", err)
	}

	after := must[*convo.SessionInfo](t)(c.GetSession(ctx, convo.GetSessionParams{SessionID: "r"}))
	if after.Revision != before.Revision || after.MessageCount != 1 || after.Usage != (convo.UsageTotals{}) {
		t.Fatalf("a refused response changed the session: %+v", after)
	}
}

// TestBodyOptions: Model, Thinking and Store reach export, validate, count_tokens and trim.
func TestBodyOptions(t *testing.T) {
	c := start(t)
	ctx := ctxT(t)

	// An Anthropic tool loop of claude-opus-4-6, with its signed thinking.
	must[*convo.SessionInfo](t)(c.CreateSession(ctx, convo.CreateSessionParams{SessionID: "a"}))
	must[*convo.Added](t)(c.AddUser(ctx, convo.AddUserParams{SessionID: "a", Text: "Pack for Paris and London?"}))
	calls := must[*convo.AddedResponse](t)(c.AddResponse(ctx, convo.AddResponseParams{SessionID: "a", Format: convo.FormatAnthropicMessages, Response: fixture(t, "anthropic_thinking_tool_use.json")}))
	for _, id := range calls.ToolCallIDs {
		must[*convo.Added](t)(c.AddToolResult(ctx, convo.AddToolResultParams{SessionID: "a", ToolCallID: id, Content: convo.Text("14 °C")}))
	}
	anthropic := func(p convo.ExportParams) (string, []convo.Warning) {
		t.Helper()
		p.SessionID, p.Format = "a", convo.FormatAnthropicMessages
		ex := must[*convo.Exported](t)(c.Export(ctx, p))
		return compact(t, ex.Payload), ex.Warnings
	}
	signed := `"type":"thinking"`
	if body, w := anthropic(convo.ExportParams{}); !strings.Contains(body, signed) || len(w) != 0 {
		t.Fatalf("export: %s %+v", body, w)
	}
	// The same model, or it plus a date: replayed.
	if body, w := anthropic(convo.ExportParams{Model: "claude-opus-4-6-20260301"}); !strings.Contains(body, signed) || len(w) != 0 {
		t.Fatalf("export for the same model: %s %+v", body, w)
	}
	// Another model: built from the common form, the thinking left out, with a warning.
	if body, w := anthropic(convo.ExportParams{Model: "claude-sonnet-4-5"}); strings.Contains(body, signed) || len(w) == 0 || !strings.Contains(body, `"tool_use"`) {
		t.Fatalf("export for another model: %s %+v", body, w)
	}
	// Thinking off: every thinking block left out.
	if body, _ := anthropic(convo.ExportParams{Thinking: convo.Ptr(false)}); strings.Contains(body, signed) || !strings.Contains(body, `"tool_use"`) {
		t.Fatalf("export without thinking: %s", body)
	}
	count := func(p convo.CountTokensParams) int {
		t.Helper()
		return must[*convo.TokenCount](t)(c.CountTokens(ctx, p)).Tokens
	}
	full := count(convo.CountTokensParams{SessionID: "a", Format: convo.FormatAnthropicMessages})
	if less := count(convo.CountTokensParams{SessionID: "a", Format: convo.FormatAnthropicMessages, Thinking: convo.Ptr(false)}); less >= full {
		t.Fatalf("count_tokens: %d without thinking, %d with", less, full)
	}
	if same := count(convo.CountTokensParams{SessionID: "a", Format: convo.FormatAnthropicMessages, Model: "claude-opus-4-6"}); same != full {
		t.Fatalf("count_tokens for the model: %d, %d without it", same, full)
	}
	// With thinking on, a tool loop whose turn came from elsewhere (no thinking block)
	// is what Anthropic refuses; the native one is not.
	validate := func(id string, p convo.ValidateParams) []convo.Violation {
		t.Helper()
		p.SessionID = id
		return must[*convo.Validated](t)(c.Validate(ctx, p)).Violations
	}
	if v := validate("a", convo.ValidateParams{Format: convo.FormatAnthropicMessages, Thinking: convo.Ptr(true)}); len(v) != 0 {
		t.Fatalf("validate the native loop with thinking: %+v", v)
	}
	must[*convo.SessionInfo](t)(c.CreateSession(ctx, convo.CreateSessionParams{SessionID: "plain"}))
	must[*convo.Added](t)(c.AddUser(ctx, convo.AddUserParams{SessionID: "plain", Text: "Weather?"}))
	call := must[convo.ToolCall](t)(convo.NewToolCall("toolu_1", "get_weather", map[string]string{"location": "Paris"}))
	must[*convo.Added](t)(c.AddAssistant(ctx, convo.AddAssistantParams{SessionID: "plain", ToolCalls: []convo.ToolCall{call}}))
	must[*convo.Added](t)(c.AddToolResult(ctx, convo.AddToolResultParams{SessionID: "plain", ToolCallID: "toolu_1", Content: convo.Text("14 °C")}))
	if v := validate("plain", convo.ValidateParams{Format: convo.FormatAnthropicMessages, Thinking: convo.Ptr(true)}); len(v) != 1 || v[0].Rule != "thinking_required" {
		t.Fatalf("validate with thinking: %+v", v)
	}
	if v := validate("plain", convo.ValidateParams{Format: convo.FormatAnthropicMessages}); len(v) != 0 {
		t.Fatalf("validate: %+v", v)
	}

	// A Responses turn whose reasoning item has no encrypted_content: a stateless request
	// (Store false) cannot replay it.
	must[*convo.SessionInfo](t)(c.CreateSession(ctx, convo.CreateSessionParams{SessionID: "o"}))
	must[*convo.Added](t)(c.AddUser(ctx, convo.AddUserParams{SessionID: "o", Text: "Plans for Saturday?"}))
	o := must[*convo.AddedResponse](t)(c.AddResponse(ctx, convo.AddResponseParams{SessionID: "o", Format: convo.FormatOpenAIResponses, Response: fixture(t, "openai_responses_reasoning_no_encrypted.json")}))
	must[*convo.Added](t)(c.AddToolResult(ctx, convo.AddToolResultParams{SessionID: "o", ToolCallID: o.ToolCallIDs[0], Content: convo.Text("Saturday: Louvre")}))
	stored := must[*convo.Exported](t)(c.Export(ctx, convo.ExportParams{SessionID: "o", Format: convo.FormatOpenAIResponses}))
	stateless := must[*convo.Exported](t)(c.Export(ctx, convo.ExportParams{SessionID: "o", Format: convo.FormatOpenAIResponses, Store: convo.Ptr(false)}))
	if !strings.Contains(string(stored.Payload), `"type":"reasoning"`) || len(stored.Warnings) != 0 {
		t.Fatalf("export: %s %+v", stored.Payload, stored.Warnings)
	}
	if strings.Contains(string(stateless.Payload), `"type":"reasoning"`) || strings.Contains(string(stateless.Payload), `"id":"fc_`) ||
		!strings.Contains(string(stateless.Payload), `"call_id":"`+o.ToolCallIDs[0]+`"`) || len(stateless.Warnings) == 0 {
		t.Fatalf("export with store false: %s %+v", stateless.Payload, stateless.Warnings)
	}
	if v := validate("o", convo.ValidateParams{Format: convo.FormatOpenAIResponses, Store: convo.Ptr(false)}); len(v) != 1 || v[0].Rule != "reasoning_not_replayable" {
		t.Fatalf("validate with store false: %+v", v)
	}
	if v := validate("o", convo.ValidateParams{Format: convo.FormatOpenAIResponses, Store: convo.Ptr(true)}); len(v) != 0 {
		t.Fatalf("validate with store true: %+v", v)
	}
	withReasoning := count(convo.CountTokensParams{SessionID: "o", Format: convo.FormatOpenAIResponses})
	without := count(convo.CountTokensParams{SessionID: "o", Format: convo.FormatOpenAIResponses, Store: convo.Ptr(false)})
	if without >= withReasoning {
		t.Fatalf("count_tokens: %d with store false, %d without", without, withReasoning)
	}
	// Trim counts as count_tokens counts, for the format and options given.
	tr := must[*convo.TrimResult](t)(c.Trim(ctx, convo.TrimParams{SessionID: "o", MaxTokens: convo.Ptr(1 << 20), Format: convo.FormatOpenAIResponses, Store: convo.Ptr(false), Model: "gpt-5.4"}))
	if tr.Removed != 0 || tr.Tokens == nil || *tr.Tokens != without || tr.Fits == nil || !*tr.Fits {
		t.Fatalf("trim: %+v (count_tokens says %d)", tr, without)
	}
	tr = must[*convo.TrimResult](t)(c.Trim(ctx, convo.TrimParams{SessionID: "a", MaxTokens: convo.Ptr(1 << 20), Format: convo.FormatAnthropicMessages, Thinking: convo.Ptr(false)}))
	if tr.Tokens == nil || *tr.Tokens >= full {
		t.Fatalf("trim without thinking: %+v (count_tokens with thinking: %d)", tr, full)
	}
}

// TestNativeMessageInput: AddMessage and AddMessages take a turn's native form and usage;
// the common form is derived from it, and giving one beside it is refused.
func TestNativeMessageInput(t *testing.T) {
	c := start(t)
	ctx := ctxT(t)
	must[*convo.SessionInfo](t)(c.CreateSession(ctx, convo.CreateSessionParams{SessionID: "n"}))
	must[*convo.Added](t)(c.AddUser(ctx, convo.AddUserParams{SessionID: "n", Text: "Pack for Paris and London?"}))
	body := pick(t, fixture(t, "anthropic_thinking_tool_use.json"), "content")
	native := &convo.Native{Format: convo.FormatAnthropicMessages, Model: convo.Ptr("claude-opus-4-6"), Body: body}
	spent := &convo.Usage{InputTokens: convo.Ptr(int64(1950)), OutputTokens: convo.Ptr(int64(214))}

	_, err := c.AddMessage(ctx, convo.AddMessageParams{SessionID: "n", Message: convo.MessageInput{Role: convo.RoleAssistant, Native: native, Content: convo.Text("I'll check.")}})
	if !errors.Is(err, convo.ErrInvalidParams) {
		t.Fatalf("native with content beside it: %v", err)
	}
	_, err = c.AddMessage(ctx, convo.AddMessageParams{SessionID: "n", Message: convo.MessageInput{Role: convo.RoleUser, Content: convo.Text("hi"), Native: native}})
	if !errors.Is(err, convo.ErrInvalidParams) {
		t.Fatalf("native on a user message: %v", err)
	}
	a := must[*convo.Added](t)(c.AddMessage(ctx, convo.AddMessageParams{SessionID: "n", Message: convo.MessageInput{Role: convo.RoleAssistant, Native: native, Usage: spent}}))
	d := must[*convo.Dict](t)(c.ToDict(ctx, convo.ToDictParams{SessionID: "n"}))
	m := d.Messages[a.Index]
	if m.Native == nil || compact(t, m.Native.Body) != compact(t, body) || str(m.Native.Model) != "claude-opus-4-6" {
		t.Fatalf("native came back as %+v", m.Native)
	}
	if text, _ := m.Content.AsText(); text != "I'll check the current weather in both cities." || len(m.ToolCalls) != 2 || m.ToolCalls[0].ID() != "toolu_01NRrZKi33evThhcqajiJafW" {
		t.Fatalf("common form: %s %s", m.Content, m.ToolCalls)
	}
	if u := m.Usage; u == nil || *u.InputTokens != 1950 || *u.OutputTokens != 214 || u.CacheReadTokens != nil || u.ReasoningTokens != nil {
		t.Fatalf("usage %+v", m.Usage)
	}

	// to_dict and back: native and usage travel, and the copy's usage is their sum.
	d.SessionID = "n-copy"
	imp := must[*convo.Imported](t)(c.FromDict(ctx, convo.FromDictParams{Data: d}))
	if imp.Usage != usage(1950, 214, 0, 0, 0) {
		t.Fatalf("from_dict usage %+v", imp.Usage)
	}
	orig := must[*convo.Exported](t)(c.Export(ctx, convo.ExportParams{SessionID: "n", Format: convo.FormatAnthropicMessages}))
	copied := must[*convo.Exported](t)(c.Export(ctx, convo.ExportParams{SessionID: "n-copy", Format: convo.FormatAnthropicMessages}))
	if !bytes.Equal(orig.Payload, copied.Payload) {
		t.Fatalf("to_dict, from_dict: %s\nnot %s", copied.Payload, orig.Payload)
	}
}

// TestRuntimeResponseAnswer: a runtime may answer with the provider's whole response,
// which convo stores as AddResponse does, for Run and Stream alike.
func TestRuntimeResponseAnswer(t *testing.T) {
	answers := map[string]string{
		"Pack for Paris and London?": "anthropic_thinking_tool_use.json",
		"So?":                        "anthropic_final_answer.json",
		"Fail.":                      "openai_responses_failed.json",
	}
	payloads := make(chan json.RawMessage, 4)
	c := start(t, convo.WithRuntimeFormat(convo.FormatOpenAIResponses), convo.WithRuntime(func(ctx context.Context, req *convo.RuntimeRequest) (*convo.RuntimeAnswer, error) {
		payloads <- req.Payload
		input := req.Messages[len(req.Messages)-1].Content.String()
		name := answers[input]
		format := convo.FormatAnthropicMessages
		if strings.HasPrefix(name, "openai_responses") {
			format = convo.FormatOpenAIResponses
		}
		raw, err := os.ReadFile(filepath.Join("testdata", "providers", name))
		if err != nil {
			return nil, err
		}
		if req.Streaming() {
			if err := req.SendText(ctx, "Pack a"); err != nil {
				return nil, err
			}
		}
		return convo.ResponseAnswer(format, raw), nil
	}))
	ctx := ctxT(t)
	must[*convo.SessionInfo](t)(c.CreateSession(ctx, convo.CreateSessionParams{SessionID: "rt", System: "Be brief."}))

	run := must[*convo.RunAnswer](t)(c.Run(ctx, convo.RunParams{SessionID: "rt", Input: "Pack for Paris and London?"}))
	if p := <-payloads; !strings.Contains(string(p), `"instructions":"Be brief."`) || !strings.Contains(string(p), `"input":[`) {
		t.Fatalf("an openai_responses payload: %s", p)
	}
	if str(run.Text) != "I'll check the current weather in both cities." || len(run.ToolCalls) != 2 || run.ToolCalls[1].ID() != "toolu_01EbfuYLS2mb2ixXokwVJmU7" || run.Revision != 1 {
		t.Fatalf("run: %+v", run)
	}
	var u convo.Usage
	if err := json.Unmarshal(run.Usage, &u); err != nil || *u.InputTokens != 1950 || *u.CacheWriteTokens != 1912 || *u.ReasoningTokens != 131 {
		t.Fatalf("run usage: %s", run.Usage)
	}
	for _, call := range run.ToolCalls {
		must[*convo.Added](t)(c.AddToolResult(ctx, convo.AddToolResultParams{SessionID: "rt", ToolCallID: call.ID(), Content: convo.Text("14 °C")}))
	}
	st := must[*convo.RunAnswer](t)(c.Stream(ctx, convo.RunParams{SessionID: "rt", Input: "So?"}))
	<-payloads
	if !strings.HasPrefix(str(st.Text), "Here's the current weather") || st.ToolCalls != nil {
		t.Fatalf("stream: %+v", st)
	}

	h := must[*convo.History](t)(c.History(ctx, convo.HistoryParams{SessionID: "rt"}))
	k := 0
	for _, m := range h.Messages {
		if m.Native == nil {
			continue
		}
		name := []string{"anthropic_thinking_tool_use.json", "anthropic_final_answer.json"}[k]
		if compact(t, m.Native.Body) != compact(t, pick(t, fixture(t, name), "content")) {
			t.Fatalf("the runtime's turn %d came back as %s", k, m.Native.Body)
		}
		k++
	}
	if k != 2 {
		t.Fatalf("%d native turns: %+v", k, h.Messages)
	}
	s := must[*convo.SessionInfo](t)(c.GetSession(ctx, convo.GetSessionParams{SessionID: "rt"}))
	if s.Usage != usage(1950+2280, 214+173, 1912, 1912+356, 131+58) {
		t.Fatalf("session usage %+v", s.Usage)
	}

	// A response AddResponse would refuse: nothing is stored.
	_, err := c.Run(ctx, convo.RunParams{SessionID: "rt", Input: "Fail."})
	var rpc *convo.RPCError
	if !errors.Is(err, convo.ErrRuntimeFailed) || !errors.As(err, &rpc) || rpc.Details().Reason != "invalid_response" {
		t.Fatalf("a failed response: %v", err)
	}
	<-payloads
	if after := must[*convo.SessionInfo](t)(c.GetSession(ctx, convo.GetSessionParams{SessionID: "rt"})); after.Revision != s.Revision {
		t.Fatalf("a refused answer changed the session: %+v", after)
	}
}

// TestAddResponseInteractionWithoutID: an Interaction that was not stored (store: false)
// has no id; its turn is stored all the same, with a null response_id.
func TestAddResponseInteractionWithoutID(t *testing.T) {
	c := start(t)
	ctx := ctxT(t)
	must[*convo.SessionInfo](t)(c.CreateSession(ctx, convo.CreateSessionParams{SessionID: "i"}))
	must[*convo.Added](t)(c.AddUser(ctx, convo.AddUserParams{SessionID: "i", Text: "Name Spain's three largest cities."}))
	response := fixture(t, "gemini_interactions_stateless.json")
	got := must[*convo.AddedResponse](t)(c.AddResponse(ctx, convo.AddResponseParams{SessionID: "i", Format: convo.FormatGeminiInteractions, Response: response}))
	if len(got.ToolCallIDs) != 0 {
		t.Fatalf("tool_call_ids %q", got.ToolCallIDs)
	}
	h := must[*convo.History](t)(c.History(ctx, convo.HistoryParams{SessionID: "i"}))
	m := h.Messages[1]
	if compact(t, m.Metadata) != `{"response_id":null,"stop_reason":"completed"}` || compact(t, m.Native.Body) != compact(t, pick(t, response, "steps")) {
		t.Fatalf("metadata %s, native %s", m.Metadata, m.Native.Body)
	}
}

// TestToolResultImages: AddToolResult's Images go inside the tool_result of an
// anthropic_messages export; Chat Completions leaves them out with a warning.
func TestToolResultImages(t *testing.T) {
	c := start(t)
	ctx := ctxT(t)
	must[*convo.SessionInfo](t)(c.CreateSession(ctx, convo.CreateSessionParams{SessionID: "s"}))
	must[*convo.Added](t)(c.AddUser(ctx, convo.AddUserParams{SessionID: "s", Text: "Take a screenshot."}))
	call := must[convo.ToolCall](t)(convo.NewToolCall("c1", "screenshot", map[string]any{}))
	must[*convo.Added](t)(c.AddAssistant(ctx, convo.AddAssistantParams{SessionID: "s", ToolCalls: []convo.ToolCall{call}}))
	const png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==" // 1×1
	must[*convo.Added](t)(c.AddToolResult(ctx, convo.AddToolResultParams{SessionID: "s", ToolCallID: "c1", Content: convo.Text("the screen"), Images: []string{png}}))

	ex := must[*convo.Exported](t)(c.Export(ctx, convo.ExportParams{SessionID: "s", Format: convo.FormatAnthropicMessages}))
	want := `{"role":"user","content":[{"type":"tool_result","tool_use_id":"c1","content":[{"type":"text","text":"the screen"},` +
		`{"type":"image","source":{"type":"base64","media_type":"image/png","data":"` + png + `"}}]}]}`
	if got := compact(t, pick(t, ex.Payload, "messages", "2")); got != want || len(ex.Warnings) != 0 {
		t.Fatalf("the tool_result:\n  %s\nnot\n  %s (warnings %+v)", got, want, ex.Warnings)
	}
	chat := must[*convo.Exported](t)(c.Export(ctx, convo.ExportParams{SessionID: "s", Format: convo.FormatOpenAIChat}))
	if len(chat.Warnings) != 1 || !strings.Contains(chat.Warnings[0].Message, `"c1"`) {
		t.Fatalf("chat warnings %+v", chat.Warnings)
	}
}
