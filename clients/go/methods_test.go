package convo_test

import (
	"context"
	"encoding/json"
	"sort"
	"strings"
	"sync"
	"testing"

	convo "github.com/convo-dev/convo/clients/go"
)

// TestEveryMethod calls every method of the protocol through its typed method, checks
// what comes back, and checks that the methods sent are exactly openrpc.json's.
func TestEveryMethod(t *testing.T) {
	var mu sync.Mutex
	sent := map[string]bool{}
	runtime := func(ctx context.Context, req *convo.RuntimeRequest) (*convo.RuntimeAnswer, error) {
		switch {
		case req.Purpose == "json":
			return &convo.RuntimeAnswer{Text: `{"answer": 4}`}, nil
		case req.Streaming():
			for _, piece := range []string{"Fo", "ur"} {
				if err := req.SendText(ctx, piece); err != nil {
					return nil, err
				}
			}
			return &convo.RuntimeAnswer{Text: "Four."}, nil
		}
		return &convo.RuntimeAnswer{Text: "4", Usage: map[string]int{"input_tokens": 9, "output_tokens": 1}, Model: "m-1"}, nil
	}
	c := start(t, convo.WithRuntime(runtime), convo.WithRuntimeFormat(convo.FormatOpenAIChat))
	convo.OnSend(c, func(m string) { mu.Lock(); sent[m] = true; mu.Unlock() })
	ctx := ctxT(t)

	// initialize
	info := must[*convo.InitializeResult](t)(c.Initialize(ctx, convo.InitializeParams{Runtime: &convo.RuntimeConfig{Format: convo.FormatOpenAIChat}}))
	if info.ServerInfo.Name != "convo" || info.ProtocolVersion != 1 || info.Capabilities.Store != "memory" || info.Capabilities.Framing != "lsp" {
		t.Fatalf("initialize: %+v", info)
	}
	if c.ServerInfo().ServerInfo.Version == "" {
		t.Fatal("ServerInfo has no version")
	}

	// session/subscribe, to a session that does not exist yet (the rest of the test
	// runs while nobody reads it: it must not hold the client up).
	sub := must[*convo.Subscription](t)(c.Subscribe(ctx, convo.SubscribeParams{SessionID: "demo-copy"}))

	// session/create: metadata comes back exactly as given (a big integer, member order).
	meta := json.RawMessage(`{"z":123456789012345678901234567890,"a":1.50}`)
	s := must[*convo.SessionInfo](t)(c.CreateSession(ctx, convo.CreateSessionParams{
		SessionID: "demo", System: "You are terse.", Cwd: "/home/me", Title: "Demo", Metadata: meta,
	}))
	if s.SessionID != "demo" || str(s.System) != "You are terse." || str(s.Cwd) != "/home/me" || s.Revision != 0 || s.ForkedFrom != nil {
		t.Fatalf("create: %+v", s)
	}
	if got := compact(t, s.Metadata); got != string(meta) {
		t.Fatalf("metadata came back as %s", got)
	}
	generated := must[*convo.SessionInfo](t)(c.CreateSession(ctx, convo.CreateSessionParams{}))
	if len(generated.SessionID) != 36 {
		t.Fatalf("generated id %q", generated.SessionID)
	}

	// session/get
	got := must[*convo.SessionInfo](t)(c.GetSession(ctx, convo.GetSessionParams{SessionID: "demo"}))
	if got.CreatedAt != s.CreatedAt || str(got.Title) != "Demo" {
		t.Fatalf("get: %+v", got)
	}

	// session/list, a page at a time
	var ids []string
	var cursor string
	for {
		page := must[*convo.SessionPage](t)(c.ListSessions(ctx, convo.ListSessionsParams{Limit: 1, Cursor: cursor}))
		for _, s := range page.Sessions {
			ids = append(ids, s.SessionID)
		}
		if page.NextCursor == nil {
			break
		}
		cursor = *page.NextCursor
	}
	if len(ids) != 2 || ids[0] != generated.SessionID || ids[1] != "demo" {
		t.Fatalf("list: %v", ids)
	}

	// session/update: set, clear, leave alone
	up := must[*convo.SessionInfo](t)(c.UpdateSession(ctx, convo.UpdateSessionParams{
		SessionID: "demo", Title: convo.Value("Edits"), Cwd: convo.Null[string](), ExpectedRevision: convo.Ptr(int64(0)),
	}))
	if str(up.Title) != "Edits" || up.Cwd != nil || str(up.System) != "You are terse." || up.Revision != 1 {
		t.Fatalf("update: %+v", up)
	}
	up = must[*convo.SessionInfo](t)(c.UpdateSession(ctx, convo.UpdateSessionParams{SessionID: "demo", Metadata: convo.Null[any]()}))
	if up.Metadata != nil && string(up.Metadata) != "null" {
		t.Fatalf("metadata not cleared: %s", up.Metadata)
	}
	up = must[*convo.SessionInfo](t)(c.UpdateSession(ctx, convo.UpdateSessionParams{SessionID: "demo", Metadata: convo.Value[any](map[string]int{"v": 2})}))
	if compact(t, up.Metadata) != `{"v":2}` || up.Revision != 3 {
		t.Fatalf("metadata not set: %+v", up)
	}

	// add_user, add_assistant with two parallel calls, add_tool_result for one
	u := must[*convo.Added](t)(c.AddUser(ctx, convo.AddUserParams{SessionID: "demo", Text: "Read both files.", Images: []string{"aGVsbG8="}}))
	if u.Index != 0 || u.Revision != 4 || u.MessageID == "" {
		t.Fatalf("add_user: %+v", u)
	}
	call1 := must[convo.ToolCall](t)(convo.NewToolCall("call_1", "read_file", map[string]string{"path": "README.md"}))
	call2 := convo.ToolCall(`{"id":"call_2","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"Cargo.toml\"}"}}`)
	a := must[*convo.Added](t)(c.AddAssistant(ctx, convo.AddAssistantParams{SessionID: "demo", Text: "Reading.", ToolCalls: []convo.ToolCall{call1, call2}}))
	if a.Index != 1 {
		t.Fatalf("add_assistant: %+v", a)
	}
	r := must[*convo.Added](t)(c.AddToolResult(ctx, convo.AddToolResultParams{SessionID: "demo", ToolCallID: "call_2", Content: convo.Text("[package]")}))
	if r.Index != 2 {
		t.Fatalf("add_tool_result: %+v", r)
	}

	// session/history: repaired (a synthetic result for call_1) and as stored
	h := must[*convo.History](t)(c.History(ctx, convo.HistoryParams{SessionID: "demo"}))
	if len(h.Messages) != 4 || h.Repaired != 1 || h.Messages[3].ID != nil || str(h.Messages[3].ToolCallID) != "call_1" {
		t.Fatalf("history: %+v", h)
	}
	if h.Messages[1].ToolCalls[0].ID() != "call_1" || h.Messages[1].ToolCalls[1].Name() != "read_file" || h.Messages[0].Images[0] != "aGVsbG8=" {
		t.Fatalf("history: %+v", h.Messages[:2])
	}
	if compact(t, h.Messages[1].ToolCalls[1]) != string(call2) {
		t.Fatalf("tool call came back as %s", h.Messages[1].ToolCalls[1])
	}
	if text, _ := h.Messages[2].Content.AsText(); text != "[package]" {
		t.Fatalf("content %s", h.Messages[2].Content)
	}
	stored := must[*convo.History](t)(c.History(ctx, convo.HistoryParams{SessionID: "demo", Repair: convo.Ptr(false), Offset: 1, Limit: convo.Ptr(5)}))
	if len(stored.Messages) != 2 || stored.Repaired != 0 {
		t.Fatalf("history as stored: %+v", stored)
	}

	// add_message (moving on cancels call_1), add_messages
	parts := must[convo.Content](t)(convo.Parts(map[string]string{"type": "text", "text": "Thanks."}))
	m := must[*convo.Added](t)(c.AddMessage(ctx, convo.AddMessageParams{SessionID: "demo", Message: convo.MessageInput{Role: convo.RoleUser, Content: parts, Metadata: map[string]bool{"ok": true}}}))
	if m.Index != 4 { // after the cancelled result for call_1
		t.Fatalf("add_message: %+v", m)
	}
	t1 := must[convo.ToolCall](t)(convo.NewToolCall("t1", "cargo_test", struct{}{}))
	many := must[*convo.AddedMany](t)(c.AddMessages(ctx, convo.AddMessagesParams{SessionID: "demo", Messages: []convo.MessageInput{
		{Role: convo.RoleAssistant, ToolCalls: []convo.ToolCall{t1}},
		{Role: convo.RoleTool, ToolCallID: "t1", Content: convo.Text("ok")},
		{Role: convo.RoleUser, Content: convo.Text("And now?")},
		{Role: convo.RoleAssistant, Content: convo.Text("Done.")},
	}}))
	if len(many.MessageIDs) != 4 {
		t.Fatalf("add_messages: %+v", many)
	}

	// add_response, on the other session: a provider's whole response, kept as it came.
	must[*convo.Added](t)(c.AddUser(ctx, convo.AddUserParams{SessionID: generated.SessionID, Text: "Weather in Paris?"}))
	completion := `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-x","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_w","type":"function","function":{"name":"weather","arguments":"{\"city\":\"Paris\"}"}}],"refusal":null},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":20,"completion_tokens":7,"total_tokens":27}}`
	ar := must[*convo.AddedResponse](t)(c.AddResponse(ctx, convo.AddResponseParams{SessionID: generated.SessionID, Format: convo.FormatOpenAIChat, Response: json.RawMessage(completion), Metadata: map[string]int{"turn": 1}}))
	if ar.Index != 1 || ar.Revision != 2 || len(ar.ToolCallIDs) != 1 || ar.ToolCallIDs[0] != "call_w" {
		t.Fatalf("add_response: %+v", ar)
	}
	gh := must[*convo.History](t)(c.History(ctx, convo.HistoryParams{SessionID: generated.SessionID, Repair: convo.Ptr(false)}))
	if n := gh.Messages[1].Native; n == nil || n.Format != convo.FormatOpenAIChat || str(n.Model) != "gpt-x" ||
		compact(t, n.Body) != `{"role":"assistant","content":null,"tool_calls":[{"id":"call_w","type":"function","function":{"name":"weather","arguments":"{\"city\":\"Paris\"}"}}],"refusal":null}` {
		t.Fatalf("add_response native: %+v", n)
	}
	if gs := must[*convo.SessionInfo](t)(c.GetSession(ctx, convo.GetSessionParams{SessionID: generated.SessionID})); gs.Usage.InputTokens != 20 || gs.Usage.OutputTokens != 7 {
		t.Fatalf("add_response usage: %+v", gs.Usage)
	}

	// pop hands the response's message back, native and all.
	pop := must[*convo.Popped](t)(c.Pop(ctx, convo.PopParams{SessionID: generated.SessionID, ExpectedRevision: convo.Ptr(ar.Revision)}))
	if pop.Message == nil || str(pop.Message.ID) != ar.MessageID || pop.Message.Native == nil || pop.Revision != ar.Revision+1 {
		t.Fatalf("pop: %+v", pop)
	}

	// export, validate, count_tokens
	ex := must[*convo.Exported](t)(c.Export(ctx, convo.ExportParams{SessionID: "demo", Format: convo.FormatOpenAIChat}))
	var body struct {
		Messages []json.RawMessage `json:"messages"`
	}
	if err := json.Unmarshal(ex.Payload, &body); err != nil || len(body.Messages) == 0 {
		t.Fatalf("export: %s (%v)", ex.Payload, err)
	}
	exA := must[*convo.Exported](t)(c.Export(ctx, convo.ExportParams{SessionID: "demo", Format: convo.FormatAnthropicMessages, Repair: convo.Ptr(true)}))
	if !strings.Contains(string(exA.Payload), `"tool_use"`) {
		t.Fatalf("anthropic export: %s", exA.Payload)
	}
	v := must[*convo.Validated](t)(c.Validate(ctx, convo.ValidateParams{SessionID: "demo", Format: convo.FormatGeminiContents}))
	if v.Violations == nil {
		t.Fatal("validate: violations is null")
	}
	tok := must[*convo.TokenCount](t)(c.CountTokens(ctx, convo.CountTokensParams{SessionID: "demo"}))
	if tok.Tokens <= 0 {
		t.Fatalf("count_tokens: %+v", tok)
	}

	// run, json, stream through the runtime
	run := must[*convo.RunAnswer](t)(c.Run(ctx, convo.RunParams{SessionID: "demo", Input: "2+2?", Temperature: convo.Ptr(0.0)}))
	if str(run.Text) != "4" || len(run.MessageIDs) != 2 || run.ToolCalls != nil || compact(t, run.Usage) != `{"input_tokens":9,"output_tokens":1}` {
		t.Fatalf("run: %+v", run)
	}
	js := must[*convo.JSONAnswer](t)(c.JSON(ctx, convo.JSONParams{SessionID: "demo", Input: "2+2 as JSON?", Schema: json.RawMessage(`{"type":"object","required":["answer"]}`)}))
	if compact(t, js.Value) != `{"answer":4}` || js.Revision != run.Revision+1 {
		t.Fatalf("json: %+v", js)
	}
	st := must[*convo.RunAnswer](t)(c.Stream(ctx, convo.RunParams{SessionID: "demo", Input: "Say it."}))
	if str(st.Text) != "Four." || st.Revision != js.Revision+1 {
		t.Fatalf("stream: %+v", st)
	}

	// trim by turns and by tokens
	tr := must[*convo.TrimResult](t)(c.Trim(ctx, convo.TrimParams{SessionID: "demo", MaxTurns: convo.Ptr(4)}))
	if tr.Removed == 0 || tr.Fits != nil {
		t.Fatalf("trim: %+v", tr)
	}
	tt := must[*convo.TrimResult](t)(c.Trim(ctx, convo.TrimParams{SessionID: "demo", MaxTokens: convo.Ptr(100000)}))
	if tt.Fits == nil || !*tt.Fits || tt.Tokens == nil {
		t.Fatalf("trim to fit: %+v", tt)
	}

	// fork at a message, clear the fork
	h = must[*convo.History](t)(c.History(ctx, convo.HistoryParams{SessionID: "demo"}))
	at := *h.Messages[1].ID
	f := must[*convo.SessionInfo](t)(c.Fork(ctx, convo.ForkParams{SessionID: "demo", NewSessionID: "demo-alt", AtMessageID: at}))
	if f.MessageCount != 2 || f.ForkedFrom == nil || f.ForkedFrom.SessionID != "demo" || str(f.ForkedFrom.MessageID) != at {
		t.Fatalf("fork: %+v", f)
	}
	cl := must[*convo.Cleared](t)(c.Clear(ctx, convo.ClearParams{SessionID: "demo-alt", ExpectedRevision: convo.Ptr(int64(0))}))
	if cl.Removed != 2 || cl.Revision != 1 {
		t.Fatalf("clear: %+v", cl)
	}

	// rewind, keeping the dropped turn as an archive
	one := must[*convo.Added](t)(c.AddUser(ctx, convo.AddUserParams{SessionID: "demo-alt", Text: "one"}))
	must[*convo.Added](t)(c.AddUser(ctx, convo.AddUserParams{SessionID: "demo-alt", Text: "two"}))
	rw := must[*convo.Rewound](t)(c.Rewind(ctx, convo.RewindParams{SessionID: "demo-alt", ToMessageID: one.MessageID, Archive: true}))
	if rw.Removed != 1 || rw.Revision != 4 || rw.ArchivedSessionID == nil {
		t.Fatalf("rewind: %+v", rw)
	}

	// search, in one session and across all
	sr := must[*convo.SearchPage](t)(c.Search(ctx, convo.SearchParams{Query: "one", SessionID: "demo-alt", Limit: 5}))
	if len(sr.Hits) != 1 || sr.Hits[0].MessageID != one.MessageID || sr.Hits[0].Snippet != "[one]" || sr.NextCursor != nil {
		t.Fatalf("search: %+v", sr)
	}
	if _, err := c.Search(ctx, convo.SearchParams{Query: "\"open"}); err == nil {
		t.Fatal("search: a malformed query was accepted")
	}

	// images by reference
	png := "iVBORw0KGgoAAAANSUhEUg=="
	must[*convo.Added](t)(c.AddUser(ctx, convo.AddUserParams{SessionID: "demo-alt", Text: "pic", Images: []string{png}}))
	byRef := must[*convo.History](t)(c.History(ctx, convo.HistoryParams{SessionID: "demo-alt", Images: convo.ImagesRef}))
	last := byRef.Messages[len(byRef.Messages)-1]
	if len(last.ImageRefs) != 1 || last.Images != nil || last.ImageRefs[0].MediaType != "image/png" {
		t.Fatalf("history by ref: %+v", last)
	}
	cp := must[*convo.Compacted](t)(c.Compact(ctx, convo.CompactParams{SessionID: "demo-alt", KeepTurns: 1, Summary: convo.Ptr("earlier")}))
	if cp.Removed != 1 || cp.SummaryMessageID == nil {
		t.Fatalf("compact: %+v", cp)
	}
	img := must[*convo.ImageData](t)(c.Image(ctx, convo.ImageParams{Ref: last.ImageRefs[0].Ref}))
	if img.Data != png || img.MediaType != "image/png" {
		t.Fatalf("image: %+v", img)
	}

	// to_dict, and back with from_dict under a new id
	d := must[*convo.Dict](t)(c.ToDict(ctx, convo.ToDictParams{SessionID: "demo"}))
	if d.SessionID != "demo" || len(d.Messages) != len(h.Messages) {
		t.Fatalf("to_dict: %+v", d)
	}
	d.SessionID = "demo-copy"
	imp := must[*convo.Imported](t)(c.FromDict(ctx, convo.FromDictParams{Data: d}))
	if imp.SessionID != "demo-copy" || imp.MessageCount != len(d.Messages) || imp.Repaired.Added != 0 {
		t.Fatalf("from_dict: %+v", imp)
	}
	copied := must[*convo.Dict](t)(c.ToDict(ctx, convo.ToDictParams{SessionID: "demo-copy"}))
	for i := range d.Messages {
		if *copied.Messages[i].ID != *d.Messages[i].ID || copied.Messages[i].CreatedAt != d.Messages[i].CreatedAt {
			t.Fatalf("from_dict message %d: %+v", i, copied.Messages[i])
		}
	}
	providerBody := `{"model":"gpt-x","messages":[{"role":"system","content":"Sys."},{"role":"user","content":"hi"},{"role":"assistant","content":"hello"}]}`
	fromBody := must[*convo.Imported](t)(c.FromDict(ctx, convo.FromDictParams{
		Data: json.RawMessage(providerBody), Format: "openai_chat", SessionID: "demo-body",
	}))
	if fromBody.SessionID != "demo-body" || fromBody.MessageCount != 2 || str(fromBody.System) != "Sys." {
		t.Fatalf("from_dict openai_chat: %+v", fromBody)
	}
	replaced := must[*convo.Imported](t)(c.FromDict(ctx, convo.FromDictParams{
		Data:    json.RawMessage(`{"session_id":"demo-copy","system_prompt":"Be brief.","messages":[{"role":"tool","tool_call_id":"x","content":"stray"},{"role":"user","content":"hi"}]}`),
		Replace: true, Repair: true, ExpectedRevision: convo.Ptr(int64(0)),
	}))
	if replaced.Repaired.Dropped != 1 || replaced.MessageCount != 1 || replaced.Revision != 1 || str(replaced.System) != "Be brief." {
		t.Fatalf("from_dict replace: %+v", replaced)
	}

	// delete
	del := must[*convo.Deleted](t)(c.DeleteSession(ctx, convo.DeleteSessionParams{SessionID: "demo-copy", ExpectedRevision: convo.Ptr(int64(1))}))
	if !del.Deleted {
		t.Fatalf("delete: %+v", del)
	}

	// The subscription tells the copy's last change; session/unsubscribe ends it.
	if last := until(t, sub, func(ch convo.Changed) bool { return ch.Change == convo.ChangeDeleted }); len(last) > 3 {
		t.Fatalf("the subscription kept more than the copy's latest change: %+v", last)
	}
	if err := c.Unsubscribe(ctx, convo.UnsubscribeParams{SubscriptionID: sub.SubscriptionID}); err != nil {
		t.Fatal(err)
	}

	// retention
	must[*convo.SessionInfo](t)(c.CreateSession(ctx, convo.CreateSessionParams{SessionID: "gone"}))
	if old := must[*convo.SessionPage](t)(c.ListSessions(ctx, convo.ListSessionsParams{UpdatedBefore: "2000-01-01T00:00:00Z"})); len(old.Sessions) != 0 {
		t.Fatalf("list updated_before: %+v", old)
	}
	gone := must[*convo.DeletedMany](t)(c.DeleteSessions(ctx, convo.DeleteSessionsParams{SessionIDs: []string{"gone", "ghost"}}))
	if gone.Deleted != 1 {
		t.Fatalf("delete_many: %+v", gone)
	}
	if _, ok := <-sub.C; ok || sub.Err() != nil {
		t.Fatalf("after Unsubscribe, C is open or Err is %v", sub.Err())
	}

	// shutdown; Close then sends only exit.
	if err := c.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}

	var names []string
	mu.Lock()
	for m := range sent {
		names = append(names, m)
	}
	mu.Unlock()
	sort.Strings(names)
	want := openrpcMethods(t)
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Fatalf("methods sent:\n  %v\nopenrpc.json's:\n  %v", names, want)
	}
}
