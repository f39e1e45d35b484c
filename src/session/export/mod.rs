//! Provider-ready histories. `export` turns a session into the request body parts one
//! provider accepts (OpenAI Chat Completions, the OpenAI Responses API, Anthropic
//! Messages, Gemini contents, Gemini's Interactions API), reporting as a warning whatever it had to change or leave
//! out; `validate` lists what a provider would reject in a payload, with the provider's
//! own error text. Pure.
//!
//! One rule for every format (spec section 13): a message whose `native.format` is the
//! export's format is replayed from its native body verbatim (`replay`); every other
//! message is built from its common form, and what the format cannot carry (another
//! provider's reasoning, signatures, item ids) is left out with a warning, never
//! converted into text and never forged.

mod anthropic;
mod count;
mod gemini;
mod interactions;
mod openai;
mod responses;

pub use count::{Around, Piece, Tally, call_names, count_with, piece};

use base64::Engine as _;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::error::quote;
use crate::session::message::{Message, Role, call_id};
use crate::session::native;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Format {
    OpenaiChat,
    OpenaiResponses,
    AnthropicMessages,
    GeminiContents,
    GeminiInteractions,
}

impl Format {
    /// Every format, in the order `initialize` lists them.
    pub const ALL: [Format; 5] = [
        Format::OpenaiChat,
        Format::OpenaiResponses,
        Format::AnthropicMessages,
        Format::GeminiContents,
        Format::GeminiInteractions,
    ];

    /// The name clients give it.
    pub fn name(self) -> &'static str {
        match self {
            Format::OpenaiChat => "openai_chat",
            Format::OpenaiResponses => "openai_responses",
            Format::AnthropicMessages => "anthropic_messages",
            Format::GeminiContents => "gemini_contents",
            Format::GeminiInteractions => "gemini_interactions",
        }
    }

    /// Whether a tool result is sent under its call's name, which the body finds in the
    /// calls before it.
    pub fn names_results(self) -> bool {
        matches!(self, Format::GeminiContents | Format::GeminiInteractions)
    }

    /// The API it is the request body of, as people call it.
    pub fn provider(self) -> &'static str {
        match self {
            Format::OpenaiChat => "Chat Completions",
            Format::OpenaiResponses => "Responses API",
            Format::AnthropicMessages => "Anthropic Messages",
            Format::GeminiContents => "Gemini",
            Format::GeminiInteractions => "Gemini Interactions",
        }
    }
}

/// How to build the body: `fix` merges, fills in and leaves out what the provider would
/// reject (each a warning); without it every message is sent as it is. `model`: only
/// native bodies of that model are replayed. `thinking` (Anthropic): `false` leaves
/// every thinking block out; `true` makes `validate` require one where Anthropic does.
/// `store` (Responses API, default true): `false` means stateless, so reasoning without
/// `encrypted_content` cannot be replayed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Options {
    pub fix: bool,
    pub model: Option<String>,
    pub thinking: Option<bool>,
    pub store: Option<bool>,
}

impl Options {
    pub fn fixing(fix: bool) -> Self {
        Options { fix, ..Options::default() }
    }

    fn stateless(&self) -> bool {
        self.store == Some(false)
    }
}

/// Something export changed or could not express, at a message of the history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Warning {
    pub index: Option<usize>,
    pub message: String,
}

/// A rule of the provider that a payload breaks, at a message of the history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Violation {
    pub index: usize,
    pub rule: &'static str,
    pub provider_error: String,
}

/// A provider payload, and which history message each of its messages came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Export {
    pub payload: Value,
    pub warnings: Vec<Warning>,
    /// For each provider message (OpenAI `messages`, Anthropic `messages`, Gemini
    /// `contents`), the index of the history message it starts with.
    pub sources: Vec<usize>,
}

