// Package convo is a client of convo, the LLM conversation-state sidecar: it starts the
// convo binary as a child process and speaks JSON-RPC 2.0 to it over the child's stdio
// (LSP framing), with a typed method per protocol method.
//
// A Client is safe for concurrent use: calls from many goroutines are pipelined over
// the one connection (one writer, one reader routing replies by id). Requests that name
// the same session take effect in the order they are sent; replies may come in any order.
//
// Every call takes a context first. When it ends before the reply, the client sends
// $/cancelRequest for the request and the call returns ctx.Err().
//
// The protocol is described in protocol/README.md of the convo repository.
package convo

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Option configures Start.
type Option func(*options)

type options struct {
	binary          string
	store           string
	args            []string
	stderr          io.Writer
	runtime         RuntimeFunc
	runtimeFormat   Format
	shutdownTimeout time.Duration
}

// WithBinary sets the convo binary to run. Without it Start uses $CONVO_BINARY, then
// `convo` on PATH (`convo.exe` on Windows).
func WithBinary(path string) Option { return func(o *options) { o.binary = path } }

// WithStore passes --store: "memory", "sqlite" (the platform data folder, the server's
// default) or "sqlite:PATH".
func WithStore(store string) Option { return func(o *options) { o.store = store } }

// WithArgs passes more command-line arguments to convo (--durability full,
// --log-level debug, …).
func WithArgs(args ...string) Option {
	return func(o *options) { o.args = append(o.args, args...) }
}

// WithStderr sends convo's stderr (its log lines) to w; os.Stderr by default. Pass
// io.Discard to drop them.
func WithStderr(w io.Writer) Option { return func(o *options) { o.stderr = w } }

// WithRuntime answers convo's runtime/run and runtime/stream requests (for Run, JSON and
// Stream) with f. Without it the client answers them -32601, which convo reports as
// ErrRuntimeFailed with reason "no_runtime".
func WithRuntime(f RuntimeFunc) Option { return func(o *options) { o.runtime = f } }

// WithRuntimeFormat makes every runtime request carry Payload: the provider-ready
// request body of its messages in that format (initialize's runtime.format).
func WithRuntimeFormat(format Format) Option {
	return func(o *options) { o.runtimeFormat = format }
}

// WithShutdownTimeout bounds how long Close waits for shutdown (which waits for every
// earlier request) and for the process to exit before killing it; 30 s by default.
func WithShutdownTimeout(d time.Duration) Option {
	return func(o *options) { o.shutdownTimeout = d }
}

// Client is a running convo process and the connection to it. Close it to end the
// process. If the host process dies instead, convo sees its input end, finishes what
// is in flight, makes acknowledged writes durable and exits by itself.
type Client struct {
	cmd     *exec.Cmd
	runtime RuntimeFunc
	opts    options
	info    *InitializeResult
	stderr  *tailWriter

	nextID   atomic.Int64
	shutDown atomic.Bool // Shutdown succeeded: Close sends only exit

	mu       sync.Mutex
	closed   bool
	pending  map[int64]*waiter
	handlers map[string]context.CancelFunc // runtime requests running, by id
	subs     map[string]*Subscription      // subscriptions, by subscription_id
	drained  chan struct{}                 // while Close waits: closed when pending empties

	out        chan []byte   // frames for the writer; a nil frame closes convo's stdin
	writerDone chan struct{} // closed when the writer stops
	dead       chan struct{} // closed when convo's stdout ended
	deadErr    error
	exited     chan struct{} // closed when the process has been waited for
	waitErr    error

	base       context.Context // parent of the runtime handlers' contexts
	cancelBase context.CancelFunc

	closeOnce sync.Once
	closeErr  error

	// sent, when set (by tests), sees the method and the frame of every request sent,
	// before the frame is written.
	sent func(method string, frame []byte)
}

type response struct {
	result json.RawMessage
	err    *RPCError
}

