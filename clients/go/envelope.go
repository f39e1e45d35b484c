package convo

import (
	"bytes"
	"encoding/json"
	"errors"
)

// envelope is a JSON-RPC message as read: the members the client routes by, each still
// raw JSON (ID and Params absent: nil).
type envelope struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *RPCError       `json:"error"`
}

var errNotObject = errors.New("not a JSON object")

// parseEnvelope splits a message into its members. It walks the top-level object once,
// skipping over the values instead of decoding them (a result is decoded once, by the
// call it answers, into its own type); the slices share body. Anything unusual is left
// to encoding/json.
func parseEnvelope(body []byte) (envelope, error) {
	var env envelope
	if err := splitEnvelope(body, &env); err != nil {
		env = envelope{}
		err = json.Unmarshal(body, &env)
		return env, err
	}
	return env, nil
}

func splitEnvelope(b []byte, env *envelope) error {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return errNotObject
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return nil
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return errNotObject
		}
		end := skipString(b, i)
		if end < 0 {
			return errNotObject
		}
		key := b[i+1 : end-1]
		if bytes.IndexByte(key, '\\') >= 0 {
			return errNotObject // an escaped key: let encoding/json read it
		}
		i = skipSpace(b, end)
		if i >= len(b) || b[i] != ':' {
			return errNotObject
		}
		i = skipSpace(b, i+1)
		end = skipValue(b, i)
		if end < 0 {
			return errNotObject
		}
		value := b[i:end]
		switch { // names match as encoding/json matches them: case-insensitively
		case bytes.EqualFold(key, []byte("id")):
			env.ID = value
		case bytes.EqualFold(key, []byte("method")):
			if err := json.Unmarshal(value, &env.Method); err != nil {
				return err
			}
		case bytes.EqualFold(key, []byte("params")):
			env.Params = value
		case bytes.EqualFold(key, []byte("result")):
			env.Result = value
		case bytes.EqualFold(key, []byte("error")):
			env.Error = nil
			if string(value) != "null" {
				env.Error = new(RPCError)
				if err := json.Unmarshal(value, env.Error); err != nil {
					return err
				}
			}
		}
		i = skipSpace(b, end)
		if i >= len(b) {
			return errNotObject
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case '}':
			if skipSpace(b, i+1) != len(b) {
				return errNotObject
			}
			return nil
		default:
			return errNotObject
		}
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index after the string starting at b[i] ('"'), or -1.
func skipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return -1
}

// skipValue returns the index after the value starting at b[i], or -1.
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				end := skipString(b, i)
				if end < 0 {
					return -1
				}
				i = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
		}
		return -1
	default: // a number, true, false or null
		start := i
	loop:
		for ; i < len(b); i++ {
			switch b[i] {
			case ',', '}', ']', ' ', '\t', '\r', '\n':
				break loop
			}
		}
		if i == start {
			return -1
		}
		return i
	}
}
