package convo_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	convo "github.com/convo-dev/convo/clients/go"
)

// expect checks that err matches sentinel with errors.Is and is an *RPCError of that code
// and kind for errors.As.
func expect(t *testing.T, err error, sentinel error, code int, kind string) *convo.RPCError {
	t.Helper()
	if !errors.Is(err, sentinel) {
		t.Fatalf("got %v, want %v", err, sentinel)
	}
	var rpc *convo.RPCError
	if !errors.As(err, &rpc) {
		t.Fatalf("%v is not an *RPCError", err)
	}
	if rpc.Code != code || rpc.Kind() != kind || rpc.Message == "" {
		t.Fatalf("got code %d kind %q message %q, want %d %q", rpc.Code, rpc.Kind(), rpc.Message, code, kind)
	}
	return rpc
}

func TestErrors(t *testing.T) {
	c := start(t)
	ctx := ctxT(t)
	must[*convo.SessionInfo](t)(c.CreateSession(ctx, convo.CreateSessionParams{SessionID: "s"}))

	t.Run("1001 session not found", func(t *testing.T) {
		_, err := c.GetSession(ctx, convo.GetSessionParams{SessionID: "missing"})
		e := expect(t, err, convo.ErrSessionNotFound, 1001, "session_not_found")
		if e.Details().SessionID != "missing" {
			t.Fatalf("data: %s", e.Data)
		}
	})
	t.Run("1002 session exists", func(t *testing.T) {
		_, err := c.CreateSession(ctx, convo.CreateSessionParams{SessionID: "s"})
		expect(t, err, convo.ErrSessionExists, 1002, "session_exists")
	})
	t.Run("1003 revision conflict", func(t *testing.T) {
		_, err := c.AddUser(ctx, convo.AddUserParams{SessionID: "s", Text: "hi", ExpectedRevision: convo.Ptr(int64(7))})
		d := expect(t, err, convo.ErrRevisionConflict, 1003, "revision_conflict").Details()
		if d.CurrentRevision == nil || *d.CurrentRevision != 0 || *d.ExpectedRevision != 7 {
			t.Fatalf("data: %+v", d)
		}
	})
	t.Run("1004 invalid sequence", func(t *testing.T) {
		_, err := c.AddToolResult(ctx, convo.AddToolResultParams{SessionID: "s", ToolCallID: "nope", Content: convo.Text("x")})
		d := expect(t, err, convo.ErrInvalidSequence, 1004, "invalid_sequence").Details()
		if d.Reason != "no_pending_tool_calls" || d.ToolCallID != "nope" {
			t.Fatalf("data: %+v", d)
		}
		var raw struct {
			Reason string `json:"reason"`
		}
		var rpc *convo.RPCError
		errors.As(err, &rpc)
		if rpc.DecodeData(&raw) != nil || raw.Reason != "no_pending_tool_calls" {
			t.Fatalf("DecodeData: %+v", raw)
		}
	})
	t.Run("1007 message not found", func(t *testing.T) {
		_, err := c.Fork(ctx, convo.ForkParams{SessionID: "s", AtMessageID: "no-such-message"})
		if d := expect(t, err, convo.ErrMessageNotFound, 1007, "message_not_found").Details(); d.MessageID != "no-such-message" {
			t.Fatalf("data: %+v", d)
		}
	})
	t.Run("1008 runtime failed: no runtime", func(t *testing.T) {
		_, err := c.Run(ctx, convo.RunParams{SessionID: "s", Input: "hi"})
		if d := expect(t, err, convo.ErrRuntimeFailed, 1008, "runtime_failed").Details(); d.Reason != "no_runtime" {
			t.Fatalf("data: %+v", d)
		}
	})
	t.Run("-32602 invalid params", func(t *testing.T) {
		_, err := c.GetSession(ctx, convo.GetSessionParams{SessionID: "a b"})
		expect(t, err, convo.ErrInvalidParams, -32602, "")
		_, err = c.AddAssistant(ctx, convo.AddAssistantParams{SessionID: "s"})
		expect(t, err, convo.ErrInvalidParams, -32602, "")
	})
	t.Run("-32601 method not found", func(t *testing.T) {
		err := c.Call(ctx, "session/nope", map[string]string{}, nil)
		expect(t, err, convo.ErrMethodNotFound, -32601, "")
	})
	t.Run("not a sentinel of another code", func(t *testing.T) {
		_, err := c.GetSession(ctx, convo.GetSessionParams{SessionID: "missing"})
		if errors.Is(err, convo.ErrSessionExists) || errors.Is(err, convo.ErrClosed) {
			t.Fatal("matches another sentinel")
		}
		if !strings.Contains(err.Error(), "1001") {
			t.Fatalf("message %q does not give the code", err)
		}
	})
	// The session is unchanged by all of the above.
	if s := must[*convo.SessionInfo](t)(c.GetSession(ctx, convo.GetSessionParams{SessionID: "s"})); s.Revision != 0 || s.MessageCount != 0 {
		t.Fatalf("a failed request changed the session: %+v", s)
	}
}

