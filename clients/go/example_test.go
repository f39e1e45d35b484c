package convo_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"testing"

	convo "github.com/convo-dev/convo/clients/go"
)

// The README's examples, compiled with the tests.

func Example() {
	ctx := context.Background()
	c, err := convo.Start(ctx, convo.WithStore("memory")) // the binary: $CONVO_BINARY or PATH
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	s, err := c.CreateSession(ctx, convo.CreateSessionParams{System: "You are terse."})
	if err != nil {
		log.Fatal(err)
	}
	id := s.SessionID
	c.AddUser(ctx, convo.AddUserParams{SessionID: id, Text: "List the files."})
	call, _ := convo.NewToolCall("call_1", "ls", map[string]string{"path": "."})
	c.AddAssistant(ctx, convo.AddAssistantParams{SessionID: id, ToolCalls: []convo.ToolCall{call}})

	// The host crashed before the tool ran? History still hands out a valid transcript.
	h, err := c.History(ctx, convo.HistoryParams{SessionID: id})
	if err != nil {
		log.Fatal(err)
	}
	last := h.Messages[len(h.Messages)-1]
	fmt.Println(len(h.Messages), h.Repaired, last.Content)
}

func Example_errors() {
	ctx := context.Background()
	c, err := convo.Start(ctx, convo.WithStore("memory"))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	_, err = c.AddToolResult(ctx, convo.AddToolResultParams{SessionID: "nope", ToolCallID: "x", Content: convo.Text("ok")})
	if errors.Is(err, convo.ErrSessionNotFound) {
		fmt.Println("no such session")
	}
	var rpc *convo.RPCError
	if errors.As(err, &rpc) {
		fmt.Println(rpc.Code, rpc.Kind(), rpc.Details().SessionID)
	}
}

