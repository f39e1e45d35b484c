//! The tokens of a body, counted without building it. A message's *piece* — its items'
//! tokens and the shape that places it in a turn — depends only on the message and the
//! options (and, for a Gemini result, on the name of its call), so a caller may keep it
//! once computed; `count_with` then adds pieces and the turns' own tokens, placing
//! messages by the same `Layout` that `turns` builds with. `count_payload` of the body
//! `export_with` makes is the same number (the tests hold the two together).

use std::cell::OnceCell;
use std::sync::{Arc, OnceLock};

use serde_json::{Map, Value};

use super::{
    Format, Items, Layout, Options, Place, TurnFormat, anthropic, gemini, interactions, openai, responses, text,
};
use crate::session::message::{Message, Role};
use crate::session::tokens::{PER_MESSAGE, PER_REPLY, count_text, count_value};

/// A message's part of a body: its items' tokens (a Chat or Responses item's with its
/// per-message overhead; a turn's items without the turn's), whether it has no item,
/// and whether all its items are tool results.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Piece {
    pub tokens: usize,
    pub empty: bool,
    pub results: bool,
}

/// What a piece may need beyond its message: the names of the history's calls, which a
/// Gemini result is sent under (found once, and only if a Gemini result needs them, or
/// given by a caller that keeps them).
pub struct Around<'a, M> {
    messages: &'a [M],
    names: OnceCell<Arc<Map<String, Value>>>,
}

impl<'a, M: AsRef<Message>> Around<'a, M> {
    pub fn new(messages: &'a [M]) -> Self {
        Around { messages, names: OnceCell::new() }
    }

    /// With the names of `messages`' calls found already.
    pub fn with_names(messages: &'a [M], names: Arc<Map<String, Value>>) -> Self {
        Around { messages, names: OnceCell::from(names) }
    }

    fn names(&self) -> &Map<String, Value> {
        self.names.get_or_init(|| Arc::new(call_names(self.messages)))
    }

    /// What a result answering call `id` is sent under in a format that names results
    /// (`Format::names_results`): the call's name, and whether its id was Gemini's own.
    pub fn call(&self, id: &str) -> Option<&Value> {
        self.names().get(id)
    }
}

/// The names of `messages`' calls, as a Gemini body sends their results.
pub fn call_names(messages: &[impl AsRef<Message>]) -> Map<String, Value> {
    gemini::call_names(messages)
}

/// The piece of message `i` in a body of `format`.
pub fn piece<M: AsRef<Message>>(format: Format, i: usize, m: &Message, options: &Options, around: &Around<M>) -> Piece {
    let mut warnings = Vec::new();
    let items = |list: &[Value]| list.iter().map(count_value).sum::<usize>();
    let turn = |f: &TurnFormat, made: Items| {
        let list = match &made {
            Items::Built(list) => list.as_slice(),
            Items::Turn(turn) => turn[f.items].as_array().map(Vec::as_slice).unwrap_or_default(),
        };
        Piece { tokens: items(list), empty: list.is_empty(), results: list.iter().all(f.is_result) }
    };
    match format {
        Format::OpenaiChat => match openai::item(i, m, options, &mut warnings) {
            Some(item) => Piece { tokens: count_value(&item) + PER_MESSAGE, empty: false, results: false },
            None => Piece { tokens: 0, empty: true, results: false },
        },
        Format::OpenaiResponses => {
            let list = responses::items(i, m, options, &mut warnings);
            Piece { tokens: items(&list) + PER_MESSAGE * list.len(), empty: list.is_empty(), results: false }
        }
        Format::AnthropicMessages => turn(anthropic::TURNS, anthropic::items(i, m, options, &mut warnings)),
        Format::GeminiContents => {
            let names = if m.role == Role::Tool { around.names() } else { &Map::new() };
            turn(gemini::TURNS, gemini::items(i, m, options, names, false, &mut warnings))
        }
        Format::GeminiInteractions => {
            let names = if m.role == Role::Tool { around.names() } else { &Map::new() };
            let list = interactions::steps(i, m, options, names, &mut warnings);
            Piece { tokens: items(&list) + PER_MESSAGE * list.len(), empty: list.is_empty(), results: false }
        }
    }
}

/// The tokens of the body `export_with(format, system, messages, options)` makes, each
/// message's piece given by `piece` (which may keep them).
pub fn count_with<M: AsRef<Message>>(
    format: Format,
    system: Option<&str>,
    messages: &[M],
    options: &Options,
    mut piece: impl FnMut(usize, &Message) -> Piece,
) -> usize {
    let mut tally = Tally::default();
    for (i, m) in messages.iter().map(AsRef::as_ref).enumerate() {
        tally.add(format, options.fix, m, || piece(i, m));
    }
    tally.total(format, system)
}

/// A turn's own tokens (its role, and the per-message overhead), each role's counted
/// once: every turn of a long history adds them.
fn turn_tokens(role: &str) -> usize {
    static ROLES: OnceLock<[usize; 4]> = OnceLock::new();
    let [user, assistant, model, system] =
        *ROLES.get_or_init(|| ["user", "assistant", "model", "system"].map(|r| count_text(r) + PER_MESSAGE));
    match role {
        "user" => user,
        "assistant" => assistant,
        "model" => model,
        "system" => system,
        other => count_text(other) + PER_MESSAGE,
    }
}

/// The placeholder user turn's item, counted once per format.
fn placeholder_tokens(f: &TurnFormat) -> usize {
    static ANTHROPIC: OnceLock<usize> = OnceLock::new();
    static GEMINI: OnceLock<usize> = OnceLock::new();
    let once = if f.assistant == "model" { &GEMINI } else { &ANTHROPIC };
    *once.get_or_init(|| count_value(&(f.placeholder)()))
}

