//! to_dict and from_dict: round trips, the generic agent library's format, and imports
//! that need repair.

use crate::harness::{Server, json};

fn round_trip(s: &mut Server) {
    s.call("session/create", json!({"session_id": "orig", "system": "sys", "cwd": "/c"}));
    s.call("session/add_user", json!({"session_id": "orig", "text": "hi", "images": ["aGVsbG8="]}));
    s.call("session/add_assistant", json!({"session_id": "orig", "text": "let me", "tool_calls": [{"id": "a", "name": "f", "arguments": {"x": 1}}]}));
    s.call("session/add_tool_result", json!({"session_id": "orig", "tool_call_id": "a", "content": "done"}));
    s.call("session/add_message", json!({"session_id": "orig", "message": {"role": "assistant", "content": [{"type": "text", "text": "ok"}], "metadata": {"k": "v"}}}));
    let dict = s.call("session/to_dict", json!({"session_id": "orig"}));
    assert_eq!((&dict["session_id"], &dict["system"], &dict["cwd"]), (&json!("orig"), &json!("sys"), &json!("/c")));
    let fields = [
        "id",
        "role",
        "content",
        "name",
        "tool_call_id",
        "tool_calls",
        "images",
        "metadata",
        "native",
        "usage",
        "created_at",
    ];
    for m in dict["messages"].as_array().unwrap() {
        let mut keys: Vec<&str> = m.as_object().unwrap().keys().map(String::as_str).collect();
        keys.sort();
        let mut want = fields.to_vec();
        want.sort();
        assert_eq!(keys, want, "every Message field, null where unset");
    }

    // Into a new session: the same dict comes back, but for the id.
    let mut copy = dict.clone();
    copy["session_id"] = json!("copy");
    let imported = s.call("session/from_dict", json!({"data": copy}));
    assert_eq!(
        (&imported["session_id"], &imported["revision"], &imported["message_count"]),
        (&json!("copy"), &json!(0), &json!(4))
    );
    assert_eq!(imported["repaired"], json!({"added": 0, "dropped": 0}));
    assert_eq!(s.call("session/to_dict", json!({"session_id": "copy"})), copy);

    // Onto the original: refused without replace; with it the revision count goes on.
    s.fail("session/from_dict", json!({"data": dict}), 1002);
    let before = s.call("session/get", json!({"session_id": "orig"}));
    // Issue 9, item 5: a replace checks `expected_revision` and changes nothing on 1003.
    let stale = before["revision"].as_u64().unwrap() - 1;
    let error = s.fail(
        "session/from_dict",
        json!({"data": {"session_id": "orig"}, "replace": true, "expected_revision": stale}),
        1003,
    );
    assert_eq!(error["data"]["current_revision"], before["revision"]);
    assert_eq!(s.call("session/get", json!({"session_id": "orig"})), before, "nothing was replaced");
    s.fail(
        "session/from_dict",
        json!({"data": {"session_id": "nobody"}, "replace": true, "expected_revision": 0}),
        1001,
    );
    let replaced =
        s.call("session/from_dict", json!({"data": dict, "replace": true, "expected_revision": before["revision"]}));
    assert_eq!(replaced["revision"], before["revision"].as_u64().unwrap() + 1);
    assert_eq!(replaced["created_at"], before["created_at"]);
    assert_eq!(s.call("session/to_dict", json!({"session_id": "orig"})), dict);

    // Without a session id, a new one.
    let mut anonymous = dict.clone();
    anonymous.as_object_mut().unwrap().remove("session_id");
    let fresh = s.call("session/from_dict", json!({"data": anonymous}));
    assert_ne!(fresh["session_id"], "orig");
    s.fail("session/to_dict", json!({"session_id": "ghost"}), 1001);
}

/// What the generic agent library's `Session.to_dict()` writes.
fn agent_library_format(s: &mut Server) {
    let data = json!({
        "session_id": "agent-1",
        "system": "You are helpful.",
        "messages": [
            {"role": "user", "content": "What's in /tmp?", "name": null, "tool_call_id": null, "tool_calls": null},
            {"role": "assistant", "content": "", "name": null, "tool_call_id": null,
             "tool_calls": [{"id": "call_1", "name": "ls", "arguments": {"path": "/tmp"}}]},
            {"role": "tool", "content": "a.txt", "name": null, "tool_call_id": "call_1", "tool_calls": null},
            {"role": "user", "content": [{"type": "text", "text": "and this?", "image_url": null}], "name": null, "tool_call_id": null, "tool_calls": null}
        ]
    });
    let imported = s.call("session/from_dict", json!({"data": data}));
    assert_eq!(
        (&imported["session_id"], &imported["system"], &imported["message_count"]),
        (&json!("agent-1"), &json!("You are helpful."), &json!(4))
    );
    let h = s.call("session/history", json!({"session_id": "agent-1"}));
    let msgs = h["messages"].as_array().unwrap();
    assert_eq!(msgs[1]["tool_calls"], data["messages"][1]["tool_calls"]);
    assert_eq!(msgs[3]["content"], data["messages"][3]["content"], "content parts kept as given");
    assert!(msgs.iter().all(|m| m["id"].is_string()), "imported messages get ids");

    let pycodeloop_style = json!({"system_prompt": "sp", "cwd": ".", "messages": [{"role": "user", "content": "x"}]});
    let i = s.call("session/from_dict", json!({"data": pycodeloop_style}));
    assert_eq!((&i["system"], &i["cwd"]), (&json!("sp"), &json!(".")));
}

