package convo_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	convo "github.com/convo-dev/convo/clients/go"
)

// TestCancel: a call whose ctx ends returns ctx.Err() at once; the client sends
// $/cancelRequest, convo passes it on to the runtime, and nothing is appended.
func TestCancel(t *testing.T) {
	asked := make(chan struct{}, 1)
	handlerEnded := make(chan error, 1)
	c := start(t, convo.WithRuntime(func(ctx context.Context, req *convo.RuntimeRequest) (*convo.RuntimeAnswer, error) {
		asked <- struct{}{}
		<-ctx.Done()
		handlerEnded <- ctx.Err()
		return nil, ctx.Err()
	}))
	ctx := ctxT(t)
	must[*convo.SessionInfo](t)(c.CreateSession(ctx, convo.CreateSessionParams{SessionID: "s"}))

	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := c.Run(runCtx, convo.RunParams{SessionID: "s", Input: "never answered"})
		done <- err
	}()
	<-asked
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v, want context.Canceled", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("the call did not return when its ctx ended")
	}
	select {
	case <-handlerEnded:
	case <-time.After(5 * time.Second):
		t.Fatal("the runtime handler's ctx was not cancelled: no $/cancelRequest went through")
	}
	if s := must[*convo.SessionInfo](t)(c.GetSession(ctx, convo.GetSessionParams{SessionID: "s"})); s.MessageCount != 0 {
		t.Fatalf("a cancelled run appended: %+v", s)
	}

	// A deadline: context.DeadlineExceeded.
	short, cancelShort := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancelShort()
	if _, err := c.Run(short, convo.RunParams{SessionID: "s", Input: "too slow"}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want context.DeadlineExceeded", err)
	}
	<-asked
	<-handlerEnded

	// A ctx that has already ended sends nothing.
	gone, cancelGone := context.WithCancel(ctx)
	cancelGone()
	if _, err := c.CreateSession(gone, convo.CreateSessionParams{SessionID: "not-made"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v", err)
	}
	if _, err := c.GetSession(ctx, convo.GetSessionParams{SessionID: "not-made"}); !errors.Is(err, convo.ErrSessionNotFound) {
		t.Fatalf("got %v", err)
	}
}

// TestCancelStream: a stream cancelled after some text keeps it, marked partial.
func TestCancelStream(t *testing.T) {
	sent := make(chan struct{})
	c := start(t, convo.WithRuntime(func(ctx context.Context, req *convo.RuntimeRequest) (*convo.RuntimeAnswer, error) {
		if err := req.SendText(ctx, "The answer is"); err != nil {
			return nil, err
		}
		close(sent)
		<-ctx.Done()
		return nil, ctx.Err()
	}))
	ctx := ctxT(t)
	must[*convo.SessionInfo](t)(c.CreateSession(ctx, convo.CreateSessionParams{SessionID: "s"}))
	streamCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := c.Stream(streamCtx, convo.RunParams{SessionID: "s", Input: "Tell me."})
		done <- err
	}()
	<-sent
	waitFor(t, func() bool {
		h := must[*convo.History](t)(c.History(ctx, convo.HistoryParams{SessionID: "s", IncludeDraft: true}))
		return h.Draft != nil && h.Draft.Messages[1].Content.String() == "The answer is"
	})
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v", err)
	}
	waitFor(t, func() bool {
		h := must[*convo.History](t)(c.History(ctx, convo.HistoryParams{SessionID: "s"}))
		return len(h.Messages) == 2 && h.Messages[1].Content.String() == "The answer is" &&
			strings.Contains(string(h.Messages[1].Metadata), `"partial":true`)
	})
}