/// `export_with` and no option but `fix`.
pub fn export(format: Format, system: Option<&str>, messages: &[impl AsRef<Message>], fix: bool) -> Export {
    export_with(format, system, messages, &Options::fixing(fix))
}

/// The request body parts of `format` for a history (see `Options`).
pub fn export_with(
    format: Format,
    system: Option<&str>,
    messages: &[impl AsRef<Message>],
    options: &Options,
) -> Export {
    match format {
        Format::OpenaiChat => openai::export(system, messages, options),
        Format::OpenaiResponses => responses::export(system, messages, options),
        Format::AnthropicMessages => anthropic::export(system, messages, options),
        Format::GeminiContents => gemini::export(system, messages, options),
        Format::GeminiInteractions => interactions::export(system, messages, options),
    }
}

/// What the provider would reject in `export`'s payload.
pub fn validate(format: Format, export: &Export) -> Vec<Violation> {
    validate_with(format, export, &Options::default())
}

/// `validate`, with the rules the options bring (`thinking: true`, `store: false`).
pub fn validate_with(format: Format, export: &Export, options: &Options) -> Vec<Violation> {
    let found = match format {
        Format::OpenaiChat => openai::validate(&export.payload),
        Format::OpenaiResponses => responses::validate(&export.payload, options),
        Format::AnthropicMessages => anthropic::validate(&export.payload, options),
        Format::GeminiContents => gemini::validate(&export.payload),
        Format::GeminiInteractions => interactions::validate(&export.payload),
    };
    found
        .into_iter()
        .map(|(at, rule, provider_error)| Violation {
            index: export.sources.get(at).copied().unwrap_or(at),
            rule,
            provider_error,
        })
        .collect()
}

/// How a format that takes turns (Anthropic, Gemini) names and builds them.
pub(crate) struct TurnFormat {
    /// The assistant's role name (`assistant`, `model`).
    pub assistant: &'static str,
    /// The member holding a turn's items (`content`, `parts`).
    pub items: &'static str,
    /// Where history system messages go, for the warning.
    pub system_field: &'static str,
    /// The item a placeholder user turn holds.
    pub placeholder: fn() -> Value,
    /// Whether an item is a tool result.
    pub is_result: fn(&Value) -> bool,
}

/// The text of the user turn put before a history that starts with the assistant.
pub(crate) const PLACEHOLDER: &str = "(The conversation so far continues below.)";

/// The system prompt with a history system message's text joined on, as the formats
/// that have no place for one in the history send it.
pub(crate) fn join_system(system: Option<String>, text: &str) -> String {
    [system.unwrap_or_default().as_str(), text].join("\n\n").trim_start().to_owned()
}

/// A message's part of a turn: items built from its common form, or (replayed) a whole
/// native turn, which goes out as it is unless it must merge with the turn before it.
pub(crate) enum Items {
    Built(Vec<Value>),
    Turn(Value),
}

/// Where a message goes in a body of turns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Place {
    /// A history system message, moved into the system prompt (with `fix`).
    Moved,
    /// An empty message, left out (with `fix`).
    LeftOut,
    /// A turn of its own, after a placeholder user turn when `placeholder`.
    Turn { placeholder: bool },
    /// Into the turn before it; `warn` when that merges two turns of one role (not a
    /// result joining a group's results).
    Joined { warn: bool },
}

/// The turn roles, as `Layout` tracks them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TurnRole {
    System,
    User,
    Assistant,
}

/// The one algorithm that places messages in turns, for `turns` (which builds them) and
/// `count_with` (which counts them): tool results ride in user turns, a group's results
/// and a user message right after them in one turn (results first), as the provider
/// takes them; with `fix`, history system messages join the system prompt, empty
/// messages are left out, a placeholder user turn goes before a leading assistant turn,
/// and any other consecutive turns of one role merge. Without `fix`, every other message
/// is a turn of its own, as it is.
#[derive(Debug, Clone, Default)]
pub(crate) struct Layout {
    /// The last turn's role, and whether it holds only (and some) tool results.
    last: Option<(TurnRole, bool)>,
    previous: Option<Role>,
}

