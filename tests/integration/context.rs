//! Context management (spec section 17) through the real binary on every store: provider
//! compaction points, `usage.iterations`, context editing, `fit` and cache breakpoints.
//! The provider objects are tests/fixtures/providers/*.json, written from the SDK types
//! (anthropic-sdk-python `BetaCompactionBlock`, `BetaUsage.iterations`; openai-python
//! `ResponseCompactionItem`, `CompactedResponse`).

use serde_json::{Value, json};

use crate::harness::Server;
use crate::reasoning::fixture;

const ANTHROPIC: &str = "anthropic_messages";
const RESPONSES: &str = "openai_responses";

fn user(s: &mut Server, id: &str, text: &str) {
    s.call("session/add_user", json!({"session_id": id, "text": text}));
}

fn assistant(s: &mut Server, id: &str, text: &str) {
    s.call("session/add_assistant", json!({"session_id": id, "text": text}));
}

fn respond(s: &mut Server, id: &str, format: &str, name: &str) -> Value {
    s.call("session/add_response", json!({"session_id": id, "format": format, "response": fixture(name)}))
}

fn warnings(exported: &Value) -> Vec<String> {
    exported["warnings"].as_array().unwrap().iter().map(|w| w["message"].as_str().unwrap().to_owned()).collect()
}

fn tokens(s: &mut Server, params: Value) -> u64 {
    s.call("session/count_tokens", params)["tokens"].as_u64().unwrap()
}

/// Two turns of plain talk, then a response that compacted them (history index 4).
fn compacted(s: &mut Server, id: &str, response: &str) {
    s.call("session/create", json!({"session_id": id, "system": "You are a travel assistant."}));
    user(s, id, "What should I pack for Paris and London?");
    assistant(s, id, "A rain jacket, a warm layer and shoes for wet streets.");
    user(s, id, "And how do I get from one to the other?");
    assistant(s, id, "The Eurostar, from Gare du Nord to St Pancras.");
    user(s, id, "How long does it take?");
    respond(s, id, ANTHROPIC, response);
}

fn usage_is_summed_over_iterations(s: &mut Server) {
    compacted(s, "u", "anthropic_compaction_iterations");
    let info = s.call("session/get", json!({"session_id": "u"}));
    assert_eq!(info["usage"]["input_tokens"], 203_000, "180,000 compacted and 23,000 answered");
    assert_eq!(info["usage"]["output_tokens"], 4_500);
    let history = s.call("session/history", json!({"session_id": "u"}));
    let last = &history["messages"][5];
    assert_eq!(last["usage"]["input_tokens"], 203_000);
    assert_eq!(last["content"], fixture("anthropic_compaction_iterations")["content"][1]["text"]);
}