fn imports_that_need_repair(s: &mut Server) {
    let dangling = json!({"session_id": "d", "messages": [
        {"role": "user", "content": "go"},
        {"role": "assistant", "tool_calls": [{"id": "a"}, {"id": "b"}]},
        {"role": "tool", "tool_call_id": "b", "content": "B"},
        {"role": "user", "content": "next"},
        {"role": "assistant", "tool_calls": [{"id": "c"}]}
    ]});
    let i = s.call("session/from_dict", json!({"data": dangling}));
    assert_eq!(i["repaired"], json!({"added": 1, "dropped": 0}));
    let h = s.call("session/history", json!({"session_id": "d", "repair": false}));
    let msgs = h["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 6);
    assert_eq!((&msgs[3]["tool_call_id"], &msgs[3]["metadata"]), (&json!("a"), &json!({"synthetic": true})));
    // The trailing call may still be running: it is not cancelled, and its result lands.
    s.call("session/add_tool_result", json!({"session_id": "d", "tool_call_id": "c", "content": "C"}));

    let orphan = json!({"session_id": "o", "messages": [
        {"role": "tool", "tool_call_id": "zz", "content": "orphan"},
        {"role": "user", "content": "hi"},
        {"role": "tool", "tool_call_id": "yy", "content": "orphan too"}
    ]});
    let e = s.fail("session/from_dict", json!({"data": orphan}), 1004);
    assert_eq!(e["data"]["tool_call_id"], "zz");
    s.fail("session/get", json!({"session_id": "o"}), 1001);
    let fixed = s.call("session/from_dict", json!({"data": orphan, "repair": true}));
    assert_eq!(fixed["repaired"], json!({"added": 0, "dropped": 2}));
    assert_eq!(fixed["message_count"], 1);

    s.fail(
        "session/from_dict",
        json!({"data": {"messages": [{"role": "user", "id": "same"}, {"role": "user", "id": "same"}]}}),
        -32602,
    );
    s.fail("session/from_dict", json!({"data": {"messages": [{"role": "user", "created_at": "last week"}]}}), -32602);
    s.fail("session/from_dict", json!({"data": {"session_id": "bad id"}}), -32602);
    s.fail("session/from_dict", json!({"data": "not an object"}), -32602);
    s.fail("session/from_dict", json!({}), -32602);
}

/// Issue 9, item 7: `created_at` is RFC 3339 as the RFC defines it, kept in one form
/// (UTC, `Z`, six digits of fraction) so that stamps sort as text.
fn imported_time_stamps(s: &mut Server) {
    let kept = [
        ("2024-01-01T08:00:00.5+00:00", "2024-01-01T08:00:00.500000Z"),
        ("2024-01-01t10:00:00z", "2024-01-01T10:00:00.000000Z"),
        ("2024-01-01T10:00:00.123456789+02:00", "2024-01-01T08:00:00.123456Z"),
        ("2024-01-01T01:30:00+05:30", "2023-12-31T20:00:00.000000Z"),
        ("2024-02-29T23:59:59.999999Z", "2024-02-29T23:59:59.999999Z"),
    ];
    let messages: Vec<_> =
        kept.iter().map(|(at, _)| json!({"role": "user", "content": "x", "created_at": at})).collect();
    s.call("session/from_dict", json!({"data": {"session_id": "times", "messages": messages}}));
    let stored = s.call("session/to_dict", json!({"session_id": "times"}));
    let got: Vec<&str> =
        stored["messages"].as_array().unwrap().iter().map(|m| m["created_at"].as_str().unwrap()).collect();
    assert_eq!(got, kept.map(|(_, want)| want));

    let refused = [
        ("2024-01-01T10:00:00+25:99", "its offset hour is missing or not valid"),
        ("2024-01-01T10:00:00+01:99", "offset minute must be in the range -59..=59"),
        ("2016-12-31T23:59:60Z", "leap seconds (second 60) are not accepted"),
        ("2024-01-01T10:00:60Z", "second must be in the range 0..=59 because leap seconds are not supported"),
        ("2024-01-01T10:00:00.123456789012345678Z", "at most 9 digits of fraction (nanoseconds) are accepted"),
        ("2023-02-29T10:00:00Z", "day must be in the range 1..=28 for the given month and year"),
        ("2024-01-01T10:00:00", "its offset hour is missing or not valid"),
    ];
    for (at, why) in refused {
        let data =
            json!({"session_id": "bad-time", "messages": [{"role": "user"}, {"role": "user", "created_at": at}]});
        let e = s.fail("session/from_dict", json!({"data": data}), -32602);
        let want = format!(
            "invalid params: data.messages[1]: created_at: must be an RFC 3339 time stamp \
             (YYYY-MM-DDTHH:MM:SS[.fraction] then Z or +HH:MM or -HH:MM), got \"{at}\": {why}"
        );
        assert_eq!(e["message"], want);
    }
    s.fail("session/get", json!({"session_id": "bad-time"}), 1001);
}

crate::every_store!(round_trip, agent_library_format, imports_that_need_repair, imported_time_stamps);
