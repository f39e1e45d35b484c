//! Any frame, and any params to every method, through the whole server in-process
//! (classification, ordering, registry, rules, memory store): no panic, and every reply
//! is a JSON-RPC 2.0 response.
#![no_main]

use std::cell::RefCell;
use std::sync::Arc;

use convo::rpc::LocalServer;
use convo::store::MemoryStore;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;


thread_local! {
    static SERVER: RefCell<(LocalServer, u32)> = RefCell::new((fresh(), 0));
    /// Every method the server registers, as `initialize` lists them.
    static METHODS: Vec<String> = {
        let init = fresh().call("initialize", serde_json::json!({})).expect("initialize");
        let methods = init["capabilities"]["methods"].as_array().expect("a method list").clone();
        methods.iter().filter_map(|m| m.as_str().map(str::to_owned)).collect()
    };
}

fn fresh() -> LocalServer {
    LocalServer::new(Arc::new(MemoryStore::default()), 1 << 20).expect("a server")
}

fn check(reply: &str) {
    let value: Value = serde_json::from_str(reply).expect("a reply is JSON");
    let replies = match value {
        Value::Array(items) => items,
        single => vec![single],
    };
    for r in replies {
        assert_eq!(r["jsonrpc"], "2.0", "{r}");
        // A subscription taken earlier in the run sends its notifications in between.
        if r.get("id").is_none() {
            assert_eq!(r["method"], "session/changed", "the only server notification here: {r}");
            continue;
        }
        assert!(r.get("result").is_some() != r.get("error").is_some(), "result or error: {r}");
        if let Some(code) = r["error"]["code"].as_i64() {
            assert_ne!(code, -32603, "an internal error: {r}");
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let [selector, rest @ ..] = data else { return };
    SERVER.with(|cell| {
        let (server, uses) = &mut *cell.borrow_mut();
        // A fresh store now and then, so that a long campaign does not pile up sessions.
        *uses += 1;
        if *uses % 5_000 == 0 {
            *server = fresh();
        }
        let frame = if *selector < 128 {
            rest.to_vec()
        } else {
            let method = METHODS.with(|m| m[*selector as usize % m.len()].clone());
            let params = serde_json::from_slice::<Value>(rest)
                .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(rest).into_owned()));
            serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string().into_bytes()
        };
        for reply in server.frame(&frame) {
            check(&reply);
        }
    });
});