// waiter is a call waiting for its reply.
type waiter struct {
	ch chan response
	// onReply, when set, is run by the reader with c.mu held, before the reply is
	// handed to ch and before the next message is read (Subscribe registers its
	// subscription there, so that no session/changed that follows is missed).
	onReply func(response)
}

// Start runs convo and sends initialize. ctx bounds the start only; the process lives
// until Close.
func Start(ctx context.Context, opts ...Option) (*Client, error) {
	o := options{stderr: os.Stderr, shutdownTimeout: 30 * time.Second}
	for _, opt := range opts {
		opt(&o)
	}
	bin, err := findBinary(o.binary)
	if err != nil {
		return nil, err
	}
	var args []string
	if o.store != "" {
		args = append(args, "--store", o.store)
	}
	args = append(args, o.args...)

	cmd := exec.Command(bin, args...)
	tail := &tailWriter{w: o.stderr}
	cmd.Stderr = tail
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("convo: starting %s: %w", bin, err)
	}
	base, cancel := context.WithCancel(context.Background())
	c := &Client{
		cmd:        cmd,
		runtime:    o.runtime,
		opts:       o,
		stderr:     tail,
		pending:    make(map[int64]*waiter),
		handlers:   make(map[string]context.CancelFunc),
		subs:       make(map[string]*Subscription),
		out:        make(chan []byte, 256),
		writerDone: make(chan struct{}),
		dead:       make(chan struct{}),
		exited:     make(chan struct{}),
		base:       base,
		cancelBase: cancel,
	}
	go c.writeLoop(stdin)
	go c.readLoop(stdout)

	var p InitializeParams
	if o.runtimeFormat != "" {
		p.Runtime = &RuntimeConfig{Format: o.runtimeFormat}
	}
	info, err := c.Initialize(ctx, p)
	if err == nil && info.ProtocolVersion != 1 {
		err = fmt.Errorf("convo: %s speaks protocol version %d; this client speaks 1", bin, info.ProtocolVersion)
	}
	if err != nil {
		c.kill()
		if errors.Is(err, ErrClosed) {
			if c.waitErr != nil {
				err = fmt.Errorf("%w (%v)", err, c.waitErr)
			}
			if msg := c.stderr.last(); msg != "" {
				err = fmt.Errorf("%w; it said: %s", err, msg)
			}
		}
		return nil, fmt.Errorf("convo: starting %s: %w", bin, err)
	}
	return c, nil
}

func findBinary(explicit string) (string, error) {
	if explicit != "" {
		return explicit, nil
	}
	if env := os.Getenv("CONVO_BINARY"); env != "" {
		return env, nil
	}
	name := binaryName(runtime.GOOS)
	path, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("%w: pass WithBinary, set CONVO_BINARY, or put %s on PATH (%v)", ErrBinaryNotFound, name, err)
	}
	return path, nil
}

// binaryName is the file name of the convo binary on goos: convo.exe on Windows, as the
// release ships it there (the win32-x64 package's bin/convo.exe), convo elsewhere.
func binaryName(goos string) string {
	if goos == "windows" {
		return "convo.exe"
	}
	return "convo"
}

// ServerInfo is what the server last answered to initialize (Start sends it).
func (c *Client) ServerInfo() *InitializeResult {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.info
}

// PID is the convo process's id.
func (c *Client) PID() int { return c.cmd.Process.Pid }

// Call sends a request by name and decodes its result into result (when not nil): for
// methods this client has no typed method for yet. params is marshalled as JSON (nil
// sends none).
func (c *Client) Call(ctx context.Context, method string, params, result any) error {
	p, err := c.send(ctx, method, params, false)
	if err != nil {
		return err
	}
	return c.await(ctx, p, result)
}

// Notify sends a notification (a request without id, never answered).
func (c *Client) Notify(ctx context.Context, method string, params any) error {
	frame, err := encode(nil, method, params)
	if err != nil {
		return err
	}
	return c.write(ctx, frame)
}

type pendingCall struct {
	id int64
	ch chan response
}

