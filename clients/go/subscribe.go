package convo

import (
	"container/list"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
)

// SubscribeParams are session/subscribe's params.
type SubscribeParams struct {
	// SessionID is the session to watch; it need not exist yet (its creation is told).
	// Empty watches every session.
	SessionID string `json:"session_id,omitempty"`
}

// Subscribed is session/subscribe's result.
type Subscribed struct {
	SubscriptionID string `json:"subscription_id"`
}

// UnsubscribeParams are session/unsubscribe's params.
type UnsubscribeParams struct {
	SubscriptionID string `json:"subscription_id"`
}

// Change is the kind of a committed change, in Changed.
type Change string

// The changes session/changed tells.
const (
	ChangeCreated   Change = "created"
	ChangeAppended  Change = "appended"
	ChangeUpdated   Change = "updated"
	ChangeTrimmed   Change = "trimmed"
	ChangeCleared   Change = "cleared"
	ChangeRewound   Change = "rewound"
	ChangeCompacted Change = "compacted"
	ChangeImported  Change = "imported"
	ChangeDeleted   Change = "deleted"
	// ChangeDraft: a stream's draft was saved; Revision is the session's, unchanged.
	ChangeDraft Change = "draft"
)

// Changed is a session/changed notification: a change committed to a session, by this
// process or by any other on the same store.
type Changed struct {
	SubscriptionID string `json:"subscription_id"`
	SessionID      string `json:"session_id"`
	// Revision is the session's revision after the change.
	Revision     int64  `json:"revision"`
	Change       Change `json:"change"`
	MessageCount int    `json:"message_count"`
}

// Subscription is a session/subscribe subscription: its changes arrive on C.
//
// Per session, changes arrive in revision order and the last one is always delivered;
// several may be coalesced into one (the server already may, and so does the client).
// The client keeps at most one undelivered change per session: when a change comes for
// a session whose earlier change has not been received from C yet, the newer one
// replaces it (in its place in the queue). So a slow reader, or none, never blocks the
// client (its other calls go on), and the memory a subscription holds is bounded by the
// number of sessions it watches, not by the number of changes.
//
// C is closed when the subscription ends: after Close or Unsubscribe (Err is nil), or
// when the client closes or convo ends (Err says so). Changes not yet received are
// dropped then.
type Subscription struct {
	Subscribed // SubscriptionID, the server's id of the subscription

	// C delivers the changes. It is not buffered: what has not been received waits,
	// coalesced per session, in the subscription.
	C <-chan Changed `json:"-"`

	c   *Client
	out chan Changed

	mu        sync.Mutex
	queue     list.List                // of Changed, at most one per session, oldest first
	bySession map[string]*list.Element // the queue's element of each session

	wake     chan struct{} // a change was queued (capacity 1)
	done     chan struct{} // closed when the subscription ends
	pumpDone chan struct{} // closed when the pump has closed C
	endOnce  sync.Once
	err      error // why it ended; set before done is closed

	closeOnce sync.Once
	closeErr  error
}

func newSubscription(c *Client) *Subscription {
	s := &Subscription{
		c:         c,
		out:       make(chan Changed),
		bySession: make(map[string]*list.Element),
		wake:      make(chan struct{}, 1),
		done:      make(chan struct{}),
		pumpDone:  make(chan struct{}),
	}
	s.C = s.out
	go s.pump()
	return s
}

// Subscribe watches the committed changes of one session (params.SessionID) or of every
// session (session/subscribe), made through this client, another client of the same
// convo process, or another convo process on the same store (SQLite: told within about
// 100 ms). Receive them from the Subscription's C; Close it to unsubscribe.
func (c *Client) Subscribe(ctx context.Context, params SubscribeParams) (*Subscription, error) {
	s := newSubscription(c)
	abandoned := false // the caller gave up before the reply (c.mu held)
	// The reader registers the subscription as it reads the reply, before it reads the
	// session/changed notifications that follow it.
	p, err := c.sendWith(ctx, "session/subscribe", params, false, func(r response) {
		var got Subscribed
		if r.err != nil || json.Unmarshal(r.result, &got) != nil || got.SubscriptionID == "" {
			return
		}
		if abandoned {
			id := c.nextID.Add(1) // not pending: its reply is ignored
			frame, err := encode(&id, "session/unsubscribe", UnsubscribeParams{SubscriptionID: got.SubscriptionID})
			if err == nil {
				c.post(frame)
			}
			return
		}
		s.SubscriptionID = got.SubscriptionID
		c.subs[got.SubscriptionID] = s
	})
	if err != nil {
		s.end(err)
		return nil, err
	}
	select {
	case r := <-p.ch:
		return s.started(r)
	case <-ctx.Done():
		c.mu.Lock()
		_, waiting := c.pending[p.id]
		abandoned = waiting
		c.mu.Unlock()
		if !waiting { // the reply came first after all
			return s.started(<-p.ch)
		}
		c.cancelRequest(p.id)
		s.end(ctx.Err())
		return nil, ctx.Err()
	case <-c.dead:
		select {
		case r := <-p.ch:
			return s.started(r)
		default:
		}
		c.forget(p.id)
		s.end(c.deadErr)
		return nil, c.deadErr
	}
}

