//! Whole sessions: create, get, list, update, delete, fork, clear.

use crate::harness::{Server, Value, json};

fn create_and_get(s: &mut Server) {
    let made = s.call(
        "session/create",
        json!({"session_id": "proj:main_1.x-y", "system": "be brief", "cwd": "/src", "title": "t", "metadata": {"k": [1, {"z": null}]}}),
    );
    assert_eq!(made["session_id"], "proj:main_1.x-y");
    assert_eq!((made["revision"].as_u64(), made["message_count"].as_u64()), (Some(0), Some(0)));
    assert_eq!(made["forked_from"], Value::Null);
    assert_eq!(made["created_at"], made["updated_at"]);
    assert_eq!(s.call("session/get", json!({"session_id": "proj:main_1.x-y"})), made);

    let generated = s.call("session/create", json!({}));
    let id = generated["session_id"].as_str().unwrap();
    let uuid = uuid::Uuid::parse_str(id).expect("a generated id is a UUID");
    assert_eq!(uuid.get_version_num(), 7);
    assert_eq!(generated["system"], Value::Null);

    let taken = s.fail("session/create", json!({"session_id": "proj:main_1.x-y"}), 1002);
    assert_eq!(taken["data"], json!({"kind": "session_exists", "session_id": "proj:main_1.x-y"}));
    let missing = s.fail("session/get", json!({"session_id": "nope"}), 1001);
    assert_eq!(missing["data"], json!({"kind": "session_not_found", "session_id": "nope"}));
}

fn bad_session_ids(s: &mut Server) {
    for bad in [json!(""), json!("a b"), json!("a/b"), json!("x".repeat(129)), json!(5), json!("é")] {
        s.fail("session/create", json!({"session_id": bad}), -32602);
        s.fail("session/get", json!({"session_id": bad}), -32602);
    }
    s.call("session/create", json!({"session_id": "x".repeat(128)}));
    s.fail("session/get", json!({}), -32602);
    s.fail("session/get", json!(["positional"]), -32602);
    s.fail("session/create", json!({"system": 5}), -32602);
    // Issue 17: `[]` is read as `{}` (an empty Lua table), any other array is refused.
    s.fail("session/create", json!({"metadata": ["k"]}), -32602);
    assert_eq!(s.call("session/list", json!({}))["sessions"].as_array().unwrap().len(), 1, "nothing else was created");
}

fn update_and_revisions(s: &mut Server) {
    s.call("session/create", json!({"session_id": "u", "system": "s", "cwd": "/a"}));
    let updated = s.call("session/update", json!({"session_id": "u", "title": "new", "cwd": null}));
    assert_eq!(
        (updated["title"].as_str(), &updated["cwd"], &updated["system"]),
        (Some("new"), &Value::Null, &json!("s"))
    );
    assert_eq!(updated["revision"], 1);
    // Changing nothing keeps the revision.
    let same = s.call("session/update", json!({"session_id": "u", "title": "new"}));
    assert_eq!(same["revision"], 1);
    assert_eq!(s.call("session/update", json!({"session_id": "u"}))["revision"], 1);

    let conflict = s.fail("session/update", json!({"session_id": "u", "title": "lost", "expected_revision": 0}), 1003);
    assert_eq!(conflict["data"], json!({"kind": "revision_conflict", "current_revision": 1, "expected_revision": 0}));
    assert_eq!(s.call("session/get", json!({"session_id": "u"}))["title"], "new", "a conflict changes nothing");
    let ok = s.call("session/update", json!({"session_id": "u", "metadata": {"a": 1}, "expected_revision": 1}));
    assert_eq!((ok["revision"].as_u64(), &ok["metadata"]), (Some(2), &json!({"a": 1})));
    assert!(ok["updated_at"].as_str() >= ok["created_at"].as_str());
    // An append stamps the session again, in the one form every stamp has, no earlier
    // than the message it stored.
    s.call("session/add_user", json!({"session_id": "u", "text": "hi"}));
    let message = s.call("session/history", json!({"session_id": "u"}))["messages"][0]["created_at"].clone();
    let appended = s.call("session/get", json!({"session_id": "u"}));
    let (stamp, message) = (appended["updated_at"].as_str().unwrap(), message.as_str().unwrap());
    assert_eq!((stamp.len(), &stamp[10..11], &stamp[stamp.len() - 1..]), (message.len(), "T", "Z"), "{stamp}");
    assert!(stamp >= message && Some(stamp) >= ok["updated_at"].as_str(), "{stamp} after {message}");
    s.fail("session/update", json!({"session_id": "ghost", "title": "x"}), 1001);
    s.fail("session/update", json!({"session_id": "u", "expected_revision": -1}), -32602);
}