impl Layout {
    /// Where the next message goes, given its role and its items: whether it has none,
    /// and whether all of them are tool results.
    pub fn place(&mut self, role: Role, fix: bool, empty: bool, results: bool) -> Place {
        let previous = self.previous.replace(role);
        let turn_role = match role {
            Role::System if fix => return Place::Moved,
            Role::System => TurnRole::System,
            Role::User | Role::Tool => TurnRole::User,
            Role::Assistant => TurnRole::Assistant,
        };
        let results_only = self.last.is_some_and(|(role, results)| role == TurnRole::User && results);
        // After a group's results: the next result, or the user message that follows.
        let joins_results = results_only && matches!(role, Role::Tool | Role::User) && previous == Some(Role::Tool);
        if !fix && !joins_results {
            self.last = Some((turn_role, !empty && results));
            return Place::Turn { placeholder: false };
        }
        if fix && empty {
            return Place::LeftOut;
        }
        match self.last {
            Some((last, all_results)) if last == turn_role => {
                self.last = Some((last, all_results && (empty || results)));
                Place::Joined { warn: role != Role::Tool && !results_only }
            }
            None if turn_role == TurnRole::Assistant => {
                self.last = Some((turn_role, !empty && results));
                Place::Turn { placeholder: true }
            }
            _ => {
                self.last = Some((turn_role, !empty && results));
                Place::Turn { placeholder: false }
            }
        }
    }
}

/// Turns from messages, placed by `Layout`. Returns the turns, their sources, and the
/// system prompt.
pub(crate) fn turns<M: AsRef<Message>>(
    f: &TurnFormat,
    system: Option<&str>,
    messages: &[M],
    fix: bool,
    warnings: &mut Vec<Warning>,
    mut items: impl FnMut(usize, &Message, &mut Vec<Warning>) -> Items,
) -> (Vec<Value>, Vec<usize>, Option<String>) {
    let mut system = system.map(str::to_owned);
    let (mut out, mut sources): (Vec<Value>, Vec<usize>) = (Vec::new(), Vec::new());
    let warn = |warnings: &mut Vec<Warning>, i, message: String| warnings.push(Warning { index: Some(i), message });
    let mut layout = Layout::default();
    for (i, m) in messages.iter().map(AsRef::as_ref).enumerate() {
        if fix && m.role == Role::System {
            layout.place(m.role, fix, false, false);
            system = Some(join_system(system.take(), &text(&m.content)));
            warn(warnings, i, format!("a system message was moved into `{}`", f.system_field));
            continue;
        }
        let (new, whole) = match items(i, m, warnings) {
            Items::Built(new) => (new, None),
            Items::Turn(turn) => (turn[f.items].as_array().cloned().unwrap_or_default(), Some(turn)),
        };
        let role = match m.role {
            Role::System => "system",
            Role::User | Role::Tool => "user",
            Role::Assistant => f.assistant,
        };
        match layout.place(m.role, fix, new.is_empty(), new.iter().all(f.is_result)) {
            Place::Moved => {}
            Place::LeftOut => warn(warnings, i, "an empty message was left out".into()),
            Place::Turn { placeholder } => {
                if placeholder {
                    out.push(json!({"role": "user", f.items: [(f.placeholder)()]}));
                    sources.push(i);
                    warn(warnings, i, format!("a placeholder user turn was put before the leading {role} turn"));
                }
                out.push(whole.unwrap_or_else(|| json!({"role": role, f.items: new})));
                sources.push(i);
            }
            Place::Joined { warn: merged } => {
                if merged {
                    warn(warnings, i, format!("consecutive {role} turns were merged"));
                }
                if let Some(items) = out.last_mut().and_then(|last| last[f.items].as_array_mut()) {
                    items.extend(new);
                }
            }
        }
    }
    (out, sources, system.filter(|s| !s.is_empty()))
}

