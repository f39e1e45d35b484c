//! `session/search` (issue 14, protocol section 9) on every store: words, prefixes,
//! phrases, case, all terms required; what is text (tool results yes, tool-call
//! arguments no); never a message a reader cannot see (trimmed, rewound, cleared,
//! deleted, compacted away); forks; paging; refused params; a database written before search existed.

use crate::harness::{Backend, Framing, Place, Server, Value, json};

/// (session id, index) of each hit.
fn places(result: &Value) -> Vec<(String, u64)> {
    let hits = result["hits"].as_array().unwrap();
    hits.iter().map(|h| (h["session_id"].as_str().unwrap().to_owned(), h["index"].as_u64().unwrap())).collect()
}

fn search(s: &mut Server, params: Value) -> Vec<(String, u64)> {
    let mut found = places(&s.call("session/search", params));
    found.sort();
    found
}

fn q(s: &mut Server, query: &str) -> Vec<(String, u64)> {
    search(s, json!({"query": query}))
}

fn at(pairs: &[(&str, u64)]) -> Vec<(String, u64)> {
    pairs.iter().map(|(s, i)| ((*s).to_owned(), *i)).collect()
}

fn words_prefixes_phrases(s: &mut Server) {
    s.call("session/create", json!({"session_id": "s"}));
    s.call("session/add_user", json!({"session_id": "s", "text": "The Quick brown fox jumps over the lazy dog"}));
    s.call("session/add_assistant", json!({"session_id": "s", "text": "A LAZY afternoon, quickly: New York City!"}));
    s.call("session/add_user", json!({"session_id": "s", "text": "Café au lait, s'il vous plaît"}));
    assert_eq!(q(s, "quick"), at(&[("s", 0)]), "a word, not the words it starts");
    assert_eq!(q(s, "QUICK*"), at(&[("s", 0), ("s", 1)]));
    assert_eq!(q(s, "lazy"), at(&[("s", 0), ("s", 1)]), "case-insensitive");
    assert_eq!(q(s, "lazy dog"), at(&[("s", 0)]), "every word must match");
    assert_eq!(q(s, "fox city"), at(&[]), "in one message");
    assert_eq!(q(s, "\"new york\""), at(&[("s", 1)]));
    assert_eq!(q(s, "\"york new\""), at(&[]), "a phrase keeps its order");
    assert_eq!(q(s, "\"new yo\"*"), at(&[("s", 1)]));
    assert_eq!(q(s, "CAFÉ"), at(&[("s", 2)]));
    assert_eq!(q(s, "cafe"), at(&[]), "diacritics are kept");
    assert_eq!(q(s, "il"), at(&[("s", 2)]), "words split at punctuation");
    assert_eq!(q(s, "jump"), at(&[]), "no stemming");

    let result = s.call("session/search", json!({"query": "fox"}));
    let hit = &result["hits"][0];
    let first = s.call("session/history", json!({"session_id": "s"}))["messages"][0]["id"].clone();
    assert_eq!(hit["message_id"], first);
    assert_eq!(hit["role"], "user");
    assert_eq!(hit["snippet"], "The Quick brown [fox] jumps over the lazy dog");
    assert_eq!(result["next_cursor"], Value::Null);
}

fn what_is_text(s: &mut Server) {
    s.call("session/create", json!({"session_id": "t"}));
    s.call("session/add_user", json!({"session_id": "t", "text": "run the tool"}));
    let calls = json!([{"id": "c1", "name": "grep", "arguments": {"pattern": "needleword"}}]);
    s.call("session/add_assistant", json!({"session_id": "t", "text": "", "tool_calls": calls}));
    s.call("session/add_tool_result", json!({"session_id": "t", "tool_call_id": "c1", "content": "found zebra"}));
    let parts = json!([{"type": "text", "text": "part giraffe"}, {"type": "image_url", "image_url": {"url": "x"}}]);
    s.call("session/add_message", json!({"session_id": "t", "message": {"role": "assistant", "content": parts}}));
    assert_eq!(q(s, "needleword"), at(&[]), "tool-call arguments are not text");
    assert_eq!(q(s, "grep"), at(&[]));
    let result = s.call("session/search", json!({"query": "zebra"}));
    assert_eq!(places(&result), at(&[("t", 2)]));
    assert_eq!(result["hits"][0]["role"], "tool");
    assert_eq!(q(s, "giraffe"), at(&[("t", 3)]), "text parts are text");
    assert_eq!(q(s, "url"), at(&[]), "other parts are not");
}