func TestErrorTooLarge(t *testing.T) {
	c := start(t, convo.WithArgs("--max-message-bytes", "2048"), convo.WithStderr(io.Discard))
	ctx := ctxT(t)
	must[*convo.SessionInfo](t)(c.CreateSession(ctx, convo.CreateSessionParams{SessionID: "s"}))
	_, err := c.AddUser(ctx, convo.AddUserParams{SessionID: "s", Text: strings.Repeat("x", 4096)})
	expect(t, err, convo.ErrTooLarge, 1005, "too_large")
	// The connection goes on; a reply over the limit is refused too.
	for i := 0; i < 3; i++ {
		must[*convo.Added](t)(c.AddUser(ctx, convo.AddUserParams{SessionID: "s", Text: strings.Repeat("y", 1000)}))
	}
	_, err = c.History(ctx, convo.HistoryParams{SessionID: "s"})
	if d := expect(t, err, convo.ErrTooLarge, 1005, "too_large").Details(); d.Limit == nil || *d.Limit != 2048 {
		t.Fatalf("data: %+v", d)
	}
}

// TestErrorStorageUnavailable runs convo under a file-size limit: a write past it fails
// with 1006 and takes no effect, and the server goes on.
func TestErrorStorageUnavailable(t *testing.T) {
	dir := t.TempDir()
	wrapper := filepath.Join(dir, "convo-limited")
	script := "#!/bin/sh\nulimit -f 400\nexec \"$CONVO_REAL\" \"$@\"\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("CONVO_REAL", binary(t))
	c := start(t, convo.WithBinary(wrapper), convo.WithStore("sqlite:"+filepath.Join(dir, "db.sqlite")), convo.WithStderr(io.Discard))
	ctx := ctxT(t)
	must[*convo.SessionInfo](t)(c.CreateSession(ctx, convo.CreateSessionParams{SessionID: "s"}))
	_, err := c.AddUser(ctx, convo.AddUserParams{SessionID: "s", Text: strings.Repeat("x", 400_000)})
	expect(t, err, convo.ErrStorageUnavailable, 1006, "storage_unavailable")
	if s := must[*convo.SessionInfo](t)(c.GetSession(ctx, convo.GetSessionParams{SessionID: "s"})); s.MessageCount != 0 {
		t.Fatalf("the failed write took effect: %+v", s)
	}
}

func TestErrorRuntime(t *testing.T) {
	var asked atomic.Int32
	c := start(t, convo.WithRuntime(func(ctx context.Context, req *convo.RuntimeRequest) (*convo.RuntimeAnswer, error) {
		switch req.Messages[len(req.Messages)-1].Content.String() {
		case "fail":
			return nil, errors.New("the provider is down")
		case "fail rpc":
			return nil, &convo.RPCError{Code: 42, Message: "quota", Data: json.RawMessage(`{"retry_after":3}`)}
		case "empty":
			return &convo.RuntimeAnswer{}, nil
		}
		asked.Add(1)
		return &convo.RuntimeAnswer{Text: "not JSON"}, nil
	}))
	ctx := ctxT(t)
	must[*convo.SessionInfo](t)(c.CreateSession(ctx, convo.CreateSessionParams{SessionID: "s"}))

	_, err := c.Run(ctx, convo.RunParams{SessionID: "s", Input: "fail"})
	d := expect(t, err, convo.ErrRuntimeFailed, 1008, "runtime_failed").Details()
	if d.Reason != "error" || !strings.Contains(string(d.Error), "the provider is down") {
		t.Fatalf("data: %+v", d)
	}
	_, err = c.Run(ctx, convo.RunParams{SessionID: "s", Input: "fail rpc"})
	d = expect(t, err, convo.ErrRuntimeFailed, 1008, "runtime_failed").Details()
	if d.Reason != "error" || compact(t, d.Error) != `{"code":42,"message":"quota","data":{"retry_after":3}}` {
		t.Fatalf("data: %+v %s", d, d.Error)
	}
	_, err = c.Run(ctx, convo.RunParams{SessionID: "s", Input: "empty"})
	if d := expect(t, err, convo.ErrRuntimeFailed, 1008, "runtime_failed").Details(); d.Reason != "invalid_response" || d.Detail == "" {
		t.Fatalf("data: %+v", d)
	}
	_, err = c.JSON(ctx, convo.JSONParams{SessionID: "s", Input: "json please", Schema: map[string]any{"type": "object"}, Retries: 1})
	d = expect(t, err, convo.ErrInvalidOutput, 1009, "invalid_output").Details()
	if len(d.Errors) == 0 || d.Text != "not JSON" || asked.Load() != 2 {
		t.Fatalf("data: %+v, asked %d times", d, asked.Load())
	}
	if s := must[*convo.SessionInfo](t)(c.GetSession(ctx, convo.GetSessionParams{SessionID: "s"})); s.MessageCount != 0 {
		t.Fatalf("a failed run appended something: %+v", s)
	}
}

