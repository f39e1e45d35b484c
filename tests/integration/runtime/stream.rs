//! `session/stream`: deltas make a draft, the final answer is what is stored, and a
//! stream that ends early (host error, cancel, crash) keeps what was said.

use std::time::{Duration, Instant};

use crate::harness::{Framing, Server, Value, json};

use super::{ask, assert_runtime_failed, plus, revision, said, session_with_history, stored};

/// Sends the host's `runtime/delta` with a piece of text.
fn delta(s: &mut Server, stream_id: &Value, text: &str) {
    s.notify("runtime/delta", json!({"stream_id": stream_id, "text": text}));
}

/// `session/history` with `include_draft: true`.
fn with_draft(s: &mut Server, id: &str) -> Value {
    s.call("session/history", json!({"session_id": id, "repair": false, "include_draft": true}))
}

/// The draft once its partial assistant text is `text` (drafts are saved at least every
/// 250 ms); fails after 30 s, a deadline for a busy machine, not a measurement.
fn draft_saying(s: &mut Server, id: &str, text: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let draft = with_draft(s, id)["draft"].clone();
        if draft["messages"][1]["content"] == text {
            return draft;
        }
        assert!(Instant::now() < deadline, "the draft never said {text:?}: {draft}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn assert_no_draft(s: &mut Server, id: &str) {
    assert_eq!(with_draft(s, id).get("draft"), Some(&Value::Null), "no draft left");
}

/// The stream id of a `runtime/stream` request.
fn stream_id(host: &Value) -> Value {
    let id = &host["params"]["stream_id"];
    assert!(id.as_str().is_some_and(|id| !id.is_empty()), "{host}");
    id.clone()
}

/// Issue 10: convo sends `runtime/stream` (the params of `runtime/run` plus `stream_id`);
/// the deltas are not stored, the final answer is, and the result is that of a run.
fn a_stream_stores_the_final_answer_not_the_deltas(s: &mut Server) {
    let before = session_with_history(s, "s");
    let (id, host) = ask(s, "session/stream", json!({"session_id": "s", "input": "Tell a story", "temperature": 0}));
    assert_eq!(host["id"], "convo:1");
    let p = &host["params"];
    assert_eq!((&p["session_id"], &p["purpose"], &p["system"]), (&json!("s"), &json!("run"), &json!("Be brief.")));
    assert_eq!((&p["temperature"], &p["max_tokens"]), (&json!(0), &Value::Null));
    assert_eq!(said(p["messages"].as_array().unwrap()), plus(&before, json!([["user", "Tell a story"]])));
    let sid = stream_id(&host);
    delta(s, &sid, "Once ");
    delta(s, &sid, "upon");

    let usage = json!({"output_tokens": 5});
    s.answer(&host["id"], json!({"text": "Once upon a time.", "usage": usage, "model": "m-2"}));
    let result = s.result_of(id, "session/stream");
    let after = stored(s, "s");
    assert_eq!(said(&after), plus(&before, json!([["user", "Tell a story"], ["assistant", "Once upon a time."]])));
    assert_eq!(after[3]["metadata"], json!({"usage": usage, "model": "m-2"}));
    assert_eq!(
        result,
        json!({"text": "Once upon a time.", "tool_calls": null, "usage": usage,
               "message_ids": [after[2]["id"], after[3]["id"]], "revision": 3})
    );
    assert_no_draft(s, "s");
}

/// Issue 10: while the host streams, `session/history` with `include_draft: true` shows
/// the user message and the text so far as a top-level draft, never inside `messages`.
fn a_stream_in_progress_is_a_draft(s: &mut Server) {
    let before = session_with_history(s, "d");
    assert_no_draft(s, "d");
    let (id, host) = ask(s, "session/stream", json!({"session_id": "d", "input": "Count to three"}));
    let sid = stream_id(&host);
    delta(s, &sid, "one, ");
    delta(s, &sid, "two");

    let draft = draft_saying(s, "d", "one, two");
    assert_eq!(draft["stream_id"], sid);
    let partial = draft["messages"].as_array().unwrap();
    assert_eq!(said(partial), [json!(["user", "Count to three"]), json!(["assistant", "one, two"])]);
    let h = with_draft(s, "d");
    assert_eq!((&h["messages"], &h["revision"]), (&json!(before), &json!(2)), "a draft is not a message");
    let plain = s.call("session/history", json!({"session_id": "d", "repair": false}));
    assert!(plain.get("draft").is_none_or(Value::is_null), "no draft unless asked: {plain}");

    delta(s, &sid, ", three");
    s.answer(&host["id"], json!({"text": "One, two, three."}));
    s.result_of(id, "session/stream");
    assert_eq!(
        said(&stored(s, "d")[2..]),
        [json!(["user", "Count to three"]), json!(["assistant", "One, two, three."])]
    );
    assert_no_draft(s, "d");
}

/// Issue 10: a host error mid-stream is 1008 `reason: "error"`, and the draft is kept as
/// messages: the user message, and the partial text (when there is any) marked
/// `{"partial": true, "reason": "error"}`.
fn a_host_error_mid_stream_keeps_the_draft(s: &mut Server) {
    let before = session_with_history(s, "e");
    let (id, host) = ask(s, "session/stream", json!({"session_id": "e", "input": "Explain"}));
    delta(s, &stream_id(&host), "It is because");
    let error = json!({"code": -32000, "message": "provider overloaded"});
    s.answer_error(&host["id"], error.clone());
    let e = s.error_of(id, "session/stream", 1008);
    assert_runtime_failed(&e, "error");
    assert_eq!(e["data"]["error"], error);
    let after = stored(s, "e");
    assert_eq!(said(&after), plus(&before, json!([["user", "Explain"], ["assistant", "It is because"]])));
    assert_eq!(after[3]["metadata"], json!({"partial": true, "reason": "error"}));
    assert_eq!(revision(s, "e"), 3);
    assert_no_draft(s, "e");

    // Nothing said yet: only the user message is kept.
    let (id, host) = ask(s, "session/stream", json!({"session_id": "e", "input": "Again"}));
    s.answer_error(&host["id"], error);
    assert_runtime_failed(&s.error_of(id, "session/stream", 1008), "error");
    assert_eq!(said(&stored(s, "e")[4..]), [json!(["user", "Again"])]);
    assert_eq!(revision(s, "e"), 4);
}

/// Issue 10: `$/cancelRequest` on the `session/stream` request ends it with -32800 and
/// `data.message_ids` of what was kept (the partial text marked `"reason": "cancelled"`);
/// convo tells the host to stop, and its late answer is ignored.
fn a_cancelled_stream_keeps_what_was_said(s: &mut Server) {
    let before = session_with_history(s, "x");
    let (id, host) = ask(s, "session/stream", json!({"session_id": "x", "input": "Write a poem"}));
    delta(s, &stream_id(&host), "Roses are");
    s.notify("$/cancelRequest", json!({"id": id}));
    let e = s.error_of(id, "session/stream", -32800);
    assert_eq!(s.host_notification("$/cancelRequest"), json!({"id": host["id"]}));
    assert_eq!(e["data"]["kind"], "request_cancelled");
    let after = stored(s, "x");
    assert_eq!(said(&after), plus(&before, json!([["user", "Write a poem"], ["assistant", "Roses are"]])));
    assert_eq!(after[3]["metadata"], json!({"partial": true, "reason": "cancelled"}));
    assert_eq!(e["data"]["message_ids"], json!([after[2]["id"], after[3]["id"]]));
    assert_eq!(revision(s, "x"), 3);
    s.answer(&host["id"], json!({"text": "Roses are red."}));
    s.assert_silent();
    assert_eq!(stored(s, "x"), after, "the late answer is ignored");
    assert_no_draft(s, "x");

    // Cancelled before a word: only the user message is kept.
    let (id, host) = ask(s, "session/stream", json!({"session_id": "x", "input": "Never mind"}));
    s.notify("$/cancelRequest", json!({"id": id}));
    let e = s.error_of(id, "session/stream", -32800);
    assert_eq!(s.host_notification("$/cancelRequest"), json!({"id": host["id"]}));
    let last = stored(s, "x");
    assert_eq!(said(&last[4..]), [json!(["user", "Never mind"])]);
    assert_eq!(e["data"]["message_ids"], json!([last[4]["id"]]));
}

crate::every_store!(
    a_stream_stores_the_final_answer_not_the_deltas,
    a_stream_in_progress_is_a_draft,
    a_host_error_mid_stream_keeps_the_draft,
    a_cancelled_stream_keeps_what_was_said,
);

/// Issue 10: convo is killed (SIGKILL) mid-stream after its draft was saved; a new
/// process on the same file turns the draft whose owner stopped (5 s) into messages, the
/// partial text marked `{"partial": true, "reason": "crashed"}`.
#[test]
fn a_stream_cut_by_sigkill_is_kept_as_crashed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sessions.db");
    let mut s = Server::on_file(&path, Framing::Ndjson, &[]);
    let before = session_with_history(&mut s, "k");
    let (_, host) = ask(&mut s, "session/stream", json!({"session_id": "k", "input": "Tell me everything"}));
    let sid = stream_id(&host);
    delta(&mut s, &sid, "First, ");
    delta(&mut s, &sid, "the beginning");
    draft_saying(&mut s, "k", "First, the beginning");
    std::thread::sleep(Duration::from_millis(350));
    s.kill();

    let mut again = Server::on_file(&path, Framing::Ndjson, &[]);
    let deadline = Instant::now() + Duration::from_secs(15);
    let after = loop {
        let now = stored(&mut again, "k");
        if now.len() > before.len() || Instant::now() > deadline {
            break now;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(
        said(&after),
        plus(&before, json!([["user", "Tell me everything"], ["assistant", "First, the beginning"]]))
    );
    assert_eq!(after[..2], before[..]);
    assert_eq!(after[3]["metadata"], json!({"partial": true, "reason": "crashed"}));
    assert_no_draft(&mut again, "k");
}
