package convo_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	convo "github.com/convo-dev/convo/clients/go"
)

// next receives a change from sub, failing the test after d.
func next(t *testing.T, sub *convo.Subscription, d time.Duration) convo.Changed {
	t.Helper()
	select {
	case ch, ok := <-sub.C:
		if !ok {
			t.Fatalf("%s ended: %v", sub.SubscriptionID, sub.Err())
		}
		return ch
	case <-time.After(d):
		t.Fatalf("no change on %s within %v", sub.SubscriptionID, d)
		panic("unreachable")
	}
}

// until receives changes from sub until stop says so, checking that every session's
// revisions never go down; it returns what it received.
func until(t *testing.T, sub *convo.Subscription, stop func(convo.Changed) bool) []convo.Changed {
	t.Helper()
	var got []convo.Changed
	last := map[string]int64{}
	deadline := time.Now().Add(15 * time.Second)
	for {
		ch := next(t, sub, time.Until(deadline))
		if ch.SubscriptionID != sub.SubscriptionID {
			t.Fatalf("%s got a change of %s: %+v", sub.SubscriptionID, ch.SubscriptionID, ch)
		}
		if r, ok := last[ch.SessionID]; ok && ch.Revision < r && ch.Change != convo.ChangeCreated {
			t.Fatalf("%s: revision %d after %d (%v)", ch.SessionID, ch.Revision, r, got)
		}
		last[ch.SessionID] = ch.Revision
		got = append(got, ch)
		if stop(ch) {
			return got
		}
	}
}

// TestSubscribeSameClient: a subscription sees each change made through the same client,
// a session's own subscription (made before the session exists) only that session's.
func TestSubscribeSameClient(t *testing.T) {
	c := start(t)
	ctx := ctxT(t)
	one := must[*convo.Subscription](t)(c.Subscribe(ctx, convo.SubscribeParams{SessionID: "s"}))
	all := must[*convo.Subscription](t)(c.Subscribe(ctx, convo.SubscribeParams{}))
	if one.SubscriptionID == "" || one.SubscriptionID == all.SubscriptionID {
		t.Fatalf("subscription ids %q and %q", one.SubscriptionID, all.SubscriptionID)
	}

	// Each step, then the change it makes, seen by both subscriptions before the next.
	expect := func(change convo.Change, revision int64, count int) {
		t.Helper()
		for _, sub := range []*convo.Subscription{one, all} {
			got := until(t, sub, func(ch convo.Changed) bool { return ch.Change == change })
			ch := got[len(got)-1]
			if ch.SessionID != "s" || ch.Revision != revision || ch.MessageCount != count {
				t.Fatalf("%s: got %+v, want s %s at revision %d with %d messages", sub.SubscriptionID, ch, change, revision, count)
			}
			if len(got) > 1 {
				t.Fatalf("%s: more than the %s change: %+v", sub.SubscriptionID, change, got)
			}
		}
	}
	created := must[*convo.SessionInfo](t)(c.CreateSession(ctx, convo.CreateSessionParams{SessionID: "s"}))
	expect(convo.ChangeCreated, created.Revision, 0)
	added := must[*convo.Added](t)(c.AddUser(ctx, convo.AddUserParams{SessionID: "s", Text: "hi"}))
	expect(convo.ChangeAppended, added.Revision, 1)
	many := must[*convo.AddedMany](t)(c.AddMessages(ctx, convo.AddMessagesParams{SessionID: "s", Messages: []convo.MessageInput{
		{Role: convo.RoleAssistant, Content: convo.Text("hello")},
		{Role: convo.RoleUser, Content: convo.Text("again")},
	}}))
	expect(convo.ChangeAppended, many.Revision, 3)
	updated := must[*convo.SessionInfo](t)(c.UpdateSession(ctx, convo.UpdateSessionParams{SessionID: "s", Title: convo.Value("t")}))
	expect(convo.ChangeUpdated, updated.Revision, 3)
	cleared := must[*convo.Cleared](t)(c.Clear(ctx, convo.ClearParams{SessionID: "s"}))
	expect(convo.ChangeCleared, cleared.Revision, 0)

	// Another session: the subscription of every session sees it, the other does not.
	must[*convo.SessionInfo](t)(c.CreateSession(ctx, convo.CreateSessionParams{SessionID: "other"}))
	if ch := next(t, all, 5*time.Second); ch.SessionID != "other" || ch.Change != convo.ChangeCreated {
		t.Fatalf("got %+v", ch)
	}
	must[*convo.Deleted](t)(c.DeleteSession(ctx, convo.DeleteSessionParams{SessionID: "s"}))
	if ch := next(t, one, 5*time.Second); ch.SessionID != "s" || ch.Change != convo.ChangeDeleted {
		t.Fatalf("after other's creation, the session's own subscription got %+v", ch)
	}
	if ch := next(t, all, 5*time.Second); ch.SessionID != "s" || ch.Change != convo.ChangeDeleted {
		t.Fatalf("got %+v", ch)
	}
}

