//! Lua's empty table: Neovim and most Lua JSON encoders cannot tell an empty object from
//! an empty array, and write both as `[]`. Wherever the protocol expects an object, an
//! empty array is read as the empty object; a non-empty array stays an error (-32602),
//! and everything else is read exactly as before.
//!
//! Two tools, for the two ways a member is read:
//! - typed members (params structs, `metadata`, `schema`, messages) take one of the
//!   `deserialize_with` functions below. They ask for a struct, so serde_json hands over
//!   `{…}` or `[…]` and refuses anything else itself; no `deserialize_any`, whose
//!   `arbitrary_precision` numbers would arrive as maps, and no buffering through `Value`.
//! - members kept as JSON values (tool calls, content parts) are mended in place by
//!   [`tool_call`] and [`content_part`], before the message is checked.

use std::fmt;
use std::marker::PhantomData;

use serde::de::value::MapDeserializer;
use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Unexpected, Visitor};
use serde_json::{Map, Value};

/// Reads an object, or `[]` as `{}`.
pub fn object<'de, T: Deserialize<'de>, D: Deserializer<'de>>(d: D) -> Result<T, D::Error> {
    Object::deserialize(d).map(|o| o.0)
}

/// As [`object`], for an optional member: `null` is `None`.
pub fn optional_object<'de, T: Deserialize<'de>, D: Deserializer<'de>>(d: D) -> Result<Option<T>, D::Error> {
    Option::<Object<T>>::deserialize(d).map(|o| o.map(|o| o.0))
}

/// As [`optional_object`], for a member where absent (the field's default, `None`) and
/// `null` (`Some(None)`) differ.
pub fn present_object<'de, T: Deserialize<'de>, D: Deserializer<'de>>(d: D) -> Result<Option<Option<T>>, D::Error> {
    optional_object(d).map(Some)
}

/// An array of objects, each read as [`object`] reads one.
pub fn objects<'de, T: Deserialize<'de>, D: Deserializer<'de>>(d: D) -> Result<Vec<T>, D::Error> {
    Vec::<Object<T>>::deserialize(d).map(|v| v.into_iter().map(|o| o.0).collect())
}

/// As [`objects`], for an optional member: `null` is `None`.
pub fn optional_objects<'de, T: Deserialize<'de>, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<T>>, D::Error> {
    Option::<Vec<Object<T>>>::deserialize(d).map(|o| o.map(|v| v.into_iter().map(|o| o.0).collect()))
}

/// A `T` read from an object, or from `[]` as from `{}`.
struct Object<T>(T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Object<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // A struct is what serde_json reads from either bracket, and only from those.
        d.deserialize_struct("object", &[], ObjectVisitor(PhantomData)).map(Object)
    }
}

struct ObjectVisitor<T>(PhantomData<T>);

impl<'de, T: Deserialize<'de>> Visitor<'de> for ObjectVisitor<T> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
        T::deserialize(de::value::MapAccessDeserializer::new(map))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<T, A::Error> {
        if seq.next_element::<IgnoredAny>()?.is_some() {
            return Err(de::Error::invalid_type(Unexpected::Seq, &"an object ([] is read as {})"));
        }
        T::deserialize(MapDeserializer::<_, A::Error>::new(std::iter::empty::<((), ())>()))
    }
}

/// Mends a tool call in any of the accepted shapes (`{id, name, arguments}`, OpenAI's
/// `{id, type, function: {name, arguments}}`, Anthropic's `{id, name, input}`): an empty
/// array as its arguments or `function` is the empty object.
pub fn tool_call(call: &mut Value) {
    let Some(call) = call.as_object_mut() else { return };
    mend(call, &["arguments", "input", "function"]);
    if let Some(Value::Object(function)) = call.get_mut("function") {
        mend(function, &["arguments"]);
    }
}

/// Mends a content part: an empty array is the empty object (which still lacks its
/// `type`), and so is the `input` of a `tool_use` block, Anthropic's tool-call arguments.
pub fn content_part(part: &mut Value) {
    if is_empty_array(part) {
        *part = Value::Object(Map::new());
    }
    if let Some(part) = part.as_object_mut()
        && part.get("type").and_then(Value::as_str) == Some("tool_use")
    {
        mend(part, &["input"]);
    }
}

