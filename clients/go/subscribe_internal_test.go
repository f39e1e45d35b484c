package convo

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

// TestSubscriptionCoalesces: changes pushed while nobody reads C are kept one per
// session, the latest, in the order the sessions first changed; push never blocks.
func TestSubscriptionCoalesces(t *testing.T) {
	s := newSubscription(nil)
	defer s.end(nil)
	for rev := int64(1); rev <= 1000; rev++ {
		for _, id := range []string{"a", "b", "c"} {
			s.push(Changed{SessionID: id, Revision: rev, Change: ChangeAppended})
		}
	}
	s.push(Changed{SessionID: "b", Revision: 1001, Change: ChangeDeleted})
	time.Sleep(50 * time.Millisecond) // let the pump take its first change and wake

	want := []Changed{
		{SessionID: "a", Revision: 1000, Change: ChangeAppended},
		{SessionID: "b", Revision: 1001, Change: ChangeDeleted},
		{SessionID: "c", Revision: 1000, Change: ChangeAppended},
	}
	for _, w := range want {
		select {
		case got := <-s.C:
			if got != w {
				t.Fatalf("got %+v, want %+v", got, w)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("nothing delivered, want %+v", w)
		}
	}
	select {
	case got := <-s.C:
		t.Fatalf("more than one change per session: %+v", got)
	case <-time.After(20 * time.Millisecond):
	}
	s.mu.Lock()
	n := s.queue.Len()
	s.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d changes still queued", n)
	}
}

// TestSubscriptionOrder: with a reader and pushers racing, each session's revisions
// come in order and the last is always delivered; end closes C.
func TestSubscriptionOrder(t *testing.T) {
	s := newSubscription(nil)
	const sessions, revisions = 8, 2000
	var wg sync.WaitGroup
	for i := 0; i < sessions; i++ {
		wg.Add(1)
		go func(id string) {
			defer wg.Done()
			for rev := int64(1); rev <= revisions; rev++ {
				s.push(Changed{SessionID: id, Revision: rev})
			}
		}(fmt.Sprint("s", i))
	}
	last := map[string]int64{}
	got := 0
	for len(last) < sessions || func() bool {
		for _, r := range last {
			if r != revisions {
				return true
			}
		}
		return false
	}() {
		select {
		case ch := <-s.C:
			if ch.Revision <= last[ch.SessionID] {
				t.Fatalf("%s: revision %d after %d", ch.SessionID, ch.Revision, last[ch.SessionID])
			}
			last[ch.SessionID] = ch.Revision
			got++
			if got%7 == 0 {
				time.Sleep(time.Microsecond) // a slow reader, now and then
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("stuck at %v", last)
		}
	}
	wg.Wait()
	s.end(nil)
	if _, ok := <-s.C; ok {
		t.Fatal("C still open after end")
	}
	t.Logf("%d pushed, %d delivered", sessions*revisions, got)
}
