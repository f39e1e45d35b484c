package convo_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"sort"
	"strings"
	"testing"

	convo "github.com/convo-dev/convo/clients/go"
)

// The client method of each protocol method. A method added to openrpc.json without a
// client method, or a client method without a protocol method, fails TestMethodsMatch.
var clientMethods = map[string]string{
	"initialize":              "Initialize",
	"shutdown":                "Shutdown",
	"session/create":          "CreateSession",
	"session/get":             "GetSession",
	"session/list":            "ListSessions",
	"session/update":          "UpdateSession",
	"session/delete":          "DeleteSession",
	"session/delete_many":     "DeleteSessions",
	"session/add_user":        "AddUser",
	"session/add_assistant":   "AddAssistant",
	"session/add_tool_result": "AddToolResult",
	"session/add_message":     "AddMessage",
	"session/add_messages":    "AddMessages",
	"session/add_response":    "AddResponse",
	"session/history":         "History",
	"session/trim":            "Trim",
	"session/fork":            "Fork",
	"session/clear":           "Clear",
	"session/rewind":          "Rewind",
	"session/pop":             "Pop",
	"session/search":          "Search",
	"session/image":           "Image",
	"session/compact":         "Compact",
	"session/to_dict":         "ToDict",
	"session/from_dict":       "FromDict",
	"session/export":          "Export",
	"session/validate":        "Validate",
	"session/count_tokens":    "CountTokens",
	"session/run":             "Run",
	"session/json":            "JSON",
	"session/stream":          "Stream",
	"session/subscribe":       "Subscribe",
	"session/unsubscribe":     "Unsubscribe",
}

// The exported methods of *Client that are not protocol methods.
var notProtocol = map[string]bool{"Call": true, "Notify": true, "Close": true, "ServerInfo": true, "PID": true}

// Params a method takes beyond openrpc.json's list, as protocol/README.md documents them.
var extraParams = map[string][]string{"initialize": {"runtime"}}

type openrpcDoc struct {
	Methods []struct {
		Name   string `json:"name"`
		Params []struct {
			Name     string `json:"name"`
			Required bool   `json:"required"`
		} `json:"params"`
		Result struct {
			Schema json.RawMessage `json:"schema"`
		} `json:"result"`
	} `json:"methods"`
	Components struct {
		Schemas map[string]json.RawMessage `json:"schemas"`
		Errors  map[string]struct {
			Code int `json:"code"`
		} `json:"errors"`
	} `json:"components"`
	ServerRequests []struct {
		Name   string          `json:"name"`
		Result json.RawMessage `json:"result"`
	} `json:"x-server-requests"`
	Notifications []struct {
		Name      string          `json:"name"`
		Direction string          `json:"direction"`
		Params    json.RawMessage `json:"params"`
	} `json:"x-notifications"`
}

func loadOpenRPC(t *testing.T) *openrpcDoc {
	t.Helper()
	raw, err := os.ReadFile("../../protocol/openrpc.json")
	if err != nil {
		t.Fatalf("the protocol document: %v", err)
	}
	var d openrpcDoc
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatal(err)
	}
	return &d
}

func openrpcMethods(t *testing.T) []string {
	var names []string
	for _, m := range loadOpenRPC(t).Methods {
		names = append(names, m.Name)
	}
	sort.Strings(names)
	return names
}

var (
	ctxType = reflect.TypeOf((*context.Context)(nil)).Elem()
	errType = reflect.TypeOf((*error)(nil)).Elem()
)