// started finishes Subscribe once the reply is there.
func (s *Subscription) started(r response) (*Subscription, error) {
	var got Subscribed
	err := r.decode(&got)
	if err == nil && got.SubscriptionID == "" {
		err = errors.New("convo: session/subscribe answered no subscription_id")
	}
	if err != nil {
		s.end(err)
		return nil, err
	}
	select {
	case <-s.done: // convo ended right after answering
		return nil, s.err
	default:
	}
	return s, nil
}

// Unsubscribe stops a subscription by id (session/unsubscribe); ErrInvalidParams when
// convo has no such subscription. When it is one of this client's Subscriptions, its C
// is closed. Subscription.Close does the same.
func (c *Client) Unsubscribe(ctx context.Context, params UnsubscribeParams) error {
	if err := c.Call(ctx, "session/unsubscribe", params, nil); err != nil {
		return err
	}
	if s := c.detach(params.SubscriptionID); s != nil {
		s.end(nil)
	}
	return nil
}

// Close ends the subscription: C is closed (what it had not delivered is dropped) before
// Close sends session/unsubscribe, and nothing is delivered after Close returns. Close
// is idempotent; after Unsubscribe, or once the client is closed, it sends nothing and
// returns nil. The unsubscribe gets the client's shutdown timeout.
func (s *Subscription) Close() error {
	s.closeOnce.Do(func() {
		if s.c.detach(s.SubscriptionID) == nil { // already ended
			s.end(nil)
			return
		}
		s.end(nil)
		ctx, cancel := context.WithTimeout(context.Background(), s.c.opts.shutdownTimeout)
		defer cancel()
		err := s.c.Call(ctx, "session/unsubscribe", UnsubscribeParams{SubscriptionID: s.SubscriptionID}, nil)
		if err != nil && !errors.Is(err, ErrClosed) { // a closed client has no subscriptions left
			s.closeErr = fmt.Errorf("convo: unsubscribing %s: %w", s.SubscriptionID, err)
		}
	})
	return s.closeErr
}

// Err tells why C was closed: nil while the subscription runs and after Close or
// Unsubscribe; an error matching ErrClosed when the client closed or convo ended.
func (s *Subscription) Err() error {
	select {
	case <-s.done:
		return s.err
	default:
		return nil
	}
}

// detach stops routing a subscription's changes and returns it (nil when there is none).
func (c *Client) detach(id string) *Subscription {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.subs[id]
	delete(c.subs, id)
	return s
}

// changed routes a session/changed notification to its subscription (the reader calls
// it; it never blocks). A change for a subscription the client no longer has (it was
// just closed) is dropped.
func (c *Client) changed(params json.RawMessage) {
	var ch Changed
	if json.Unmarshal(params, &ch) != nil {
		return
	}
	c.mu.Lock()
	s := c.subs[ch.SubscriptionID]
	c.mu.Unlock()
	if s != nil {
		s.push(ch)
	}
}

// push queues a change, replacing the session's undelivered one.
func (s *Subscription) push(ch Changed) {
	s.mu.Lock()
	if e, ok := s.bySession[ch.SessionID]; ok {
		e.Value = ch
	} else {
		s.bySession[ch.SessionID] = s.queue.PushBack(ch)
	}
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// pop takes the oldest queued change.
func (s *Subscription) pop() (Changed, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.queue.Front()
	if e == nil {
		return Changed{}, false
	}
	ch := s.queue.Remove(e).(Changed)
	delete(s.bySession, ch.SessionID)
	return ch, true
}

// takeSession takes the queued change of a session, if there is one.
func (s *Subscription) takeSession(session string) (Changed, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.bySession[session]
	if !ok {
		return Changed{}, false
	}
	delete(s.bySession, session)
	return s.queue.Remove(e).(Changed), true
}

// pump hands the queued changes to C, one at a time. While the reader of C makes it
// wait, a newer change of the session it holds replaces the one it holds.
func (s *Subscription) pump() {
	defer close(s.pumpDone)
	defer close(s.out)
	for {
		next, ok := s.pop()
		if !ok {
			select {
			case <-s.wake:
				continue
			case <-s.done:
				return
			}
		}
		for sent := false; !sent; {
			select {
			case s.out <- next:
				sent = true
			case <-s.wake:
				if newer, ok := s.takeSession(next.SessionID); ok {
					next = newer
				}
			case <-s.done:
				return
			}
		}
	}
}

// end stops the subscription once: C is closed when it returns.
func (s *Subscription) end(err error) {
	s.endOnce.Do(func() {
		s.err = err
		close(s.done)
	})
	<-s.pumpDone
}
