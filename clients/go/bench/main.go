// Command bench measures the Go client's per-call overhead: the median round trip of a
// typed call against the same request written and read by hand on raw pipes, each on
// its own convo process (--store memory), the two interleaved call by call.
//
//	go run ./bench -binary ../../target/release/convo -n 5000
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"time"

	convo "github.com/convo-dev/convo/clients/go"
)

func main() {
	bin := flag.String("binary", os.Getenv("CONVO_BINARY"), "the convo binary ($CONVO_BINARY)")
	n := flag.Int("n", 5000, "calls measured per case")
	flag.Parse()
	if *bin == "" {
		fmt.Fprintln(os.Stderr, "bench: give -binary or set CONVO_BINARY")
		os.Exit(2)
	}
	if err := run(*bin, *n); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(bin string, n int) error {
	ctx := context.Background()
	c, err := convo.Start(ctx, convo.WithBinary(bin), convo.WithStore("memory"))
	if err != nil {
		return err
	}
	defer c.Close()
	raw, err := startRaw(bin)
	if err != nil {
		return err
	}
	defer raw.close()

	// The same session on both: 20 messages, for a history reply of a few KiB.
	var msgs []convo.MessageInput
	for i := 0; i < 20; i++ {
		msgs = append(msgs, convo.MessageInput{Role: convo.RoleUser, Content: convo.Text(strings.Repeat("word ", 30))})
	}
	if _, err := c.CreateSession(ctx, convo.CreateSessionParams{SessionID: "b"}); err != nil {
		return err
	}
	if _, err := c.AddMessages(ctx, convo.AddMessagesParams{SessionID: "b", Messages: msgs}); err != nil {
		return err
	}
	if _, err := raw.call(`"method":"session/create","params":{"session_id":"b"}`); err != nil {
		return err
	}
	if _, err := raw.call(`"method":"session/add_messages","params":{"session_id":"b","messages":[` +
		strings.TrimSuffix(strings.Repeat(`{"role":"user","content":"`+strings.Repeat("word ", 30)+`"},`, 20), ",") + `]}`); err != nil {
		return err
	}

	cases := []struct {
		name   string
		raw    string
		client func() error
	}{
		{"session/get", `"method":"session/get","params":{"session_id":"b"}`, func() error {
			_, err := c.GetSession(ctx, convo.GetSessionParams{SessionID: "b"})
			return err
		}},
		{"session/history (20 messages)", `"method":"session/history","params":{"session_id":"b"}`, func() error {
			_, err := c.History(ctx, convo.HistoryParams{SessionID: "b"})
			return err
		}},
	}
	fmt.Printf("%d calls per case, one at a time; median (p90) round trip\n", n)
	for _, k := range cases {
		var rawT, cliT []time.Duration
		for i := 0; i < n+n/10; i++ { // the first tenth warms up
			t0 := time.Now()
			if _, err := raw.call(k.raw); err != nil {
				return err
			}
			t1 := time.Now()
			if err := k.client(); err != nil {
				return err
			}
			t2 := time.Now()
			if i >= n/10 {
				rawT = append(rawT, t1.Sub(t0))
				cliT = append(cliT, t2.Sub(t1))
			}
		}
		rm, cm := pct(rawT, 50), pct(cliT, 50)
		fmt.Printf("%-30s raw pipes %7.1f µs (%6.1f)   client %7.1f µs (%6.1f)   overhead %+6.1f µs\n",
			k.name, us(rm), us(pct(rawT, 90)), us(cm), us(pct(cliT, 90)), us(cm-rm))
	}
	return nil
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

func pct(ds []time.Duration, p int) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)*p/100]
}

// rawConn is convo on pipes, framed by hand: the floor a client cannot go under.
type rawConn struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
	id  int
	buf []byte
}

func startRaw(bin string) (*rawConn, error) {
	cmd := exec.Command(bin, "--store", "memory")
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &rawConn{cmd: cmd, in: in, out: bufio.NewReaderSize(out, 64<<10)}, nil
}

// call writes one request (the members after the id) and reads its reply's bytes.
func (r *rawConn) call(rest string) ([]byte, error) {
	r.id++
	body := `{"jsonrpc":"2.0","id":` + strconv.Itoa(r.id) + `,` + rest + `}`
	if _, err := io.WriteString(r.in, "Content-Length: "+strconv.Itoa(len(body))+"\r\n\r\n"+body); err != nil {
		return nil, err
	}
	n := -1
	for {
		line, err := r.out.ReadString('\n')
		if err != nil {
			return nil, err
		}
		line = strings.TrimSpace(line)
		if line == "" && n >= 0 {
			break
		}
		if v, ok := strings.CutPrefix(line, "Content-Length:"); ok {
			n, _ = strconv.Atoi(strings.TrimSpace(v))
		}
	}
	if cap(r.buf) < n {
		r.buf = make([]byte, n)
	}
	r.buf = r.buf[:n]
	if _, err := io.ReadFull(r.out, r.buf); err != nil {
		return nil, err
	}
	if strings.Contains(string(r.buf[:min(len(r.buf), 200)]), `"error"`) {
		return nil, fmt.Errorf("raw call failed: %s", r.buf)
	}
	return r.buf, nil
}

func (r *rawConn) close() {
	r.in.Close()
	r.cmd.Wait()
}