fn mend(object: &mut Map<String, Value>, members: &[&str]) {
    for name in members {
        if let Some(value) = object.get_mut(*name)
            && is_empty_array(value)
        {
            *value = Value::Object(Map::new());
        }
    }
}

fn is_empty_array(value: &Value) -> bool {
    value.as_array().is_some_and(Vec::is_empty)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct Params {
        #[serde(default, deserialize_with = "optional_object")]
        metadata: Option<Map<String, Value>>,
        #[serde(default, deserialize_with = "present_object")]
        patch: Option<Option<Map<String, Value>>>,
        #[serde(default, deserialize_with = "optional_objects")]
        items: Option<Vec<Item>>,
    }

    #[derive(Debug, serde::Deserialize, PartialEq)]
    struct Item {
        #[serde(default)]
        n: Option<u32>,
    }

    fn read(text: &str) -> Result<Params, String> {
        serde_json::from_str(text).map_err(|e| e.to_string())
    }

    #[test]
    fn an_empty_array_is_read_as_an_empty_object() {
        let p = read(r#"{"metadata": [ ], "patch": [], "items": [[], {"n": 2}]}"#).unwrap();
        assert_eq!(p.metadata, Some(Map::new()));
        assert_eq!(p.patch, Some(Some(Map::new())));
        assert_eq!(p.items, Some(vec![Item { n: None }, Item { n: Some(2) }]));
    }

    #[test]
    fn null_and_absent_keep_their_meaning() {
        let p = read(r#"{"metadata": null, "patch": null, "items": null}"#).unwrap();
        assert_eq!((p.metadata, p.patch, p.items), (None, Some(None), None));
        let p = read("{}").unwrap();
        assert_eq!((p.metadata, p.patch, p.items), (None, None, None));
    }

    #[test]
    fn anything_else_that_is_not_an_object_is_refused() {
        for (text, why) in [
            (r#"{"metadata": [1]}"#, "invalid type: sequence, expected an object ([] is read as {})"),
            (r#"{"metadata": 5}"#, "invalid type: integer `5`, expected an object"),
            (r#"{"metadata": 123456789012345678901234567890}"#, "invalid type: number, expected an object"),
            (r#"{"metadata": "x"}"#, "invalid type: string \"x\", expected an object"),
            (r#"{"items": [[{}]]}"#, "invalid type: sequence, expected an object ([] is read as {})"),
        ] {
            let e = read(text).unwrap_err();
            assert!(e.starts_with(why), "{text}: {e}");
        }
    }

    #[test]
    fn values_inside_an_object_are_kept_exactly() {
        let p = read(r#"{"metadata": {"big": 123456789012345678901234567890, "z": 1, "a": []}}"#).unwrap();
        assert_eq!(
            serde_json::to_string(&p.metadata).unwrap(),
            r#"{"big":123456789012345678901234567890,"z":1,"a":[]}"#
        );
    }

    #[test]
    fn tool_calls_get_object_arguments_in_every_shape() {
        let mut calls = json!([
            {"id": "a", "name": "f", "arguments": []},
            {"id": "b", "type": "function", "function": {"name": "f", "arguments": []}},
            {"id": "c", "name": "f", "input": []},
            {"id": "d", "function": []},
            {"id": "e", "arguments": [1], "input": "[]"},
        ]);
        calls.as_array_mut().unwrap().iter_mut().for_each(tool_call);
        assert_eq!(
            calls,
            json!([
                {"id": "a", "name": "f", "arguments": {}},
                {"id": "b", "type": "function", "function": {"name": "f", "arguments": {}}},
                {"id": "c", "name": "f", "input": {}},
                {"id": "d", "function": {}},
                {"id": "e", "arguments": [1], "input": "[]"},
            ])
        );
    }

    #[test]
    fn content_parts_are_objects_and_tool_use_input_too() {
        let mut parts =
            json!([[], {"type": "tool_use", "id": "t", "input": []}, {"type": "text", "text": "x", "input": []}]);
        parts.as_array_mut().unwrap().iter_mut().for_each(content_part);
        assert_eq!(
            parts,
            json!([{}, {"type": "tool_use", "id": "t", "input": {}}, {"type": "text", "text": "x", "input": []}])
        );
    }
}
