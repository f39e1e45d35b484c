//! Gemini's Interactions API (spec section 18) and tool results that carry images. The
//! Interactions loop itself (replayed byte for byte, export → import → export, usage,
//! the failed response refused) runs with every other provider's in `reasoning`; here
//! are what only this format has: built-in tool steps, a stateless response, the
//! request body a host sends, what export to it leaves out of a generateContent turn;
//! and a screenshot tool loop exported to each of the five formats.

use serde_json::{Value, json};

use crate::cli::{Db, text as utf8};
use crate::harness::Server;
use crate::reasoning::fixture;

/// A 1x1 PNG: what a screenshot tool returns, small.
const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==";

fn text(value: &Value) -> String {
    serde_json::to_string(value).unwrap()
}

fn warnings(exported: &Value) -> Vec<String> {
    exported["warnings"].as_array().unwrap().iter().map(|w| w["message"].as_str().unwrap().to_owned()).collect()
}

fn export(s: &mut Server, id: &str, format: &str) -> Value {
    s.call("session/export", json!({"session_id": id, "format": format}))
}

/// A turn with Google Search's steps: replayed as it came to this format; left out of
/// every other, with a warning naming the steps.
fn built_in_tool_steps_are_replayed_and_left_out_elsewhere(s: &mut Server) {
    s.call("session/create", json!({"session_id": "b"}));
    s.call("session/add_user", json!({"session_id": "b", "text": "Where is the Euro 2028 final?"}));
    let response = fixture("gemini_interactions_builtin_tool");
    let added = s.call(
        "session/add_response",
        json!({"session_id": "b", "format": "gemini_interactions", "response": response}),
    );
    assert_eq!(added["tool_call_ids"], json!([]), "a built-in tool's call is not the host's to answer");
    let same = export(s, "b", "gemini_interactions");
    let sent = &same["payload"]["input"].as_array().unwrap()[1..];
    assert_eq!(text(&json!(sent)), text(&response["steps"]), "the steps, in order, byte for byte");
    assert_eq!(warnings(&same), Vec::<String>::new());
    // Another model's body is built from its common form: its tool steps said left out.
    let other_model = s.call(
        "session/export",
        json!({"session_id": "b", "format": "gemini_interactions", "model": "gemini-2.5-flash"}),
    );
    assert!(warnings(&other_model).iter().any(|w| w.starts_with("built-in tool steps left out (")), "{other_model}");
    let answer = response["steps"][3]["content"][0]["text"].as_str().unwrap();
    for format in ["openai_chat", "openai_responses", "anthropic_messages", "gemini_contents"] {
        let other = export(s, "b", format);
        let provider = match format {
            "openai_chat" => "Chat Completions",
            "openai_responses" => "Responses API",
            "anthropic_messages" => "Anthropic Messages",
            _ => "Gemini",
        };
        let expected = [
            format!("reasoning left out: {provider} cannot carry it; export gemini_interactions"),
            format!(
                "built-in tool steps left out (\"google_search_call\", \"google_search_result\"): {provider} cannot \
                 carry them; export gemini_interactions"
            ),
        ];
        assert_eq!(warnings(&other), expected, "{format}");
        let payload = text(&other["payload"]);
        assert!(payload.contains(&serde_json::to_string(answer).unwrap()), "{format}: the answer's text goes");
        assert!(!payload.contains("google_search") && !payload.contains("search_suggestions"), "{format}: {payload}");
    }
}

/// A stateless response (no `id`): its `response_id` is null; the metadata keeps the
/// status as the stop reason.
fn a_stateless_response_has_no_response_id(s: &mut Server) {
    s.call("session/create", json!({"session_id": "st"}));
    s.call("session/add_user", json!({"session_id": "st", "text": "The three largest cities in Spain?"}));
    let response = fixture("gemini_interactions_stateless");
    s.call("session/add_response", json!({"session_id": "st", "format": "gemini_interactions", "response": response}));
    let history = s.call("session/history", json!({"session_id": "st"}));
    let turn = &history["messages"][1];
    assert_eq!(turn["metadata"], json!({"response_id": null, "stop_reason": "completed"}));
    assert_eq!(turn["native"]["model"], response["model"]);
    assert_eq!(turn["content"], response["steps"][1]["content"][0]["text"]);
    let usage = &response["usage"];
    let thought = usage["total_thought_tokens"].as_u64().unwrap();
    assert_eq!(
        turn["usage"],
        json!({"input_tokens": usage["total_input_tokens"], "output_tokens": usage["total_output_tokens"].as_u64().unwrap() + thought,
               "cache_read_tokens": 0, "cache_write_tokens": null, "reasoning_tokens": thought})
    );
}

