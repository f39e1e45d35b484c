package convo_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	convo "github.com/convo-dev/convo/clients/go"
)

// Context management (spec section 17) against the binary: the options of Export,
// CountTokens and Validate, the reply's Context, Edits and Fit, and the 1005 of a Fit
// that cannot be met.

// toolLoop stores a system prompt and three user turns, each a tool loop of four calls
// with long results and a final answer; the calls alternate between "run" and
// "read_file".
func toolLoop(t *testing.T, c *convo.Client, id string) {
	t.Helper()
	ctx := ctxT(t)
	must[*convo.SessionInfo](t)(c.CreateSession(ctx, convo.CreateSessionParams{SessionID: id, System: "You are a coding agent."}))
	for turn := 0; turn < 3; turn++ {
		must[*convo.Added](t)(c.AddUser(ctx, convo.AddUserParams{SessionID: id, Text: fmt.Sprintf("Task %d: fix the failing build.", turn)}))
		for step := 0; step < 4; step++ {
			name := "run"
			if step%2 == 1 {
				name = "read_file"
			}
			callID := fmt.Sprintf("call_%d_%d", turn, step)
			must[*convo.Added](t)(c.AddAssistant(ctx, convo.AddAssistantParams{
				SessionID: id,
				Text:      fmt.Sprintf("Step %d.", step),
				ToolCalls: []convo.ToolCall{must[convo.ToolCall](t)(convo.NewToolCall(callID, name, map[string]string{"path": fmt.Sprintf("src/f%d.rs", step)}))},
			}))
			must[*convo.Added](t)(c.AddToolResult(ctx, convo.AddToolResultParams{SessionID: id, ToolCallID: callID, Content: convo.Text(strings.Repeat(fmt.Sprintf("line of output %d ", step), 60))}))
		}
		must[*convo.Added](t)(c.AddAssistant(ctx, convo.AddAssistantParams{SessionID: id, Text: "Fixed: the build passes."}))
	}
}

