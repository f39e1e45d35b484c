package convo_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	convo "github.com/convo-dev/convo/clients/go"
)

// Exactly once: every append carries a message id (the caller's MessageID, or a UUID v4
// the client chooses), a repeat is answered Duplicate, and a write that failed with 1006
// is sent once more, the same. The 1006 is a real one: a SQLite store whose write lock
// another connection holds past --busy-timeout-ms.

var uuidV4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

const anthropicResponse = `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5",` +
	`"content":[{"type":"text","text":"Hello."}],"stop_reason":"end_turn","usage":{"input_tokens":3,"output_tokens":2}}`

func storedIDs(t *testing.T, ctx context.Context, c *convo.Client, session string) []string {
	t.Helper()
	h := must[*convo.History](t)(c.History(ctx, convo.HistoryParams{SessionID: session, Repair: convo.Ptr(false)}))
	var ids []string
	for _, m := range h.Messages {
		ids = append(ids, str(m.ID))
	}
	return ids
}

func TestMessageIDGivenAndRepeated(t *testing.T) {
	c := start(t)
	ctx := ctxT(t)
	if !c.ServerInfo().Capabilities.ExactlyOnce {
		t.Fatal("initialize did not say exactly_once")
	}
	must[*convo.SessionInfo](t)(c.CreateSession(ctx, convo.CreateSessionParams{SessionID: "s"}))
	call := []convo.ToolCall{convo.ToolCall(`{"id":"c1","name":"ls","arguments":{}}`)}
	added := func(a *convo.AddedResponse, err error) (*convo.Added, error) {
		if err != nil {
			return nil, err
		}
		return &a.Added, nil
	}
	appends := []func(id string) (*convo.Added, error){
		func(id string) (*convo.Added, error) {
			return c.AddUser(ctx, convo.AddUserParams{SessionID: "s", Text: "hi", MessageID: id})
		},
		func(id string) (*convo.Added, error) {
			return c.AddAssistant(ctx, convo.AddAssistantParams{SessionID: "s", ToolCalls: call, MessageID: id})
		},
		func(id string) (*convo.Added, error) {
			return c.AddToolResult(ctx, convo.AddToolResultParams{SessionID: "s", ToolCallID: "c1", Content: convo.Text("README.md"), MessageID: id})
		},
		func(id string) (*convo.Added, error) {
			return c.AddMessage(ctx, convo.AddMessageParams{SessionID: "s", Message: convo.MessageInput{Role: convo.RoleUser, Content: convo.Text("next")}, MessageID: id})
		},
		func(id string) (*convo.Added, error) {
			return c.AddMessage(ctx, convo.AddMessageParams{SessionID: "s", Message: convo.MessageInput{Role: convo.RoleAssistant, Content: convo.Text("in it"), MessageID: id}})
		},
		func(id string) (*convo.Added, error) {
			return added(c.AddResponse(ctx, convo.AddResponseParams{SessionID: "s", Format: convo.FormatAnthropicMessages, Response: json.RawMessage(anthropicResponse), MessageID: id}))
		},
		func(id string) (*convo.Added, error) {
			return c.AddUser(ctx, convo.AddUserParams{SessionID: "s", Text: "shouted", MessageID: strings.ToUpper(id)})
		},
	}
	var ids []string
	for i, append_ := range appends {
		id := convo.NewMessageID()
		ids = append(ids, id)
		first := must[*convo.Added](t)(append_(id))
		if first.MessageID != id || first.Duplicate {
			t.Fatalf("append %d: %+v, want id %s", i, first, id)
		}
		again := must[*convo.Added](t)(append_(id))
		if want := (convo.Added{MessageID: id, Index: first.Index, Revision: first.Revision, Duplicate: true}); *again != want {
			t.Fatalf("append %d again: %+v, want %+v", i, again, want)
		}
	}
	if got := storedIDs(t, ctx, c, "s"); strings.Join(got, " ") != strings.Join(ids, " ") {
		t.Fatalf("stored ids %v, want %v", got, ids)
	}

	many := []convo.MessageInput{
		{Role: convo.RoleUser, Content: convo.Text("a"), MessageID: convo.NewMessageID()},
		{Role: convo.RoleAssistant, Content: convo.Text("b"), MessageID: convo.NewMessageID()},
	}
	first := must[*convo.AddedMany](t)(c.AddMessages(ctx, convo.AddMessagesParams{SessionID: "s", Messages: many}))
	if first.Duplicate || strings.Join(first.MessageIDs, " ") != many[0].MessageID+" "+many[1].MessageID {
		t.Fatalf("add_messages: %+v", first)
	}
	again := must[*convo.AddedMany](t)(c.AddMessages(ctx, convo.AddMessagesParams{SessionID: "s", Messages: many}))
	if !again.Duplicate || again.Revision != first.Revision || strings.Join(again.MessageIDs, " ") != strings.Join(first.MessageIDs, " ") {
		t.Fatalf("add_messages again: %+v, first %+v", again, first)
	}

	// The same id with a different message: ErrMessageExists, nothing stored.
	_, err := c.AddUser(ctx, convo.AddUserParams{SessionID: "s", Text: "something else", MessageID: ids[0]})
	if d := expect(t, err, convo.ErrMessageExists, 1010, "message_exists").Details(); d.MessageID != ids[0] {
		t.Fatalf("data: %+v", d)
	}
	// A partial retry (the second message is new).
	_, err = c.AddMessages(ctx, convo.AddMessagesParams{SessionID: "s", Messages: []convo.MessageInput{many[0], {Role: convo.RoleUser, Content: convo.Text("new")}}})
	expect(t, err, convo.ErrMessageExists, 1010, "message_exists")
	_, err = c.AddUser(ctx, convo.AddUserParams{SessionID: "s", Text: "x", MessageID: "not-a-uuid"})
	expect(t, err, convo.ErrInvalidParams, -32602, "")
	if s := must[*convo.SessionInfo](t)(c.GetSession(ctx, convo.GetSessionParams{SessionID: "s"})); s.MessageCount != 9 {
		t.Fatalf("message_count %d, want 9", s.MessageCount)
	}
}