/// The native body of an assistant message to replay in `format` verbatim, if it has
/// one of that format (and, with `model`, of that model); else `None`, with a warning
/// for what building it from the common form leaves out.
pub(crate) fn replay<'m>(
    format: Format,
    index: usize,
    m: &'m Message,
    options: &Options,
    warnings: &mut Vec<Warning>,
) -> Option<&'m Value> {
    let native = m.native.as_ref()?;
    let warn = |warnings: &mut Vec<Warning>, message: String| warnings.push(Warning { index: Some(index), message });
    if native.format != format {
        if native::is_compaction_point(native) {
            let message = format!(
                "compaction left out: {} cannot read {}'s compaction; the history before it is sent instead",
                format.provider(),
                native.format.name()
            );
            warn(warnings, message);
        }
        if native::has_reasoning(native) {
            let message =
                format!("reasoning left out: {} cannot carry it; export {}", format.provider(), native.format.name());
            warn(warnings, message);
        }
        own_steps_left_out(format, index, native, warnings);
        return None;
    }
    if let Some(wanted) = &options.model
        && !native::model_matches(native.model.as_deref(), wanted)
    {
        let made_by = native.model.as_deref().map_or("an unknown model".to_owned(), quote);
        let message = format!(
            "built from the common form: its {} body came from {made_by}, not {}, so its reasoning was left out",
            format.name(),
            quote(wanted)
        );
        warn(warnings, message);
        own_steps_left_out(format, index, native, warnings);
        return None;
    }
    Some(&native.body)
}

/// The warning for the steps of built-in tools a native body holds, when it is built
/// from its common form instead of replayed.
fn own_steps_left_out(format: Format, index: usize, native: &native::Native, warnings: &mut Vec<Warning>) {
    let own = native::own_steps(native);
    if own.is_empty() {
        return;
    }
    let kinds: Vec<String> = own.iter().map(|k| quote(k)).collect();
    let message = format!(
        "built-in tool steps left out ({}): {} cannot carry them; export {}",
        kinds.join(", "),
        format.provider(),
        native.format.name()
    );
    warnings.push(Warning { index: Some(index), message });
}

/// A tool call in the shape every provider is built from.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    pub id: String,
    pub name: String,
    /// The arguments as an object when they are one (or a JSON string of one).
    pub args: Value,
    /// The arguments as given, when given as a string (JSON text, as OpenAI sends them).
    pub text: Option<String>,
}

impl Call {
    /// The arguments as JSON text, as OpenAI's formats carry them: the text given, else
    /// the value's.
    pub fn arguments_text(&self) -> String {
        self.text.clone().unwrap_or_else(|| self.args.to_string())
    }
}

/// Arguments as the object Anthropic's `input` and Gemini's `args` must be; anything
/// else is wrapped as `{"arguments": …}`, with a warning.
pub(crate) fn object_args(index: usize, args: Value, warnings: &mut Vec<Warning>) -> Value {
    if args.is_object() {
        return args;
    }
    let message = "tool call arguments that are not an object were wrapped as {\"arguments\": …}".into();
    warnings.push(Warning { index: Some(index), message });
    json!({"arguments": args})
}

/// Reads any of the three accepted ToolCall shapes.
pub fn calls(message: &Message) -> Vec<Call> {
    message
        .tool_calls
        .iter()
        .flatten()
        .map(|c| {
            let function = c.get("function");
            let name = function.and_then(|f| f.get("name")).or_else(|| c.get("name"));
            let args =
                function.and_then(|f| f.get("arguments")).or_else(|| c.get("arguments")).or_else(|| c.get("input"));
            let (args, text) = match args {
                Some(Value::String(s)) => {
                    (serde_json::from_str(s).unwrap_or_else(|_| Value::String(s.clone())), Some(s.clone()))
                }
                Some(v) => (v.clone(), None),
                None => (json!({}), None),
            };
            Call {
                id: call_id(c).unwrap_or_default().to_owned(),
                name: name.and_then(Value::as_str).unwrap_or_default().to_owned(),
                args,
                text,
            }
        })
        .collect()
}