func ExampleWithRuntime() {
	ctx := context.Background()
	runtime := func(ctx context.Context, req *convo.RuntimeRequest) (*convo.RuntimeAnswer, error) {
		// req.Messages: the repaired history, then the new user message; req.Payload: the
		// same as an OpenAI chat body (WithRuntimeFormat). Call your model here.
		if req.Streaming() {
			for _, piece := range []string{"Four", "."} {
				if err := req.SendText(ctx, piece); err != nil {
					return nil, err
				}
			}
		}
		return &convo.RuntimeAnswer{Text: "Four.", Usage: map[string]int{"output_tokens": 2}, Model: "my-model"}, nil
	}
	c, err := convo.Start(ctx, convo.WithStore("memory"),
		convo.WithRuntime(runtime), convo.WithRuntimeFormat(convo.FormatOpenAIChat))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	s, _ := c.CreateSession(ctx, convo.CreateSessionParams{})
	answer, err := c.Run(ctx, convo.RunParams{SessionID: s.SessionID, Input: "What is 2 + 2?", Temperature: convo.Ptr(0.0)})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(*answer.Text, answer.MessageIDs, answer.Revision)

	streamed, err := c.Stream(ctx, convo.RunParams{SessionID: s.SessionID, Input: "Again?"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(*streamed.Text)
}

func ExampleClient_Subscribe() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "convo-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	// Two processes on one database, as two editor windows would have.
	store := convo.WithStore("sqlite:" + filepath.Join(dir, "convo.db"))
	mine, err := convo.Start(ctx, store)
	if err != nil {
		log.Fatal(err)
	}
	defer mine.Close()
	theirs, err := convo.Start(ctx, store)
	if err != nil {
		log.Fatal(err)
	}
	defer theirs.Close()

	sub, err := mine.Subscribe(ctx, convo.SubscribeParams{SessionID: "demo"}) // the session need not exist yet
	if err != nil {
		log.Fatal(err)
	}
	defer sub.Close() // unsubscribes; C is closed

	theirs.CreateSession(ctx, convo.CreateSessionParams{SessionID: "demo"})
	theirs.AddUser(ctx, convo.AddUserParams{SessionID: "demo", Text: "Hello from the other window."})

	for ch := range sub.C { // within about 100 ms of each commit; maybe coalesced, the last always
		fmt.Println(ch.SessionID, ch.Change, ch.Revision, ch.MessageCount) // demo appended 1 1
		if ch.MessageCount == 1 {
			break
		}
	}
}

func ExampleClient_AddResponse() {
	ctx := context.Background()
	c, err := convo.Start(ctx, convo.WithStore("memory"))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	s, _ := c.CreateSession(ctx, convo.CreateSessionParams{})
	id, traceID := s.SessionID, "t-42"
	c.AddUser(ctx, convo.AddUserParams{SessionID: id, Text: "What should I pack for Paris and London tomorrow?"})

	// callModel stands for the host's HTTP call: here, Anthropic's two answers of a
	// tool loop, as the API sent them.
	answers := []string{"anthropic_thinking_tool_use.json", "anthropic_final_answer.json"}
	callModel := func(ctx context.Context, payload json.RawMessage) ([]byte, error) {
		name := answers[0]
		answers = answers[1:]
		return os.ReadFile(filepath.Join("testdata", "providers", name))
	}
	runTool := func(call convo.ToolCall) string { return "14 °C, light rain" }

	format, model := convo.FormatAnthropicMessages, "claude-opus-4-6"
	for {
		// The request body: convo's payload ({system?, messages}, native turns verbatim),
		// plus what is yours to set (model, max_tokens, tools, thinking).
		ex, err := c.Export(ctx, convo.ExportParams{SessionID: id, Format: format, Model: model})
		if err != nil {
			log.Fatal(err)
		}
		body, err := callModel(ctx, ex.Payload) // the HTTP response body, as received
		if err != nil {
			log.Fatal(err)
		}
		added, err := c.AddResponse(ctx, convo.AddResponseParams{
			SessionID: id, Format: format,
			Response: json.RawMessage(body), // not a map or struct made from it: order matters
			Metadata: map[string]string{"trace_id": traceID},
		})
		if err != nil { // ErrInvalidParams: not a `message`, or no output (a refusal); nothing stored
			log.Fatal(err)
		}
		if len(added.ToolCallIDs) == 0 {
			break // the final answer
		}
		h, err := c.History(ctx, convo.HistoryParams{SessionID: id, Offset: added.Index, Limit: convo.Ptr(1)})
		if err != nil {
			log.Fatal(err)
		}
		for _, call := range h.Messages[0].ToolCalls { // {id, name, arguments}, derived from the turn
			c.AddToolResult(ctx, convo.AddToolResultParams{SessionID: id, ToolCallID: call.ID(), Content: convo.Text(runTool(call))})
		}
	}
	s, _ = c.GetSession(ctx, convo.GetSessionParams{SessionID: id})
	fmt.Println(s.Usage.InputTokens, s.Usage.CacheReadTokens, s.Usage.ReasoningTokens) // 4230 1912 189: what the loop spent
}

func Example_exactlyOnce() {
	ctx := context.Background()
	c, err := convo.Start(ctx, convo.WithStore("memory"))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	if _, err := c.CreateSession(ctx, convo.CreateSessionParams{SessionID: "demo"}); err != nil {
		log.Fatal(err)
	}

	id := "0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9"
	a, _ := c.AddUser(ctx, convo.AddUserParams{SessionID: "demo", Text: "Ship it.", MessageID: id})
	b, _ := c.AddUser(ctx, convo.AddUserParams{SessionID: "demo", Text: "Ship it.", MessageID: id})
	fmt.Println(a.MessageID == id, a.Duplicate, b.Index == a.Index, b.Duplicate) // true false true true
}

// TestExamples runs the examples (they print ids and times, so they have no Output).
func TestExamples(t *testing.T) {
	t.Setenv("CONVO_BINARY", binary(t))
	Example()
	Example_errors()
	Example_exactlyOnce()
	ExampleWithRuntime()
	ExampleClient_Subscribe()
	ExampleClient_AddResponse()
}