// cacheControls counts the blocks of an Anthropic body that carry cache_control.
func cacheControls(t *testing.T, payload json.RawMessage) int {
	t.Helper()
	var body struct {
		System   json.RawMessage `json:"system"`
		Messages []struct {
			Content []map[string]json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(payload, &body); err != nil {
		t.Fatal(err)
	}
	n := 0
	var system []map[string]json.RawMessage
	if json.Unmarshal(body.System, &system) == nil {
		for _, b := range system {
			if b["cache_control"] != nil {
				n++
			}
		}
	}
	for _, m := range body.Messages {
		for _, b := range m.Content {
			if b["cache_control"] != nil {
				n++
			}
		}
	}
	return n
}

func TestContextCapabilities(t *testing.T) {
	c := start(t)
	got := strings.Join(c.ServerInfo().Capabilities.Context, " ")
	if got != "compaction clear_thinking clear_tool_results fit cache" {
		t.Errorf("capabilities.context: %s", got)
	}
}

func TestExportFitAndCache(t *testing.T) {
	c := start(t)
	ctx := ctxT(t)
	toolLoop(t, c, "loop")
	before := must[*convo.TokenCount](t)(c.CountTokens(ctx, convo.CountTokensParams{SessionID: "loop", Format: convo.FormatAnthropicMessages}))
	if before.Context != nil || before.Edits != nil || before.Fit != nil {
		t.Errorf("a count without options has context, edits or fit: %+v", before)
	}

	// count_tokens previews the fit; export sends that very body.
	fit := &convo.Fit{MaxTokens: before.Tokens / 2}
	preview := must[*convo.TokenCount](t)(c.CountTokens(ctx, convo.CountTokensParams{SessionID: "loop", Format: convo.FormatAnthropicMessages, Fit: fit}))
	if preview.Fit == nil || preview.Fit.TokensBefore != before.Tokens || preview.Fit.Tokens != preview.Tokens || preview.Tokens > fit.MaxTokens {
		t.Fatalf("count_tokens with fit %d of %d tokens: %+v (fit %+v)", fit.MaxTokens, before.Tokens, preview, preview.Fit)
	}
	if preview.Fit.ClearedToolResults == 0 && preview.Fit.TurnsLeftOut == 0 {
		t.Errorf("the fit changed nothing: %+v", preview.Fit)
	}
	exported := must[*convo.Exported](t)(c.Export(ctx, convo.ExportParams{
		SessionID: "loop", Format: convo.FormatAnthropicMessages, Fit: fit, Cache: &convo.Cache{TTL: "1h"},
	}))
	if exported.Fit == nil || *exported.Fit != *preview.Fit {
		t.Errorf("export's fit %+v, count_tokens' %+v", exported.Fit, preview.Fit)
	}
	if exported.Context != nil || exported.Edits != nil {
		t.Errorf("export without compaction point or clearing: context %+v, edits %+v", exported.Context, exported.Edits)
	}
	if n := cacheControls(t, exported.Payload); n < 2 || n > 4 {
		t.Errorf("%d cache_control breakpoints in %s", n, exported.Payload)
	}
	if !strings.Contains(string(exported.Payload), `"system":[{"type":"text","text":"You are a coding agent.","cache_control":{"type":"ephemeral","ttl":"1h"}}]`) {
		t.Errorf("the system prompt has no 1h breakpoint: %.300s", exported.Payload)
	}
	if v := must[*convo.Validated](t)(c.Validate(ctx, convo.ValidateParams{SessionID: "loop", Format: convo.FormatAnthropicMessages, Cache: &convo.Cache{}})); len(v.Violations) != 0 {
		t.Errorf("validate with cache: %+v", v.Violations)
	}

	// Cache{} is `true`: OpenAI's prompt_cache_key is the session id; Key and Retention.
	chat := must[*convo.Exported](t)(c.Export(ctx, convo.ExportParams{SessionID: "loop", Format: convo.FormatOpenAIChat, Cache: &convo.Cache{}}))
	if got := compact(t, pick(t, chat.Payload, "prompt_cache_key")); got != `"loop"` {
		t.Errorf("prompt_cache_key %s", got)
	}
	responses := must[*convo.Exported](t)(c.Export(ctx, convo.ExportParams{SessionID: "loop", Format: convo.FormatOpenAIResponses, Cache: &convo.Cache{Key: "k-1", Retention: "24h"}}))
	if got := compact(t, pick(t, responses.Payload, "prompt_cache_key")) + compact(t, pick(t, responses.Payload, "prompt_cache_retention")); got != `"k-1""24h"` {
		t.Errorf("prompt_cache_key and retention: %s", got)
	}

	// A system TTL shorter than the others is refused.
	_, err := c.Export(ctx, convo.ExportParams{SessionID: "loop", Format: convo.FormatAnthropicMessages, Cache: &convo.Cache{TTL: "1h", SystemTTL: "5m"}})
	if !errors.Is(err, convo.ErrInvalidParams) {
		t.Errorf("system_ttl shorter than ttl: %v", err)
	}

	// The stored history never changes.
	after := must[*convo.TokenCount](t)(c.CountTokens(ctx, convo.CountTokensParams{SessionID: "loop", Format: convo.FormatAnthropicMessages}))
	if after.Tokens != before.Tokens {
		t.Errorf("tokens %d after the exports, %d before", after.Tokens, before.Tokens)
	}
}

func TestExportClearing(t *testing.T) {
	c := start(t)
	ctx := ctxT(t)
	toolLoop(t, c, "loop")
	exported := must[*convo.Exported](t)(c.Export(ctx, convo.ExportParams{
		SessionID:        "loop",
		Format:           convo.FormatAnthropicMessages,
		ClearToolResults: &convo.ClearToolResults{Keep: convo.Ptr(2), ExcludeTools: []string{"run"}, Placeholder: "[cleared]"},
		ClearThinking:    &convo.ClearThinking{Keep: convo.Ptr(0)},
	}))
	// Six read_file results, the last two kept: four cleared; run's never.
	if exported.Edits == nil || exported.Edits.ClearedToolResults != 4 || exported.Edits.ClearedThinkingTurns != 0 || exported.Edits.ClearedTokens <= 0 {
		t.Fatalf("edits %+v", exported.Edits)
	}
	if n := strings.Count(string(exported.Payload), `"content":"[cleared]"`); n != 4 {
		t.Errorf("%d results with the placeholder", n)
	}
	if exported.Fit != nil {
		t.Errorf("fit without Fit: %+v", exported.Fit)
	}
	counted := must[*convo.TokenCount](t)(c.CountTokens(ctx, convo.CountTokensParams{
		SessionID: "loop", Format: convo.FormatAnthropicMessages,
		ClearToolResults: &convo.ClearToolResults{Keep: convo.Ptr(2), ExcludeTools: []string{"run"}, Placeholder: "[cleared]"},
	}))
	if counted.Edits == nil || *counted.Edits != *exported.Edits {
		t.Errorf("count_tokens' edits %+v, export's %+v", counted.Edits, exported.Edits)
	}
}

func TestFitTooLarge(t *testing.T) {
	c := start(t)
	ctx := ctxT(t)
	toolLoop(t, c, "loop")
	for _, call := range []func() error{
		func() error {
			_, err := c.Export(ctx, convo.ExportParams{SessionID: "loop", Format: convo.FormatAnthropicMessages, Fit: &convo.Fit{MaxTokens: 10}})
			return err
		},
		func() error {
			_, err := c.CountTokens(ctx, convo.CountTokensParams{SessionID: "loop", Format: convo.FormatAnthropicMessages, Fit: &convo.Fit{MaxTokens: 10, KeepTurns: 2}})
			return err
		},
	} {
		err := call()
		if !errors.Is(err, convo.ErrTooLarge) {
			t.Fatalf("an impossible fit: %v", err)
		}
		var rpc *convo.RPCError
		if !errors.As(err, &rpc) {
			t.Fatalf("not an *RPCError: %T", err)
		}
		d := rpc.Details()
		if d.Kind != "too_large" || d.MaxTokens == nil || *d.MaxTokens != 10 || d.Tokens == nil || *d.Tokens <= 10 {
			t.Errorf("1005 data %s", rpc.Data)
		}
	}
}

// TestCompactionPoint: an Anthropic response that starts with a compaction block (its
// usage summed over usage.iterations) makes an Anthropic export start there; Chat
// Completions gets the whole history and a warning; CompactionIgnore counts it all.
func TestCompactionPoint(t *testing.T) {
	c := start(t)
	ctx := ctxT(t)
	id := "trip"
	must[*convo.SessionInfo](t)(c.CreateSession(ctx, convo.CreateSessionParams{SessionID: id, System: "You are a concise travel assistant."}))
	must[*convo.Added](t)(c.AddUser(ctx, convo.AddUserParams{SessionID: id, Text: "Plan a week in Paris and London."}))
	must[*convo.Added](t)(c.AddAssistant(ctx, convo.AddAssistantParams{SessionID: id, Text: "Paris first, then London."}))
	must[*convo.Added](t)(c.AddUser(ctx, convo.AddUserParams{SessionID: id, Text: "How long is the train?"}))
	added := must[*convo.AddedResponse](t)(c.AddResponse(ctx, convo.AddResponseParams{
		SessionID: id, Format: convo.FormatAnthropicMessages, Response: fixture(t, "anthropic_compaction_iterations.json"),
	}))
	if added.Index != 3 {
		t.Fatalf("stored at %d", added.Index)
	}
	info := must[*convo.SessionInfo](t)(c.GetSession(ctx, convo.GetSessionParams{SessionID: id}))
	if info.Usage.InputTokens != 203000 || info.Usage.OutputTokens != 4500 {
		t.Errorf("usage not summed over iterations: %+v", info.Usage)
	}

	exported := must[*convo.Exported](t)(c.Export(ctx, convo.ExportParams{SessionID: id, Format: convo.FormatAnthropicMessages}))
	if exported.Context == nil || exported.Context.FromIndex != 3 {
		t.Fatalf("context %+v", exported.Context)
	}
	if strings.Contains(string(exported.Payload), "Plan a week") {
		t.Errorf("the messages before the compaction point were sent: %.300s", exported.Payload)
	}
	counted := must[*convo.TokenCount](t)(c.CountTokens(ctx, convo.CountTokensParams{SessionID: id, Format: convo.FormatAnthropicMessages}))
	whole := must[*convo.TokenCount](t)(c.CountTokens(ctx, convo.CountTokensParams{SessionID: id, Format: convo.FormatAnthropicMessages, Compaction: convo.CompactionIgnore}))
	if counted.Context == nil || counted.Context.FromIndex != 3 || whole.Context != nil || whole.Tokens <= counted.Tokens {
		t.Errorf("from the compaction point %+v (context %+v), ignoring it %+v", counted, counted.Context, whole)
	}

	chat := must[*convo.Exported](t)(c.Export(ctx, convo.ExportParams{SessionID: id, Format: convo.FormatOpenAIChat}))
	if chat.Context != nil || !strings.Contains(string(chat.Payload), "Plan a week") {
		t.Errorf("openai_chat: context %+v, payload %.300s", chat.Context, chat.Payload)
	}
	warned := false
	for _, w := range chat.Warnings {
		warned = warned || (w.Index != nil && *w.Index == 3 && strings.HasPrefix(w.Message, "compaction left out: Chat Completions cannot read"))
	}
	if !warned {
		t.Errorf("no compaction warning: %+v", chat.Warnings)
	}
}

// TestCacheJSON: Cache{} is sent as true, a Cache with a field as the object.
func TestCacheJSON(t *testing.T) {
	for _, tc := range []struct {
		cache *convo.Cache
		want  string
	}{
		{&convo.Cache{}, `{"session_id":"s","format":"anthropic_messages","cache":true}`},
		{&convo.Cache{TTL: "5m", SystemTTL: "1h"}, `{"session_id":"s","format":"anthropic_messages","cache":{"ttl":"5m","system_ttl":"1h"}}`},
		{nil, `{"session_id":"s","format":"anthropic_messages"}`},
	} {
		b, err := json.Marshal(convo.ValidateParams{SessionID: "s", Format: convo.FormatAnthropicMessages, Cache: tc.cache})
		if err != nil || string(b) != tc.want {
			t.Errorf("%s, %v; want %s", b, err, tc.want)
		}
	}
	b, _ := json.Marshal(convo.CountTokensParams{SessionID: "s", Fit: &convo.Fit{MaxTokens: 0}, ClearToolResults: &convo.ClearToolResults{Keep: convo.Ptr(0)}, Compaction: convo.CompactionIgnore})
	if want := `{"session_id":"s","compaction":"ignore","clear_tool_results":{"keep":0},"fit":{"max_tokens":0}}`; string(b) != want {
		t.Errorf("%s; want %s", b, want)
	}
	var back convo.Cache
	if err := json.Unmarshal([]byte(`true`), &back); err != nil || back != (convo.Cache{}) {
		t.Errorf("true: %+v %v", back, err)
	}
	if err := json.Unmarshal([]byte(`{"key":"k"}`), &back); err != nil || back.Key != "k" {
		t.Errorf("object: %+v %v", back, err)
	}
}

// TestCompactEndpointResult: the Responses compact endpoint's result is stored as one
// compaction point; an openai_responses export starts there, its output sent back as is.
func TestCompactEndpointResult(t *testing.T) {
	c := start(t)
	ctx := ctxT(t)
	id := "gpt"
	must[*convo.SessionInfo](t)(c.CreateSession(ctx, convo.CreateSessionParams{SessionID: id, System: "Be brief."}))
	must[*convo.Added](t)(c.AddUser(ctx, convo.AddUserParams{SessionID: id, Text: "What should I pack?"}))
	must[*convo.Added](t)(c.AddAssistant(ctx, convo.AddAssistantParams{SessionID: id, Text: "Rain gear."}))
	compacted := fixture(t, "openai_responses_compacted.json")
	added := must[*convo.AddedResponse](t)(c.AddResponse(ctx, convo.AddResponseParams{SessionID: id, Format: convo.FormatOpenAIResponses, Response: compacted}))
	must[*convo.Added](t)(c.AddUser(ctx, convo.AddUserParams{SessionID: id, Text: "And the train?"}))
	exported := must[*convo.Exported](t)(c.Export(ctx, convo.ExportParams{SessionID: id, Format: convo.FormatOpenAIResponses}))
	if exported.Context == nil || int64(exported.Context.FromIndex) != int64(added.Index) {
		t.Fatalf("context %+v, the compaction stored at %d", exported.Context, added.Index)
	}
	var input []json.RawMessage
	if err := json.Unmarshal(pick(t, exported.Payload, "input"), &input); err != nil {
		t.Fatal(err)
	}
	var output []json.RawMessage
	if err := json.Unmarshal(pick(t, compacted, "output"), &output); err != nil {
		t.Fatal(err)
	}
	if len(input) != len(output)+1 {
		t.Fatalf("%d input items, %d in the compacted output", len(input), len(output))
	}
	for i := range output {
		if compact(t, input[i]) != compact(t, output[i]) {
			t.Errorf("item %d: %s, compacted %s", i, input[i], output[i])
		}
	}
}
