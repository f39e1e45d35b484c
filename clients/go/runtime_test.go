package convo_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	convo "github.com/convo-dev/convo/clients/go"
)

func TestRuntimeRun(t *testing.T) {
	check := make(chan error, 1)
	c := start(t, convo.WithRuntimeFormat(convo.FormatOpenAIChat), convo.WithRuntime(func(ctx context.Context, req *convo.RuntimeRequest) (*convo.RuntimeAnswer, error) {
		last := req.Messages[len(req.Messages)-1]
		var payload struct {
			Messages []struct {
				Role    string `json:"role"`
				Content string `json:"content"`
			} `json:"messages"`
		}
		_ = json.Unmarshal(req.Payload, &payload)
		switch {
		case req.Purpose != "run" || req.Streaming() || req.SessionID != "s":
			check <- fmt.Errorf("request %+v", req)
		case str(req.System) != "You are terse." || req.Temperature == nil || *req.Temperature != 0 || *req.MaxTokens != 5:
			check <- fmt.Errorf("system %q, temperature %v, max_tokens %v", str(req.System), req.Temperature, req.MaxTokens)
		case last.Role != convo.RoleUser || last.Content.String() != "What is 2 + 2?" || compact(t, req.Metadata) != `{"turn":1}`:
			check <- fmt.Errorf("last message %+v, metadata %s", last, req.Metadata)
		case len(payload.Messages) != 2 || payload.Messages[1].Content != "What is 2 + 2?":
			check <- fmt.Errorf("payload %s", req.Payload)
		case compact(t, req.Tools) != `[{"type":"function","function":{"name":"calc"}}]`:
			check <- fmt.Errorf("tools %s", req.Tools)
		case !errors.Is(req.SendText(ctx, "x"), convo.ErrNotStreaming):
			check <- errors.New("SendText on runtime/run")
		default:
			check <- nil
		}
		if strings.Contains(last.Content.String(), "tool") {
			call, _ := convo.NewToolCall("c1", "calc", map[string]string{"expr": "2+2"})
			return &convo.RuntimeAnswer{ToolCalls: []convo.ToolCall{call}, StopReason: "tool_use"}, nil
		}
		return &convo.RuntimeAnswer{Text: "4", Usage: map[string]int{"input_tokens": 14}, Model: "m-1", StopReason: "stop"}, nil
	}))
	ctx := ctxT(t)
	must[*convo.SessionInfo](t)(c.CreateSession(ctx, convo.CreateSessionParams{SessionID: "s", System: "You are terse."}))
	tools := json.RawMessage(`[{"type":"function","function":{"name":"calc"}}]`)
	run := must[*convo.RunAnswer](t)(c.Run(ctx, convo.RunParams{
		SessionID: "s", Input: "What is 2 + 2?", Temperature: convo.Ptr(0.0), MaxTokens: convo.Ptr(int64(5)),
		Tools: tools, Metadata: map[string]int{"turn": 1},
	}))
	if err := <-check; err != nil {
		t.Fatal(err)
	}
	if str(run.Text) != "4" || run.Revision != 1 || compact(t, run.Usage) != `{"input_tokens":14}` {
		t.Fatalf("run: %+v", run)
	}
	h := must[*convo.History](t)(c.History(ctx, convo.HistoryParams{SessionID: "s"}))
	if len(h.Messages) != 2 || *h.Messages[0].ID != run.MessageIDs[0] || *h.Messages[1].ID != run.MessageIDs[1] {
		t.Fatalf("history: %+v", h.Messages)
	}
	if got := compact(t, h.Messages[1].Metadata); got != `{"usage":{"input_tokens":14},"model":"m-1","stop_reason":"stop"}` {
		t.Fatalf("assistant metadata %s", got)
	}

	// An answer of tool calls only.
	_, err := c.Run(ctx, convo.RunParams{SessionID: "s", Input: "use a tool", Temperature: convo.Ptr(0.0), MaxTokens: convo.Ptr(int64(5)), Tools: tools, Metadata: map[string]int{"turn": 1}})
	if err != nil {
		t.Fatal(err)
	}
	<-check
	h = must[*convo.History](t)(c.History(ctx, convo.HistoryParams{SessionID: "s"}))
	if len(h.Messages) != 5 || h.Messages[3].ToolCalls[0].ID() != "c1" || h.Repaired != 1 {
		t.Fatalf("history: %+v", h)
	}
}

