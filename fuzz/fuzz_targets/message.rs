//! Message validation on any JSON: no panic; an accepted message serializes to JSON
//! that is accepted again as the same message; and the conversation rules take any
//! sequence of accepted messages without panicking.
#![no_main]

use convo::session::{Identity, Message, MessageInput, Tail, plan_import};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fn accept(value: Value) -> Option<Message> {
    serde_json::from_value::<MessageInput>(value).ok()?.into_message(Identity::Given).ok()
}

fuzz_target!(|data: &[u8]| {
    let Ok(value) = serde_json::from_slice::<Value>(data) else { return };
    let items = match value {
        Value::Array(items) => items,
        single => vec![single],
    };
    let mut accepted = Vec::new();
    for item in items {
        if let Some(message) = accept(item) {
            let again = accept(serde_json::to_value(&message).expect("serializes")).expect("accepted again");
            assert_eq!(again, message, "a message survives its own JSON");
            accepted.push(message);
        }
    }
    let mut tail = Tail::default();
    let mut out = Vec::new();
    for message in accepted.iter().cloned() {
        let _ = tail.push(message, &mut out);
    }
    let _ = plan_import(accepted, true);
});