// send writes a request; after Close only when force is set (Close's own shutdown).
func (c *Client) send(ctx context.Context, method string, params any, force bool) (*pendingCall, error) {
	return c.sendWith(ctx, method, params, force, nil)
}

// sendWith is send with a function the reader runs on the reply (waiter.onReply).
func (c *Client) sendWith(ctx context.Context, method string, params any, force bool, onReply func(response)) (*pendingCall, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	id := c.nextID.Add(1)
	frame, err := encode(&id, method, params)
	if err != nil {
		return nil, err
	}
	ch := make(chan response, 1)
	c.mu.Lock()
	if c.closed && !force {
		c.mu.Unlock()
		return nil, ErrClosed
	}
	c.pending[id] = &waiter{ch: ch, onReply: onReply}
	c.mu.Unlock()
	if c.sent != nil {
		c.sent(method, frame)
	}
	if err := c.write(ctx, frame); err != nil {
		c.forget(id)
		return nil, err
	}
	return &pendingCall{id: id, ch: ch}, nil
}

func (c *Client) await(ctx context.Context, p *pendingCall, result any) error {
	select {
	case r := <-p.ch:
		return r.decode(result)
	case <-ctx.Done():
		select {
		case r := <-p.ch: // the reply came first after all
			return r.decode(result)
		default:
		}
		c.forget(p.id)
		c.cancelRequest(p.id)
		return ctx.Err()
	case <-c.dead:
		select {
		case r := <-p.ch:
			return r.decode(result)
		default:
		}
		c.forget(p.id)
		return c.deadErr
	}
}

func (r response) decode(result any) error {
	if r.err != nil {
		return r.err
	}
	if result == nil {
		return nil
	}
	if err := json.Unmarshal(r.result, result); err != nil {
		return fmt.Errorf("convo: decoding the result: %w", err)
	}
	return nil
}

func (c *Client) forget(id int64) {
	c.mu.Lock()
	c.take(id)
	c.mu.Unlock()
}

// take removes a call from pending (c.mu held), telling Close when none is left.
func (c *Client) take(id int64) *waiter {
	w := c.pending[id]
	delete(c.pending, id)
	if c.drained != nil && len(c.pending) == 0 {
		close(c.drained)
		c.drained = nil
	}
	return w
}

// cancelRequest sends $/cancelRequest without making the caller wait on a busy writer.
func (c *Client) cancelRequest(id int64) {
	frame, _ := encode(nil, "$/cancelRequest", map[string]int64{"id": id})
	c.post(frame)
}

// post hands a frame to the writer without waiting on a busy one: from the reader, or
// from a caller that has given up.
func (c *Client) post(frame []byte) {
	select {
	case c.out <- frame:
	case <-c.writerDone:
	default:
		go func() {
			select {
			case c.out <- frame:
			case <-c.writerDone:
			}
		}()
	}
}

// write hands a frame to the writer.
func (c *Client) write(ctx context.Context, frame []byte) error {
	select {
	case c.out <- frame:
		return nil
	case <-c.writerDone:
		return ErrClosed
	case <-c.dead:
		return c.deadErr
	case <-ctx.Done():
		return ctx.Err()
	}
}

// encode makes an LSP frame of a request (id set) or a notification.
func encode(id *int64, method string, params any) ([]byte, error) {
	var body bytes.Buffer
	body.WriteString(`{"jsonrpc":"2.0",`)
	if id != nil {
		// The id comes first, so that the server can name it even when the frame is
		// refused as too large.
		body.WriteString(`"id":`)
		body.WriteString(strconv.FormatInt(*id, 10))
		body.WriteByte(',')
	}
	body.WriteString(`"method":`)
	m, _ := json.Marshal(method)
	body.Write(m)
	if params != nil {
		ps, err := json.Marshal(params)
		if err != nil {
			return nil, fmt.Errorf("convo: encoding the params of %s: %w", method, err)
		}
		body.WriteString(`,"params":`)
		body.Write(ps)
	}
	body.WriteByte('}')
	return lspFrame(body.Bytes()), nil
}

