//! A session's messages as the memory store keeps them: each message's JSON text,
//! serialized once when it is stored and shared by every fork and every reply, with its
//! role beside it; and the trailing tool-call group, so that an append reads nothing back.

use std::borrow::Cow;
use std::sync::Arc;

use serde_json::Value;

use super::sign::Sign;
use crate::error::{Error, Result};
use crate::session::json::push_string;
use crate::session::search::content_text;
use crate::session::{Message, Role, Tail, role_name};
use crate::store::MessageJson;
use crate::store::text::Text;

/// One stored message: one pointer, since a long session keeps one for each of its
/// messages (`imbl` keeps them 64 to a leaf: 544 bytes, mimalloc's 640-byte size; as a
/// text's address and length and a word of bits, 24 bytes, its leaves took 1,792).
#[derive(Clone)]
pub struct Stored {
    /// Its JSON text, which the server wrote itself: valid by construction, so never
    /// parsed to be handed out. A short message keeps only its values (`short_text`),
    /// its id and time perhaps as their bits (`Bits`). The word kept with it (`packed`)
    /// holds `Origin::revision` in the low `REVISION_BITS` bits; above them its role,
    /// whether it is kept short, and whether with bits.
    json: Text,
}

/// Who stored a message: the session, and the revision that change made (what a retry of
/// its append is answered with). The session's name is one allocation the runs of its
/// messages share (`Owners`).
#[derive(Clone, Default, Debug, PartialEq)]
pub struct Origin {
    pub owner: Arc<String>,
    pub revision: u64,
}

/// A kept revision is at most 2^56 - 1: at a million changes a second, after 2,000 years.
const REVISION_BITS: u32 = 56;
const REVISION: u64 = (1 << REVISION_BITS) - 1;
const SHORT: u64 = 1 << (REVISION_BITS + 2);
/// A short message whose id and time are kept as their bits (`Bits`).
const BITS: u64 = 1 << (REVISION_BITS + 3);

/// The members of a message with no name, tool call id, tool calls, images, metadata,
/// native form or usage, all `null`: half of a tiny message's text. A short message (such
/// a message whose content is a string of at most `SHORT_CONTENT` bytes) is kept as the
/// values of its id, content and time alone; its keys, role and these members are put
/// back when its text is handed out, which costs a copy, so longer messages, for which
/// they weigh little, are kept whole.
const NULLS: &str =
    r#","name":null,"tool_call_id":null,"tool_calls":null,"images":null,"metadata":null,"native":null,"usage":null"#;
const SHORT_CONTENT: usize = 256;

/// The keys and punctuation `full` puts around a short message's values, with the
/// longest role name.
const SHORT_KEYS: usize = r#"{"id":,"role":"assistant","content":,"created_at":}"#.len();

/// The id and time of a short message that the server made both of (a UUID written as
/// `mint` writes it, a stamp in the canonical form): kept as their 128 and 64 bits, seven
/// to a byte, so that the text stays ASCII and a `str`. Such a message, the most common
/// by far, is kept as `ID_BYTES + TIME_BYTES` bytes and its content's JSON string: 29
/// bytes where their texts take 67, which takes a tiny message down two of the
/// allocator's sizes (96 to 64 bytes with its counts).
struct Bits;

const ID_BYTES: usize = 19;
const TIME_BYTES: usize = 10;
/// What an id and a time kept as their bits take as their JSON strings.
const BITS_AS_TEXT: usize = r#""00000000-0000-0000-0000-000000000000""2026-01-01T00:00:00.000000Z""#.len();

impl Bits {
    /// Writes `value`'s low `7 * bytes` bits, seven to a byte, the lowest first.
    fn put(out: &mut String, mut value: u128, bytes: usize) {
        for _ in 0..bytes {
            out.push(char::from(value as u8 & 0x7f));
            value >>= 7;
        }
    }

    fn get(bytes: &[u8]) -> u128 {
        bytes.iter().rev().fold(0, |value, &b| value << 7 | u128::from(b & 0x7f))
    }

    /// The head of a text kept with `BITS`: the id's bits, then the time's; with room
    /// for `more` bytes after it.
    fn head(id: u128, micros: i64, more: usize) -> String {
        let mut head = String::with_capacity(ID_BYTES + TIME_BYTES + more);
        Bits::put(&mut head, id, ID_BYTES);
        Bits::put(&mut head, u128::from(micros as u64), TIME_BYTES);
        head
    }

    /// The id a head holds.
    fn id(head: &[u8]) -> u128 {
        Bits::get(&head[..ID_BYTES])
    }

    /// The id a head holds, as its JSON string.
    fn push_id(out: &mut String, head: &[u8]) {
        out.push('"');
        crate::mint::push_hyphenated(out, Bits::id(head));
        out.push('"');
    }