fn delete(s: &mut Server) {
    s.call("session/create", json!({"session_id": "d"}));
    assert_eq!(s.call("session/delete", json!({"session_id": "d"})), json!({"deleted": true}));
    s.fail("session/get", json!({"session_id": "d"}), 1001);
    s.fail("session/delete", json!({"session_id": "d"}), 1001);
    // The id is free again.
    assert_eq!(s.call("session/create", json!({"session_id": "d"}))["revision"], 0);
}

/// Issue 9, item 5: delete honours `expected_revision`.
fn delete_checks_the_revision(s: &mut Server) {
    s.call("session/create", json!({"session_id": "d"}));
    s.call("session/add_user", json!({"session_id": "d", "text": "hi"}));
    let error = s.fail("session/delete", json!({"session_id": "d", "expected_revision": 0}), 1003);
    assert_eq!(error["data"]["current_revision"], 1);
    assert_eq!(s.call("session/get", json!({"session_id": "d"}))["message_count"], 1, "nothing was deleted");
    s.call("session/delete", json!({"session_id": "d", "expected_revision": 1}));
    s.fail("session/get", json!({"session_id": "d"}), 1001);
}

fn list_pagination(s: &mut Server) {
    for i in 0..7 {
        s.call("session/create", json!({"session_id": format!("s{i}")}));
    }
    let mut seen = Vec::new();
    let mut cursor = Value::Null;
    let mut pages = 0;
    loop {
        let mut params = json!({"limit": 3});
        if !cursor.is_null() {
            params["cursor"] = cursor.clone();
        }
        let page = s.call("session/list", params);
        pages += 1;
        seen.extend(page["sessions"].as_array().unwrap().iter().map(|i| i["session_id"].as_str().unwrap().to_owned()));
        cursor = page["next_cursor"].clone();
        if cursor.is_null() {
            break;
        }
        // Issue 9, item 10: sessions updated mid-walk, one already listed and one not,
        // neither skipped nor listed twice.
        if pages == 1 {
            s.call("session/update", json!({"session_id": "s1", "title": "touched"}));
            s.call("session/add_user", json!({"session_id": "s6", "text": "touched"}));
        }
    }
    assert_eq!(pages, 3);
    assert_eq!(seen, ["s6", "s5", "s4", "s3", "s2", "s1", "s0"], "newest created first");

    let all = s.call("session/list", json!({}));
    assert_eq!(all["next_cursor"], Value::Null);
    let stamps: Vec<&str> =
        all["sessions"].as_array().unwrap().iter().map(|i| i["created_at"].as_str().unwrap()).collect();
    assert!(stamps.windows(2).all(|w| w[0] >= w[1]), "{stamps:?}");

    s.fail("session/list", json!({"limit": 0}), -32602);
    s.fail("session/list", json!({"limit": 1001}), -32602);
    assert_eq!(s.call("session/list", json!({"limit": 1000}))["sessions"].as_array().unwrap().len(), 7);
    for made_up in ["garbage", "2026-01-01T00:00:00.000000Z", "2026-01-01T00:00:00.000000Z/a b", "x/s1"] {
        let error = s.fail("session/list", json!({"cursor": made_up}), -32602);
        assert!(error["message"].as_str().unwrap().contains("cursor"), "{error}");
    }
}

fn user(s: &mut Server, session: &str, text: &str) -> String {
    s.call("session/add_user", json!({"session_id": session, "text": text}))["message_id"].as_str().unwrap().to_owned()
}

fn texts(s: &mut Server, session: &str) -> Vec<Value> {
    let h = s.call("session/history", json!({"session_id": session}));
    h["messages"].as_array().unwrap().iter().map(|m| m["content"].clone()).collect()
}