/// The request body a host sends on its next turn, imported: the system instruction,
/// one native message per run of the model's steps, a tool message per result (an object
/// result as its JSON text); exported again and imported again, the same bytes.
fn a_request_body_imports_and_round_trips(s: &mut Server) {
    let body = fixture("gemini_interactions_request");
    let made = s.call("session/from_dict", json!({"format": "gemini_interactions", "session_id": "rq", "data": body}));
    assert_eq!(made["message_count"], 6);
    let history = s.call("session/history", json!({"session_id": "rq", "repair": false}));
    let m = history["messages"].as_array().unwrap();
    let roles: Vec<&str> = m.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["user", "assistant", "tool", "tool", "assistant", "user"]);
    assert_eq!(text(&m[1]["native"]["body"]), text(&Value::Array(body["input"].as_array().unwrap()[1..5].to_vec())));
    let calls: Vec<&Value> = m[1]["tool_calls"].as_array().unwrap().iter().map(|c| &c["id"]).collect();
    assert_eq!((m[2]["tool_call_id"].clone(), m[3]["tool_call_id"].clone()), (calls[0].clone(), calls[1].clone()));
    assert_eq!(m[2]["content"], json!(body["input"][5]["result"].to_string()), "an object result as its JSON text");
    assert_eq!(m[3]["content"], body["input"][6]["result"]);
    let first = export(s, "rq", "gemini_interactions");
    assert_eq!(first["payload"]["system_instruction"], body["system_instruction"]);
    let steps = |body: &Value| json!(body["input"].as_array().unwrap()[1..5]);
    assert_eq!(text(&steps(&first["payload"])), text(&steps(&body)), "the model's steps as they came");
    let data = first["payload"].clone();
    s.call("session/from_dict", json!({"format": "gemini_interactions", "session_id": "rq2", "data": data}));
    assert_eq!(text(&export(s, "rq2", "gemini_interactions")["payload"]), text(&first["payload"]));
    assert_eq!(
        s.call("session/validate", json!({"session_id": "rq", "format": "gemini_interactions"}))["violations"],
        json!([])
    );
}

/// A generateContent turn exported as steps: its text and calls go, its thought part and
/// every `thoughtSignature` are left out with the reasoning warning, never moved onto a
/// step; common-form history becomes `user_input`, `model_output`, `function_call` and
/// `function_result` steps, a history system message joins `system_instruction`.
fn a_generate_content_turn_loses_its_signatures_with_a_warning(s: &mut Server) {
    s.call("session/create", json!({"session_id": "gc", "system": "You are a travel assistant."}));
    s.call("session/add_user", json!({"session_id": "gc", "text": "Paris and London?"}));
    let response = fixture("gemini_thought_signatures");
    let added =
        s.call("session/add_response", json!({"session_id": "gc", "format": "gemini_contents", "response": response}));
    for (n, id) in added["tool_call_ids"].as_array().unwrap().iter().enumerate() {
        let content = format!("{}C", 12 + n);
        s.call("session/add_tool_result", json!({"session_id": "gc", "tool_call_id": id, "content": content}));
    }
    s.call("session/add_message", json!({"session_id": "gc", "message": {"role": "system", "content": "Be brief."}}));
    let exported = export(s, "gc", "gemini_interactions");
    let expected = json!({
        "system_instruction": "You are a travel assistant.\n\nBe brief.",
        "input": [
            {"type": "user_input", "content": [{"type": "text", "text": "Paris and London?"}]},
            {"type": "model_output", "content": [{"type": "text", "text": "I'll look up the current weather in both cities."}]},
            {"type": "function_call", "id": "call_1", "name": "get_current_weather", "arguments": {"location": "Paris, France"}},
            {"type": "function_call", "id": "call_2", "name": "get_current_weather", "arguments": {"location": "London, UK"}},
            {"type": "function_result", "call_id": "call_1", "name": "get_current_weather", "result": "12C"},
            {"type": "function_result", "call_id": "call_2", "name": "get_current_weather", "result": "13C"},
        ],
    });
    assert_eq!(exported["payload"], expected);
    assert_eq!(
        warnings(&exported),
        [
            "reasoning left out: Gemini Interactions cannot carry it; export gemini_contents",
            "a system message was moved into `system_instruction`"
        ]
    );
    assert!(!text(&exported["payload"]).contains("ignature"), "no signature moved or forged");
    let counted = s.call("session/count_tokens", json!({"session_id": "gc", "format": "gemini_interactions"}));
    assert!(counted["tokens"].as_u64().unwrap() > 0);
}