func TestRuntimeJSON(t *testing.T) {
	type ask struct {
		purpose, schema string
		messages        []convo.Message
	}
	asks := make(chan ask, 4)
	c := start(t, convo.WithRuntime(func(ctx context.Context, req *convo.RuntimeRequest) (*convo.RuntimeAnswer, error) {
		asks <- ask{req.Purpose, string(req.Schema()), req.Messages}
		if len(asks) == 1 { // the first ask gets a wrong answer
			return &convo.RuntimeAnswer{Text: `{"answer": "four"}`}, nil
		}
		return &convo.RuntimeAnswer{Text: `{"answer": 4}`, ToolCalls: nil}, nil
	}))
	ctx := ctxT(t)
	must[*convo.SessionInfo](t)(c.CreateSession(ctx, convo.CreateSessionParams{SessionID: "s"}))
	schema := json.RawMessage(`{"type":"object","properties":{"answer":{"type":"integer"}},"required":["answer"]}`)
	js := must[*convo.JSONAnswer](t)(c.JSON(ctx, convo.JSONParams{SessionID: "s", Input: "2+2?", Schema: schema, Retries: 2}))
	var v struct{ Answer int }
	if err := json.Unmarshal(js.Value, &v); err != nil || v.Answer != 4 || js.Text != `{"answer": 4}` {
		t.Fatalf("json: %+v", js)
	}
	first, second := <-asks, <-asks
	if first.purpose != "json" || compact(t, []byte(first.schema)) != string(schema) {
		t.Fatalf("first ask: %+v", first)
	}
	// The retry sends the first ask's messages, the refused answer, and the errors.
	n := len(first.messages)
	if len(second.messages) != n+2 || second.messages[n].Role != convo.RoleAssistant || second.messages[n+1].Role != convo.RoleUser {
		t.Fatalf("second ask: %+v", second.messages)
	}
	h := must[*convo.History](t)(c.History(ctx, convo.HistoryParams{SessionID: "s"}))
	if len(h.Messages) != 2 || h.Messages[1].Content.String() != `{"answer": 4}` {
		t.Fatalf("history: %+v", h.Messages)
	}
}

func TestRuntimeStream(t *testing.T) {
	half := make(chan struct{})
	resume := make(chan struct{})
	c := start(t, convo.WithRuntime(func(ctx context.Context, req *convo.RuntimeRequest) (*convo.RuntimeAnswer, error) {
		if !req.Streaming() || req.Purpose != "run" {
			return nil, fmt.Errorf("not a stream: %+v", req)
		}
		if err := req.SendText(ctx, "Hel"); err != nil {
			return nil, err
		}
		close(half)
		<-resume
		call, _ := convo.NewToolCall("c1", "wave", nil)
		if err := req.SendDelta(ctx, convo.Delta{Text: "lo", ToolCalls: []convo.ToolCall{call}}); err != nil {
			return nil, err
		}
		// The final answer is what is stored, not the deltas put together.
		return &convo.RuntimeAnswer{Text: "Hello!", ToolCalls: []convo.ToolCall{call}}, nil
	}))
	ctx := ctxT(t)
	must[*convo.SessionInfo](t)(c.CreateSession(ctx, convo.CreateSessionParams{SessionID: "s"}))
	done := make(chan *convo.RunAnswer, 1)
	go func() {
		a, err := c.Stream(ctx, convo.RunParams{SessionID: "s", Input: "Greet."})
		if err != nil {
			t.Error(err)
		}
		done <- a
	}()
	<-half
	// Meanwhile the draft shows the user message and the text so far.
	deadline := time.Now().Add(5 * time.Second)
	for {
		h := must[*convo.History](t)(c.History(ctx, convo.HistoryParams{SessionID: "s", IncludeDraft: true}))
		if len(h.Messages) != 0 {
			t.Fatalf("a draft inside messages: %+v", h.Messages)
		}
		if h.Draft != nil && h.Draft.Messages[1].Content.String() == "Hel" {
			if h.Draft.Messages[0].Content.String() != "Greet." || h.Draft.StreamID == "" {
				t.Fatalf("draft: %+v", h.Draft)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no draft with the first delta: %+v", h.Draft)
		}
		time.Sleep(20 * time.Millisecond)
	}
	close(resume)
	a := <-done
	if a == nil || str(a.Text) != "Hello!" || len(a.ToolCalls) != 1 || a.Revision != 1 {
		t.Fatalf("stream: %+v", a)
	}
	h := must[*convo.History](t)(c.History(ctx, convo.HistoryParams{SessionID: "s", IncludeDraft: true, Repair: convo.Ptr(false)}))
	if h.Draft != nil || len(h.Messages) != 2 || h.Messages[1].Content.String() != "Hello!" {
		t.Fatalf("after the stream: %+v", h)
	}
}

// TestRuntimeConcurrent: runs on many sessions at once, each answered on its own
// goroutine: every handler waits until all of them have been asked.
func TestRuntimeConcurrent(t *testing.T) {
	const n = 16
	var arrived sync.WaitGroup
	arrived.Add(n)
	all := make(chan struct{})
	go func() { arrived.Wait(); close(all) }()
	c := start(t, convo.WithRuntime(func(ctx context.Context, req *convo.RuntimeRequest) (*convo.RuntimeAnswer, error) {
		arrived.Done()
		select {
		case <-all:
		case <-time.After(10 * time.Second):
			return nil, errors.New("the other runs were not asked meanwhile")
		}
		return &convo.RuntimeAnswer{Text: "re: " + req.Messages[len(req.Messages)-1].Content.String()}, nil
	}))
	ctx := ctxT(t)
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		go func(i int) {
			id := fmt.Sprint("s", i)
			if _, err := c.CreateSession(ctx, convo.CreateSessionParams{SessionID: id}); err != nil {
				errs <- err
				return
			}
			a, err := c.Run(ctx, convo.RunParams{SessionID: id, Input: id})
			if err == nil && str(a.Text) != "re: "+id {
				err = fmt.Errorf("%s got %q", id, str(a.Text))
			}
			errs <- err
		}(i)
	}
	for i := 0; i < n; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}