fn fork_at_a_message(s: &mut Server) {
    s.call(
        "session/create",
        json!({"session_id": "p", "system": "sys", "cwd": "/w", "title": "T", "metadata": {"m": 1}}),
    );
    let first = user(s, "p", "one");
    user(s, "p", "two");
    let child = s.call("session/fork", json!({"session_id": "p", "new_session_id": "c", "at_message_id": first}));
    assert_eq!(child["session_id"], "c");
    assert_eq!(child["forked_from"], json!({"session_id": "p", "message_id": first}));
    assert_eq!((child["message_count"].as_u64(), child["revision"].as_u64()), (Some(1), Some(0)));
    assert_eq!(
        (&child["system"], &child["cwd"], &child["title"], &child["metadata"]),
        (&json!("sys"), &json!("/w"), &json!("T"), &json!({"m": 1}))
    );
    let copied = s.call("session/history", json!({"session_id": "c"}));
    assert_eq!(copied["messages"][0]["id"], first.as_str(), "message ids are kept");

    // A fork and its parent change independently.
    user(s, "c", "child only");
    user(s, "p", "parent only");
    s.call("session/trim", json!({"session_id": "p", "max_turns": 1}));
    assert_eq!(texts(s, "c"), [json!("one"), json!("child only")]);
    assert_eq!(texts(s, "p"), [json!("parent only")]);

    let whole = s.call("session/fork", json!({"session_id": "p"}));
    assert_eq!(whole["message_count"], 1);
    assert!(whole["forked_from"]["message_id"].is_string());

    let empty = s.call("session/create", json!({}));
    let of_empty = s.call("session/fork", json!({"session_id": empty["session_id"]}));
    assert_eq!(of_empty["forked_from"]["message_id"], Value::Null);

    s.fail("session/fork", json!({"session_id": "p", "new_session_id": "c"}), 1002);
    s.fail("session/fork", json!({"session_id": "p", "new_session_id": "p"}), 1002);
    let unknown = s.fail("session/fork", json!({"session_id": "p", "at_message_id": first}), 1007);
    assert_eq!(unknown["data"], json!({"kind": "message_not_found", "message_id": first}), "trimmed away");
    s.fail("session/fork", json!({"session_id": "ghost"}), 1001);
}

fn fork_survives_parent_deletion(s: &mut Server) {
    s.call("session/create", json!({"session_id": "parent"}));
    for i in 0..50 {
        user(s, "parent", &i.to_string());
    }
    s.call("session/fork", json!({"session_id": "parent", "new_session_id": "kid"}));
    s.call("session/delete", json!({"session_id": "parent"}));
    let kept = texts(s, "kid");
    assert_eq!(kept, (0..50).map(|i| json!(i.to_string())).collect::<Vec<_>>());
    assert_eq!(s.call("session/get", json!({"session_id": "kid"}))["forked_from"]["session_id"], "parent");
}

fn clear(s: &mut Server) {
    s.call("session/create", json!({"session_id": "c", "system": "sys", "cwd": "/x", "metadata": {"a": 1}}));
    assert_eq!(s.call("session/clear", json!({"session_id": "c"})), json!({"removed": 0, "revision": 0}));
    user(s, "c", "a");
    user(s, "c", "b");
    s.fail("session/clear", json!({"session_id": "c", "expected_revision": 1}), 1003);
    assert_eq!(
        s.call("session/clear", json!({"session_id": "c", "expected_revision": 2})),
        json!({"removed": 2, "revision": 3})
    );
    let info = s.call("session/get", json!({"session_id": "c"}));
    assert_eq!(
        (&info["system"], &info["cwd"], &info["metadata"], &info["message_count"]),
        (&json!("sys"), &json!("/x"), &json!({"a": 1}), &json!(0))
    );
    s.fail("session/clear", json!({"session_id": "ghost"}), 1001);
}

/// Issue 47: creates pipelined are applied together (PostgreSQL writes a run of them in
/// a few round trips), yet each is answered as if alone: an id taken before, or by a
/// create earlier in the pipeline, is 1002 and changes nothing; an update or a delete
/// sent after a create sees it; every session is created once.
fn creates_pipelined_together(s: &mut Server) {
    s.call("session/create", json!({"session_id": "old", "title": "before"}));
    let mut minted = Vec::new();
    let mut named = Vec::new();
    for i in 0..40 {
        let meta = json!({"n": i, "nested": {"big": 12345678901234567890u64, "list": [1.5, null, "é\"x"]}});
        minted.push(s.send_request("session/create", json!({"title": format!("m{i}"), "cwd": "/w", "metadata": meta})));
        named.push(s.send_request("session/create", json!({"session_id": format!("n{i}"), "system": format!("s{i}")})));
    }
    let taken = s.send_request("session/create", json!({"session_id": "old", "title": "after"}));
    let twice = s.send_request("session/create", json!({"session_id": "n7", "system": "again"}));
    let updated = s.send_request("session/update", json!({"session_id": "n3", "title": "t3"}));
    let deleted = s.send_request("session/delete", json!({"session_id": "n5"}));
    let remade = s.send_request("session/create", json!({"session_id": "n5", "system": "remade"}));
    let fresh = s.send_request("session/create", json!({"session_id": "late"}));

    let mut ids = std::collections::HashSet::new();
    let mut answered = Vec::new();
    for (i, id) in minted.iter().enumerate() {
        let made = s.result_of(*id, "session/create");
        assert_eq!(
            (&made["title"], &made["revision"], &made["cwd"]),
            (&json!(format!("m{i}")), &json!(0), &json!("/w"))
        );
        assert_eq!(made["metadata"]["nested"]["list"], json!([1.5, null, "é\"x"]));
        assert_eq!(made["metadata"]["nested"]["big"].to_string(), "12345678901234567890");
        assert!(ids.insert(made["session_id"].as_str().unwrap().to_owned()), "each minted id once");
        answered.push(made);
    }
    for (i, id) in named.iter().enumerate() {
        let made = s.result_of(*id, "session/create");
        assert_eq!((&made["session_id"], &made["system"]), (&json!(format!("n{i}")), &json!(format!("s{i}"))));
    }
    assert_eq!(s.error_of(taken, "session/create", 1002)["data"]["session_id"], "old");
    assert_eq!(s.error_of(twice, "session/create", 1002)["data"]["session_id"], "n7");
    assert_eq!(s.result_of(updated, "session/update")["title"], "t3");
    s.result_of(deleted, "session/delete");
    assert_eq!(s.result_of(remade, "session/create")["system"], "remade");
    assert_eq!(s.result_of(fresh, "session/create")["session_id"], "late");

    for made in answered {
        assert_eq!(s.call("session/get", json!({"session_id": made["session_id"]})), made, "stored as answered");
    }
    assert_eq!(s.call("session/get", json!({"session_id": "old"}))["title"], "before");
    assert_eq!(s.call("session/get", json!({"session_id": "n7"}))["system"], "s7");
    let listed = s.call("session/list", json!({"limit": 1000}))["sessions"].as_array().unwrap().clone();
    assert_eq!(listed.len(), 1 + 40 + 40 + 1);
    let listed: std::collections::HashSet<&str> = listed.iter().map(|i| i["session_id"].as_str().unwrap()).collect();
    assert!(ids.iter().all(|id| listed.contains(id.as_str())));
}