/// A screenshot tool loop: a call, and its result of text and a PNG — appended through
/// `add_tool_result` and through `add_message` — in every format where the spec puts it,
/// the base64 byte for byte; Chat Completions says it left the image out; export →
/// import → export keeps it.
fn a_screenshot_result_goes_where_each_format_carries_it(s: &mut Server) {
    for (id, through) in [("shot", "add_tool_result"), ("shot2", "add_message")] {
        s.call("session/create", json!({"session_id": id}));
        s.call("session/add_user", json!({"session_id": id, "text": "Open the page and look."}));
        let call = json!({"id": "call_s1", "name": "screenshot", "arguments": {"url": "https://example.com"}});
        s.call("session/add_assistant", json!({"session_id": id, "tool_calls": [call]}));
        if through == "add_tool_result" {
            let params =
                json!({"session_id": id, "tool_call_id": "call_s1", "content": "Captured 1x1.", "images": [PNG]});
            s.call("session/add_tool_result", params);
        } else {
            let message =
                json!({"role": "tool", "tool_call_id": "call_s1", "content": "Captured 1x1.", "images": [PNG]});
            s.call("session/add_message", json!({"session_id": id, "message": message}));
        }
        let history = s.call("session/history", json!({"session_id": id}));
        assert_eq!(history["messages"][2]["images"], json!([PNG]), "{through}: stored");

        let data_url = format!("data:image/png;base64,{PNG}");
        let results = [
            (
                "anthropic_messages",
                "/messages/2/content/0",
                json!({"type": "tool_result", "tool_use_id": "call_s1", "content": [
                    {"type": "text", "text": "Captured 1x1."},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}}]}),
            ),
            (
                "openai_responses",
                "/input/2",
                json!({"type": "function_call_output", "call_id": "call_s1", "output": [
                    {"type": "input_text", "text": "Captured 1x1."},
                    {"type": "input_image", "image_url": data_url}]}),
            ),
            (
                "gemini_contents",
                "/contents/2/parts/0",
                json!({"functionResponse": {"name": "screenshot", "response": {"content": "Captured 1x1."},
                       "parts": [{"inline_data": {"mime_type": "image/png", "data": PNG}}]}}),
            ),
            (
                "gemini_interactions",
                "/input/2",
                json!({"type": "function_result", "call_id": "call_s1", "name": "screenshot", "result": [
                    {"type": "text", "text": "Captured 1x1."},
                    {"type": "image", "data": PNG, "mime_type": "image/png"}]}),
            ),
        ];
        for (format, at, result) in results {
            let exported = export(s, id, format);
            assert_eq!(exported["payload"].pointer(at), Some(&result), "{through} to {format}");
            // By reference: a `{ref}` where the base64 was, and the body imports as well.
            let by_ref = s.call("session/export", json!({"session_id": id, "format": format, "images": "ref"}));
            assert!(!by_ref["payload"].to_string().contains(&PNG[..40]), "{format}: {}", by_ref["payload"]);
            let copy = format!("{id}-{format}-ref");
            let data = by_ref["payload"].clone();
            s.call("session/from_dict", json!({"format": format, "session_id": copy, "data": data}));
            let copied = s.call("session/history", json!({"session_id": copy}));
            assert_eq!(copied["messages"][2]["images"], json!([PNG]), "{format}: imported by reference");
            // The call convo built for Gemini carries Google's placeholder signature.
            let placeholder = "a function call of the current turn has no thought signature: Google's placeholder \
                               `skip_thought_signature_validator` was written on the first call of its message";
            let expected: Vec<&str> = if format == "gemini_contents" { vec![placeholder] } else { vec![] };
            assert_eq!(warnings(&exported), expected, "{format}");
            let v = s.call("session/validate", json!({"session_id": id, "format": format}));
            assert_eq!(v["violations"], json!([]), "{format}");
            // Export → import → export: the image stays.
            let copy = format!("{id}-{format}");
            let data = exported["payload"].clone();
            s.call("session/from_dict", json!({"format": format, "session_id": copy, "data": data}));
            let copied = s.call("session/history", json!({"session_id": copy}));
            assert_eq!(copied["messages"][2]["images"], json!([PNG]), "{format}: imported with its image");
            assert_eq!(text(&export(s, &copy, format)["payload"]), text(&exported["payload"]), "{format}");
        }
        let chat = export(s, id, "openai_chat");
        assert_eq!(
            chat["payload"]["messages"][2],
            json!({"role": "tool", "tool_call_id": "call_s1", "content": "Captured 1x1."})
        );
        assert_eq!(
            warnings(&chat),
            [
                "1 image(s) of the result of call \"call_s1\" left out: Chat Completions cannot carry an image in a tool message"
            ]
        );
    }
    // An image that is not base64 of an image is refused, as for add_user; nothing stored.
    let e = s.fail(
        "session/add_tool_result",
        json!({"session_id": "shot", "tool_call_id": "call_s1", "content": "again", "images": ["%%%"]}),
        -32602,
    );
    assert!(e["message"].as_str().unwrap().contains("images"), "{e}");
    assert_eq!(s.call("session/get", json!({"session_id": "shot"}))["message_count"], 3);
}