func lspFrame(body []byte) []byte {
	head := "Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n"
	f := make([]byte, 0, len(head)+len(body))
	f = append(f, head...)
	return append(f, body...)
}

// writeLoop is the one writer: it writes frames in the order they were handed over,
// flushing when no more are waiting.
func (c *Client) writeLoop(stdin io.WriteCloser) {
	defer close(c.writerDone)
	defer stdin.Close()
	w := bufio.NewWriterSize(stdin, 64<<10)
	for {
		var f []byte
		select {
		case f = <-c.out:
		case <-c.dead:
			return
		}
		for {
			if f == nil {
				_ = w.Flush()
				return
			}
			if _, err := w.Write(f); err != nil {
				return
			}
			more := false
			select {
			case f = <-c.out:
				more = true
			default:
			}
			if !more {
				break
			}
		}
		if err := w.Flush(); err != nil {
			return
		}
	}
}

// readLoop is the one reader: it routes replies to their calls and serves convo's
// requests, until convo's stdout ends; then it waits for the process.
func (c *Client) readLoop(stdout io.Reader) {
	r := bufio.NewReaderSize(stdout, 64<<10)
	var err error
	for {
		var body []byte
		if body, err = readFrame(r); err != nil {
			break
		}
		c.dispatch(body)
	}
	if errors.Is(err, io.EOF) {
		c.deadErr = fmt.Errorf("%w: the convo process ended its output", ErrClosed)
	} else {
		c.deadErr = fmt.Errorf("%w: reading from convo: %v", ErrClosed, err)
	}
	c.mu.Lock()
	c.closed = true
	subs := c.subs
	c.subs = map[string]*Subscription{}
	c.mu.Unlock()
	close(c.dead)
	for _, s := range subs {
		s.end(c.deadErr)
	}
	c.cancelBase()
	c.waitErr = c.cmd.Wait()
	close(c.exited)
}

func readFrame(r *bufio.Reader) ([]byte, error) {
	length := -1
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			if err == io.EOF && line != "" {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		line = strings.TrimRight(line, "\r\n")
		if line == "" {
			if length >= 0 {
				break
			}
			continue // blank lines between frames
		}
		name, value, ok := strings.Cut(line, ":")
		if ok && strings.EqualFold(strings.TrimSpace(name), "Content-Length") {
			n, err := strconv.Atoi(strings.TrimSpace(value))
			if err != nil || n < 0 {
				return nil, fmt.Errorf("bad Content-Length header %q", line)
			}
			length = n
		}
	}
	body := make([]byte, length)
	if _, err := io.ReadFull(r, body); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return body, nil
}

func (c *Client) dispatch(body []byte) {
	env, err := parseEnvelope(body)
	if err != nil {
		return // not JSON: nothing to route it to
	}
	switch {
	case env.Method != "" && env.ID != nil:
		c.serve(env)
	case env.Method != "":
		c.notified(env)
	default:
		id, err := strconv.ParseInt(string(env.ID), 10, 64)
		if err != nil {
			return // id null: a reply to nothing this client can name
		}
		r := response{result: env.Result, err: env.Error}
		c.mu.Lock()
		w := c.take(id)
		if w != nil && w.onReply != nil {
			w.onReply(r)
		}
		c.mu.Unlock()
		if w != nil {
			w.ch <- r
		}
	}
}

// notified handles convo's notifications: session/changed for a subscription,
// $/cancelRequest for a runtime request.
func (c *Client) notified(env envelope) {
	if env.Method == "session/changed" {
		c.changed(env.Params)
		return
	}
	if env.Method != "$/cancelRequest" {
		return
	}
	var p struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(env.Params, &p) != nil {
		return
	}
	c.mu.Lock()
	cancel := c.handlers[idKey(p.ID)]
	c.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// idKey normalises a JSON id (`"convo:1"` however escaped, or a number).
func idKey(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return "s" + s
	}
	return "n" + string(bytes.TrimSpace(raw))
}