/// The text of a message's content: the string, or its text parts joined.
pub fn text_of(content: &Value) -> String {
    text(content)
}

/// The text of a message's content: the string, or its text parts joined.
pub(crate) fn text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter(|p| p.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// An image: its media type, read from its first bytes, and its base64 data.
pub(crate) struct Image {
    pub media_type: &'static str,
    pub data: String,
}

/// The media type of a base64 image, read from its first bytes (PNG, JPEG, GIF, WebP).
pub fn media_type(base64: &str) -> Option<&'static str> {
    let head: String = base64.chars().take(24).collect();
    let head = base64::engine::general_purpose::STANDARD_NO_PAD.decode(head.trim_end_matches('=').get(..16)?).ok()?;
    match head.as_slice() {
        [0x89, b'P', b'N', b'G', ..] => Some("image/png"),
        [0xFF, 0xD8, 0xFF, ..] => Some("image/jpeg"),
        [b'G', b'I', b'F', b'8', ..] => Some("image/gif"),
        [b'R', b'I', b'F', b'F', _, _, _, _, b'W', b'E', b'B', b'P', ..] => Some("image/webp"),
        _ => None,
    }
}

/// The message's images (attached, and image parts of its content), each with its media
/// type; what cannot be read is left out with a warning.
pub(crate) fn images(index: usize, message: &Message, warnings: &mut Vec<Warning>) -> Vec<Image> {
    let mut out = Vec::new();
    let parts = message.content.as_array().into_iter().flatten();
    let from_parts = parts.filter_map(|p| match p.get("type").and_then(Value::as_str) {
        Some("image_url") => p
            .pointer("/image_url/url")
            .and_then(Value::as_str)
            .and_then(|u| u.split_once(";base64,"))
            .map(|(_, d)| d.to_owned()),
        Some("image") => p.pointer("/source/data").and_then(Value::as_str).map(str::to_owned),
        _ => None,
    });
    for data in message.images.iter().flatten().cloned().chain(from_parts) {
        match media_type(&data) {
            Some(media_type) => out.push(Image { media_type, data }),
            None => {
                warnings.push(Warning { index: Some(index), message: "an image of unknown type was left out".into() })
            }
        }
    }
    out
}