    /// The time a head holds, as its JSON string.
    fn push_time(out: &mut String, head: &[u8]) {
        let micros = Bits::get(&head[ID_BYTES..ID_BYTES + TIME_BYTES]) as u64 as i64;
        out.push('"');
        crate::session::push_at_micros(out, micros);
        out.push('"');
    }
}

/// An id as a stored text begins with it: its JSON string, and its bits when a short
/// message would keep them (`Bits`).
struct WantedId {
    quoted: String,
    head: Option<String>,
}

impl WantedId {
    fn new(id: &str) -> Option<WantedId> {
        let head = crate::mint::hyphenated_bits(id).map(|bits| {
            let mut head = String::with_capacity(ID_BYTES);
            Bits::put(&mut head, bits, ID_BYTES);
            head
        });
        Some(WantedId { quoted: serde_json::to_string(id).ok()?, head })
    }
}

impl Stored {
    /// `m` as kept, stored by the change that made `revision`.
    pub fn of(m: &Message, revision: u64) -> Result<Stored> {
        let bare = m.name.is_none()
            && m.tool_call_id.is_none()
            && m.tool_calls.is_none()
            && m.images.is_none()
            && m.metadata.is_none()
            && m.native.is_none()
            && m.usage.is_none();
        let short = match &m.content {
            Value::String(content) if bare && content.len() <= SHORT_CONTENT => {
                let bits =
                    m.id.as_deref()
                        .and_then(crate::mint::hyphenated_bits)
                        .zip(crate::session::micros_of(&m.created_at));
                Some(match bits {
                    Some((id, micros)) => {
                        // Room for the content as a JSON string with nothing to escape.
                        let mut text = Bits::head(id, micros, content.len() + 2);
                        push_string(&mut text, content);
                        (text, BITS)
                    }
                    None => (short_text(m, content), 0),
                })
            }
            _ => None,
        };
        let whole;
        let text = match &short {
            Some((text, _)) => text,
            None => {
                whole = serde_json::to_string(m).map_err(|e| Error::Internal(e.to_string()))?;
                &whole
            }
        };
        let role = match m.role {
            Role::System => 0,
            Role::User => 1,
            Role::Assistant => 2,
            Role::Tool => 3,
        };
        let form = short.as_ref().map_or(0, |(_, bits)| SHORT | bits);
        let packed = revision.min(REVISION) | role << REVISION_BITS | form;
        let json = Text::new(packed, text)
            .ok_or_else(|| Error::InvalidParams("a message of 4 GiB or more cannot be kept".into()))?;
        Ok(Stored { json })
    }

    /// The word kept with its text (see `json`).
    fn packed(&self) -> u64 {
        self.json.head()
    }

    pub fn role(&self) -> Role {
        match (self.packed() >> REVISION_BITS) & 3 {
            0 => Role::System,
            1 => Role::User,
            2 => Role::Assistant,
            _ => Role::Tool,
        }
    }

    /// Whether it is kept short: its text is its id, content and time.
    pub fn short(&self) -> bool {
        self.packed() & SHORT != 0
    }

    /// Whether it is kept short with its id and time as their bits (`Bits`).
    fn bits(&self) -> bool {
        self.packed() & BITS != 0
    }

    /// The revision of the change that stored it (`Origin::revision`).
    pub fn revision(&self) -> u64 {
        self.packed() & REVISION
    }

    /// The kept text: the same allocation for every fork holding the message.
    pub fn text(&self) -> &Text {
        &self.json
    }

    /// The text `Message` serializes to.
    pub fn full(&self) -> Result<MessageJson> {
        if !self.short() {
            return Ok(MessageJson::Shared(self.json.clone()));
        }
        Ok(MessageJson::Made(self.full_text()?))
    }

