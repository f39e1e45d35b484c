package convo

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

var envelopeSeeds = []string{
	`{"jsonrpc":"2.0","id":1,"result":{"session_id":"s","n":[1,2,{"a":"}"}]}}`,
	`{"jsonrpc":"2.0","id":2,"result":null}`,
	`{"jsonrpc":"2.0","id":3,"error":{"code":1001,"message":"session not found: \"x\"","data":{"kind":"session_not_found","session_id":"x"}}}`,
	`{"jsonrpc":"2.0","id":"convo:1","method":"runtime/run","params":{"messages":[{"content":"a \\\" ] } ["}]}}`,
	`{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":"convo:1"}}`,
	` { "id" : 7 , "result" : [ 1 , -2.5e+3 , true , false , null ] } `,
	`{"result":"é\u00e9","id":8,"jsonrpc":"2.0"}`,
	`{"\u0069d":9,"result":1}`,
	`{"ID":10,"Result":{"x":1},"error":{"code":1,"message":"m"},"error":null}`,
	`{"id":11,"method":"a","method":"b","result":1,"result":[2]}`,
	`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}`,
	`{}`,
	`[1]`,
	`{"id":1,"result":{"a":1}`,
	`{"id":1,"result":}`,
	`{"id":1 "result":2}`,
	`{"id":1,"result":"abc}`,
}

func TestEnvelope(t *testing.T) {
	for _, s := range envelopeSeeds {
		checkEnvelope(t, []byte(s))
	}
	env, err := parseEnvelope([]byte(envelopeSeeds[2]))
	if err != nil || string(env.ID) != "3" || env.Error == nil || env.Error.Code != 1001 || env.Error.Kind() != "session_not_found" {
		t.Fatalf("%+v %v", env, err)
	}
	env, err = parseEnvelope([]byte(envelopeSeeds[3]))
	if err != nil || env.Method != "runtime/run" || string(env.ID) != `"convo:1"` || idKey(env.ID) != "sconvo:1" {
		t.Fatalf("%+v %v", env, err)
	}
	env, err = parseEnvelope([]byte(envelopeSeeds[7]))
	if err != nil || string(env.ID) != "9" {
		t.Fatalf("an escaped key: %+v %v", env, err)
	}
}

// FuzzEnvelope: on valid JSON, parseEnvelope reads what encoding/json reads.
func FuzzEnvelope(f *testing.F) {
	for _, s := range envelopeSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(checkEnvelope)
}

func checkEnvelope(t *testing.T, body []byte) {
	var want envelope
	wantErr := json.Unmarshal(body, &want)
	got, err := parseEnvelope(body)
	if wantErr != nil {
		return // invalid JSON: nothing is routed either way that matters
	}
	if err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	norm := func(r json.RawMessage) string {
		if r == nil {
			return "<absent>"
		}
		var b bytes.Buffer
		if json.Compact(&b, r) != nil {
			return "<bad>" + string(r)
		}
		return b.String()
	}
	if norm(got.ID) != norm(want.ID) || got.Method != want.Method || norm(got.Params) != norm(want.Params) ||
		norm(got.Result) != norm(want.Result) || !reflect.DeepEqual(got.Error, want.Error) {
		t.Fatalf("%s:\n got %+v\nwant %+v", body, got, want)
	}
}