// TestMethodsMatch: every method of openrpc.json has a client method of the form
// func(ctx, Params) (*Result, error), or func(ctx, Params) error when its result is null,
// and every exported method of *Client is a protocol method or a known helper.
func TestMethodsMatch(t *testing.T) {
	doc := loadOpenRPC(t)
	client := reflect.TypeOf(&convo.Client{})
	inDoc := map[string]bool{}
	for _, m := range doc.Methods {
		inDoc[m.Name] = true
		goName, ok := clientMethods[m.Name]
		if !ok {
			t.Errorf("%s is in openrpc.json but the client has no method for it", m.Name)
			continue
		}
		meth, ok := client.MethodByName(goName)
		if !ok {
			t.Errorf("%s: *Client has no method %s", m.Name, goName)
			continue
		}
		ft := meth.Type // receiver first
		if ft.NumIn() < 2 || ft.In(1) != ctxType {
			t.Errorf("%s: ctx is not the first argument", goName)
		}
		if ft.Out(ft.NumOut()-1) != errType {
			t.Errorf("%s: the last result is not an error", goName)
		}
		if m.Name == "shutdown" {
			continue
		}
		if isNull(t, m.Result.Schema) {
			if ft.NumIn() != 3 || ft.NumOut() != 1 {
				t.Errorf("%s answers null, but %s is not func(ctx, Params) error: %v", m.Name, goName, ft)
				continue
			}
		} else if ft.NumIn() != 3 || ft.NumOut() != 2 || ft.Out(0).Kind() != reflect.Pointer {
			t.Errorf("%s is not func(ctx, Params) (*Result, error): %v", goName, ft)
			continue
		}

		// Params: the struct's JSON names are openrpc.json's param names.
		var want []string
		for _, p := range m.Params {
			want = append(want, p.Name)
		}
		want = append(want, extraParams[m.Name]...)
		if got, want := jsonNames(ft.In(2)), sorted(want); got != want {
			t.Errorf("%s params: %s has [%s], openrpc.json [%s]", m.Name, ft.In(2), got, want)
		}
		if ft.NumOut() == 1 {
			continue
		}

		// Result: the struct's JSON names are the result schema's properties.
		props := schemaProperties(t, doc, m.Result.Schema)
		if got, want := jsonNames(ft.Out(0).Elem()), sorted(props); got != want {
			t.Errorf("%s result: %s has [%s], openrpc.json [%s]", m.Name, ft.Out(0).Elem(), got, want)
		}
	}
	for name, goName := range clientMethods {
		if !inDoc[name] {
			t.Errorf("the client has %s for %s, which openrpc.json does not have", goName, name)
		}
	}
	protocol := map[string]bool{}
	for _, goName := range clientMethods {
		protocol[goName] = true
	}
	for i := 0; i < client.NumMethod(); i++ {
		name := client.Method(i).Name
		if !protocol[name] && !notProtocol[name] {
			t.Errorf("*Client.%s is neither a protocol method nor a known helper", name)
		}
	}
}

// TestSchemasMatch: the types that carry openrpc.json's shared objects have its members.
func TestSchemasMatch(t *testing.T) {
	doc := loadOpenRPC(t)
	for name, v := range map[string]any{
		"Message":       convo.Message{},
		"MessageInput":  convo.MessageInput{},
		"SessionInfo":   convo.SessionInfo{},
		"Native":        convo.Native{},
		"Usage":         convo.Usage{},
		"UsageTotals":   convo.UsageTotals{},
		"AddedResponse": convo.AddedResponse{},
		"ImageRef":      convo.ImageRef{},
		// Context management (section 17).
		"ClearToolResults": convo.ClearToolResults{},
		"ClearThinking":    convo.ClearThinking{},
		"Fit":              convo.Fit{},
		"Cache":            convo.Cache{},
		"ContextLeftOut":   convo.ContextLeftOut{},
		"Edits":            convo.Edits{},
		"Fitted":           convo.Fitted{},
	} {
		schema, ok := doc.Components.Schemas[name]
		if !ok {
			t.Errorf("openrpc.json has no schema %s", name)
			continue
		}
		if got, want := jsonNames(reflect.TypeOf(v)), sorted(schemaProperties(t, doc, schema)); got != want {
			t.Errorf("%T has [%s], openrpc.json's %s [%s]", v, got, name, want)
		}
	}
	// The Format constants are the formats openrpc.json names.
	var format struct {
		Enum []string `json:"enum"`
	}
	if err := json.Unmarshal(doc.Components.Schemas["Format"], &format); err != nil {
		t.Fatal(err)
	}
	ours := []string{string(convo.FormatOpenAIChat), string(convo.FormatOpenAIResponses), string(convo.FormatAnthropicMessages), string(convo.FormatGeminiContents), string(convo.FormatGeminiInteractions)}
	if got, want := sorted(ours), sorted(format.Enum); got != want {
		t.Errorf("the Format constants are [%s], openrpc.json's [%s]", got, want)
	}
	// The Compaction constants are the values openrpc.json names.
	var compaction struct {
		Enum []string `json:"enum"`
	}
	if err := json.Unmarshal(doc.Components.Schemas["Compaction"], &compaction); err != nil {
		t.Fatal(err)
	}
	if got, want := sorted([]string{string(convo.CompactionUse), string(convo.CompactionIgnore)}), sorted(compaction.Enum); got != want {
		t.Errorf("the Compaction constants are [%s], openrpc.json's [%s]", got, want)
	}
}

// TestServerRequestsMatch: the runtime requests are the ones openrpc.json lists, and the
// answer carries the members its result schema names.
func TestServerRequestsMatch(t *testing.T) {
	doc := loadOpenRPC(t)
	var names []string
	for _, r := range doc.ServerRequests {
		names = append(names, r.Name)
		if r.Name == "runtime/run" {
			props := schemaProperties(t, doc, r.Result)
			if got, want := jsonNames(reflect.TypeOf(convo.RuntimeAnswer{})), sorted(props); got != want {
				t.Errorf("RuntimeAnswer has [%s], openrpc.json [%s]", got, want)
			}
		}
	}
	if got := sorted(names); got != "runtime/run runtime/stream" {
		t.Errorf("server requests in openrpc.json: %s; the client answers runtime/run and runtime/stream", got)
	}
}

