package convo_test

import (
	"errors"
	"testing"

	convo "github.com/convo-dev/convo/clients/go"
)

// TestPop: pop removes the last message whatever its role and hands it back; with
// ReplaceWith the rest of a grouped message is stored in its place in the same step.
func TestPop(t *testing.T) {
	c := start(t)
	ctx := ctxT(t)
	must[*convo.SessionInfo](t)(c.CreateSession(ctx, convo.CreateSessionParams{SessionID: "p"}))
	if p := must[*convo.Popped](t)(c.Pop(ctx, convo.PopParams{SessionID: "p"})); p.Message != nil || p.Revision != 0 {
		t.Fatalf("pop of an empty session: %+v", p)
	}
	must[*convo.Added](t)(c.AddUser(ctx, convo.AddUserParams{SessionID: "p", Text: "Read both."}))
	c1 := must[convo.ToolCall](t)(convo.NewToolCall("c1", "read", map[string]string{"path": "a"}))
	c2 := must[convo.ToolCall](t)(convo.NewToolCall("c2", "read", map[string]string{"path": "b"}))
	must[*convo.Added](t)(c.AddAssistant(ctx, convo.AddAssistantParams{SessionID: "p", ToolCalls: []convo.ToolCall{c1, c2}}))
	r := must[*convo.Added](t)(c.AddToolResult(ctx, convo.AddToolResultParams{SessionID: "p", ToolCallID: "c1", Content: convo.Text("A")}))

	if _, err := c.Pop(ctx, convo.PopParams{SessionID: "p", ExpectedRevision: convo.Ptr(int64(1))}); !errors.Is(err, convo.ErrRevisionConflict) {
		t.Fatalf("pop at a stale revision: %v", err)
	}
	// A tool result: its call is open again.
	p := must[*convo.Popped](t)(c.Pop(ctx, convo.PopParams{SessionID: "p", ExpectedRevision: convo.Ptr(r.Revision)}))
	if p.Message == nil || str(p.Message.ID) != r.MessageID || str(p.Message.ToolCallID) != "c1" || p.Revision != r.Revision+1 {
		t.Fatalf("pop: %+v", p)
	}
	// The group's message, replaced by the part of it that stays.
	p = must[*convo.Popped](t)(c.Pop(ctx, convo.PopParams{SessionID: "p", ReplaceWith: &convo.MessageInput{Role: convo.RoleAssistant, ToolCalls: []convo.ToolCall{c2}}}))
	if p.Message == nil || len(p.Message.ToolCalls) != 2 {
		t.Fatalf("pop with replace_with: %+v", p)
	}
	h := must[*convo.History](t)(c.History(ctx, convo.HistoryParams{SessionID: "p", Repair: convo.Ptr(false)}))
	if len(h.Messages) != 2 || len(h.Messages[1].ToolCalls) != 1 || h.Messages[1].ToolCalls[0].ID() != "c2" {
		t.Fatalf("history after pop: %+v", h.Messages)
	}
}

// TestAllowEmpty: an empty answer a model gave is refused unless AllowEmpty says to
// store it.
func TestAllowEmpty(t *testing.T) {
	c := start(t)
	ctx := ctxT(t)
	must[*convo.SessionInfo](t)(c.CreateSession(ctx, convo.CreateSessionParams{SessionID: "e"}))
	must[*convo.Added](t)(c.AddUser(ctx, convo.AddUserParams{SessionID: "e", Text: "Anything?"}))
	if _, err := c.AddAssistant(ctx, convo.AddAssistantParams{SessionID: "e"}); !errors.Is(err, convo.ErrInvalidParams) {
		t.Fatalf("an empty answer: %v", err)
	}
	must[*convo.Added](t)(c.AddAssistant(ctx, convo.AddAssistantParams{SessionID: "e", AllowEmpty: true}))
	must[*convo.Added](t)(c.AddMessage(ctx, convo.AddMessageParams{SessionID: "e", Message: convo.MessageInput{Role: convo.RoleAssistant, Content: convo.Text(""), AllowEmpty: true}}))
	h := must[*convo.History](t)(c.History(ctx, convo.HistoryParams{SessionID: "e"}))
	if len(h.Messages) != 3 || h.Messages[1].Role != convo.RoleAssistant || h.Messages[2].Content.String() != "" {
		t.Fatalf("history: %+v", h.Messages)
	}
}
