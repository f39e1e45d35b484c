//! `session/from_dict` on any JSON: no panic, and whatever it imports round-trips:
//! importing a session's `to_dict` over it gives the same `to_dict` back.
#![no_main]

use std::sync::Arc;

use convo::rpc::LocalServer;
use convo::store::MemoryStore;
use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};

fuzz_target!(|data: &[u8]| {
    let [flags, rest @ ..] = data else { return };
    let Ok(dict) = serde_json::from_slice::<Value>(rest) else { return };
    let mut server = LocalServer::new(Arc::new(MemoryStore::default()), 1 << 20).expect("a server");
    let repair = flags & 1 == 1;
    let Ok(imported) = server.call("session/from_dict", json!({"data": dict, "repair": repair})) else { return };
    let id = imported["session_id"].clone();
    let first = server.call("session/to_dict", json!({"session_id": id})).expect("to_dict of an imported session");
    server.call("session/from_dict", json!({"data": first, "replace": true})).expect("to_dict output imports");
    let second = server.call("session/to_dict", json!({"session_id": id})).expect("to_dict again");
    assert_eq!(first, second, "to_dict -> from_dict is the identity");
});