// reply answers one of convo's requests.
func (c *Client) reply(id json.RawMessage, result any, rerr *RPCError) {
	var body []byte
	var err error
	if rerr == nil {
		body, err = json.Marshal(struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Result  any             `json:"result"`
		}{"2.0", id, result})
		if err != nil {
			rerr = &RPCError{Code: CodeInternalError, Message: "the runtime's answer cannot be encoded: " + err.Error()}
		}
	}
	if rerr != nil {
		body, _ = json.Marshal(struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Error   *RPCError       `json:"error"`
		}{"2.0", id, rerr})
	}
	_ = c.write(context.Background(), lspFrame(body))
}

// Close ends convo gracefully: it waits for the calls in flight to be answered, sends
// shutdown (every acknowledged write durable) and exit, and waits for the process to
// end. Later calls return ErrClosed. The calls and shutdown get the shutdown timeout
// (WithShutdownTimeout, 30 s by default); past it convo's input is closed, which
// fails the calls still waiting for a runtime, and after the same time again the
// process is killed. Close is idempotent; it reports a failed or timed-out shutdown,
// or an exit status other than 0.
func (c *Client) Close() error {
	c.closeOnce.Do(func() { c.closeErr = c.close() })
	return c.closeErr
}

func (c *Client) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.shutdownTimeout)
	defer cancel()
	// Later calls fail with ErrClosed (not with the server's -32600 after shutdown);
	// the calls in flight are answered first.
	c.mu.Lock()
	c.closed = true
	var drained chan struct{}
	if len(c.pending) > 0 {
		drained = make(chan struct{})
		c.drained = drained
	}
	c.mu.Unlock()
	if drained != nil {
		select {
		case <-drained:
		case <-c.dead:
		case <-ctx.Done():
		}
	}
	var shutdownErr error
	select {
	case <-c.dead:
	default:
		if c.shutDown.Load() {
			_ = c.Notify(ctx, "exit", nil)
			break
		}
		var p *pendingCall
		if p, shutdownErr = c.send(ctx, "shutdown", nil, true); shutdownErr == nil {
			shutdownErr = c.await(ctx, p, nil)
		}
		_ = c.Notify(ctx, "exit", nil)
	}
	// After exit convo ends by itself; so it does at the end of its input, once what is
	// in flight is done. Past the timeout it is killed.
	timer := time.NewTimer(c.opts.shutdownTimeout)
	defer timer.Stop()
	select {
	case c.out <- nil:
	case <-c.writerDone:
	case <-timer.C:
		_ = c.cmd.Process.Kill()
	}
	select {
	case <-c.exited:
	case <-timer.C:
		_ = c.cmd.Process.Kill()
		<-c.exited
	}
	c.cancelBase()
	if shutdownErr != nil && !errors.Is(shutdownErr, ErrClosed) {
		return fmt.Errorf("convo: shutdown: %w", shutdownErr)
	}
	if c.waitErr != nil {
		return fmt.Errorf("convo: the process ended: %w", c.waitErr)
	}
	return nil
}

// kill ends the process at once and waits for it (a failed start).
func (c *Client) kill() {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.closed = true
		c.mu.Unlock()
		_ = c.cmd.Process.Kill()
		<-c.exited
		c.cancelBase()
		c.closeErr = ErrClosed
	})
}

// tailWriter passes stderr on and keeps its last line, for a failed start's error.
type tailWriter struct {
	w   io.Writer
	mu  sync.Mutex
	buf []byte
}

func (t *tailWriter) Write(p []byte) (int, error) {
	t.mu.Lock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > 4096 {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-4096:]...)
	}
	t.mu.Unlock()
	if t.w != nil {
		// A failing writer must not stop the copying: convo would block on its logs.
		_, _ = t.w.Write(p)
	}
	return len(p), nil
}

func (t *tailWriter) last() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	lines := strings.Split(strings.TrimSpace(string(t.buf)), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}
