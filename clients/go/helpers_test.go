package convo_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	convo "github.com/convo-dev/convo/clients/go"
)

// binary is the convo binary under test: $CONVO_BINARY (test.sh sets it).
func binary(t testing.TB) string {
	t.Helper()
	b := os.Getenv("CONVO_BINARY")
	if b == "" {
		t.Skip("CONVO_BINARY is not set: these tests run the convo binary (bash clients/go/test.sh target/release/convo)")
	}
	return b
}

// start runs a client on an in-memory store and closes it when the test ends, checking
// that Close leaves no process behind.
func start(t *testing.T, opts ...convo.Option) *convo.Client {
	t.Helper()
	c := startRaw(t, append([]convo.Option{convo.WithStore("memory")}, opts...)...)
	t.Cleanup(func() {
		pid := c.PID()
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		assertGone(t, pid)
	})
	return c
}

func startRaw(t *testing.T, opts ...convo.Option) *convo.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := convo.Start(ctx, append([]convo.Option{convo.WithBinary(binary(t))}, opts...)...)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	return c
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func must[T any](t *testing.T) func(v T, err error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func str(p *string) string {
	if p == nil {
		return "<nil>"
	}
	return *p
}

// compact is JSON without insignificant whitespace, to compare raw values byte for
// byte (json.Compact changes nothing else: no escaping, no reordering).
func compact(t *testing.T, raw []byte) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		t.Fatalf("not JSON: %s", raw)
	}
	return b.String()
}
