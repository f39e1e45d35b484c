package convo

import "context"

// OnSend makes c report the method of every request it sends (set before any call).
func OnSend(c *Client, f func(method string)) { c.sent = f }

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