/// Issue 47: updates pipelined over many sessions are applied together (PostgreSQL
/// locks their rows in one round trip and writes them in another), yet each is answered
/// as if alone: a stale revision or a missing session is refused and changes nothing,
/// two updates of one session apply in order, one that changes nothing keeps the
/// revision.
fn updates_pipelined_together(s: &mut Server) {
    for i in 0..30 {
        s.call("session/create", json!({"session_id": format!("u{i}"), "title": "t"}));
    }
    let mut sent = Vec::new();
    for i in 0..30 {
        let params = match i {
            3 => json!({"session_id": "u3", "title": "stale", "expected_revision": 5}),
            4 => json!({"session_id": "u4", "title": "t"}),
            _ => json!({"session_id": format!("u{i}"), "title": format!("a{i}"), "metadata": {"i": i}}),
        };
        sent.push(s.send_request("session/update", params));
    }
    let ghost = s.send_request("session/update", json!({"session_id": "ghost", "title": "x"}));
    let again = s.send_request("session/update", json!({"session_id": "u7", "title": "b7", "expected_revision": 1}));
    let stale = s.send_request("session/update", json!({"session_id": "u8", "title": "no", "expected_revision": 0}));

    for (i, id) in sent.iter().enumerate() {
        match i {
            3 => assert_eq!(s.error_of(*id, "session/update", 1003)["data"]["current_revision"], 0),
            4 => assert_eq!(s.result_of(*id, "session/update")["revision"], 0, "nothing changed"),
            _ => {
                let info = s.result_of(*id, "session/update");
                assert_eq!(
                    (&info["title"], &info["metadata"], &info["revision"]),
                    (&json!(format!("a{i}")), &json!({"i": i}), &json!(1))
                );
            }
        }
    }
    assert_eq!(s.error_of(ghost, "session/update", 1001)["data"]["session_id"], "ghost");
    assert_eq!(s.result_of(again, "session/update")["revision"], 2);
    assert_eq!(s.error_of(stale, "session/update", 1003)["data"]["current_revision"], 1);
    let get = |s: &mut Server, id: &str| s.call("session/get", json!({"session_id": id}));
    assert_eq!((get(s, "u3")["title"].as_str(), get(s, "u3")["revision"].as_u64()), (Some("t"), Some(0)));
    assert_eq!((get(s, "u7")["title"].as_str(), get(s, "u7")["revision"].as_u64()), (Some("b7"), Some(2)));
    assert_eq!((get(s, "u8")["title"].as_str(), get(s, "u8")["revision"].as_u64()), (Some("a8"), Some(1)));
    assert_eq!(get(s, "u29")["metadata"], json!({"i": 29}));
}

crate::every_store!(
    updates_pipelined_together,
    creates_pipelined_together,
    create_and_get,
    bad_session_ids,
    update_and_revisions,
    delete,
    delete_checks_the_revision,
    list_pagination,
    fork_at_a_message,
    fork_survives_parent_deletion,
    clear,
);