    /// A short message's text with its keys and `NULLS` put back, in `Message`'s order.
    fn full_text(&self) -> Result<String> {
        let (id, content, created_at) = self.values()?;
        let room = self.json.len() + SHORT_KEYS + NULLS.len() + if self.bits() { BITS_AS_TEXT } else { 0 };
        let mut full = String::with_capacity(room);
        full.push_str(r#"{"id":"#);
        match id {
            Some(id) => full.push_str(id),
            None => Bits::push_id(&mut full, self.json.as_bytes()),
        }
        full.push_str(r#","role":""#);
        full.push_str(role_name(self.role()));
        full.push_str(r#"","content":"#);
        full.push_str(content);
        full.push_str(NULLS);
        full.push_str(r#","created_at":"#);
        match created_at {
            Some(created_at) => full.push_str(created_at),
            None => Bits::push_time(&mut full, self.json.as_bytes()),
        }
        full.push('}');
        Ok(full)
    }

    /// A short message's values, each one JSON value: its id (`null` or a string), its
    /// content and its time (strings); the id and time `None` when kept as their bits.
    fn values(&self) -> Result<(Option<&str>, &str, Option<&str>)> {
        let text = &*self.json;
        if self.bits() {
            let content = text.get(ID_BYTES + TIME_BYTES..).filter(|c| string_end(c, 0) == Some(c.len()));
            return content
                .map(|c| (None, c, None))
                .ok_or_else(|| Error::Internal("a kept message lost its shape".into()));
        }
        let id_end = if text.starts_with("null") { Some(4) } else { string_end(text, 0) };
        let content_end = id_end.and_then(|at| string_end(text, at).map(|end| (at, end)));
        match content_end {
            Some((id_end, end)) if string_end(text, end) == Some(text.len()) => {
                Ok((Some(&text[..id_end]), &text[id_end..end], Some(&text[end..])))
            }
            _ => Err(Error::Internal("a kept message lost its shape".into())),
        }
    }

    /// The message, parsed back from its text.
    pub fn message(&self) -> Result<Message> {
        if self.short() {
            return serde_json::from_str(&self.full_text()?).map_err(|e| unreadable(&e));
        }
        serde_json::from_str(&self.json).map_err(|e| unreadable(&e))
    }

    /// Its id.
    pub fn id(&self) -> Result<Option<String>> {
        if self.short() {
            return match self.values()?.0 {
                Some(id) => serde_json::from_str(id).map_err(|e| unreadable(&e)),
                None => Ok(Some(crate::mint::hyphenated(Bits::id(self.json.as_bytes())))),
            };
        }
        #[derive(serde::Deserialize)]
        struct Id {
            id: Option<String>,
        }
        let id: Id = serde_json::from_str(&self.json).map_err(|e| unreadable(&e))?;
        Ok(id.id)
    }

    /// Its content.
    pub fn content(&self) -> Result<Value> {
        if self.short() {
            return serde_json::from_str(self.values()?.1).map_err(|e| unreadable(&e));
        }
        #[derive(serde::Deserialize)]
        struct Content {
            content: Value,
        }
        let content: Content = serde_json::from_str(&self.json).map_err(|e| unreadable(&e))?;
        Ok(content.content)
    }

    /// Its searchable text (`content_text`): a short message's content where it lies when
    /// it holds no escape, else read from its JSON.
    pub fn content_text(&self) -> Result<Cow<'_, str>> {
        if self.short() {
            let content = self.values()?.1;
            let inner = &content[1..content.len() - 1];
            if !inner.contains('\\') {
                return Ok(Cow::Borrowed(inner));
            }
        }
        Ok(Cow::Owned(content_text(&self.content()?).into_owned()))
    }

    /// Whether its id is `wanted`: every stored text begins with its id, a whole text as
    /// `Message` serializes `id` first, a short one as its JSON string or its bits. A JSON
    /// string read from the start of a text ends where the wanted one ends exactly when
    /// the two are the same; the bits are always `ID_BYTES`.
    fn has_id(&self, wanted: &WantedId) -> bool {
        if self.bits() {
            return wanted.head.as_ref().is_some_and(|head| self.json.starts_with(head.as_str()));
        }
        let rest = if self.short() { Some(&*self.json) } else { self.json.strip_prefix(r#"{"id":"#) };
        rest.is_some_and(|rest| rest.starts_with(&wanted.quoted))
    }
}

/// The end of the JSON string that starts at `start` of `text` (one past its closing
/// quote), or `None` when no string starts there.
fn string_end(text: &str, start: usize) -> Option<usize> {
    let bytes = text.as_bytes();
    if bytes.get(start) != Some(&b'"') {
        return None;
    }
    let mut at = start + 1;
    loop {
        at += memchr::memchr2(b'"', b'\\', bytes.get(at..)?)?;
        if bytes[at] == b'"' {
            return Some(at + 1);
        }
        at += 2;
    }
}

/// A short message's text: the values of its id, content and time, one after another,
/// as `Message` serializes them (each is self-delimiting: `null` or a JSON string). Its
/// role is kept beside it. Written here rather than by serde_json, which escapes every
/// key as it writes it: each append of a short message makes one.
fn short_text(m: &Message, content: &str) -> String {
    let id_len = m.id.as_ref().map_or(4, String::len);
    let mut text = String::with_capacity(6 + id_len + content.len() + m.created_at.len());
    match &m.id {
        Some(id) => push_string(&mut text, id),
        None => text.push_str("null"),
    }
    push_string(&mut text, content);
    push_string(&mut text, &m.created_at);
    text
}

/// The error for a stored text that does not read back: a bug, never the client's input.
fn unreadable(e: &serde_json::Error) -> Error {
    Error::Internal(format!("a stored message does not read back: {e}"))
}

#[derive(Clone, Default)]
pub struct History {
    messages: imbl::Vector<Stored>,
    /// Each message's signature, at its index: what a search tests first (`sign`).
    signs: imbl::Vector<Sign>,
    /// Who stored the messages.
    owners: Owners,
    tail: Tail,
}

/// Who stored a history's messages, as runs of messages one session stored, oldest
/// first: a session's appends lengthen its last run, and a fork or a compaction brings
/// the runs of what it keeps (as the SQL stores keep a history as segments). There are
/// as many runs as owners in turn, not as messages: a message keeps no owner of its own.
#[derive(Clone, Default, Debug, PartialEq)]
struct Owners(imbl::Vector<(usize, Arc<String>)>);

impl Owners {
    /// `n` messages more, stored by `owner`.
    fn push(&mut self, n: usize, owner: &Arc<String>) {
        match self.0.back_mut() {
            _ if n == 0 => {}
            Some((count, last)) if Arc::ptr_eq(last, owner) || last == owner => *count += n,
            _ => self.0.push_back((n, owner.clone())),
        }
    }

    /// The runs of the oldest `n` messages, and of the rest.
    fn split(&self, n: usize) -> (Owners, Owners) {
        let mut before = 0;
        for (i, (count, owner)) in self.0.iter().enumerate() {
            if before + count > n {
                let (mut oldest, mut rest) = self.0.clone().split_at(i);
                rest.pop_front();
                if n > before {
                    oldest.push_back((n - before, owner.clone()));
                }
                rest.push_front((before + count - n, owner.clone()));
                return (Owners(oldest), Owners(rest));
            }
            before += count;
        }
        (self.clone(), Owners::default())
    }

    /// Who stored message `index` of the `len` a history holds.
    fn at(&self, index: usize, len: usize) -> Option<&Arc<String>> {
        let mut end = len;
        for (count, owner) in self.0.iter().rev() {
            let start = end.checked_sub(*count)?;
            if index >= start {
                return (index < end).then_some(owner);
            }
            end = start;
        }
        None
    }
}

impl History {
    /// A history of `messages`, which the rules already accepted in this order.
    pub fn of(messages: &[Message], origin: &Origin) -> Result<History> {
        let mut history = History::default();
        history.extend(messages, origin)?;
        Ok(history)
    }

    /// Appends messages the rules accepted after this history (`newest` then gives them
    /// as kept). Each is serialized before anything changes, so an error leaves the
    /// history as it was.
    pub fn extend(&mut self, messages: &[Message], origin: &Origin) -> Result<()> {
        let kept = messages.iter().map(|m| Stored::of(m, origin.revision)).collect::<Result<Vec<_>>>()?;
        for (message, kept) in messages.iter().zip(kept) {
            self.tail.follow(message);
            self.messages.push_back(kept);
            self.signs.push_back(Sign::of(&content_text(&message.content)));
        }
        self.owners.push(messages.len(), &origin.owner);
        Ok(())
    }

    /// The newest `n` messages as kept, oldest first.
    pub fn newest(&self, n: usize) -> impl Iterator<Item = &Stored> {
        (self.len().saturating_sub(n)..self.len()).filter_map(|i| self.messages.get(i))
    }

    /// Appends the messages `other` keeps after its oldest `skip` (a compaction's kept
    /// turns) and reads the trailing group again.
    pub fn extend_kept(&mut self, other: &History, skip: usize) -> Result<()> {
        let skip = skip.min(other.len());
        self.messages.append(other.messages.skip(skip));
        self.signs.append(other.signs.skip(skip));
        for (count, owner) in other.owners.split(skip).1.0 {
            self.owners.push(count, &owner);
        }
        self.tail = read_tail(&self.messages)?;
        Ok(())
    }

    pub fn len(&self) -> usize {
        self.messages.len()
    }

    pub fn tail(&self) -> &Tail {
        &self.tail
    }

    pub fn roles_newest_first(&self) -> impl Iterator<Item = Role> + '_ {
        self.messages.iter().rev().map(Stored::role)
    }

    /// The index of message `id`, newest first.
    pub fn index_of(&self, id: &str) -> Option<usize> {
        let wanted = WantedId::new(id)?;
        self.messages.iter().rev().position(|k| k.has_id(&wanted)).map(|back| self.len() - 1 - back)
    }

    /// The id of the message at `index`.
    pub fn id_at(&self, index: usize) -> Result<Option<String>> {
        self.messages.get(index).map_or(Ok(None), Stored::id)
    }

    pub fn last_id(&self) -> Result<Option<String>> {
        self.len().checked_sub(1).map_or(Ok(None), |last| self.id_at(last))
    }

    /// Keeps the oldest `n` messages (a rewind, or a fork at a message).
    pub fn keep_oldest(&mut self, n: usize) -> Result<()> {
        let mut messages = self.messages.clone();
        messages.truncate(n);
        self.tail = read_tail(&messages)?;
        self.messages = messages;
        self.signs.truncate(n);
        self.owners = self.owners.split(n).0;
        Ok(())
    }

    /// Drops the oldest `n` messages (a trim).
    pub fn drop_oldest(&mut self, n: usize) -> Result<()> {
        let n = n.min(self.len());
        let messages = self.messages.skip(n);
        self.tail = read_tail(&messages)?;
        self.messages = messages;
        self.signs = self.signs.skip(n);
        self.owners = self.owners.split(n).1;
        Ok(())
    }

    pub fn messages(&self) -> &imbl::Vector<Stored> {
        &self.messages
    }

    pub fn signs(&self) -> &imbl::Vector<Sign> {
        &self.signs
    }

    /// Who stored message `index`, and by which change.
    pub fn origin_at(&self, index: usize) -> Option<Origin> {
        let revision = self.messages.get(index)?.revision();
        Some(Origin { owner: self.owners.at(index, self.len())?.clone(), revision })
    }

    /// The messages and their signatures, as they are now (two O(1) clones), for a
    /// search to scan without the store's lock.
    pub fn searched(&self) -> (imbl::Vector<Stored>, imbl::Vector<Sign>) {
        (self.messages.clone(), self.signs.clone())
    }

    /// Messages `start..end` (clamped) as their texts.
    pub fn json(&self, start: usize, end: usize) -> Result<Vec<MessageJson>> {
        let (start, end) = self.clamp(start, end);
        // A focus narrowed to the page: no walk over the messages before it.
        self.messages.focus().narrow(start..end).into_iter().map(Stored::full).collect()
    }

    /// Messages `start..end` (clamped), parsed.
    pub fn parsed(&self, start: usize, end: usize) -> Result<Vec<Arc<Message>>> {
        let (start, end) = self.clamp(start, end);
        self.messages.focus().narrow(start..end).into_iter().map(|k| k.message().map(Arc::new)).collect()
    }

    fn clamp(&self, start: usize, end: usize) -> (usize, usize) {
        let end = end.min(self.len());
        (start.min(end), end)
    }
}

/// The trailing group of `messages`: the tool results at the end and the call that opened
/// them, the only messages read back.
fn read_tail(messages: &imbl::Vector<Stored>) -> Result<Tail> {
    let mut newest_first = Vec::new();
    for kept in messages.iter().rev() {
        let last = kept.role() != Role::Tool;
        newest_first.push(kept.message()?);
        if last {
            break;
        }
    }
    Ok(Tail::from_newest_first(&newest_first))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A history of `messages`, and them as kept.
    fn kept_of(messages: &[Message], origin: &Origin) -> Result<(History, Vec<Stored>)> {
        let history = History::of(messages, origin)?;
        let kept = history.newest(messages.len()).cloned().collect();
        Ok((history, kept))
    }

    fn message(role: Role, id: &str) -> Message {
        Message { id: Some(id.into()), ..Message::new(role, json!("text")) }
    }

    fn calls(id: &str, calls: &[&str]) -> Message {
        let mut m = message(Role::Assistant, id);
        m.tool_calls = Some(calls.iter().map(|c| json!({"id": c, "name": "f", "arguments": {}})).collect());
        m
    }

    fn result(id: &str, call: &str) -> Message {
        Message { tool_call_id: Some(call.into()), ..message(Role::Tool, id) }
    }

    fn unanswered(history: &History) -> Vec<&str> {
        history.tail().unanswered().collect()
    }

    #[test]
    fn a_kept_message_reads_back_exactly() {
        let mut m = calls("m1", &["c1"]);
        m.content = json!([{"type": "text", "text": "a \"quoted\"\nline é"}, {"type": "x", "n": 1.50}]);
        m.name = Some("n".into());
        m.metadata = Some(json!({"z": 1, "a": [-0.0, null]}).as_object().unwrap().clone());
        let (history, kept) = kept_of(&[m.clone()], &Origin::default()).unwrap();
        assert_eq!(kept[0].message().unwrap(), m);
        assert_eq!(history.parsed(0, 1).unwrap()[0].as_ref(), &m);
        assert_eq!(history.json(0, 1).unwrap()[0].get(), serde_json::to_string(&m).unwrap());
        assert_eq!(kept[0].role(), Role::Assistant);
    }

    #[test]
    fn a_message_kept_short_reads_back_exactly() {
        let mut m = message(Role::User, "a\"created_at\":");
        m.content = json!("x\",\"created_at\": é");
        m.created_at = "2026-12-01T00:00:00.000001Z".into();
        let (history, kept) = kept_of(std::slice::from_ref(&m), &Origin::default()).unwrap();
        assert!(kept[0].short() && !kept[0].json.contains("null"));
        assert_eq!(kept[0].message().unwrap(), m);
        assert_eq!(history.json(0, 1).unwrap()[0].get(), serde_json::to_string(&m).unwrap());
        assert_eq!(history.index_of("a\"created_at\":"), Some(0));
        let mut named = m.clone();
        named.name = Some("n".into());
        let (history, kept) = kept_of(std::slice::from_ref(&named), &Origin::default()).unwrap();
        assert!(!kept[0].short());
        assert_eq!(history.json(0, 1).unwrap()[0].get(), serde_json::to_string(&named).unwrap());
        let long = Message { content: json!("x".repeat(SHORT_CONTENT + 1)), ..m };
        let (history, kept) = kept_of(std::slice::from_ref(&long), &Origin::default()).unwrap();
        assert!(!kept[0].short());
        assert_eq!(history.json(0, 1).unwrap()[0].get(), serde_json::to_string(&long).unwrap());
    }

    #[test]
    fn a_short_message_keeps_its_values_alone_and_is_found_by_id() {
        let m = Message { created_at: "2026-12-04T00:00:00.000001Z".into(), ..message(Role::User, "m-1") };
        let kept = Stored::of(&m, 0).unwrap();
        assert_eq!(&*kept.json, r#""m-1""text""2026-12-04T00:00:00.000001Z""#);
        assert_eq!(kept.content().unwrap(), json!("text"));
        // Ids that end in an escape, hold quotes, are a prefix of another, or are missing;
        // the same ids on messages kept whole.
        let ids = [Some("a\\"), Some("a\\\""), Some("a"), Some("a\"b"), None, Some("")];
        let mut messages = Vec::new();
        for whole in [false, true] {
            for id in ids {
                let mut m = message(Role::Assistant, "x");
                m.id = id.map(str::to_owned);
                m.content = json!(format!("about \"{id:?}\""));
                if whole {
                    m.name = Some("n".into());
                }
                messages.push(m);
            }
        }
        let (history, kept) = kept_of(&messages, &Origin::default()).unwrap();
        for (i, (m, kept)) in messages.iter().zip(&kept).enumerate() {
            assert_eq!(kept.short(), i < ids.len());
            assert_eq!(kept.message().unwrap(), *m);
            assert_eq!(kept.content().unwrap(), m.content);
            assert_eq!(history.id_at(i).unwrap(), m.id);
            if let Some(id) = &m.id {
                assert_eq!(history.index_of(id), Some(i + ids.len() * usize::from(i < ids.len())), "{id:?}");
            }
        }
        assert_eq!(history.index_of("a\\\\"), None);
        assert_eq!(history.id_at(messages.len()).unwrap(), None);
    }

    #[test]
    fn a_kept_message_holds_its_role_revision_and_form_behind_one_pointer() {
        assert_eq!(std::mem::size_of::<Stored>(), 8, "a million messages keep a million");
        for role in [Role::System, Role::User, Role::Assistant, Role::Tool] {
            for (text, short) in [("x", true), (&*"x".repeat(SHORT_CONTENT + 1), false)] {
                for (revision, kept_as) in [(0, 0), (1, 1), (REVISION, REVISION), (u64::MAX, REVISION)] {
                    let kept = Stored::of(&Message { content: json!(text), ..message(role, "m") }, revision).unwrap();
                    assert_eq!((kept.role(), kept.short(), kept.revision()), (role, short, kept_as));
                }
            }
        }
    }

    /// What a history's changes do to who stored each message, tried against a list of
    /// one owner a message: `(kind, n, owner)`, a kind of 0 appending `n` messages by
    /// `owner`, 1 keeping the oldest `n`, 2 dropping the oldest `n`, 3 compacting (one
    /// summary by `owner`, then the messages after the oldest `n`).
    fn owners_after(changes: &[(u8, usize, u8)]) -> (History, Vec<Origin>) {
        let names: Vec<Arc<String>> = (0..4).map(|i| Arc::new(format!("s{i}"))).collect();
        let (mut history, mut model) = (History::default(), Vec::new());
        let mut next_id = 0;
        let mut messages = |n: usize| -> Vec<Message> {
            (0..n)
                .map(|_| {
                    next_id += 1;
                    message(Role::User, &format!("m{next_id}"))
                })
                .collect()
        };
        for (revision, &(kind, n, owner)) in changes.iter().enumerate() {
            let origin = Origin { owner: names[usize::from(owner) % names.len()].clone(), revision: revision as u64 };
            match kind % 4 {
                0 => {
                    history.extend(&messages(n), &origin).unwrap();
                    model.extend(std::iter::repeat_n(origin, n));
                }
                1 => {
                    history.keep_oldest(n).unwrap();
                    model.truncate(n);
                }
                2 => {
                    history.drop_oldest(n).unwrap();
                    model.drain(..n.min(model.len()));
                }
                _ => {
                    let (mut compacted, _) = kept_of(&messages(1), &origin).unwrap();
                    compacted.extend_kept(&history, n).unwrap();
                    history = compacted;
                    model = std::iter::once(origin).chain(model.into_iter().skip(n)).collect();
                }
            }
        }
        (history, model)
    }

    #[test]
    fn a_sessions_appends_lengthen_one_run_of_its_owner() {
        let (history, model) = owners_after(&[(0, 3, 0), (0, 2, 0), (0, 1, 1), (3, 4, 2), (0, 2, 2), (1, 3, 0)]);
        assert_eq!(
            model.iter().map(|o| (o.owner.as_str(), o.revision)).collect::<Vec<_>>(),
            [("s2", 3), ("s0", 1), ("s1", 2)]
        );
        let runs: Vec<(usize, &str)> = history.owners.0.iter().map(|(n, o)| (*n, o.as_str())).collect();
        assert_eq!(runs, [(1, "s2"), (1, "s0"), (1, "s1")]);
        let (history, _) = owners_after(&[(0, 3, 0), (0, 2, 0), (0, 4, 0)]);
        assert_eq!(history.owners.0.len(), 1, "one owner, one run however many appends");
        assert!(Arc::ptr_eq(&history.owners.0[0].1, &history.origin_at(8).unwrap().owner));
        assert_eq!(history.origin_at(9), None);
    }

    proptest::proptest! {
        #[test]
        fn each_message_is_stored_by_whom_it_was_appended_by(
            changes in proptest::collection::vec((0..4u8, 0..6usize, 0..4u8), 0..40),
        ) {
            let (history, model) = owners_after(&changes);
            proptest::prop_assert_eq!(history.len(), model.len());
            for (i, origin) in model.iter().enumerate() {
                proptest::prop_assert_eq!(history.origin_at(i), Some(origin.clone()), "message {}", i);
            }
            proptest::prop_assert_eq!(history.origin_at(model.len()), None);
            // Runs are never empty, and two in a row have two owners.
            let runs: Vec<_> = history.owners.0.iter().cloned().collect();
            proptest::prop_assert!(runs.iter().all(|(n, _)| *n > 0));
            proptest::prop_assert!(runs.windows(2).all(|w| w[0].1 != w[1].1));
        }
    }

    #[test]
    fn short_texts_written_by_hand_are_what_serde_json_writes() {
        let contents =
            ["", "plain", "tab\there", "a \"quote\"", "back\\slash", "\u{1}\u{1f}\u{7f}", "é ✓ 😀 </script>"];
        let ids = [None, Some("m-1"), Some("with \"quote\" and \n")];
        for role in [Role::System, Role::User, Role::Assistant, Role::Tool] {
            for (content, id) in contents.iter().zip(ids.iter().cycle()) {
                let mut m = message(role, "x");
                m.id = id.map(str::to_owned);
                m.content = json!(content);
                let kept = Stored::of(&m, 0).unwrap();
                assert!(kept.short());
                assert_eq!(
                    kept.full().unwrap().get(),
                    serde_json::to_string(&m).unwrap(),
                    "{role:?} {content:?} {id:?}"
                );
                assert_eq!(kept.message().unwrap(), m);
            }
        }
    }

    #[test]
    fn a_message_the_server_named_and_stamped_keeps_their_bits() {
        let minted = crate::mint::id();
        let stamp = crate::session::now();
        let m = Message { id: Some(minted.clone()), created_at: stamp.clone(), ..message(Role::User, "x") };
        let kept = Stored::of(&m, 0).unwrap();
        assert!(kept.short() && kept.bits());
        assert_eq!(kept.json.len(), ID_BYTES + TIME_BYTES + r#""text""#.len());
        assert!(kept.json.is_ascii());
        assert_eq!(kept.full().unwrap().get(), serde_json::to_string(&m).unwrap());
        assert_eq!(kept.message().unwrap(), m);
        assert_eq!(kept.id().unwrap(), Some(minted.clone()));
        assert_eq!(kept.content().unwrap(), json!("text"));
        assert_eq!(kept.content_text().unwrap(), "text");

        // Ids a UUID parser takes that are not written as `mint` writes them, and the
        // same UUID in other forms, are kept as text; each is found as itself only. (A
        // fixed UUID with letters in it: a minted one may have none to upper-case.)
        let lower = "0192f0c1-7a3b-7cde-8f01-23456789abcd";
        let upper = lower.to_uppercase();
        let simple = lower.replace('-', "");
        let ids = [lower, &upper, &simple, &format!("{{{lower}}}"), "00000000-0000-0000-0000-000000000000"];
        let messages: Vec<Message> = ids
            .iter()
            .enumerate()
            .map(|(i, id)| Message {
                id: Some((*id).to_owned()),
                created_at: stamp.clone(),
                content: json!(format!("m{i} \"é\"\n")),
                ..message(Role::Assistant, "x")
            })
            .collect();
        let (history, kept) = kept_of(&messages, &Origin::default()).unwrap();
        for (i, (m, kept)) in messages.iter().zip(&kept).enumerate() {
            assert_eq!(kept.bits(), i == 0 || i == 4, "{:?}", m.id);
            assert_eq!(kept.full().unwrap().get(), serde_json::to_string(m).unwrap());
            assert_eq!(history.index_of(m.id.as_deref().unwrap()), Some(i), "{:?}", m.id);
            assert_eq!(history.id_at(i).unwrap(), m.id);
        }
        assert_eq!(history.index_of(&lower[..35]), None);
        assert_eq!(history.index_of("00000000-0000-0000-0000-000000000001"), None);

        // A time stamp not in the canonical form (a message built in a test, say) keeps
        // the message's text as it is.
        let loose = Message { created_at: "2026-12-01T00:00:00Z".into(), ..m.clone() };
        let kept = Stored::of(&loose, 0).unwrap();
        assert!(kept.short() && !kept.bits());
        assert_eq!(kept.message().unwrap(), loose);
    }

    proptest::proptest! {
        /// Any UUID and any time the canonical form can write, with any short content,
        /// reads back as serde_json writes the message.
        #[test]
        fn bits_read_back_as_the_text_they_stand_for(
            id in proptest::num::u128::ANY,
            micros in -62_167_219_200_000_000i64..253_402_300_800_000_000,
            content in "\\PC{0,40}",
        ) {
            let m = Message {
                id: Some(uuid::Uuid::from_u128(id).hyphenated().to_string()),
                created_at: crate::session::at_micros(micros),
                content: json!(content),
                ..message(Role::Tool, "x")
            };
            let kept = Stored::of(&m, 0).unwrap();
            proptest::prop_assert!(kept.bits());
            let full = kept.full().unwrap();
            proptest::prop_assert_eq!(full.get(), serde_json::to_string(&m).unwrap());
            proptest::prop_assert_eq!(kept.id().unwrap(), m.id.clone());
            proptest::prop_assert_eq!(kept.message().unwrap(), m.clone());
            proptest::prop_assert_eq!(kept.content_text().unwrap(), content.as_str());
            let (history, _) = kept_of(std::slice::from_ref(&m), &Origin::default()).unwrap();
            proptest::prop_assert_eq!(history.index_of(m.id.as_deref().unwrap()), Some(0));
        }
    }

    #[test]
    fn ids_are_found_by_their_quoted_text() {
        let ids = ["a", "a\"b", "a\\", "é", "a,"];
        let (history, _) =
            kept_of(&ids.iter().map(|id| message(Role::User, id)).collect::<Vec<_>>(), &Origin::default()).unwrap();
        for (i, id) in ids.iter().enumerate() {
            assert_eq!(history.index_of(id), Some(i), "{id}");
            assert_eq!(history.id_at(i).unwrap().as_deref(), Some(*id));
        }
        assert_eq!(history.index_of("b"), None);
        assert_eq!(history.index_of("a\"b\""), None);
        assert_eq!(history.last_id().unwrap().as_deref(), Some("a,"));
        assert_eq!(History::default().last_id().unwrap(), None);
    }

    #[test]
    fn the_trailing_group_follows_appends_and_cuts() {
        let (mut history, _) =
            kept_of(&[message(Role::User, "u1"), calls("a1", &["c1", "c2"])], &Origin::default()).unwrap();
        assert_eq!(unanswered(&history), ["c1", "c2"]);
        history.extend(&[result("t1", "c1")], &Origin::default()).unwrap();
        assert_eq!(unanswered(&history), ["c2"]);
        history.keep_oldest(2).unwrap();
        assert_eq!(unanswered(&history), ["c1", "c2"]);
        history
            .extend(&[result("t1", "c1"), result("t2", "c2"), message(Role::User, "u2")], &Origin::default())
            .unwrap();
        assert!(unanswered(&history).is_empty());
        history.keep_oldest(4).unwrap();
        assert!(unanswered(&history).is_empty());
        assert!(history.tail().check_result("c2").is_err(), "c2 is answered");
        assert!(history.tail().check_result("c1").is_err(), "c1 is answered");
        history.keep_oldest(3).unwrap();
        assert_eq!(unanswered(&history), ["c2"]);
        history.drop_oldest(1).unwrap();
        assert_eq!(unanswered(&history), ["c2"]);
        assert_eq!(history.index_of("a1"), Some(0));
        history.drop_oldest(9).unwrap();
        assert_eq!(history.len(), 0);
        assert!(unanswered(&history).is_empty());
        let (mut compacted, _) = kept_of(&[message(Role::User, "s")], &Origin::default()).unwrap();
        let (old, _) = kept_of(&[message(Role::User, "u"), calls("a", &["c"])], &Origin::default()).unwrap();
        compacted.extend_kept(&old, 1).unwrap();
        assert_eq!(unanswered(&compacted), ["c"]);
    }
}