fn export_starts_at_the_latest_compaction_point(s: &mut Server) {
    compacted(s, "c", "anthropic_compaction_iterations");
    let body = fixture("anthropic_compaction_iterations")["content"].clone();
    let exported = s.call("session/export", json!({"session_id": "c", "format": ANTHROPIC}));
    assert_eq!(exported["context"], json!({"from_index": 5}));
    let messages = exported["payload"]["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 2, "the placeholder user turn, then the compaction's turn");
    assert_eq!(messages[0]["role"], "user");
    assert_eq!(messages[1], json!({"role": "assistant", "content": body}), "replayed verbatim");
    assert_eq!(exported["payload"]["system"], "You are a travel assistant.");

    // Counted as sent: the turns before the point are not.
    let sent = tokens(s, json!({"session_id": "c", "format": ANTHROPIC}));
    let whole = tokens(s, json!({"session_id": "c", "format": ANTHROPIC, "compaction": "ignore"}));
    assert!(sent + 40 < whole, "{sent} against {whole}");
    let all = s.call("session/export", json!({"session_id": "c", "format": ANTHROPIC, "compaction": "ignore"}));
    assert!(all.get("context").is_none());
    assert_eq!(all["payload"]["messages"].as_array().unwrap().len(), 6);

    // Another format cannot read it: the history before it, and a warning.
    let chat = s.call("session/export", json!({"session_id": "c", "format": "openai_chat"}));
    assert!(chat.get("context").is_none());
    assert_eq!(chat["payload"]["messages"].as_array().unwrap().len(), 7, "system and all six");
    assert!(warnings(&chat).contains(
        &"compaction left out: Chat Completions cannot read anthropic_messages's compaction; the history before it is sent instead".to_owned()
    ));
    // The stored history keeps everything.
    assert_eq!(s.call("session/history", json!({"session_id": "c"}))["messages"].as_array().unwrap().len(), 6);
    let dict = s.call("session/to_dict", json!({"session_id": "c"}));
    assert_eq!(dict["messages"][5]["native"]["body"], body);
}

fn a_failed_compaction_is_replayed_but_is_no_point(s: &mut Server) {
    compacted(s, "f", "anthropic_compaction_failed");
    let exported = s.call("session/export", json!({"session_id": "f", "format": ANTHROPIC}));
    assert!(exported.get("context").is_none());
    let messages = exported["payload"]["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 6);
    assert_eq!(messages[5]["content"][0], json!({"type": "compaction", "content": null}));
    let chat = s.call("session/export", json!({"session_id": "f", "format": "openai_chat"}));
    assert!(!warnings(&chat).iter().any(|w| w.starts_with("compaction left out")), "nothing was left out");
}

fn a_paused_compaction_is_a_turn_and_a_point(s: &mut Server) {
    compacted(s, "p", "anthropic_pause_after_compaction");
    let history = s.call("session/history", json!({"session_id": "p"}));
    let paused = &history["messages"][5];
    assert_eq!(paused["content"], Value::Null);
    assert_eq!(paused["metadata"]["stop_reason"], "compaction");
    assert_eq!(paused["usage"]["input_tokens"], 150_000);
    // The host continues the turn after the pause.
    assistant(s, "p", "About 2 h 16 min.");
    let exported = s.call("session/export", json!({"session_id": "p", "format": ANTHROPIC}));
    assert_eq!(exported["context"], json!({"from_index": 5}));
    let messages = exported["payload"]["messages"].as_array().unwrap();
    let content = &messages[1]["content"];
    assert_eq!(content[0]["type"], "compaction");
    assert_eq!(content.as_array().unwrap().last().unwrap()["text"], "About 2 h 16 min.", "merged into one turn");
}

fn a_compaction_mid_tool_loop(s: &mut Server) {
    compacted(s, "t", "anthropic_compaction_tool_use");
    let added = s.call("session/history", json!({"session_id": "t"}))["messages"][5]["tool_calls"].clone();
    let call = added[0]["id"].as_str().unwrap().to_owned();
    s.call(
        "session/add_tool_result",
        json!({"session_id": "t", "tool_call_id": call, "content": "08:01, 09:01, 10:01"}),
    );
    let exported = s.call("session/export", json!({"session_id": "t", "format": ANTHROPIC, "thinking": true}));
    let messages = exported["payload"]["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 3, "placeholder, the compacting turn with its call, the result");
    assert_eq!(messages[2]["content"][0]["tool_use_id"], call.as_str());
    assert_eq!(
        s.call("session/count_tokens", json!({"session_id": "t", "format": ANTHROPIC}))["context"]["from_index"],
        5
    );
    // A fork taken before the compaction has none of it; one taken after keeps the point.
    let before = s.call("session/history", json!({"session_id": "t"}))["messages"][4]["id"].clone();
    s.call("session/fork", json!({"session_id": "t", "new_session_id": "early", "at_message_id": before}));
    let early = s.call("session/export", json!({"session_id": "early", "format": ANTHROPIC}));
    assert!(early.get("context").is_none());
    assert_eq!(early["payload"]["messages"].as_array().unwrap().len(), 5);
    s.call("session/fork", json!({"session_id": "t", "new_session_id": "late"}));
    let late = s.call("session/export", json!({"session_id": "late", "format": ANTHROPIC}));
    assert_eq!(late["context"], json!({"from_index": 5}));
}

fn responses_compaction_items_and_the_compact_endpoint(s: &mut Server) {
    s.call("session/create", json!({"session_id": "r"}));
    user(s, "r", "What should I pack for Paris and London?");
    assistant(s, "r", "A rain jacket.");
    user(s, "r", "And how do I get from one to the other?");
    let compacted = fixture("openai_responses_compacted");
    respond(s, "r", RESPONSES, "openai_responses_compacted");
    let history = s.call("session/history", json!({"session_id": "r"}));
    let stored = &history["messages"][3];
    assert_eq!(stored["role"], "assistant");
    assert_eq!(stored["content"], Value::Null, "the compact endpoint's result has no common form");
    assert_eq!(stored["usage"]["input_tokens"], 42_000);
    assert_eq!(stored["metadata"]["response_id"], compacted["id"]);
    let exported = s.call("session/export", json!({"session_id": "r", "format": RESPONSES}));
    assert_eq!(exported["context"], json!({"from_index": 3}));
    assert_eq!(exported["payload"]["input"], compacted["output"], "sent back as is");

    user(s, "r", "How long does it take?");
    respond(s, "r", RESPONSES, "openai_responses_compaction_item");
    let exported = s.call("session/export", json!({"session_id": "r", "format": RESPONSES}));
    assert_eq!(exported["context"], json!({"from_index": 5}), "the latest point wins");
    assert_eq!(exported["payload"]["input"], fixture("openai_responses_compaction_item")["output"]);
    let gemini = s.call("session/export", json!({"session_id": "r", "format": "gemini_contents"}));
    let left_out: Vec<String> =
        warnings(&gemini).into_iter().filter(|w| w.starts_with("compaction left out")).collect();
    assert_eq!(left_out.len(), 2, "{left_out:?}");
    assert_eq!(
        left_out[0],
        "compaction left out: Gemini cannot read openai_responses's compaction; the history before it is sent instead"
    );
}

/// A tool loop of `steps` steps, each with one call whose result is `size` words, and
/// reasoning on every answer.
fn tool_loop(s: &mut Server, id: &str, steps: usize, size: usize) {
    s.call("session/create", json!({"session_id": id, "system": "You are a coding agent."}));
    for step in 0..steps {
        user(s, id, &format!("Step {step}: read the next file."));
        let call = format!("call_{step}");
        let body = json!([
            {"type": "thinking", "thinking": format!("I will read file {step} to see what it holds."), "signature": "c2ln"},
            {"type": "tool_use", "id": call, "name": if step == 0 { "memory" } else { "read" }, "input": {"n": step}},
        ]);
        s.call(
            "session/add_message",
            json!({"session_id": id, "message": {"role": "assistant", "content": null,
            "native": {"format": ANTHROPIC, "model": "claude-opus-4-6", "body": body}}}),
        );
        let text = vec![format!("line{step}"); size].join(" ");
        s.call("session/add_tool_result", json!({"session_id": id, "tool_call_id": call, "content": text}));
        assistant(s, id, &format!("File {step} read."));
    }
}

fn editing_clears_on_the_way_out_only(s: &mut Server) {
    tool_loop(s, "e", 5, 200);
    let stored = s.call("session/to_dict", json!({"session_id": "e"}));
    let plain = tokens(s, json!({"session_id": "e", "format": ANTHROPIC}));
    let params = json!({"session_id": "e", "format": ANTHROPIC,
        "clear_tool_results": {"keep": 1, "exclude_tools": ["memory"]}, "clear_thinking": {"keep": 2}});
    let exported = s.call("session/export", params.clone());
    let edits = &exported["edits"];
    assert_eq!(edits["cleared_tool_results"], 3, "steps 1, 2, 3: step 0's tool is excluded, step 4 kept");
    assert_eq!(edits["cleared_thinking_turns"], 3);
    let counted = s.call("session/count_tokens", params);
    assert_eq!(counted["edits"], *edits);
    assert_eq!(counted["tokens"].as_u64().unwrap(), plain - edits["cleared_tokens"].as_u64().unwrap());
    let results: Vec<Value> = exported["payload"]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["content"].as_array().unwrap().clone())
        .filter(|b| b["type"] == "tool_result")
        .map(|b| b["content"].clone())
        .collect();
    assert_eq!(results[1], "[tool result cleared to save context]");
    assert_eq!(results[3], "[tool result cleared to save context]");
    assert!(results[0].as_str().unwrap().starts_with("line0"), "excluded");
    assert!(results[4].as_str().unwrap().starts_with("line4"), "kept");
    let thinking = exported["payload"]["messages"].to_string().matches("\"thinking\",").count();
    assert_eq!(thinking, 2);
    assert!(s.call("session/validate", json!({"session_id": "e", "format": ANTHROPIC}))["violations"] == json!([]));
    assert_eq!(s.call("session/to_dict", json!({"session_id": "e"})), stored, "the stored history is untouched");
    let plain_export = s.call("session/export", json!({"session_id": "e", "format": ANTHROPIC}));
    assert!(plain_export.get("edits").is_none() && plain_export.get("fit").is_none());
}

fn fit_leaves_out_in_order_and_never_the_last_turns(s: &mut Server) {
    tool_loop(s, "fit", 8, 300);
    let before = tokens(s, json!({"session_id": "fit", "format": ANTHROPIC}));
    // A budget met by clearing results alone.
    let exported = s
        .call("session/export", json!({"session_id": "fit", "format": ANTHROPIC, "fit": {"max_tokens": before - 500}}));
    let fit = &exported["fit"];
    assert_eq!(fit["tokens_before"], before);
    assert_eq!(fit["cleared_tool_results"], 1, "one result of ~600 tokens is enough");
    assert_eq!(fit["cleared_thinking_turns"], 0);
    assert_eq!(fit["turns_left_out"], 0);
    assert!(fit["tokens"].as_u64().unwrap() <= before - 500);
    // A budget that needs whole turns left out.
    let params = json!({"session_id": "fit", "format": ANTHROPIC, "fit": {"max_tokens": 1500, "keep_turns": 2}});
    let exported = s.call("session/export", params.clone());
    let fit = exported["fit"].clone();
    assert_eq!(fit["cleared_tool_results"], 6, "every result but the last two turns'");
    assert_eq!(fit["cleared_thinking_turns"], 6);
    assert!(fit["turns_left_out"].as_u64().unwrap() >= 1);
    let fitted = fit["tokens"].as_u64().unwrap();
    // A turn here is under 150 tokens once cleared: one more would not have fitted.
    assert!((1350..=1500).contains(&fitted), "stops as soon as it fits: {fit}");
    let counted = s.call("session/count_tokens", params.clone());
    assert_eq!(counted["tokens"], fit["tokens"], "count_tokens previews what export sends");
    assert_eq!(s.call("session/export", params)["payload"], exported["payload"], "the same input, the same body");
    let messages = exported["payload"]["messages"].as_array().unwrap();
    assert_eq!(messages.last().unwrap()["content"][0]["text"], "File 7 read.");
    assert!(messages[0]["content"][0]["text"].as_str().unwrap().starts_with("Step"), "starts at a whole turn");
    assert!(s.call("session/validate", json!({"session_id": "fit", "format": ANTHROPIC}))["violations"] == json!([]));
    // Too small for the last turns: 1005 with the sizes, nothing exported.
    let error = s.fail(
        "session/export",
        json!({"session_id": "fit", "format": "openai_chat", "fit": {"max_tokens": 100}}),
        1005,
    );
    assert_eq!(error["data"]["kind"], "too_large");
    assert_eq!(error["data"]["max_tokens"], 100);
    assert!(error["data"]["tokens"].as_u64().unwrap() > 100);
    s.fail(
        "session/export",
        json!({"session_id": "fit", "format": ANTHROPIC, "fit": {"max_tokens": 100, "keep_turns": 0}}),
        -32602,
    );
    assert_eq!(s.call("session/get", json!({"session_id": "fit"}))["message_count"], 32, "nothing stored changed");
}

/// `fit` made from the history's end gives what it gives made from the whole history
/// (which `clear_thinking` with nothing to clear makes convo take).
fn same_fit_both_ways(s: &mut Server, params: Value) {
    let from_end = s.call("session/export", params.clone());
    let mut whole = params.clone();
    whole["clear_thinking"] = json!({"keep": 1_000_000});
    let whole = s.call("session/export", whole);
    assert_eq!(from_end["payload"], whole["payload"], "{params}");
    assert_eq!(from_end["fit"], whole["fit"], "{params}");
    assert_eq!(from_end["warnings"], whole["warnings"], "{params}");
    let counted = s.call("session/count_tokens", params.clone());
    assert_eq!(counted["fit"], whole["fit"], "{params}");
}

fn fit_from_the_end_is_fit_of_the_whole(s: &mut Server) {
    // Long enough that the end is read in several pages.
    long_session(s, "long", 2_500, 2);
    s.call("session/count_tokens", json!({"session_id": "long", "format": ANTHROPIC}));
    for (format, max) in [(ANTHROPIC, 60_000), ("openai_chat", 30_000), (RESPONSES, 500), ("gemini_contents", 60_000)] {
        same_fit_both_ways(s, json!({"session_id": "long", "format": format, "fit": {"max_tokens": max}}));
    }
    same_fit_both_ways(
        s,
        json!({"session_id": "long", "format": ANTHROPIC, "fit": {"max_tokens": 5_000, "keep_turns": 3}, "cache": true}),
    );
    // Results worth clearing, reasoning, a summary at the start, dangling calls.
    tool_loop(s, "mixed", 12, 100);
    same_fit_both_ways(s, json!({"session_id": "mixed", "format": ANTHROPIC, "fit": {"max_tokens": 600}}));
    s.call("session/compact", json!({"session_id": "mixed", "keep_turns": 10, "summary": "Steps 0 and 1 read files."}));
    same_fit_both_ways(s, json!({"session_id": "mixed", "format": ANTHROPIC, "fit": {"max_tokens": 600}}));
    user(s, "mixed", "One more.");
    s.call(
        "session/add_assistant",
        json!({"session_id": "mixed", "tool_calls": [{"id": "open", "name": "read", "arguments": {}}]}),
    );
    same_fit_both_ways(s, json!({"session_id": "mixed", "format": ANTHROPIC, "fit": {"max_tokens": 600}}));
    same_fit_both_ways(
        s,
        json!({"session_id": "mixed", "format": "openai_chat", "fit": {"max_tokens": 400, "keep_turns": 2}}),
    );
    let error =
        s.fail("session/export", json!({"session_id": "long", "format": ANTHROPIC, "fit": {"max_tokens": 10}}), 1005);
    assert_eq!(error["data"]["max_tokens"], 10);
}

fn cache_breakpoints_and_keys(s: &mut Server) {
    tool_loop(s, "k", 3, 5);
    user(s, "k", "Now the last one.");
    let cache = json!({"ttl": "5m", "system_ttl": "1h"});
    let exported = s.call("session/export", json!({"session_id": "k", "format": ANTHROPIC, "cache": cache}));
    let payload = &exported["payload"];
    assert_eq!(payload["system"][0]["cache_control"], json!({"type": "ephemeral", "ttl": "1h"}));
    let marked: Vec<(usize, Value)> = payload["messages"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
        .flat_map(|(i, m)| {
            m["content"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|b| b.get("cache_control").is_some())
                .map(move |b| (i, b.clone()))
        })
        .collect();
    assert_eq!(marked.len(), 2, "{marked:?}");
    let last = payload["messages"].as_array().unwrap().len() - 1;
    assert_eq!(marked[1].0, last, "the body's end");
    assert_eq!(marked[0].0, last - 2, "the end of the request before the latest answer");
    assert!(
        s.call("session/validate", json!({"session_id": "k", "format": ANTHROPIC, "cache": cache}))["violations"]
            == json!([])
    );
    let chat = s.call("session/export", json!({"session_id": "k", "format": "openai_chat", "cache": true}));
    assert_eq!(chat["payload"]["prompt_cache_key"], "k");
    let responses = s.call(
        "session/export",
        json!({"session_id": "k", "format": RESPONSES, "cache": {"key": "agent-7", "retention": "24h"}}),
    );
    assert_eq!(responses["payload"]["prompt_cache_key"], "agent-7");
    assert_eq!(responses["payload"]["prompt_cache_retention"], "24h");
    let gemini = s.call("session/export", json!({"session_id": "k", "format": "gemini_contents", "cache": true}));
    assert!(warnings(&gemini).contains(&"cache adds nothing: Gemini caches implicitly".to_owned()));
    s.fail(
        "session/export",
        json!({"session_id": "k", "format": ANTHROPIC, "cache": {"ttl": "1h", "system_ttl": "5m"}}),
        -32602,
    );
    s.fail("session/export", json!({"session_id": "k", "format": ANTHROPIC, "cache": "yes"}), -32602);
    // A history whose own parts are marked: validate says what Anthropic would.
    let marked = |text: &str, ttl: &str| json!({"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": text}, "cache_control": {"type": "ephemeral", "ttl": ttl}});
    s.call("session/create", json!({"session_id": "hand"}));
    s.call("session/add_message", json!({"session_id": "hand", "message": {"role": "user", "content": [marked("a", "5m"), marked("b", "1h"), marked("c", "5m"), marked("d", "5m"), marked("e", "5m")]}}));
    let violations =
        s.call("session/validate", json!({"session_id": "hand", "format": ANTHROPIC}))["violations"].clone();
    let rules: Vec<&str> = violations.as_array().unwrap().iter().map(|v| v["rule"].as_str().unwrap()).collect();
    assert_eq!(rules, ["cache_breakpoints", "cache_ttl_order"]);
    assert_eq!(violations[0]["provider_error"], "A maximum of 4 blocks with cache_control may be provided. Found 5.");
}

/// A session of `turns` turns, each a question, a call, a result of `words` words and an
/// answer.
fn long_session(s: &mut Server, id: &str, turns: usize, words: usize) {
    s.call("session/create", json!({"session_id": id, "system": "You summarise coding sessions."}));
    for batch in 0..turns.div_ceil(10) {
        let messages: Vec<Value> = (batch * 10..((batch + 1) * 10).min(turns))
            .flat_map(|t| {
                let call = format!("call_{t}");
                [
                    json!({"role": "user", "content": format!("Step {t}: what is in file {t}?")}),
                    json!({"role": "assistant", "content": null, "tool_calls": [{"id": call, "name": "read", "arguments": {"n": t}}]}),
                    json!({"role": "tool", "tool_call_id": call, "content": format!("file{t} ").repeat(words)}),
                    json!({"role": "assistant", "content": format!("File {t} holds words.")}),
                ]
            })
            .collect();
        s.call("session/add_messages", json!({"session_id": id, "messages": messages}));
    }
}

/// What a summary request holds, counted as convo counts it (the runtime has no format:
/// Chat Completions).
fn request_tokens(params: &Value) -> usize {
    use convo::session::export::{Format, export};
    let messages: Vec<convo::session::Message> = serde_json::from_value(params["messages"].clone()).unwrap();
    let body = export(Format::OpenaiChat, params["system"].as_str(), &messages, true);
    convo::session::tokens::count_payload(&body.payload)
}

fn compaction_in_parts_never_sends_more_than_the_budget(s: &mut Server) {
    long_session(s, "big", 150, 1000);
    let before = tokens(s, json!({"session_id": "big"}));
    assert!(before > 300_000, "{before}");
    let params = json!({"session_id": "big", "keep_turns": 1, "summarize": true, "max_input_tokens": 50_000});
    let id = s.send_request("session/compact", params);
    let mut parts: Vec<Value> = Vec::new();
    loop {
        let host = s.host_request(id, "runtime/run");
        let asked = &host["params"];
        assert_eq!(asked["purpose"], "summarize");
        let sent = request_tokens(asked);
        assert!(sent <= 50_000, "request {} holds {sent} tokens", parts.len());
        let part = asked["part"].clone();
        let index = part["index"].as_u64().unwrap() as usize;
        assert_eq!(index, parts.len());
        if part["merge"] == true {
            let merged: Vec<Value> =
                asked["messages"].as_array().unwrap().iter().map(|m| m["content"].clone()).collect();
            let wanted: Vec<Value> = (0..index).map(|k| json!(format!("summary of part {k}"))).collect();
            assert_eq!(merged, wanted, "the merge gets every part's summary, in order");
            assert_eq!(part["count"], index);
            s.answer(&host["id"], json!({"text": "the merged summary"}));
            break;
        }
        if index > 0 {
            assert_eq!(
                asked["messages"][0]["content"],
                format!("summary of part {}", index - 1),
                "the summary before, first"
            );
        }
        s.answer(&host["id"], json!({"text": format!("summary of part {index}")}));
        parts.push(part);
    }
    assert!(parts.len() >= 7, "300,000 tokens in parts of at most 50,000: {}", parts.len());
    assert!(parts.iter().all(|p| p["count"] == parts.len()), "{parts:?}");
    let done = s.result_of(id, "session/compact");
    assert_eq!(done["removed"], 149 * 4);
    let history = s.call("session/history", json!({"session_id": "big"}));
    assert_eq!(history["messages"][0]["content"], "the merged summary");
    assert_eq!(history["messages"].as_array().unwrap().len(), 5);

    // A turn too large alone goes with its results cleared; a message too large even so
    // cannot be summarised within the budget: 1005, and nothing changes.
    long_session(s, "one", 3, 30_000);
    let id = s.send_request(
        "session/compact",
        json!({"session_id": "one", "keep_turns": 1, "summarize": true, "max_input_tokens": 20_000}),
    );
    let host = s.host_request(id, "runtime/run");
    assert!(request_tokens(&host["params"]) <= 20_000);
    assert_eq!(host["params"]["messages"][2]["content"], "[tool result cleared to save context]");
    s.answer(&host["id"], json!({"text": "first"}));
    let host = s.host_request(id, "runtime/run");
    s.answer(&host["id"], json!({"text": "second"}));
    let host = s.host_request(id, "runtime/run");
    assert_eq!(host["params"]["part"], json!({"index": 2, "count": 2, "merge": true}));
    s.answer(&host["id"], json!({"text": "both"}));
    assert_eq!(s.result_of(id, "session/compact")["removed"], 8);
    s.call("session/create", json!({"session_id": "huge"}));
    s.call("session/add_user", json!({"session_id": "huge", "text": "word ".repeat(30_000)}));
    s.call("session/add_assistant", json!({"session_id": "huge", "text": "ok"}));
    s.call("session/add_user", json!({"session_id": "huge", "text": "next"}));
    let error = s.fail(
        "session/compact",
        json!({"session_id": "huge", "keep_turns": 1, "summarize": true, "max_input_tokens": 20_000}),
        1005,
    );
    assert_eq!(error["data"]["max_tokens"], 20_000);
    assert_eq!(s.call("session/get", json!({"session_id": "huge"}))["message_count"], 3);
}

/// Counts on from a session's running count equal counting it whole (a budget too large
/// to change anything makes convo count the whole body), whatever happened since.
fn a_running_count_is_the_count_of_the_whole(s: &mut Server) {
    let check = |s: &mut Server, when: &str| {
        for format in ["openai_chat", RESPONSES, ANTHROPIC, "gemini_contents"] {
            let running = s.call("session/count_tokens", json!({"session_id": "run", "format": format}));
            let whole = s.call(
                "session/count_tokens",
                json!({"session_id": "run", "format": format, "fit": {"max_tokens": 1_000_000_000}}),
            );
            assert_eq!(running["tokens"], whole["tokens"], "{format}, {when}");
            assert_eq!(running["context"], whole["context"], "{format}, {when}");
        }
    };
    s.call("session/create", json!({"session_id": "run", "system": "sys"}));
    check(s, "empty");
    user(s, "run", "What should I pack?");
    check(s, "a user message");
    let added = respond(s, "run", ANTHROPIC, "anthropic_thinking_tool_use");
    check(s, "calls, unanswered");
    for id in added["tool_call_ids"].as_array().unwrap() {
        s.call("session/add_tool_result", json!({"session_id": "run", "tool_call_id": id, "content": "12 °C"}));
        check(s, "a result");
    }
    respond(s, "run", ANTHROPIC, "anthropic_final_answer");
    check(s, "the answer");
    s.call("session/pop", json!({"session_id": "run"}));
    check(s, "popped");
    assistant(s, "run", "Pack a coat.");
    check(s, "another answer where the popped one was");
    s.call("session/add_message", json!({"session_id": "run", "message": {"role": "system", "content": "Be brief."}}));
    check(s, "a system message");
    s.call("session/update", json!({"session_id": "run", "system": "A new system prompt."}));
    check(s, "a new system prompt");
    user(s, "run", "And the train?");
    respond(s, "run", ANTHROPIC, "anthropic_compaction_iterations");
    check(s, "a compaction point");
    user(s, "run", "Thanks.");
    check(s, "after the compaction point");
    s.call("session/trim", json!({"session_id": "run", "max_turns": 1}));
    check(s, "trimmed");
    let first = s.call("session/history", json!({"session_id": "run"}))["messages"][0]["id"].clone();
    s.call("session/rewind", json!({"session_id": "run", "to_message_id": first}));
    check(s, "rewound");
    user(s, "run", "Again.");
    assistant(s, "run", "Sure.");
    check(s, "two more");
    // Imported over, every message keeping its id and time stamp, an earlier one changed.
    let mut dict = s.call("session/to_dict", json!({"session_id": "run"}));
    dict["messages"][0]["content"] =
        json!("A much longer first message than the one counted before it was imported over.");
    s.call("session/from_dict", json!({"data": dict, "replace": true}));
    check(s, "imported over, its last message the same");
}

crate::every_store!(
    usage_is_summed_over_iterations,
    export_starts_at_the_latest_compaction_point,
    a_failed_compaction_is_replayed_but_is_no_point,
    a_paused_compaction_is_a_turn_and_a_point,
    a_compaction_mid_tool_loop,
    responses_compaction_items_and_the_compact_endpoint,
    editing_clears_on_the_way_out_only,
    fit_leaves_out_in_order_and_never_the_last_turns,
    cache_breakpoints_and_keys,
    a_running_count_is_the_count_of_the_whole,
    fit_from_the_end_is_fit_of_the_whole,
);

crate::both_framings!(compaction_in_parts_never_sends_more_than_the_budget);