/// An Interactions tool loop's usage: each response's normalised on its message (output
/// counting the thought tokens), their sum on the session.
fn usage_sums_over_a_tool_loop(s: &mut Server) {
    s.call("session/create", json!({"session_id": "u"}));
    s.call("session/add_user", json!({"session_id": "u", "text": "Paris and London?"}));
    let (calls, answer) = (fixture("gemini_interactions_thought_calls"), fixture("gemini_interactions_final"));
    let added =
        s.call("session/add_response", json!({"session_id": "u", "format": "gemini_interactions", "response": calls}));
    for id in added["tool_call_ids"].as_array().unwrap() {
        s.call("session/add_tool_result", json!({"session_id": "u", "tool_call_id": id, "content": "mild"}));
    }
    s.call("session/add_response", json!({"session_id": "u", "format": "gemini_interactions", "response": answer}));
    let n = |r: &Value, k: &str| r["usage"][k].as_u64().unwrap();
    let normalised = |r: &Value| {
        json!({"input_tokens": n(r, "total_input_tokens"),
               "output_tokens": n(r, "total_output_tokens") + n(r, "total_thought_tokens"),
               "cache_read_tokens": n(r, "total_cached_tokens"), "cache_write_tokens": null,
               "reasoning_tokens": n(r, "total_thought_tokens")})
    };
    let history = s.call("session/history", json!({"session_id": "u"}));
    assert_eq!(history["messages"][1]["usage"], normalised(&calls));
    assert_eq!(history["messages"][4]["usage"], normalised(&answer));
    let sum = |k: &str| normalised(&calls)[k].as_u64().unwrap_or(0) + normalised(&answer)[k].as_u64().unwrap_or(0);
    let total = json!({"input_tokens": sum("input_tokens"), "output_tokens": sum("output_tokens"),
                       "cache_read_tokens": sum("cache_read_tokens"), "cache_write_tokens": 0,
                       "reasoning_tokens": sum("reasoning_tokens")});
    assert_eq!(s.call("session/get", json!({"session_id": "u"}))["usage"], total);
}

/// A count continued from a session's running count names the pending calls' results
/// (the repaired view's) as a full count does: counting twice gives one number.
fn a_running_count_keeps_the_names_of_pending_results(s: &mut Server) {
    for (format, name) in
        [("gemini_contents", "gemini_thought_signatures"), ("gemini_interactions", "gemini_interactions_thought_calls")]
    {
        let id = format!("rc-{format}");
        s.call("session/create", json!({"session_id": id}));
        s.call("session/add_user", json!({"session_id": id, "text": "Paris and London?"}));
        s.call("session/add_response", json!({"session_id": id, "format": format, "response": fixture(name)}));
        let count = |s: &mut Server| s.call("session/count_tokens", json!({"session_id": id, "format": format}));
        let first = count(s)["tokens"].clone();
        assert_eq!(count(s)["tokens"], first, "{format}: counted again from the running count");
        s.call("session/add_user", json!({"session_id": id, "text": "Never mind."}));
        let third = count(s)["tokens"].clone();
        let mut dict = s.call("session/to_dict", json!({"session_id": id}));
        dict["session_id"] = json!(format!("{id}-copy"));
        s.call("session/from_dict", json!({"data": dict}));
        let fresh = s.call("session/count_tokens", json!({"session_id": format!("{id}-copy"), "format": format}));
        assert_eq!(fresh["tokens"], third, "{format}: a full count of the same history");
    }
}

