//! Reasoning models (spec section 13): provider responses appended as they came
//! (`session/add_response`), kept byte for byte in every store, replayed verbatim to
//! their own format and left out, with warnings, of every other; the Responses API
//! format; the validator's reasoning rules; usage; and a crash between appends. The
//! response objects are tests/fixtures/providers/*.json, written from the providers' SDK
//! types (see the README there).

use std::collections::HashSet;

use serde_json::{Value, json};

use crate::harness::{Backend, Framing, Place, Server};

const FORMATS: [&str; 5] =
    ["openai_chat", "openai_responses", "anthropic_messages", "gemini_contents", "gemini_interactions"];

pub fn fixture(name: &str) -> Value {
    let path = format!("{}/tests/fixtures/providers/{name}.json", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

/// One provider's tool loop: the first response (which calls tools), and the answer after
/// the results.
struct Loop {
    format: &'static str,
    calls: &'static str,
    answer: &'static str,
}

const LOOPS: [Loop; 6] = [
    Loop { format: "anthropic_messages", calls: "anthropic_thinking_tool_use", answer: "anthropic_final_answer" },
    Loop { format: "openai_responses", calls: "openai_responses_reasoning_calls", answer: "openai_responses_final" },
    Loop { format: "openai_chat", calls: "openai_chat_tool_calls", answer: "anthropic_redacted_thinking" },
    Loop { format: "openai_chat", calls: "deepseek_chat_reasoning_content", answer: "" },
    Loop { format: "gemini_contents", calls: "gemini_thought_signatures", answer: "gemini_final" },
    Loop {
        format: "gemini_interactions",
        calls: "gemini_interactions_thought_calls",
        answer: "gemini_interactions_final",
    },
];

/// The part of a response a message keeps as its native body.
fn body_of(format: &str, response: &Value) -> Value {
    match format {
        "anthropic_messages" => response["content"].clone(),
        "openai_responses" => response["output"].clone(),
        "openai_chat" => response["choices"][0]["message"].clone(),
        "gemini_contents" => response["candidates"][0]["content"].clone(),
        "gemini_interactions" => response["steps"].clone(),
        other => panic!("no format {other}"),
    }
}

/// The format a fixture is a response of.
fn format_of(name: &str) -> &'static str {
    match name.split('_').next().unwrap() {
        "anthropic" => "anthropic_messages",
        _ if name.starts_with("gemini_interactions") => "gemini_interactions",
        "gemini" => "gemini_contents",
        _ if name.starts_with("openai_responses") => "openai_responses",
        _ => "openai_chat",
    }
}

/// Runs a tool loop into session `id`: a user message, the response that calls tools,
/// a result per call, and (when there is one) the answer. Returns the bodies stored.
fn run_loop(s: &mut Server, id: &str, l: &Loop) -> Vec<Value> {
    s.call("session/create", json!({"session_id": id, "system": "You are a travel assistant."}));
    s.call("session/add_user", json!({"session_id": id, "text": "What should I pack for Paris and London?"}));
    let first = fixture(l.calls);
    let added = s.call("session/add_response", json!({"session_id": id, "format": l.format, "response": first}));
    let mut bodies = vec![body_of(l.format, &first)];
    let ids: Vec<String> = serde_json::from_value(added["tool_call_ids"].clone()).unwrap();
    assert!(!ids.is_empty(), "{}: the response calls tools", l.calls);
    for (n, call) in ids.iter().enumerate() {
        let result = format!("{{\"temperature\": {}, \"unit\": \"celsius\"}}", 12 + n);
        s.call("session/add_tool_result", json!({"session_id": id, "tool_call_id": call, "content": result}));
    }
    if !l.answer.is_empty() {
        let format = format_of(l.answer);
        let answer = fixture(l.answer);
        s.call("session/add_response", json!({"session_id": id, "format": format, "response": answer}));
        bodies.push(body_of(format, &answer));
    }
    bodies
}

fn text(value: &Value) -> String {
    serde_json::to_string(value).unwrap()
}

fn warnings(exported: &Value) -> Vec<String> {
    exported["warnings"].as_array().unwrap().iter().map(|w| w["message"].as_str().unwrap().to_owned()).collect()
}

/// The assistant-side pieces of a payload, in order: for each format, what a native
/// body replays as.
fn assistant_pieces(format: &str, payload: &Value) -> Vec<Value> {
    match format {
        "anthropic_messages" => payload["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["role"] == "assistant")
            .map(|m| m["content"].clone())
            .collect(),
        "openai_chat" => {
            payload["messages"].as_array().unwrap().iter().filter(|m| m["role"] == "assistant").cloned().collect()
        }
        "gemini_contents" => {
            payload["contents"].as_array().unwrap().iter().filter(|c| c["role"] == "model").cloned().collect()
        }
        "openai_responses" | "gemini_interactions" => {
            // Runs of the assistant's items (the model's steps), each run one piece.
            let mut runs: Vec<Vec<Value>> = Vec::new();
            let mut open = false;
            for item in payload["input"].as_array().unwrap() {
                let theirs =
                    matches!(item["type"].as_str(), Some("function_call_output" | "user_input" | "function_result"))
                        || (item["type"] == "message" && item["role"] != "assistant");
                let mine = !theirs;
                match (mine, open) {
                    (true, true) => runs.last_mut().unwrap().push(item.clone()),
                    (true, false) => runs.push(vec![item.clone()]),
                    _ => {}
                }
                open = mine;
            }
            runs.into_iter().map(Value::Array).collect()
        }
        other => panic!("no format {other}"),
    }
}

/// Every provider's tool loop: the stored native bodies are the responses' own, byte for
/// byte; an export to the same format replays them verbatim and in order; an export to
/// another format builds them from the common form and says what it left out.
fn responses_replay_byte_for_byte(s: &mut Server) {
    for (n, l) in LOOPS.iter().enumerate() {
        let id = format!("loop{n}");
        let bodies = run_loop(s, &id, l);
        let history = s.call("session/history", json!({"session_id": id, "repair": false}));
        let stored: Vec<&Value> =
            history["messages"].as_array().unwrap().iter().filter(|m| !m["native"].is_null()).collect();
        assert_eq!(stored.len(), bodies.len(), "{}", l.calls);
        for (m, body) in stored.iter().zip(&bodies) {
            assert_eq!(text(&m["native"]["body"]), text(body), "{}: the body as the provider returned it", l.calls);
        }
        let native_formats: HashSet<&str> = stored.iter().map(|m| m["native"]["format"].as_str().unwrap()).collect();
        for format in FORMATS {
            let exported = s.call("session/export", json!({"session_id": id, "format": format}));
            let pieces = assistant_pieces(format, &exported["payload"]);
            for (m, piece) in stored.iter().zip(&pieces) {
                let body = &m["native"]["body"];
                if m["native"]["format"] == format {
                    assert_eq!(text(piece), text(body), "{} to {format}: replayed verbatim", l.calls);
                } else {
                    assert_ne!(text(piece), text(body), "{} to {format}: built from the common form", l.calls);
                }
            }
            let left_out = warnings(&exported).iter().filter(|w| w.starts_with("reasoning left out")).count();
            let foreign = native_formats.iter().filter(|f| **f != format).count();
            if foreign > 0 && l.calls != "openai_chat_tool_calls" {
                assert!(left_out > 0, "{} to {format}: {:?}", l.calls, warnings(&exported));
            }
            if !native_formats.contains(format) || native_formats.len() == 1 {
                let v = s.call("session/validate", json!({"session_id": id, "format": format}));
                assert_eq!(v["violations"], json!([]), "{} validated as {format}", l.calls);
            }
        }
    }
}

/// The exact warnings of the spec: reasoning left out of Chat Completions names the
/// format that can carry it; a stateless Responses export drops what it cannot replay.
fn reasoning_left_out_with_the_stated_warnings(s: &mut Server) {
    run_loop(s, "r", &LOOPS[1]);
    let chat = s.call("session/export", json!({"session_id": "r", "format": "openai_chat"}));
    let w = warnings(&chat);
    assert!(
        w.iter().any(|w| w == "reasoning left out: Chat Completions cannot carry it; export openai_responses"),
        "{w:?}"
    );
    let payload = text(&chat["payload"]);
    assert!(!payload.contains("encrypted_content") && !payload.contains("rs_"), "no reasoning forged into Chat");

    s.call("session/create", json!({"session_id": "nr"}));
    s.call("session/add_user", json!({"session_id": "nr", "text": "go"}));
    let response = fixture("openai_responses_reasoning_no_encrypted");
    s.call("session/add_response", json!({"session_id": "nr", "format": "openai_responses", "response": response}));
    let stateless = s.call("session/export", json!({"session_id": "nr", "format": "openai_responses", "store": false}));
    let input = stateless["payload"]["input"].as_array().unwrap();
    assert!(input.iter().all(|i| i["type"] != "reasoning"), "{input:?}");
    let call = input.iter().find(|i| i["type"] == "function_call").unwrap();
    assert_eq!((call.get("id"), &call["call_id"]), (None, &json!("call_LtOiVVfDoN8SEQlDmhauevev")));
    assert!(warnings(&stateless).iter().any(|w| w.starts_with("reasoning left out: `store` is false")));
    let stored = s.call("session/export", json!({"session_id": "nr", "format": "openai_responses"}));
    assert_eq!(text(&stored["payload"]["input"][1]), text(&response["output"][0]), "with store, as it came");

    // Another model's body is built from the common form, with a warning.
    let other = s.call("session/export", json!({"session_id": "r", "format": "openai_responses", "model": "gpt-4.1"}));
    assert!(warnings(&other).iter().any(|w| w.starts_with("built from the common form")), "{:?}", warnings(&other));
    let same = s.call("session/export", json!({"session_id": "r", "format": "openai_responses", "model": "gpt-5.4"}));
    assert!(warnings(&same).is_empty(), "gpt-5.4-2026-03-05 is gpt-5.4 plus a date");
}

/// Export X, import it as X into a new session, export X again: the same bytes, for every
/// provider's loop in every format.
fn export_import_export_is_byte_identical(s: &mut Server) {
    for (n, l) in LOOPS.iter().enumerate() {
        let id = format!("loop{n}");
        run_loop(s, &id, l);
        for format in FORMATS {
            let first = s.call("session/export", json!({"session_id": id, "format": format}));
            let copy = format!("{id}-{format}");
            let data = first["payload"].clone();
            s.call("session/from_dict", json!({"format": format, "session_id": copy, "data": data}));
            let again = s.call("session/export", json!({"session_id": copy, "format": format}));
            assert_eq!(text(&again["payload"]), text(&first["payload"]), "{} through {format}", l.calls);
            // And through our own dict, unchanged.
            let dict = s.call("session/to_dict", json!({"session_id": copy}));
            let mut dict2 = dict.clone();
            dict2["session_id"] = json!(format!("{copy}-dict"));
            s.call("session/from_dict", json!({"data": dict2}));
            let third = s.call("session/export", json!({"session_id": format!("{copy}-dict"), "format": format}));
            assert_eq!(text(&third["payload"]), text(&first["payload"]), "{} through to_dict", l.calls);
        }
    }
}

/// Usage: each response's, normalised, on its message; their sums on the session, which
/// trimming does not lower and a fork starts again from.
fn usage_per_message_and_summed_per_session(s: &mut Server) {
    run_loop(s, "u", &LOOPS[0]);
    let history = s.call("session/history", json!({"session_id": "u", "repair": false}));
    let usage: Vec<&Value> = history["messages"].as_array().unwrap().iter().map(|m| &m["usage"]).collect();
    let first = json!({"input_tokens": 1950, "output_tokens": 214, "cache_read_tokens": 0,
                       "cache_write_tokens": 1912, "reasoning_tokens": 131});
    assert_eq!(usage[1], &first);
    assert!(usage[0].is_null() && usage[2].is_null(), "a user message and a result cost nothing");
    let answer = fixture("anthropic_final_answer")["usage"].clone();
    let input = ["input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"]
        .iter()
        .map(|k| answer[*k].as_u64().unwrap_or(0))
        .sum::<u64>();
    let info = s.call("session/get", json!({"session_id": "u"}));
    assert_eq!(info["usage"]["input_tokens"], json!(1950 + input));
    assert_eq!(info["usage"]["output_tokens"], json!(214 + answer["output_tokens"].as_u64().unwrap()));
    let before = info["usage"].clone();
    s.call("session/trim", json!({"session_id": "u", "max_turns": 0}));
    assert_eq!(s.call("session/get", json!({"session_id": "u"}))["usage"], before, "what was spent stays spent");
    let fork = s.call("session/fork", json!({"session_id": "u", "new_session_id": "uf"}));
    assert_eq!(fork["usage"]["input_tokens"], 0);
}

fn usage_of_imports(s: &mut Server) {
    run_loop(s, "src", &LOOPS[4]);
    let mut dict = s.call("session/to_dict", json!({"session_id": "src"}));
    dict["session_id"] = json!("copy");
    let imported = s.call("session/from_dict", json!({"data": dict}));
    assert_eq!(imported["usage"], s.call("session/get", json!({"session_id": "src"}))["usage"]);
    assert_eq!(
        imported["usage"]["reasoning_tokens"],
        json!(412 + fixture("gemini_final")["usageMetadata"]["thoughtsTokenCount"].as_u64().unwrap())
    );
}

/// What is refused: a response of another format or without output, a native beside a
/// common form on an append, a common form that is not the native body's on an import.
fn refusals_change_nothing(s: &mut Server) {
    s.call("session/create", json!({"session_id": "x"}));
    s.call("session/add_user", json!({"session_id": "x", "text": "go"}));
    for (format, name) in [
        ("openai_chat", "anthropic_final_answer"),
        ("openai_responses", "openai_responses_failed"),
        ("anthropic_messages", "anthropic_refusal_empty"),
        ("gemini_contents", "gemini_no_candidates"),
        ("gemini_interactions", "gemini_interactions_failed"),
        ("openai_chat", "openai_chat_content_filter"),
    ] {
        let e = s.fail(
            "session/add_response",
            json!({"session_id": "x", "format": format, "response": fixture(name)}),
            -32602,
        );
        assert!(e["message"].as_str().unwrap().starts_with("invalid params: response: "), "{e}");
    }
    let body = body_of("anthropic_messages", &fixture("anthropic_final_answer"));
    let native = json!({"format": "anthropic_messages", "model": null, "body": body});
    s.fail(
        "session/add_message",
        json!({"session_id": "x", "message": {"role": "assistant", "content": "mine", "native": native}}),
        -32602,
    );
    s.fail("session/add_message", json!({"session_id": "x", "message": {"role": "user", "native": native}}), -32602);
    let added =
        s.call("session/add_message", json!({"session_id": "x", "message": {"role": "assistant", "native": native}}));
    assert_eq!(added["index"], 1);
    let mut dict = s.call("session/to_dict", json!({"session_id": "x"}));
    dict["session_id"] = json!("y");
    dict["messages"][1]["content"] = json!("not what the body says");
    let e = s.fail("session/from_dict", json!({"data": dict}), -32602);
    assert!(e["message"].as_str().unwrap().contains("common form"), "{e}");
    assert_eq!(s.call("session/get", json!({"session_id": "x"}))["message_count"], 2);
}

/// Each rule of the validator, broken on purpose, is reported; the loops above are clean.
fn validate_reports_each_reasoning_rule(s: &mut Server) {
    let rules = |s: &mut Server, id: &str, params: Value| -> Vec<String> {
        let mut params = params;
        params["session_id"] = json!(id);
        let v = s.call("session/validate", params);
        v["violations"].as_array().unwrap().iter().map(|v| v["rule"].as_str().unwrap().to_owned()).collect()
    };
    let native_turn = |s: &mut Server, id: &str, format: &str, body: Value| {
        s.call("session/create", json!({"session_id": id}));
        s.call("session/add_user", json!({"session_id": id, "text": "go"}));
        let native = json!({"format": format, "model": null, "body": body});
        s.call("session/add_message", json!({"session_id": id, "message": {"role": "assistant", "native": native}}));
    };
    // Anthropic: a turn that ends in thinking; a tool turn without thinking, with thinking on.
    native_turn(s, "a1", "anthropic_messages", json!([{"type": "thinking", "thinking": "hm", "signature": "c2ln"}]));
    assert_eq!(rules(s, "a1", json!({"format": "anthropic_messages"})), ["thinking_last"]);
    s.call("session/create", json!({"session_id": "a2"}));
    s.call("session/add_user", json!({"session_id": "a2", "text": "go"}));
    s.call(
        "session/add_assistant",
        json!({"session_id": "a2", "tool_calls": [{"id": "t", "name": "f", "arguments": {}}]}),
    );
    s.call("session/add_tool_result", json!({"session_id": "a2", "tool_call_id": "t", "content": "r"}));
    assert_eq!(rules(s, "a2", json!({"format": "anthropic_messages", "thinking": true})), ["thinking_required"]);
    assert_eq!(rules(s, "a2", json!({"format": "anthropic_messages"})), Vec::<String>::new());
    s.call("session/create", json!({"session_id": "a3"}));
    s.call("session/add_user", json!({"session_id": "a3", "text": "go"}));
    let response = fixture("anthropic_thinking_tool_use");
    let added = s.call(
        "session/add_response",
        json!({"session_id": "a3", "format": "anthropic_messages", "response": response}),
    );
    for call in added["tool_call_ids"].as_array().unwrap() {
        s.call("session/add_tool_result", json!({"session_id": "a3", "tool_call_id": call, "content": "r"}));
    }
    assert_eq!(rules(s, "a3", json!({"format": "anthropic_messages", "thinking": true})), Vec::<String>::new());
    // The Responses API: a call with its item id but no reasoning; reasoning followed by
    // nothing; an output of no call; a call with no output; unreplayable reasoning.
    let call = json!({"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "f", "arguments": "{}"});
    native_turn(s, "o1", "openai_responses", json!([call]));
    s.call("session/add_tool_result", json!({"session_id": "o1", "tool_call_id": "call_1", "content": "r"}));
    assert_eq!(rules(s, "o1", json!({"format": "openai_responses"})), ["reasoning_missing"]);
    native_turn(s, "o2", "openai_responses", json!([{"type": "reasoning", "id": "rs_1", "summary": []}]));
    assert_eq!(rules(s, "o2", json!({"format": "openai_responses"})), ["reasoning_dangling"]);
    let orphan = json!({"type": "function_call_output", "call_id": "call_9", "output": "?"});
    native_turn(
        s,
        "o3",
        "openai_responses",
        json!([{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "hi", "annotations": []}]}, orphan]),
    );
    assert!(rules(s, "o3", json!({"format": "openai_responses"})).contains(&"call_missing".to_owned()));
    native_turn(
        s,
        "o4",
        "openai_responses",
        json!([{"type": "function_call", "call_id": "call_4", "name": "f", "arguments": "{}"}]),
    );
    assert_eq!(rules(s, "o4", json!({"format": "openai_responses"})), ["output_missing"]);
    s.call("session/create", json!({"session_id": "o5"}));
    s.call("session/add_user", json!({"session_id": "o5", "text": "go"}));
    let response = fixture("openai_responses_reasoning_no_encrypted");
    s.call("session/add_response", json!({"session_id": "o5", "format": "openai_responses", "response": response}));
    s.call(
        "session/add_tool_result",
        json!({"session_id": "o5", "tool_call_id": "call_LtOiVVfDoN8SEQlDmhauevev", "content": "r"}),
    );
    assert_eq!(rules(s, "o5", json!({"format": "openai_responses"})), Vec::<String>::new());
    assert_eq!(rules(s, "o5", json!({"format": "openai_responses", "store": false})), ["reasoning_not_replayable"]);
}

/// The host runtime takes a provider's response as its answer: stored in its native form,
/// its calls returned as the turn's.
fn the_runtime_takes_a_provider_response(s: &mut Server) {
    s.call("session/create", json!({"session_id": "h"}));
    let id = s.send_request("session/run", json!({"session_id": "h", "input": "Pack for Paris?"}));
    let host = s.host_request(id, "runtime/run");
    let response = fixture("gemini_thought_signatures");
    s.answer(&host["id"], json!({"format": "gemini_contents", "response": response}));
    let result = s.result_of(id, "session/run");
    assert_eq!(result["tool_calls"][0]["id"], "call_1");
    assert_eq!(result["text"], "I'll look up the current weather in both cities.");
    let history = s.call("session/history", json!({"session_id": "h", "repair": false}));
    assert_eq!(text(&history["messages"][1]["native"]["body"]), text(&response["candidates"][0]["content"]));
    assert_eq!(history["messages"][1]["metadata"]["response_id"], "CHvZHQTDAvYL9UaQJ-9XclH");
}

/// Gemini calls without ids get `call_<n>` after every id the session holds: the ones
/// stored, the ones earlier in the same request, and the ones of appends pipelined before.
fn gemini_call_ids_are_never_given_twice(s: &mut Server) {
    let native = json!({"format": "gemini_contents", "model": null,
                        "body": fixture("gemini_thought_signatures")["candidates"][0]["content"]});
    let turn = json!({"role": "assistant", "native": native});
    s.call("session/create", json!({"session_id": "g"}));
    s.call(
        "session/add_messages",
        json!({"session_id": "g", "messages": [{"role": "user", "content": "go"}, turn, turn]}),
    );
    let sent: Vec<u64> =
        (0..3).map(|_| s.send_request("session/add_message", json!({"session_id": "g", "message": turn}))).collect();
    for id in sent {
        s.result_of(id, "session/add_message");
    }
    let history = s.call("session/history", json!({"session_id": "g", "repair": false}));
    let ids: Vec<String> = history["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["tool_calls"].as_array().into_iter().flatten())
        .map(|c| c["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ids.len(), 10);
    assert_eq!(ids.iter().collect::<HashSet<_>>().len(), 10, "{ids:?}");
    assert_eq!(ids[..4], ["call_1", "call_2", "call_3", "call_4"]);
}

/// `session/json` answered with a provider's response of several text blocks stores the
/// common form of that body, which an import then takes back.
fn a_native_json_answer_keeps_its_common_form(s: &mut Server) {
    s.call("session/create", json!({"session_id": "j"}));
    let id = s.send_request("session/json", json!({"session_id": "j", "input": "a?", "schema": {"type": "object"}}));
    let host = s.host_request(id, "runtime/run");
    let response = json!({"type": "message", "model": "claude-x", "content": [
        {"type": "thinking", "thinking": "", "signature": "c2ln"},
        {"type": "text", "text": "{\"a\":"}, {"type": "text", "text": "1}"}]});
    s.answer(&host["id"], json!({"format": "anthropic_messages", "response": response}));
    assert_eq!(s.result_of(id, "session/json")["value"], json!({"a": 1}));
    let mut dict = s.call("session/to_dict", json!({"session_id": "j"}));
    assert_eq!(
        dict["messages"][1]["content"],
        json!([{"type": "text", "text": "{\"a\":"}, {"type": "text", "text": "1}"}])
    );
    dict["session_id"] = json!("j2");
    s.call("session/from_dict", json!({"data": dict}));
}

crate::every_store!(
    gemini_call_ids_are_never_given_twice,
    responses_replay_byte_for_byte,
    reasoning_left_out_with_the_stated_warnings,
    export_import_export_is_byte_identical,
    usage_per_message_and_summed_per_session,
    usage_of_imports,
    refusals_change_nothing,
    validate_reports_each_reasoning_rule,
);

crate::both_framings!(the_runtime_takes_a_provider_response, a_native_json_answer_keeps_its_common_form);

/// Killed (SIGKILL) right after its appends were acknowledged, a store keeps every byte
/// of every native body.
fn no_native_byte_is_lost_to_a_kill(backend: Backend) {
    let Some((place, _dir)) = Place::fresh(backend) else { return };
    let mut s = Server::at(&place, Framing::Ndjson, &[]);
    let mut bodies = Vec::new();
    for (n, l) in LOOPS.iter().enumerate() {
        bodies.push((format!("k{n}"), run_loop(&mut s, &format!("k{n}"), l)));
    }
    s.kill();
    let mut s = Server::at(&place, Framing::Ndjson, &[]);
    for (id, bodies) in bodies {
        let history = s.call("session/history", json!({"session_id": id, "repair": false}));
        let stored: Vec<String> = history["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| !m["native"].is_null())
            .map(|m| text(&m["native"]["body"]))
            .collect();
        assert_eq!(stored, bodies.iter().map(text).collect::<Vec<_>>(), "{id}");
    }
    s.finish();
}

#[test]
fn no_native_byte_is_lost_to_a_kill_sqlite() {
    no_native_byte_is_lost_to_a_kill(Backend::Sqlite);
}

#[test]
fn no_native_byte_is_lost_to_a_kill_postgres() {
    no_native_byte_is_lost_to_a_kill(Backend::Postgres);
}

mod property {
    //! Any sequence of add_response, add_tool_result, trim, fork and rewind keeps every
    //! stored common form derivable from its native body, and every export of a history
    //! of one format is its native bodies, in order, with the user's messages and the
    //! tool results between them.

    use std::sync::Arc;

    use convo::rpc::LocalServer;
    use convo::session::native::{Native, derive};
    use convo::store::{MemoryStore, SqliteSettings, SqliteStore};
    use proptest::prelude::*;
    use serde_json::{Value, json};

    use super::{LOOPS, assistant_pieces, fixture, text};

    #[derive(Debug, Clone)]
    enum Op {
        User,
        Response(bool),
        Results,
        Trim(u8),
        Fork,
        Rewind(u8),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            2 => Just(Op::User),
            3 => any::<bool>().prop_map(Op::Response),
            3 => Just(Op::Results),
            1 => (0..3u8).prop_map(Op::Trim),
            1 => Just(Op::Fork),
            1 => any::<u8>().prop_map(Op::Rewind),
        ]
    }

    fn call(s: &mut LocalServer, method: &str, params: Value) -> Option<Value> {
        s.call(method, params).ok()
    }

    fn check(s: &mut LocalServer, id: &str, format: &str) {
        let dict = call(s, "session/to_dict", json!({"session_id": id})).unwrap();
        let mut bodies = Vec::new();
        for m in dict["messages"].as_array().unwrap() {
            if m["native"].is_null() {
                continue;
            }
            let native: Native = serde_json::from_value(m["native"].clone()).unwrap();
            let common = derive(&native).unwrap();
            let calls: Option<Vec<Value>> = serde_json::from_value(m["tool_calls"].clone()).unwrap();
            assert!(common.agrees_with(&m["content"], calls.as_deref()), "{id}: {m}");
            bodies.push(native.body);
        }
        let exported = call(s, "session/export", json!({"session_id": id, "format": format})).unwrap();
        let pieces = assistant_pieces(format, &exported["payload"]);
        // Consecutive turns of one role are one provider turn: their bodies concatenated.
        assert_eq!(
            flat(format, &pieces),
            flat(format, &bodies),
            "{id}: the export of {format} is its native bodies, in order"
        );
    }

    /// The items of a list of assistant pieces (or native bodies), end to end.
    fn flat(format: &str, pieces: &[Value]) -> Vec<String> {
        let items = |piece: &Value| -> Vec<Value> {
            match format {
                "openai_chat" => vec![piece.clone()],
                "gemini_contents" => piece["parts"].as_array().cloned().unwrap_or_default(),
                _ => piece.as_array().cloned().unwrap_or_default(),
            }
        };
        pieces.iter().flat_map(items).map(|item| text(&item)).collect()
    }

    fn run(s: &mut LocalServer, loop_index: usize, ops: &[Op]) {
        let l = &LOOPS[loop_index];
        let format = l.format;
        let mut sessions = vec!["p".to_owned()];
        call(s, "session/create", json!({"session_id": "p"})).unwrap();
        for op in ops {
            let id = sessions.last().unwrap().clone();
            match op {
                Op::User => {
                    call(s, "session/add_user", json!({"session_id": id, "text": "next"}));
                }
                Op::Response(answer) => {
                    let name = if *answer && !l.answer.is_empty() && super::format_of(l.answer) == format {
                        l.answer
                    } else {
                        l.calls
                    };
                    let response = fixture(name);
                    call(s, "session/add_response", json!({"session_id": id, "format": format, "response": response}));
                }
                Op::Results => {
                    let history = call(s, "session/history", json!({"session_id": id, "repair": false})).unwrap();
                    let messages = history["messages"].as_array().unwrap();
                    if let Some(last) = messages.last().filter(|m| m["role"] == "assistant") {
                        for c in last["tool_calls"].as_array().into_iter().flatten() {
                            call(
                                s,
                                "session/add_tool_result",
                                json!({"session_id": id, "tool_call_id": c["id"], "content": "r"}),
                            );
                        }
                    }
                }
                Op::Trim(n) => {
                    call(s, "session/trim", json!({"session_id": id, "max_turns": n}));
                }
                Op::Fork => {
                    let fork = format!("f{}", sessions.len());
                    call(s, "session/fork", json!({"session_id": id, "new_session_id": fork})).unwrap();
                    sessions.push(fork);
                }
                Op::Rewind(at) => {
                    let history = call(s, "session/history", json!({"session_id": id, "repair": false})).unwrap();
                    let messages = history["messages"].as_array().unwrap();
                    if !messages.is_empty() {
                        let to = &messages[*at as usize % messages.len()]["id"];
                        call(s, "session/rewind", json!({"session_id": id, "to_message_id": to}));
                    }
                }
            }
            for id in sessions.clone() {
                check(s, &id, format);
            }
        }
    }

    fn sqlite() -> (LocalServer, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let settings = SqliteSettings {
            full_durability: false,
            busy_timeout: std::time::Duration::from_secs(5),
            follow_symlinks: false,
        };
        let store = SqliteStore::open(&dir.path().join("p.db"), settings).unwrap();
        (LocalServer::new(Arc::new(store), 1 << 24).unwrap(), dir)
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

        #[test]
        fn native_bodies_survive_every_edit(loop_index in 0..LOOPS.len(), ops in prop::collection::vec(op(), 1..24)) {
            let mut memory = LocalServer::new(Arc::new(MemoryStore::default()), 1 << 24).unwrap();
            run(&mut memory, loop_index, &ops);
            let (mut file, _dir) = sqlite();
            run(&mut file, loop_index, &ops);
        }
    }
}
