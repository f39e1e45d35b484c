package convo_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	convo "github.com/convo-dev/convo/clients/go"
)

// TestPipelinedOneSession: 200 goroutines append to one session at once. Every call gets
// its own reply (index and revision agree with what the history holds), and the
// session's changes are exactly the calls.
func TestPipelinedOneSession(t *testing.T) {
	c := start(t)
	ctx := ctxT(t)
	must[*convo.SessionInfo](t)(c.CreateSession(ctx, convo.CreateSessionParams{SessionID: "s"}))
	const n = 200
	added := make([]*convo.Added, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			added[i], errs[i] = c.AddUser(ctx, convo.AddUserParams{SessionID: "s", Text: fmt.Sprint("message ", i)})
		}(i)
	}
	wg.Wait()
	h := must[*convo.History](t)(c.History(ctx, convo.HistoryParams{SessionID: "s"}))
	if len(h.Messages) != n || h.Revision != n {
		t.Fatalf("%d messages, revision %d", len(h.Messages), h.Revision)
	}
	for i := 0; i < n; i++ {
		if errs[i] != nil {
			t.Fatalf("call %d: %v", i, errs[i])
		}
		a := added[i]
		m := h.Messages[a.Index]
		if *m.ID != a.MessageID || m.Content.String() != fmt.Sprint("message ", i) || a.Revision != int64(a.Index)+1 {
			t.Fatalf("call %d got %+v, the history has %s %q there", i, a, *m.ID, m.Content)
		}
	}
}

// TestPipelinedManySessions: goroutines on their own sessions, each in order, all at
// once, with a slow request of each kind mixed in.
func TestPipelinedManySessions(t *testing.T) {
	c := start(t)
	ctx := ctxT(t)
	const sessions, perSession = 32, 25
	var wg sync.WaitGroup
	errs := make(chan error, sessions)
	for s := 0; s < sessions; s++ {
		wg.Add(1)
		go func(s int) {
			defer wg.Done()
			id := fmt.Sprint("s", s)
			if _, err := c.CreateSession(ctx, convo.CreateSessionParams{SessionID: id}); err != nil {
				errs <- err
				return
			}
			for i := 0; i < perSession; i++ {
				a, err := c.AddUser(ctx, convo.AddUserParams{SessionID: id, Text: fmt.Sprint(i)})
				if err == nil && a.Index != i {
					err = fmt.Errorf("%s: message %d went to index %d", id, i, a.Index)
				}
				if err == nil && i%10 == 0 {
					_, err = c.CountTokens(ctx, convo.CountTokensParams{SessionID: id})
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}(s)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	page := must[*convo.SessionPage](t)(c.ListSessions(ctx, convo.ListSessionsParams{Limit: 1000}))
	if len(page.Sessions) != sessions {
		t.Fatalf("%d sessions", len(page.Sessions))
	}
	for _, s := range page.Sessions {
		if s.MessageCount != perSession {
			t.Fatalf("%s has %d messages", s.SessionID, s.MessageCount)
		}
	}
}

// TestRepliesOutOfOrder: a run waiting on the host does not hold up other calls, on
// its own session included.
func TestRepliesOutOfOrder(t *testing.T) {
	release := make(chan struct{})
	asked := make(chan struct{})
	c := start(t, convo.WithRuntime(func(ctx context.Context, req *convo.RuntimeRequest) (*convo.RuntimeAnswer, error) {
		close(asked)
		<-release
		return &convo.RuntimeAnswer{Text: "late"}, nil
	}))
	ctx := ctxT(t)
	must[*convo.SessionInfo](t)(c.CreateSession(ctx, convo.CreateSessionParams{SessionID: "s"}))
	done := make(chan error, 1)
	go func() {
		_, err := c.Run(ctx, convo.RunParams{SessionID: "s", Input: "slow"})
		done <- err
	}()
	<-asked
	for i := 0; i < 20; i++ {
		must[*convo.SessionInfo](t)(c.GetSession(ctx, convo.GetSessionParams{SessionID: "s"}))
		must[*convo.SessionInfo](t)(c.CreateSession(ctx, convo.CreateSessionParams{}))
	}
	select {
	case err := <-done:
		t.Fatalf("the run ended before its answer: %v", err)
	default:
	}
	close(release)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the run did not end")
	}
}