/// What an Interaction must be to be stored: a status that carries output, and calls
/// with their ids. Anything else is -32602 and changes nothing.
fn interactions_that_carry_no_turn_are_refused(s: &mut Server) {
    s.call("session/create", json!({"session_id": "bad"}));
    s.call("session/add_user", json!({"session_id": "bad", "text": "go"}));
    let mut running = fixture("gemini_interactions_stateless");
    running["status"] = json!("in_progress");
    let mut no_id = fixture("gemini_interactions_thought_calls");
    no_id["steps"][2].as_object_mut().unwrap().remove("id");
    let cases = [
        (running, "carries no assistant output (its status is in_progress)"),
        (fixture("gemini_interactions_failed"), "carries no assistant output (its status is failed)"),
        (no_id, "each function_call step must have a string `id`"),
        (json!({"object": "response", "status": "completed", "steps": []}), "expected an Interaction"),
    ];
    for (response, said) in cases {
        let params = json!({"session_id": "bad", "format": "gemini_interactions", "response": response});
        let e = s.fail("session/add_response", params, -32602);
        assert!(e["message"].as_str().unwrap().contains(said), "{e}");
    }
    assert_eq!(s.call("session/get", json!({"session_id": "bad"}))["revision"], 1);
}

crate::every_store!(
    a_running_count_keeps_the_names_of_pending_results,
    interactions_that_carry_no_turn_are_refused,
    usage_sums_over_a_tool_loop,
    built_in_tool_steps_are_replayed_and_left_out_elsewhere,
    a_stateless_response_has_no_response_id,
    a_request_body_imports_and_round_trips,
    a_generate_content_turn_loses_its_signatures_with_a_warning,
    a_screenshot_result_goes_where_each_format_carries_it,
);

/// The runtime's answer may be an Interaction: stored with its steps.
fn the_runtime_takes_an_interaction(s: &mut Server) {
    s.call("session/create", json!({"session_id": "h"}));
    let id = s.send_request("session/run", json!({"session_id": "h", "input": "Pack for Paris?"}));
    let host = s.host_request(id, "runtime/run");
    let response = fixture("gemini_interactions_thought_calls");
    s.answer(&host["id"], json!({"format": "gemini_interactions", "response": response}));
    let result = s.result_of(id, "session/run");
    assert_eq!(result["tool_calls"][0]["id"], "isykdkwf");
    let history = s.call("session/history", json!({"session_id": "h", "repair": false}));
    assert_eq!(text(&history["messages"][1]["native"]["body"]), text(&response["steps"]));
}

crate::both_framings!(the_runtime_takes_an_interaction);

/// `convo show --format gemini_interactions` writes the body; `convo import --format
/// gemini_interactions` reads it back.
#[test]
fn the_cli_writes_and_reads_interactions_bodies() {
    let db = Db::new();
    let shown = db.run(&["show", "rich", "--format", "gemini_interactions"]);
    assert!(shown.status.success(), "{}", utf8(&shown.stderr));
    let body: Value = serde_json::from_slice(&shown.stdout).unwrap();
    assert_eq!(body["system_instruction"], "Be exact.");
    assert_eq!(body["input"][0]["content"][1]["type"], "image");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("body.json");
    std::fs::write(&file, &shown.stdout).unwrap();
    let file = file.to_str().unwrap();
    let imported = db.run(&["import", "--format", "gemini_interactions", "--session-id", "again", file]);
    assert!(imported.status.success(), "{}", utf8(&imported.stderr));
    let again = db.run(&["show", "again", "--format", "gemini_interactions"]);
    assert_eq!(utf8(&again.stdout), utf8(&shown.stdout));
}