fn never_what_a_reader_cannot_see(s: &mut Server) {
    s.call("session/create", json!({"session_id": "a"}));
    for text in ["alpha one", "reply", "alpha two", "reply"] {
        let method = if text == "reply" { "session/add_assistant" } else { "session/add_user" };
        s.call(method, json!({"session_id": "a", "text": text}));
    }
    s.call("session/trim", json!({"session_id": "a", "max_turns": 1}));
    assert_eq!(q(s, "alpha"), at(&[("a", 0)]), "trimmed: gone, and indexes move");
    assert_eq!(q(s, "one"), at(&[]));

    let first = s.call("session/history", json!({"session_id": "a"}))["messages"][0]["id"].clone();
    s.call("session/add_user", json!({"session_id": "a", "text": "beta later"}));
    s.call("session/rewind", json!({"session_id": "a", "to_message_id": first}));
    assert_eq!(q(s, "beta"), at(&[]), "rewound");
    assert_eq!(q(s, "reply"), at(&[]));

    s.call("session/clear", json!({"session_id": "a"}));
    assert_eq!(q(s, "alpha"), at(&[]), "cleared");

    s.call("session/add_user", json!({"session_id": "a", "text": "gamma"}));
    s.call("session/create", json!({"session_id": "b"}));
    s.call("session/add_user", json!({"session_id": "b", "text": "gamma"}));
    assert_eq!(q(s, "gamma"), at(&[("a", 0), ("b", 0)]));
    s.call("session/delete", json!({"session_id": "a"}));
    assert_eq!(q(s, "gamma"), at(&[("b", 0)]), "deleted");
    s.call("session/delete_many", json!({"session_ids": ["b"]}));
    assert_eq!(q(s, "gamma"), at(&[]));

    s.call(
        "session/from_dict",
        json!({"data": {"session_id": "i", "messages": [{"role": "user", "content": "delta"}]}}),
    );
    assert_eq!(q(s, "delta"), at(&[("i", 0)]), "imported");
    let replacement = json!({"session_id": "i", "messages": [{"role": "user", "content": "epsilon"}]});
    s.call("session/from_dict", json!({"data": replacement, "replace": true}));
    assert_eq!((q(s, "delta"), q(s, "epsilon")), (at(&[]), at(&[("i", 0)])), "replaced");

    // Compacted: the replaced turns are gone, the summary and the kept turn are found
    // at their new places, and an archive still holds the whole history.
    s.call("session/create", json!({"session_id": "c"}));
    for text in ["zeta one", "reply", "zeta two", "reply"] {
        let method = if text == "reply" { "session/add_assistant" } else { "session/add_user" };
        s.call(method, json!({"session_id": "c", "text": text}));
    }
    let params = json!({"session_id": "c", "keep_turns": 1, "summary": "eta summary", "archive": true});
    let archive = s.call("session/compact", params)["archived_session_id"].as_str().unwrap().to_owned();
    assert_eq!(search(s, json!({"query": "one", "session_id": "c"})), at(&[]), "compacted away");
    assert_eq!(search(s, json!({"query": "zeta", "session_id": "c"})), at(&[("c", 1)]));
    assert_eq!(q(s, "eta"), at(&[("c", 0)]));
    assert_eq!(search(s, json!({"query": "zeta", "session_id": archive})), at(&[(&archive, 0), (&archive, 2)]));
}

fn forks(s: &mut Server) {
    s.call("session/create", json!({"session_id": "p"}));
    s.call("session/add_user", json!({"session_id": "p", "text": "shared words"}));
    let reply =
        s.call("session/add_assistant", json!({"session_id": "p", "text": "shared reply"}))["message_id"].clone();
    s.call("session/fork", json!({"session_id": "p", "new_session_id": "kid"}));
    s.call("session/fork", json!({"session_id": "kid", "new_session_id": "grandkid"}));
    s.call("session/add_user", json!({"session_id": "p", "text": "parentonly"}));
    s.call("session/add_user", json!({"session_id": "kid", "text": "kidonly"}));
    assert_eq!(q(s, "words"), at(&[("grandkid", 0), ("kid", 0), ("p", 0)]), "one hit per session holding it");
    assert_eq!(q(s, "parentonly"), at(&[("p", 2)]));
    assert_eq!(q(s, "kidonly"), at(&[("kid", 2)]));
    assert_eq!(search(s, json!({"query": "shared", "session_id": "kid"})), at(&[("kid", 0), ("kid", 1)]));
    s.fail("session/search", json!({"query": "shared", "session_id": "ghost"}), 1001);

    let first = s.call("session/history", json!({"session_id": "p"}))["messages"][0]["id"].clone();
    s.call("session/fork", json!({"session_id": "p", "new_session_id": "early", "at_message_id": first}));
    assert_eq!(q(s, "reply"), at(&[("grandkid", 1), ("kid", 1), ("p", 1)]), "a fork cut before it");
    let rewound = s.call("session/rewind", json!({"session_id": "p", "to_message_id": reply, "archive": true}));
    let archive = rewound["archived_session_id"].as_str().unwrap().to_owned();
    assert_eq!(q(s, "parentonly"), at(&[(archive.as_str(), 2)]), "the archive keeps what was dropped");
    s.call("session/delete", json!({"session_id": "p"}));
    s.call("session/delete", json!({"session_id": "kid"}));
    let mut expected = vec![("early", 0), ("grandkid", 0), (archive.as_str(), 0)];
    expected.sort();
    assert_eq!(q(s, "words"), at(&expected), "forks keep shared messages their parents lost");
}