func waitFor(t *testing.T, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestClose: Close shuts convo down and waits for it (no process is left: start's
// cleanup checks), is idempotent, and later calls fail with ErrClosed.
func TestClose(t *testing.T) {
	before := runtime.NumGoroutine()
	c := startRaw(t, convo.WithStore("memory"))
	ctx := ctxT(t)
	must[*convo.SessionInfo](t)(c.CreateSession(ctx, convo.CreateSessionParams{SessionID: "s"}))
	pid := c.PID()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	assertGone(t, pid)
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := c.GetSession(ctx, convo.GetSessionParams{SessionID: "s"}); !errors.Is(err, convo.ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
	waitFor(t, func() bool { return runtime.NumGoroutine() <= before }) // none left running
}

// TestCloseWaitsForCalls: calls in flight when Close is called are answered first
// (shutdown waits for every earlier request).
func TestCloseWaitsForCalls(t *testing.T) {
	release := make(chan struct{})
	asked := make(chan struct{})
	c := startRaw(t, convo.WithStore("memory"), convo.WithRuntime(func(ctx context.Context, req *convo.RuntimeRequest) (*convo.RuntimeAnswer, error) {
		close(asked)
		<-release
		return &convo.RuntimeAnswer{Text: "done"}, nil
	}))
	ctx := ctxT(t)
	must[*convo.SessionInfo](t)(c.CreateSession(ctx, convo.CreateSessionParams{SessionID: "s"}))
	done := make(chan error, 1)
	go func() {
		_, err := c.Run(ctx, convo.RunParams{SessionID: "s", Input: "hi"})
		done <- err
	}()
	<-asked
	closed := make(chan error, 1)
	pid := c.PID()
	go func() { closed <- c.Close() }()
	time.Sleep(50 * time.Millisecond)
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("the run in flight: %v", err)
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	assertGone(t, pid)
}

// TestCloseStuckRuntime: a runtime that never answers makes Close wait only for the
// shutdown timeout; the process is ended all the same.
func TestCloseStuckRuntime(t *testing.T) {
	asked := make(chan struct{})
	c := startRaw(t, convo.WithStore("memory"), convo.WithShutdownTimeout(300*time.Millisecond), convo.WithRuntime(func(ctx context.Context, req *convo.RuntimeRequest) (*convo.RuntimeAnswer, error) {
		close(asked)
		<-ctx.Done()
		return nil, ctx.Err()
	}))
	ctx := ctxT(t)
	must[*convo.SessionInfo](t)(c.CreateSession(ctx, convo.CreateSessionParams{SessionID: "s"}))
	done := make(chan error, 1)
	go func() {
		_, err := c.Run(ctx, convo.RunParams{SessionID: "s", Input: "hi"})
		done <- err
	}()
	<-asked
	pid := c.PID()
	began := time.Now()
	if err := c.Close(); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close: %v, want the shutdown timeout", err)
	}
	if d := time.Since(began); d > 3*time.Second {
		t.Fatalf("Close took %v", d)
	}
	assertGone(t, pid)
	if err := <-done; err == nil {
		t.Fatal("the run in flight succeeded")
	}
}

// TestProcessDies: when convo dies, calls in flight and later ones fail with ErrClosed,
// and Close reports how it ended.
func TestProcessDies(t *testing.T) {
	asked := make(chan struct{})
	c := startRaw(t, convo.WithStore("memory"), convo.WithRuntime(func(ctx context.Context, req *convo.RuntimeRequest) (*convo.RuntimeAnswer, error) {
		close(asked)
		<-ctx.Done()
		return nil, ctx.Err()
	}))
	ctx := ctxT(t)
	must[*convo.SessionInfo](t)(c.CreateSession(ctx, convo.CreateSessionParams{SessionID: "s"}))
	done := make(chan error, 1)
	go func() {
		_, err := c.Run(ctx, convo.RunParams{SessionID: "s", Input: "hi"})
		done <- err
	}()
	<-asked
	p, _ := os.FindProcess(c.PID())
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, convo.ErrClosed) {
		t.Fatalf("the call in flight: %v", err)
	}
	if _, err := c.GetSession(ctx, convo.GetSessionParams{SessionID: "s"}); !errors.Is(err, convo.ErrClosed) {
		t.Fatalf("a later call: %v", err)
	}
	if err := c.Close(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("Close: %v", err)
	}
	assertGone(t, c.PID())
}

// TestPersistence: with an SQLite store the sessions outlive the process.
func TestPersistence(t *testing.T) {
	store := "sqlite:" + filepath.Join(t.TempDir(), "sessions.db")
	ctx := ctxT(t)
	c := start(t, convo.WithStore(store))
	must[*convo.SessionInfo](t)(c.CreateSession(ctx, convo.CreateSessionParams{SessionID: "kept"}))
	must[*convo.Added](t)(c.AddUser(ctx, convo.AddUserParams{SessionID: "kept", Text: "remember me"}))
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c = start(t, convo.WithStore(store))
	if c.ServerInfo().Capabilities.Store != "sqlite" {
		t.Fatalf("store %q", c.ServerInfo().Capabilities.Store)
	}
	h := must[*convo.History](t)(c.History(ctx, convo.HistoryParams{SessionID: "kept"}))
	if len(h.Messages) != 1 || h.Messages[0].Content.String() != "remember me" {
		t.Fatalf("history after a restart: %+v", h.Messages)
	}
}

// TestBinaryLookup: WithBinary, then CONVO_BINARY, then PATH, then ErrBinaryNotFound.
func TestBinaryLookup(t *testing.T) {
	bin := binary(t)
	ctx := ctxT(t)
	dir := t.TempDir()
	name := "convo"
	if runtime.GOOS == "windows" {
		name = "convo.exe"
	}
	if err := os.Symlink(bin, filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir)
	t.Setenv("CONVO_BINARY", "")
	c, err := convo.Start(ctx, convo.WithStore("memory"))
	if err != nil {
		t.Fatalf("from PATH: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	t.Setenv("PATH", t.TempDir())
	if _, err := convo.Start(ctx); !errors.Is(err, convo.ErrBinaryNotFound) {
		t.Fatalf("got %v, want ErrBinaryNotFound", err)
	}

	t.Setenv("CONVO_BINARY", bin)
	c, err = convo.Start(ctx, convo.WithStore("memory"))
	if err != nil {
		t.Fatalf("from CONVO_BINARY: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	// WithBinary comes first.
	if _, err := convo.Start(ctx, convo.WithBinary(filepath.Join(dir, "missing"))); err == nil {
		t.Fatal("a missing WithBinary started")
	}
}

// TestStartFails: a configuration convo refuses is an error from Start that says why,
// and no process is left.
func TestStartFails(t *testing.T) {
	ctx := ctxT(t)
	_, err := convo.Start(ctx, convo.WithBinary(binary(t)), convo.WithStore("sqlite:/nonexistent/folder/x.db"), convo.WithStderr(io.Discard))
	if err == nil || !strings.Contains(err.Error(), "cannot open the store") || !errors.Is(err, convo.ErrClosed) {
		t.Fatalf("got %v", err)
	}
	_, err = convo.Start(ctx, convo.WithBinary(binary(t)), convo.WithArgs("--no-such-flag"), convo.WithStderr(io.Discard))
	if err == nil || !strings.Contains(err.Error(), "exit status 2") {
		t.Fatalf("got %v", err)
	}
}