/// Content parts with no counterpart in the format (beyond text, images and the
/// format's own `kept` types): reported, never silently dropped.
pub(crate) fn unexpressed_parts(index: usize, message: &Message, kept: &[&str], warnings: &mut Vec<Warning>) {
    for part in message.content.as_array().into_iter().flatten() {
        let kind = part.get("type").and_then(Value::as_str).unwrap_or_default();
        if !matches!(kind, "text" | "image_url" | "image") && !kept.contains(&kind) {
            warnings.push(Warning {
                index: Some(index),
                message: format!("a content part of type {} has no counterpart and was left out", quote(kind)),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(format: Format, payload: Value) -> Vec<&'static str> {
        let export = Export { payload, warnings: Vec::new(), sources: Vec::new() };
        validate(format, &export).into_iter().map(|v| v.rule).collect()
    }

    /// Each rule, broken on purpose, is caught.
    #[test]
    fn the_validators_catch_each_rule() {
        use Format::*;
        let call = |id: &str| json!({"id": id, "type": "function", "function": {"name": "f", "arguments": "{}"}});
        assert_eq!(
            rules(OpenaiChat, json!({"messages": [{"role": "tool", "tool_call_id": "x", "content": "r"}]})),
            ["tool_without_call"]
        );
        assert_eq!(
            rules(
                OpenaiChat,
                json!({"messages": [{"role": "assistant", "tool_calls": [call("a")]}, {"role": "user", "content": "u"}]})
            ),
            ["call_without_result"]
        );
        assert_eq!(
            rules(OpenaiChat, json!({"messages": [{"role": "assistant", "tool_calls": [call("a")]}]})),
            ["call_without_result"]
        );
        let text = |t: &str| json!([{"type": "text", "text": t}]);
        let ant = |m: Value| rules(AnthropicMessages, json!({"messages": m}));
        assert_eq!(ant(json!([{"role": "assistant", "content": text("a")}])), ["first_not_user"]);
        assert_eq!(
            ant(json!([{"role": "user", "content": text("a")}, {"role": "system", "content": text("s")}])),
            ["system_in_messages"]
        );
        assert_eq!(
            ant(json!([{"role": "user", "content": text("a")}, {"role": "user", "content": text("b")}])),
            ["roles_not_alternating"]
        );
        assert_eq!(
            ant(json!([{"role": "user", "content": []}, {"role": "assistant", "content": text("b")}])),
            ["empty_content"]
        );
        assert_eq!(
            ant(json!([{"role": "user", "content": text("a")}, {"role": "assistant", "content": []}])),
            Vec::<&str>::new(),
            "the final assistant message may be empty"
        );
        let uses = json!([{"type": "tool_use", "id": "t", "name": "f", "input": {}}]);
        assert_eq!(
            ant(
                json!([{"role": "user", "content": text("a")}, {"role": "assistant", "content": uses}, {"role": "user", "content": text("b")}])
            ),
            ["tool_use_without_result"]
        );
        let result = json!({"type": "tool_result", "tool_use_id": "t", "content": "r"});
        assert_eq!(ant(json!([{"role": "user", "content": [result]}])), ["tool_result_without_use"]);
        assert_eq!(
            ant(
                json!([{"role": "user", "content": text("a")}, {"role": "assistant", "content": uses}, {"role": "user", "content": [{"type": "text", "text": "b"}, result]}])
            ),
            ["results_not_first"]
        );
        let gem = |c: Value| rules(GeminiContents, json!({"contents": c}));
        assert_eq!(gem(json!([{"role": "system", "parts": [{"text": "s"}]}])), ["invalid_role"]);
        assert_eq!(gem(json!([{"role": "user", "parts": []}])), ["empty_parts"]);
        assert_eq!(
            gem(json!([{"role": "user", "parts": [{"text": "a"}]}, {"role": "user", "parts": [{"text": "b"}]}])),
            ["roles_not_alternating"]
        );
        let fcall = json!({"functionCall": {"name": "f", "args": {}}});
        let fresp = json!({"functionResponse": {"name": "f", "response": {}}});
        assert_eq!(
            gem(json!([{"role": "model", "parts": [fcall]}, {"role": "user", "parts": [fresp]}])),
            ["call_not_after_user"]
        );
        assert_eq!(
            gem(
                json!([{"role": "user", "parts": [{"text": "a"}]}, {"role": "model", "parts": [fcall, fcall]}, {"role": "user", "parts": [fresp]}])
            ),
            ["responses_not_matching_calls"]
        );
        assert_eq!(gem(json!([{"role": "user", "parts": [fresp]}])), ["response_without_call"]);
    }

    #[test]
    fn media_types_from_bytes() {
        let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
        assert_eq!(media_type(&b64(b"\x89PNG\r\n\x1a\n0000000000")), Some("image/png"));
        assert_eq!(media_type(&b64(b"\xff\xd8\xff\xe0000000000000")), Some("image/jpeg"));
        assert_eq!(media_type(&b64(b"GIF89a0000000000000")), Some("image/gif"));
        assert_eq!(media_type(&b64(b"RIFF0000WEBPVP8 0000")), Some("image/webp"));
        assert_eq!(media_type(&b64(b"hello there, world")), None);
    }
}