// twoProcesses starts two convo processes on one SQLite file.
func twoProcesses(t *testing.T) (a, b *convo.Client) {
	t.Helper()
	store := convo.WithStore("sqlite:" + filepath.Join(t.TempDir(), "convo.db"))
	return start(t, store), start(t, store)
}

// TestSubscribeTwoProcesses: the changes one process makes, from several goroutines on
// two sessions, reach the other's subscriptions in revision order, the last always.
func TestSubscribeTwoProcesses(t *testing.T) {
	a, b := twoProcesses(t)
	ctx := ctxT(t)
	all := must[*convo.Subscription](t)(b.Subscribe(ctx, convo.SubscribeParams{}))
	one := must[*convo.Subscription](t)(b.Subscribe(ctx, convo.SubscribeParams{SessionID: "x"}))

	// The readers read as the changes come.
	type seen struct {
		got []convo.Changed
		err error
	}
	var want map[string]int64    // the sessions' last revisions,
	known := make(chan struct{}) // once this is closed
	results := make(chan seen, 2)
	for _, sub := range []*convo.Subscription{all, one} {
		go func(sub *convo.Subscription) {
			var s seen
			var final map[string]int64
			wait := known
			last := map[string]int64{}
			timeout := time.After(20 * time.Second)
			for {
				if final != nil {
					done := true
					for session, rev := range final {
						if (sub == all || session == "x") && last[session] != rev {
							done = false
						}
					}
					if done {
						results <- s
						return
					}
				}
				select {
				case ch, ok := <-sub.C:
					if !ok {
						s.err = fmt.Errorf("%s ended: %v", sub.SubscriptionID, sub.Err())
						results <- s
						return
					}
					if r, ok := last[ch.SessionID]; ok && ch.Revision < r {
						s.err = fmt.Errorf("%s: revision %d after %d", ch.SessionID, ch.Revision, r)
					}
					last[ch.SessionID] = ch.Revision
					s.got = append(s.got, ch)
				case <-wait:
					final, wait = want, nil
				case <-timeout:
					s.err = fmt.Errorf("%s: not every last change came within 20 s; last seen %v, want %v", sub.SubscriptionID, last, final)
					results <- s
					return
				}
			}
		}(sub)
	}

	// Paced, so that the changes span several of convo's 50 ms polls of the file.
	const perSession = 50
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for _, id := range []string{"x", "y"} {
		wg.Add(1)
		go func(id string) {
			defer wg.Done()
			if _, err := a.CreateSession(ctx, convo.CreateSessionParams{SessionID: id}); err != nil {
				errs <- err
				return
			}
			for i := 0; i < perSession; i++ {
				if _, err := a.AddUser(ctx, convo.AddUserParams{SessionID: id, Text: fmt.Sprint(id, i)}); err != nil {
					errs <- err
					return
				}
				time.Sleep(5 * time.Millisecond)
			}
		}(id)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	want = map[string]int64{}
	for _, id := range []string{"x", "y"} {
		want[id] = must[*convo.SessionInfo](t)(a.GetSession(ctx, convo.GetSessionParams{SessionID: id})).Revision
	}
	close(known)
	for i := 0; i < 2; i++ {
		s := <-results
		if s.err != nil {
			t.Fatal(s.err)
		}
		t.Logf("%d changes made, %d delivered", 2*(perSession+1), len(s.got))
		if len(s.got) < 3 {
			t.Fatalf("%d changes delivered over 250 ms of changes: %+v", len(s.got), s.got)
		}
		lastOf := map[string]convo.Changed{}
		for _, ch := range s.got {
			lastOf[ch.SessionID] = ch
		}
		for id, rev := range want {
			ch, ok := lastOf[id]
			if !ok {
				continue // the one-session subscription has no y
			}
			if ch.SubscriptionID != all.SubscriptionID && ch.SubscriptionID != one.SubscriptionID {
				t.Fatalf("a change of an unknown subscription: %+v", ch)
			}
			if ch.Revision != rev || ch.MessageCount != perSession || ch.Change != convo.ChangeAppended {
				t.Fatalf("the last change of %s: %+v, want revision %d with %d messages", id, ch, rev, perSession)
			}
		}
		if got := lastOf["y"]; got.SubscriptionID == one.SubscriptionID {
			t.Fatalf("the subscription of x got a change of y: %+v", got)
		}
	}
}

// TestSubscribeSlowReader: a subscription nobody reads neither blocks the client nor
// piles up changes: once read, it hands out the session's latest change, coalesced.
func TestSubscribeSlowReader(t *testing.T) {
	a, b := twoProcesses(t)
	ctx := ctxT(t)
	sub := must[*convo.Subscription](t)(b.Subscribe(ctx, convo.SubscribeParams{SessionID: "x"}))
	mine := must[*convo.Subscription](t)(b.Subscribe(ctx, convo.SubscribeParams{SessionID: "mine"}))
	must[*convo.SessionInfo](t)(a.CreateSession(ctx, convo.CreateSessionParams{SessionID: "x"}))
	const n = 200
	var last *convo.Added
	for i := 0; i < n; i++ {
		last = must[*convo.Added](t)(a.AddUser(ctx, convo.AddUserParams{SessionID: "x", Text: fmt.Sprint(i)}))
	}
	// b works on, and its other subscription delivers, while sub is not read.
	made := must[*convo.SessionInfo](t)(b.CreateSession(ctx, convo.CreateSessionParams{SessionID: "mine"}))
	if ch := next(t, mine, 5*time.Second); ch.Change != convo.ChangeCreated || ch.Revision != made.Revision {
		t.Fatalf("got %+v", ch)
	}
	time.Sleep(500 * time.Millisecond) // a change of another process is told within about 100 ms
	got := until(t, sub, func(ch convo.Changed) bool { return ch.Revision == last.Revision })
	if len(got) > n/4 {
		t.Fatalf("%d changes delivered for %d made: they were not coalesced", len(got), n+1)
	}
	if ch := got[len(got)-1]; ch.MessageCount != n || ch.Change != convo.ChangeAppended {
		t.Fatalf("the last change: %+v", ch)
	}
	t.Logf("%d changes made, %d delivered to a reader that came late", n+1, len(got))
}

// TestSubscriptionClose: Close closes C and unsubscribes, so later changes reach only
// the subscriptions still open; Unsubscribe does the same by id; closing the client
// ends them all.
func TestSubscriptionClose(t *testing.T) {
	a, b := twoProcesses(t)
	ctx := ctxT(t)
	closed := must[*convo.Subscription](t)(b.Subscribe(ctx, convo.SubscribeParams{SessionID: "s"}))
	open := must[*convo.Subscription](t)(b.Subscribe(ctx, convo.SubscribeParams{SessionID: "s"}))
	byID := must[*convo.Subscription](t)(b.Subscribe(ctx, convo.SubscribeParams{}))
	must[*convo.SessionInfo](t)(a.CreateSession(ctx, convo.CreateSessionParams{SessionID: "s"}))
	for _, sub := range []*convo.Subscription{closed, open, byID} {
		if ch := next(t, sub, 5*time.Second); ch.Change != convo.ChangeCreated {
			t.Fatalf("got %+v", ch)
		}
	}

	if err := closed.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Unsubscribe(ctx, convo.UnsubscribeParams{SubscriptionID: byID.SubscriptionID}); err != nil {
		t.Fatal(err)
	}
	for _, sub := range []*convo.Subscription{closed, byID} {
		if ch, ok := <-sub.C; ok {
			t.Fatalf("%s delivered %+v after it was closed", sub.SubscriptionID, ch)
		}
		if err := sub.Err(); err != nil {
			t.Fatalf("Err after Close: %v", err)
		}
		if err := sub.Close(); err != nil { // idempotent, and nil after Unsubscribe
			t.Fatal(err)
		}
		// convo no longer has them.
		err := b.Unsubscribe(ctx, convo.UnsubscribeParams{SubscriptionID: sub.SubscriptionID})
		if !errors.Is(err, convo.ErrInvalidParams) {
			t.Fatalf("unsubscribing %s again: %v", sub.SubscriptionID, err)
		}
	}

	added := must[*convo.Added](t)(a.AddUser(ctx, convo.AddUserParams{SessionID: "s", Text: "after"}))
	if ch := next(t, open, 5*time.Second); ch.Revision != added.Revision {
		t.Fatalf("got %+v", ch)
	}

	// Closing the client ends its subscriptions: C is closed, Err is ErrClosed.
	c := startRaw(t, convo.WithStore("memory"))
	sub := must[*convo.Subscription](t)(c.Subscribe(ctx, convo.SubscribeParams{}))
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case _, ok := <-sub.C:
		if ok {
			t.Fatal("a change after the client closed")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("C was not closed when the client closed")
	}
	if err := sub.Err(); !errors.Is(err, convo.ErrClosed) {
		t.Fatalf("Err: %v", err)
	}
	if err := sub.Close(); err != nil {
		t.Fatalf("Close after the client closed: %v", err)
	}
	if _, err := c.Subscribe(ctx, convo.SubscribeParams{}); !errors.Is(err, convo.ErrClosed) {
		t.Fatalf("Subscribe after Close: %v", err)
	}

	// A ctx that has already ended subscribes nothing.
	gone, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := b.Subscribe(gone, convo.SubscribeParams{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v", err)
	}
}