func TestMessageIDChosenByTheClient(t *testing.T) {
	c := start(t)
	ctx := ctxT(t)
	must[*convo.SessionInfo](t)(c.CreateSession(ctx, convo.CreateSessionParams{SessionID: "s"}))
	var ids []string
	add := func(a *convo.Added, err error) {
		t.Helper()
		ids = append(ids, must[*convo.Added](t)(a, err).MessageID)
	}
	add(c.AddUser(ctx, convo.AddUserParams{SessionID: "s", Text: "hi"}))
	add(c.AddAssistant(ctx, convo.AddAssistantParams{SessionID: "s", ToolCalls: []convo.ToolCall{convo.ToolCall(`{"id":"c1","name":"ls","arguments":{}}`)}}))
	add(c.AddToolResult(ctx, convo.AddToolResultParams{SessionID: "s", ToolCallID: "c1", Content: convo.Text("ok")}))
	add(c.AddMessage(ctx, convo.AddMessageParams{SessionID: "s", Message: convo.MessageInput{Role: convo.RoleUser, Content: convo.Text("more")}}))
	r := must[*convo.AddedResponse](t)(c.AddResponse(ctx, convo.AddResponseParams{SessionID: "s", Format: convo.FormatAnthropicMessages, Response: json.RawMessage(anthropicResponse)}))
	ids = append(ids, r.MessageID)
	mine := convo.NewMessageID()
	messages := []convo.MessageInput{{Role: convo.RoleUser, Content: convo.Text("a")}, {Role: convo.RoleAssistant, Content: convo.Text("b"), MessageID: mine}}
	many := must[*convo.AddedMany](t)(c.AddMessages(ctx, convo.AddMessagesParams{SessionID: "s", Messages: messages}))
	if messages[0].MessageID != "" {
		t.Fatal("the caller's message was changed")
	}
	if many.MessageIDs[1] != mine {
		t.Fatalf("add_messages ids %v, want %s second", many.MessageIDs, mine)
	}
	ids = append(ids, many.MessageIDs...)
	stored := storedIDs(t, ctx, c, "s")
	if strings.Join(stored, " ") != strings.Join(ids, " ") {
		t.Fatalf("stored %v, replies %v", stored, ids)
	}
	for i, id := range stored {
		if id != mine && !uuidV4.MatchString(id) {
			t.Fatalf("message %d: %q is not a UUID v4", i, id)
		}
	}
}