fn paging(s: &mut Server) {
    for id in ["x", "y"] {
        s.call("session/create", json!({"session_id": id}));
        for i in 0..13 {
            let method = if i % 2 == 0 { "session/add_user" } else { "session/add_assistant" };
            s.call(method, json!({"session_id": id, "text": format!("page number {i}")}));
        }
    }
    let first = s.call("session/search", json!({"query": "page"}));
    assert_eq!(places(&first).len(), 20, "20 by default");
    let mut seen = places(&first);
    let mut cursor = first["next_cursor"].clone();
    let mut pages = 1;
    while !cursor.is_null() {
        let page = s.call("session/search", json!({"query": "page", "limit": 4, "cursor": cursor}));
        seen.extend(places(&page));
        cursor = page["next_cursor"].clone();
        pages += 1;
    }
    assert_eq!(pages, 3);
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), 26, "every hit once");
    let exact = s.call("session/search", json!({"query": "page", "limit": 26}));
    assert_eq!((places(&exact).len(), &exact["next_cursor"]), (26, &Value::Null));
    let all = s.call("session/search", json!({"query": "page", "limit": 200}));
    assert_eq!(places(&all).len(), 26);
}

fn refused(s: &mut Server) {
    s.call("session/create", json!({"session_id": "r"}));
    for query in ["", "   ", "?!", "\"open", "fo*o", "a\"b\""] {
        s.fail("session/search", json!({"query": query}), -32602);
    }
    s.fail("session/search", json!({}), -32602);
    s.fail("session/search", json!({"query": 3}), -32602);
    s.fail("session/search", json!({"query": "x", "limit": 0}), -32602);
    s.fail("session/search", json!({"query": "x", "limit": 201}), -32602);
    s.fail("session/search", json!({"query": "x", "cursor": "nonsense"}), -32602);
    s.fail("session/search", json!({"query": "x", "cursor": 5}), -32602);
    s.fail("session/search", json!({"query": "x", "session_id": "bad id"}), -32602);
    assert_eq!(q(s, "AND OR NOT NEAR"), at(&[]), "operators of a database are only words");
    assert_eq!(q(s, "x' OR 1=1 --"), at(&[]));
}

crate::every_store!(words_prefixes_phrases, what_is_text, never_what_a_reader_cannot_see, forks, paging, refused);

/// An SQLite database written by schema version 5 (before search) is brought forward:
/// its messages are found.
#[test]
fn a_version_5_database_is_indexed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v5.db");
    let mut s = Server::on_file(&path, Framing::Ndjson, &[]);
    s.call("session/create", json!({"session_id": "old"}));
    s.call("session/add_user", json!({"session_id": "old", "text": "ancient scroll"}));
    s.call("session/fork", json!({"session_id": "old", "new_session_id": "copy"}));
    assert_eq!(s.finish().code(), Some(0));
    // Back to version 5 exactly: what migration 6 and later added is taken away.
    crate::config::back_to_version(&path, 5);

    let mut s = Server::on_file(&path, Framing::Ndjson, &[]);
    assert_eq!(q(&mut s, "scroll"), at(&[("copy", 0), ("old", 0)]));
    s.call("session/add_user", json!({"session_id": "old", "text": "new scroll"}));
    assert_eq!(q(&mut s, "scroll"), at(&[("copy", 0), ("old", 0), ("old", 1)]));
    assert_eq!(s.finish().code(), Some(0));
    let conn = rusqlite::Connection::open(&path).unwrap();
    let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
    assert_eq!(version, crate::config::SCHEMA_VERSION);
}

/// A PostgreSQL schema written by version 2 (before search) is brought forward likewise.
#[test]
fn a_version_2_postgres_schema_is_indexed() {
    let Some((place, _)) = Place::fresh(Backend::Postgres) else { return };
    let Place::Postgres { url, schema } = &place else { unreachable!() };
    let mut s = Server::at(&place, Framing::Ndjson, &[]);
    s.call("session/create", json!({"session_id": "old"}));
    s.call("session/add_user", json!({"session_id": "old", "text": "ancient scroll"}));
    s.call("session/fork", json!({"session_id": "old", "new_session_id": "copy"}));
    assert_eq!(s.finish().code(), Some(0));
    crate::postgres::back_to_version(url, schema, 2);
    let mut s = Server::at(&place, Framing::Ndjson, &[]);
    assert_eq!(q(&mut s, "scroll"), at(&[("copy", 0), ("old", 0)]));
    assert_eq!(s.finish().code(), Some(0));
    let version = crate::postgres::psql(url, &format!("SELECT version FROM {schema}.meta"));
    assert_eq!(version, crate::postgres::SCHEMA_VERSION.to_string());
}