// TestNotificationsMatch: the client routes session/changed, the one notification
// convo sends besides $/cancelRequest; Changed carries the members of its params and
// the Change constants are its change kinds.
func TestNotificationsMatch(t *testing.T) {
	doc := loadOpenRPC(t)
	var toClient []string
	for _, n := range doc.Notifications {
		if n.Direction == "server to client" {
			toClient = append(toClient, n.Name)
		}
		if n.Name != "session/changed" {
			continue
		}
		if got, want := jsonNames(reflect.TypeOf(convo.Changed{})), sorted(schemaProperties(t, doc, n.Params)); got != want {
			t.Errorf("Changed has [%s], openrpc.json [%s]", got, want)
		}
		var p struct {
			Properties struct {
				Change struct {
					Enum []string `json:"enum"`
				} `json:"change"`
			} `json:"properties"`
		}
		if err := json.Unmarshal(n.Params, &p); err != nil {
			t.Fatal(err)
		}
		ours := []string{}
		for _, c := range []convo.Change{
			convo.ChangeCreated, convo.ChangeAppended, convo.ChangeUpdated, convo.ChangeTrimmed,
			convo.ChangeCleared, convo.ChangeRewound, convo.ChangeCompacted, convo.ChangeImported,
			convo.ChangeDeleted, convo.ChangeDraft,
		} {
			ours = append(ours, string(c))
		}
		if got, want := sorted(ours), sorted(p.Properties.Change.Enum); got != want {
			t.Errorf("the Change constants are [%s], openrpc.json's change kinds [%s]", got, want)
		}
	}
	// $/cancelRequest goes both ways (listed as "server to client").
	if got := sorted(toClient); got != "$/cancelRequest session/changed" {
		t.Errorf("notifications to the client in openrpc.json: %s; the client handles $/cancelRequest and session/changed", got)
	}
}

// TestErrorCodesMatch: every error code of openrpc.json has exactly one sentinel.
func TestErrorCodesMatch(t *testing.T) {
	all := []error{
		convo.ErrSessionNotFound, convo.ErrSessionExists, convo.ErrRevisionConflict, convo.ErrInvalidSequence,
		convo.ErrTooLarge, convo.ErrStorageUnavailable, convo.ErrMessageNotFound, convo.ErrRuntimeFailed,
		convo.ErrInvalidOutput, convo.ErrMessageExists, convo.ErrCancelled, convo.ErrInvalidParams, convo.ErrInvalidRequest,
		convo.ErrMethodNotFound, convo.ErrParse, convo.ErrInternal,
	}
	for name, e := range loadOpenRPC(t).Components.Errors {
		n := 0
		for _, s := range all {
			if errors.Is(&convo.RPCError{Code: e.Code}, s) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("error %s (%d) matches %d sentinels", name, e.Code, n)
		}
	}
}

func sorted(s []string) string {
	s = append([]string(nil), s...)
	sort.Strings(s)
	return strings.Join(s, " ")
}

// jsonNames lists a struct's JSON member names, embedded structs' included.
func jsonNames(t reflect.Type) string {
	var names []string
	var walk func(reflect.Type)
	walk = func(t reflect.Type) {
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if f.Anonymous && f.Type.Kind() == reflect.Struct && f.Tag.Get("json") == "" {
				walk(f.Type)
				continue
			}
			if !f.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" {
				continue
			}
			if name == "" {
				name = f.Name
			}
			names = append(names, name)
		}
	}
	walk(t)
	return sorted(names)
}

// isNull reports whether a result schema is {"type": "null"}.
func isNull(t *testing.T, raw json.RawMessage) bool {
	t.Helper()
	var s struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}
	return s.Type == "null"
}

// schemaProperties lists an object schema's property names, following $ref and taking
// the union over oneOf.
func schemaProperties(t *testing.T, doc *openrpcDoc, raw json.RawMessage) []string {
	t.Helper()
	var s struct {
		Ref        string                     `json:"$ref"`
		OneOf      []json.RawMessage          `json:"oneOf"`
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}
	if s.Ref != "" {
		return schemaProperties(t, doc, doc.Components.Schemas[strings.TrimPrefix(s.Ref, "#/components/schemas/")])
	}
	seen := map[string]bool{}
	for name := range s.Properties {
		seen[name] = true
	}
	for _, o := range s.OneOf {
		for _, name := range schemaProperties(t, doc, o) {
			seen[name] = true
		}
	}
	var names []string
	for name := range seen {
		names = append(names, name)
	}
	return names
}
