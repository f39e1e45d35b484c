package convo

import "context"

// OnSend makes c report the method of every request it sends (set before any call).
func OnSend(c *Client, f func(method string)) { c.sent = func(m string, _ []byte) { f(m) } }

// OnSendFrame makes c report the method and the LSP frame of every request it sends,
// before the frame is written (set before any call).
func OnSendFrame(c *Client, f func(method string, frame []byte)) { c.sent = f }

// SendThenCancel sends a request, calls ready, sends $/cancelRequest for it, and
// returns the server's answer: the way to see the server's own -32800 (a call whose ctx
// ends returns ctx.Err() without waiting for it).
func SendThenCancel(ctx context.Context, c *Client, method string, params any, ready func()) error {
	p, err := c.send(ctx, method, params, false)
	if err != nil {
		return err
	}
	ready()
	if err := c.Notify(ctx, "$/cancelRequest", map[string]int64{"id": p.id}); err != nil {
		return err
	}
	return c.await(ctx, p, nil)
}

// NewMessageID is a new message id as the client chooses one: a random UUID v4.
func NewMessageID() string { return messageID("", true) }