func TestErrorTimeout(t *testing.T) {
	c := start(t, convo.WithRuntime(func(ctx context.Context, req *convo.RuntimeRequest) (*convo.RuntimeAnswer, error) {
		<-ctx.Done() // convo cancels it when it gives up
		return nil, ctx.Err()
	}))
	ctx := ctxT(t)
	must[*convo.SessionInfo](t)(c.CreateSession(ctx, convo.CreateSessionParams{SessionID: "s"}))
	began := time.Now()
	_, err := c.Run(ctx, convo.RunParams{SessionID: "s", Input: "hi", TimeoutMS: convo.Ptr(int64(100))})
	if d := expect(t, err, convo.ErrRuntimeFailed, 1008, "runtime_failed").Details(); d.Reason != "timeout" {
		t.Fatalf("data: %+v", d)
	}
	if time.Since(began) > 5*time.Second {
		t.Fatal("the timeout took too long")
	}
}

// TestErrorCancelledByServer sees the server's own -32800: a stream cancelled after a
// delta, whose draft convo keeps.
func TestErrorCancelledByServer(t *testing.T) {
	started := make(chan struct{})
	handlerDone := make(chan error, 1)
	c := start(t, convo.WithRuntime(func(ctx context.Context, req *convo.RuntimeRequest) (*convo.RuntimeAnswer, error) {
		if err := req.SendText(ctx, "Half an ans"); err != nil {
			return nil, err
		}
		close(started)
		<-ctx.Done()
		handlerDone <- ctx.Err()
		return nil, ctx.Err()
	}))
	ctx := ctxT(t)
	must[*convo.SessionInfo](t)(c.CreateSession(ctx, convo.CreateSessionParams{SessionID: "s"}))
	err := convo.SendThenCancel(ctx, c, "session/stream", convo.RunParams{SessionID: "s", Input: "Explain."}, func() {
		<-started
		// Wait until the draft holds the delta, so that the kept answer has text.
		for {
			h := must[*convo.History](t)(c.History(ctx, convo.HistoryParams{SessionID: "s", IncludeDraft: true}))
			if h.Draft != nil && h.Draft.Messages[1].Content.String() == "Half an ans" {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
	d := expect(t, err, convo.ErrCancelled, -32800, "request_cancelled").Details()
	if len(d.MessageIDs) != 2 {
		t.Fatalf("data: %+v", d)
	}
	select { // convo passed the cancellation on to the host
	case <-handlerDone:
	case <-time.After(5 * time.Second):
		t.Fatal("the runtime handler's ctx was not cancelled")
	}
	h := must[*convo.History](t)(c.History(ctx, convo.HistoryParams{SessionID: "s"}))
	if len(h.Messages) != 2 || h.Messages[1].Content.String() != "Half an ans" || !strings.Contains(string(h.Messages[1].Metadata), `"cancelled"`) {
		t.Fatalf("kept: %+v", h.Messages)
	}
}

func TestErrorAfterShutdown(t *testing.T) {
	c := start(t)
	ctx := ctxT(t)
	if err := c.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	_, err := c.ListSessions(ctx, convo.ListSessionsParams{})
	expect(t, err, convo.ErrInvalidRequest, -32600, "")
}