// writeLock holds the SQLite write lock of db (BEGIN IMMEDIATE) from another process,
// the sqlite3 shell or else python3's sqlite3 module, until release (or the test's end);
// it skips the test when neither is there.
func writeLock(t *testing.T, db string) (release func()) {
	t.Helper()
	var cmd *exec.Cmd
	var script string
	if path, err := exec.LookPath("sqlite3"); err == nil {
		cmd = exec.Command(path, "-bail", db)
		script = "BEGIN IMMEDIATE;\nSELECT 'locked';\n"
	} else if path, err := exec.LookPath("python3"); err == nil {
		cmd = exec.Command(path, "-c", "import sqlite3, sys\n"+
			"c = sqlite3.connect(sys.argv[1], isolation_level=None)\n"+
			"c.execute('BEGIN IMMEDIATE')\nprint('locked', flush=True)\nsys.stdin.read()\n", db)
	} else {
		t.Skip("neither the sqlite3 shell nor python3 is here to hold the lock with")
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(stdin, script); err != nil {
		t.Fatal(err)
	}
	line := make([]byte, len("locked\n"))
	if _, err := io.ReadFull(stdout, line); err != nil || string(line) != "locked\n" {
		t.Fatalf("%s could not take the lock: %q %v %s", cmd.Path, line, err, stderr.String())
	}
	var once sync.Once
	release = func() {
		// The end of its input ends it, and with it the transaction.
		once.Do(func() {
			stdin.Close()
			_ = cmd.Wait()
		})
	}
	t.Cleanup(release)
	return release
}

// attempt is a request the client sent: its method and params.
type attempt struct {
	method string
	params string
}

// recordSends records the requests c sends; before each, before(method, n) runs with n
// the number of requests of that method sent so far (0 for the first).
func recordSends(c *convo.Client, before func(method string, n int)) func() []attempt {
	var mu sync.Mutex
	var sent []attempt
	convo.OnSendFrame(c, func(method string, frame []byte) {
		var body struct {
			Params json.RawMessage `json:"params"`
		}
		_, raw, _ := bytes.Cut(frame, []byte("\r\n\r\n"))
		_ = json.Unmarshal(raw, &body)
		mu.Lock()
		n := 0
		for _, a := range sent {
			if a.method == method {
				n++
			}
		}
		sent = append(sent, attempt{method, string(body.Params)})
		mu.Unlock()
		if before != nil {
			before(method, n)
		}
	})
	return func() []attempt {
		mu.Lock()
		defer mu.Unlock()
		return append([]attempt(nil), sent...)
	}
}

func sqliteClient(t *testing.T, before func(method string, n int)) (*convo.Client, string, func() []attempt) {
	db := filepath.Join(t.TempDir(), "db.sqlite")
	c := start(t, convo.WithStore("sqlite:"+db), convo.WithArgs("--busy-timeout-ms", "200"), convo.WithStderr(io.Discard))
	sent := recordSends(c, before)
	return c, db, sent
}

// TestRetryAfterStorageUnavailable: the lock is released when the retry is about to be
// sent (after the first attempt failed with 1006): the retry stores the message, once.
func TestRetryAfterStorageUnavailable(t *testing.T) {
	var mu sync.Mutex
	var release func()
	c, db, sent := sqliteClient(t, func(method string, n int) {
		mu.Lock()
		defer mu.Unlock()
		if strings.HasPrefix(method, "session/add_") && n%2 == 1 && release != nil {
			release()
			release = nil
		}
	})
	ctx := ctxT(t)
	must[*convo.SessionInfo](t)(c.CreateSession(ctx, convo.CreateSessionParams{SessionID: "s"}))
	lock := func() {
		r := writeLock(t, db)
		mu.Lock()
		release = r
		mu.Unlock()
	}

	lock()
	added := must[*convo.Added](t)(c.AddUser(ctx, convo.AddUserParams{SessionID: "s", Text: "hi"}))
	attempts := sent()[1:] // after session/create
	if len(attempts) != 2 || attempts[0].method != "session/add_user" || attempts[1] != attempts[0] {
		t.Fatalf("attempts: %+v", attempts)
	}
	if !uuidV4.MatchString(added.MessageID) || added.Duplicate || !strings.Contains(attempts[0].params, added.MessageID) {
		t.Fatalf("added %+v, sent %s", added, attempts[0].params)
	}
	h := must[*convo.History](t)(c.History(ctx, convo.HistoryParams{SessionID: "s"}))
	if len(h.Messages) != 1 || str(h.Messages[0].ID) != added.MessageID {
		t.Fatalf("history: %+v", h.Messages)
	}

	// AddMessages: an id for each message, the same ones in the retry.
	lock()
	many := must[*convo.AddedMany](t)(c.AddMessages(ctx, convo.AddMessagesParams{SessionID: "s", Messages: []convo.MessageInput{
		{Role: convo.RoleAssistant, Content: convo.Text("a")}, {Role: convo.RoleUser, Content: convo.Text("b")},
	}}))
	attempts = sent()[4:] // after create, 2 x add_user, history
	if len(attempts) != 2 || attempts[0].method != "session/add_messages" || attempts[1] != attempts[0] {
		t.Fatalf("attempts: %+v", attempts)
	}
	var p struct {
		Messages []struct {
			MessageID string `json:"message_id"`
		} `json:"messages"`
	}
	if err := json.Unmarshal([]byte(attempts[0].params), &p); err != nil || len(p.Messages) != 2 ||
		p.Messages[0].MessageID != many.MessageIDs[0] || p.Messages[1].MessageID != many.MessageIDs[1] {
		t.Fatalf("sent %s, got %v", attempts[0].params, many.MessageIDs)
	}
	if s := must[*convo.SessionInfo](t)(c.GetSession(ctx, convo.GetSessionParams{SessionID: "s"})); s.MessageCount != 3 {
		t.Fatalf("message_count %d, want 3", s.MessageCount)
	}
}

// TestRetryOnlyOnce: a lock held past both attempts gives ErrStorageUnavailable after
// exactly one retry; other methods and other errors are not retried.
func TestRetryOnlyOnce(t *testing.T) {
	c, db, sent := sqliteClient(t, nil)
	ctx := ctxT(t)
	must[*convo.SessionInfo](t)(c.CreateSession(ctx, convo.CreateSessionParams{SessionID: "s"}))
	release := writeLock(t, db)
	id := "0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9"
	_, err := c.AddUser(ctx, convo.AddUserParams{SessionID: "s", Text: "hi", MessageID: id})
	expect(t, err, convo.ErrStorageUnavailable, 1006, "storage_unavailable")
	attempts := sent()[1:]
	if len(attempts) != 2 || attempts[1] != attempts[0] || !strings.Contains(attempts[0].params, id) {
		t.Fatalf("attempts: %+v", attempts)
	}
	// Not an append: not retried.
	_, err = c.UpdateSession(ctx, convo.UpdateSessionParams{SessionID: "s", Title: convo.Value("t")})
	expect(t, err, convo.ErrStorageUnavailable, 1006, "storage_unavailable")
	if n := len(sent()); n != 4 {
		t.Fatalf("%d requests sent, want 4: %+v", n, sent())
	}
	release()
	if s := must[*convo.SessionInfo](t)(c.GetSession(ctx, convo.GetSessionParams{SessionID: "s"})); s.MessageCount != 0 {
		t.Fatalf("message_count %d, want 0", s.MessageCount)
	}

	// Another error: not retried.
	before := len(sent())
	_, err = c.AddUser(ctx, convo.AddUserParams{SessionID: "s", Text: "hi", ExpectedRevision: convo.Ptr(int64(7))})
	if !errors.Is(err, convo.ErrRevisionConflict) || len(sent()) != before+1 {
		t.Fatalf("%v, %d requests sent", err, len(sent())-before)
	}
	// Sent again later with the same id: stored once.
	if a := must[*convo.Added](t)(c.AddUser(ctx, convo.AddUserParams{SessionID: "s", Text: "hi", MessageID: id})); a.MessageID != id || a.Duplicate {
		t.Fatalf("added %+v", a)
	}
	if a := must[*convo.Added](t)(c.AddUser(ctx, convo.AddUserParams{SessionID: "s", Text: "hi", MessageID: id})); !a.Duplicate {
		t.Fatalf("added again %+v", a)
	}
	_, err = c.AddUser(ctx, convo.AddUserParams{SessionID: "s", Text: "bye", MessageID: id})
	expect(t, err, convo.ErrMessageExists, 1010, "message_exists")
	if n := len(sent()) - before; n != 4 {
		t.Fatalf("%d requests sent, want 4", n)
	}
	if s := must[*convo.SessionInfo](t)(c.GetSession(ctx, convo.GetSessionParams{SessionID: "s"})); s.MessageCount != 1 {
		t.Fatalf("message_count %d, want 1", s.MessageCount)
	}
}

// TestOlderServer: without Capabilities.ExactlyOnce (a server that would ignore the ids)
// the appends go as given, without an id, and are not retried.
func TestOlderServer(t *testing.T) {
	c := start(t)
	ctx := ctxT(t)
	c.ServerInfo().Capabilities.ExactlyOnce = false // as an older server answers initialize
	sent := recordSends(c, nil)
	must[*convo.SessionInfo](t)(c.CreateSession(ctx, convo.CreateSessionParams{SessionID: "s"}))
	added := must[*convo.Added](t)(c.AddUser(ctx, convo.AddUserParams{SessionID: "s", Text: "hi"}))
	must[*convo.AddedMany](t)(c.AddMessages(ctx, convo.AddMessagesParams{SessionID: "s", Messages: []convo.MessageInput{{Role: convo.RoleAssistant, Content: convo.Text("ho")}}}))
	attempts := sent()
	if len(attempts) != 3 || attempts[1].params != `{"session_id":"s","text":"hi"}` ||
		attempts[2].params != `{"session_id":"s","messages":[{"role":"assistant","content":"ho"}]}` {
		t.Fatalf("sent %+v", attempts)
	}
	if added.MessageID[14] != '7' {
		t.Fatalf("%s is not the server's own v7", added.MessageID)
	}
}