/// A count in progress, which more messages can be added to: what the messages so far
/// come to, and where the next one goes.
#[derive(Debug, Clone, Default)]
pub struct Tally {
    layout: Layout,
    tokens: usize,
    /// The texts of history system messages moved into the system prompt (with `fix`;
    /// always for Interactions, whose steps have no place for one).
    moved: Vec<String>,
}

impl Tally {
    /// Counts one more message, whose piece `piece` gives (asked only if it is sent).
    pub fn add(&mut self, format: Format, fix: bool, m: &Message, piece: impl FnOnce() -> Piece) {
        let f = match format {
            Format::OpenaiChat | Format::OpenaiResponses => {
                self.tokens += piece().tokens;
                return;
            }
            // Steps have no place for a system message: it joins the system prompt.
            Format::GeminiInteractions => {
                match m.role {
                    Role::System => self.moved.push(text(&m.content)),
                    _ => self.tokens += piece().tokens,
                }
                return;
            }
            Format::AnthropicMessages => anthropic::TURNS,
            Format::GeminiContents => gemini::TURNS,
        };
        let turn = |role: &str| turn_tokens(role);
        if fix && m.role == Role::System {
            self.layout.place(m.role, true, false, false);
            self.moved.push(text(&m.content));
            return;
        }
        let p = piece();
        match self.layout.place(m.role, fix, p.empty, p.results) {
            Place::Moved | Place::LeftOut => return,
            Place::Turn { placeholder } => {
                if placeholder {
                    self.tokens += turn("user") + placeholder_tokens(f);
                }
                self.tokens += turn(match m.role {
                    Role::System => "system",
                    Role::User | Role::Tool => "user",
                    Role::Assistant => f.assistant,
                });
            }
            Place::Joined { .. } => {}
        }
        self.tokens += p.tokens;
    }

    /// What the messages added so far come to, without the system prompt and the
    /// reply's priming.
    pub fn messages(&self) -> usize {
        self.tokens
    }

    /// The body's tokens, with its system prompt (`system` and the messages moved into
    /// it) and the reply's priming.
    pub fn total(&self, format: Format, system: Option<&str>) -> usize {
        let system = match format {
            Format::OpenaiChat => system.map_or(0, |s| count_value(&openai::system_message(s)) + PER_MESSAGE),
            Format::OpenaiResponses => system.map_or(0, count_text),
            Format::AnthropicMessages | Format::GeminiContents | Format::GeminiInteractions => {
                let mut joined = system.map(str::to_owned);
                for text in &self.moved {
                    joined = Some(super::join_system(joined.take(), text));
                }
                joined.filter(|s| !s.is_empty()).map_or(0, |s| count_text(&s))
            }
        };
        system + self.tokens + PER_REPLY
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::session::export::export_with;
    use crate::session::native::Native;
    use crate::session::tokens::count_payload;

    fn message(role: Role, content: Value) -> Message {
        Message::new(role, content)
    }

    /// Histories that exercise every place a message can go: merges, a leading answer,
    /// a system message in the history, empty answers, results and native turns.
    fn histories() -> Vec<Vec<Message>> {
        let mut call = message(Role::Assistant, json!("Looking."));
        call.tool_calls = Some(vec![json!({"id": "c1", "name": "read", "arguments": {"p": 1}})]);
        let mut result = message(Role::Tool, json!("{\"ok\": true}"));
        result.tool_call_id = Some("c1".into());
        // A screenshot: a PNG's first bytes.
        result.images = Some(vec![
            "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYGD4DwABBAEAwS2OUAAAAABJRU5ErkJggg==".into(),
        ]);
        let body = json!([{"type": "thinking", "thinking": "hm", "signature": "s"}, {"type": "text", "text": "Done."}]);
        let mut native = message(Role::Assistant, json!("Done."));
        native.native = Some(Box::new(Native { format: Format::AnthropicMessages, model: None, body }));
        let gemini = json!({"role": "model", "parts": [{"text": "Fine.", "thoughtSignature": "x"}]});
        let mut from_gemini = message(Role::Assistant, json!("Fine."));
        from_gemini.native = Some(Box::new(Native { format: Format::GeminiContents, model: None, body: gemini }));
        let steps = json!([{"type": "thought", "signature": "c2ln"}, {"type": "model_output", "content": [{"type": "text", "text": "So."}]}]);
        let mut from_interactions = message(Role::Assistant, json!("So."));
        from_interactions.native =
            Some(Box::new(Native { format: Format::GeminiInteractions, model: None, body: steps }));
        vec![
            vec![message(Role::User, json!("hi")), message(Role::Assistant, json!("hello"))],
            vec![
                message(Role::Assistant, json!("leading")),
                message(Role::User, json!("a")),
                message(Role::User, json!("b")),
            ],
            vec![
                message(Role::User, json!("go")),
                call,
                result,
                message(Role::User, json!("and then?")),
                native,
                message(Role::System, json!("Be brief.")),
                message(Role::Assistant, Value::Null),
                from_gemini,
                message(Role::User, json!([{"type": "text", "text": "parts"}])),
                from_interactions,
            ],
        ]
    }

    #[test]
    fn counting_pieces_gives_what_counting_the_body_gives() {
        for format in Format::ALL {
            for fix in [true, false] {
                for system in [None, Some("You are terse.")] {
                    for history in histories() {
                        let options = Options { fix, ..Options::default() };
                        let around = Around::new(&history);
                        let counted = count_with(format, system, &history, &options, |i, m| {
                            piece(format, i, m, &options, &around)
                        });
                        let body = export_with(format, system, &history, &options);
                        assert_eq!(
                            counted,
                            count_payload(&body.payload),
                            "{format:?} fix {fix} {system:?}: {history:?}"
                        );
                    }
                }
            }
        }
    }
}
