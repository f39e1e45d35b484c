//! Rows to domain values and back: sessions, messages, and images kept once by content
//! hash in `blobs`, counted by the message rows that name them.

use rusqlite::{Connection, OptionalExtension, Row, params};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::session::image::describe;
use crate::session::{ForkPoint, Message, SessionInfo, role_name};
pub use crate::store::sql::{SessionRow, parse_role};
use crate::store::sqlite::errors::sql;
use crate::store::sqlite::words;

pub const SESSION_COLUMNS: &str = "session_id, system, cwd, title, metadata, revision, created_at, updated_at, \
     forked_from_session, forked_from_message, segment, start, len, usage";

pub fn session(row: &Row) -> rusqlite::Result<SessionRow> {
    let start: i64 = row.get(11)?;
    let len: i64 = row.get(12)?;
    let forked_session: Option<String> = row.get(8)?;
    Ok(SessionRow {
        info: SessionInfo {
            session_id: row.get(0)?,
            system: row.get(1)?,
            cwd: row.get(2)?,
            title: row.get(3)?,
            metadata: json_column(row, 4)?,
            message_count: (len - start) as u64,
            revision: row.get::<_, i64>(5)? as u64,
            created_at: row.get(6)?,
            updated_at: row.get(7)?,
            forked_from: forked_session
                .map(|session_id| ForkPoint { session_id, message_id: row.get(9).ok().flatten() }),
            usage: json_column(row, 13)?.unwrap_or_default(),
        },
        segment: row.get(10)?,
        start: start as u64,
        len: len as u64,
    })
}

pub fn load_session(conn: &Connection, session_id: &str) -> Result<Option<SessionRow>> {
    let sql_text = format!("SELECT {SESSION_COLUMNS} FROM sessions WHERE session_id = ?1");
    conn.prepare_cached(&sql_text).and_then(|mut s| s.query_row([session_id], session).optional()).map_err(sql)
}

fn json_column<T: serde::de::DeserializeOwned>(row: &Row, i: usize) -> rusqlite::Result<Option<T>> {
    let text: Option<String> = row.get(i)?;
    text.map(|t| {
        serde_json::from_str(&t)
            .map_err(|e| rusqlite::Error::FromSqlConversionFailure(i, rusqlite::types::Type::Text, Box::new(e)))
    })
    .transpose()
}

fn to_json(value: &impl serde::Serialize) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| "null".into())
}

fn opt_json<T: serde::Serialize>(value: &Option<T>) -> Option<String> {
    value.as_ref().map(to_json)
}

/// Writes what an append changes in a session row: its revision, update time, length
/// and usage. (Replacing the whole row would also rewrite every index of `sessions`.)
pub fn put_appended(conn: &Connection, row: &SessionRow) -> Result<()> {
    let info = &row.info;
    conn.prepare_cached(
        "UPDATE sessions SET revision = ?2, updated_at = ?3, len = ?4, usage = ?5 WHERE session_id = ?1",
    )
    .and_then(|mut s| {
        let usage = to_json(&info.usage);
        s.execute(params![info.session_id, info.revision as i64, info.updated_at, row.len as i64, usage])
    })
    .map(drop)
    .map_err(sql)
}

/// Writes a session row whole: inserts it, or replaces the one with its id.
pub fn put_session(conn: &Connection, row: &SessionRow) -> Result<()> {
    let info = &row.info;
    let forked = info.forked_from.as_ref();
    conn.prepare_cached(&format!(
        "INSERT OR REPLACE INTO sessions ({SESSION_COLUMNS}) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)"
    ))
    .and_then(|mut s| {
        s.execute(params![
            info.session_id,
            info.system,
            info.cwd,
            info.title,
            opt_json(&info.metadata),
            info.revision as i64,
            info.created_at,
            info.updated_at,
            forked.map(|f| &f.session_id),
            forked.and_then(|f| f.message_id.as_ref()),
            row.segment,
            row.start as i64,
            row.len as i64,
            to_json(&info.usage),
        ])
    })
    .map(drop)
    .map_err(sql)
}

pub const MESSAGE_COLUMNS: &str =
    "id, role, content, name, tool_call_id, tool_calls, images, metadata, native, usage, created_at";

/// A message row; images still as their hashes (see `load_images`).
pub fn message(row: &Row) -> rusqlite::Result<Message> {
    let role: String = row.get(1)?;
    let role = parse_role(&role)
        .ok_or_else(|| rusqlite::Error::FromSqlConversionFailure(1, rusqlite::types::Type::Text, role.into()))?;
    Ok(Message {
        id: Some(row.get(0)?),
        role,
        content: json_column::<Value>(row, 2)?.unwrap_or(Value::Null),
        name: row.get(3)?,
        tool_call_id: row.get(4)?,
        tool_calls: json_column(row, 5)?,
        images: json_column(row, 6)?,
        metadata: json_column::<Map<String, Value>>(row, 7)?,
        native: json_column(row, 8)?,
        usage: json_column(row, 9)?,
        created_at: row.get(10)?,
    })
}

/// Appends to `out` a message row as the JSON text `Message` serializes to (every field,
/// in order), spliced from its columns, which hold JSON text already; appends nothing and
/// returns false when the message has images, whose data is in `blobs`. Each column is
/// checked to be one JSON value on one line before it is written, so a damaged row cannot
/// break a reply or its framing; the rest of the text is written here, so the whole is
/// not parsed again.
pub fn message_json(row: &Row, out: &mut String) -> rusqlite::Result<bool> {
    use rusqlite::types::ValueRef;
    if !matches!(row.get_ref(6)?, ValueRef::Null) {
        return Ok(false);
    }
    let text = |i: usize| text_of(i, row.get_ref(i)?);
    let json = |i: usize| -> rusqlite::Result<Option<&str>> {
        let value = match row.get_ref(i)? {
            // SAFETY: every byte is ASCII, which `is_plain_json_string` checked.
            ValueRef::Text(bytes) if is_plain_json_string(bytes) => {
                return Ok(Some(unsafe { std::str::from_utf8_unchecked(bytes) }));
            }
            value => text_of(i, value)?,
        };
        match value {
            Some(json) if !is_one_json_line(json) => Err(rusqlite::Error::FromSqlConversionFailure(
                i,
                rusqlite::types::Type::Text,
                format!("not one JSON value: {json:.80}").into(),
            )),
            _ => Ok(value),
        }
    };
    let role = text(1)?.unwrap_or_default();
    if parse_role(role).is_none() {
        return Err(rusqlite::Error::FromSqlConversionFailure(1, rusqlite::types::Type::Text, role.into()));
    }
    let (id, created_at) = (text(0)?.unwrap_or_default(), text(10)?.unwrap_or_default());
    let (content, name, tool_call_id, tool_calls, metadata) = (json(2)?, text(3)?, text(4)?, json(5)?, json(7)?);
    let (native, usage) = (json(8)?, json(9)?);
    // The members' names and quotes take 150 bytes: with room for a few escapes, the
    // text is written without growing.
    let columns =
        [Some(id), Some(role), content, name, tool_call_id, tool_calls, metadata, native, usage, Some(created_at)];
    out.reserve(192 + columns.iter().map(|c| c.map_or(4, str::len)).sum::<usize>());
    let string = |out: &mut String, s: Option<&str>| match s {
        Some(s) if !crate::session::json::needs_escape(s.as_bytes()) => {
            out.push('"');
            out.push_str(s);
            out.push('"');
        }
        Some(s) => out.push_str(&serde_json::to_string(s).unwrap_or_default()),
        None => out.push_str("null"),
    };
    let raw = |out: &mut String, s: Option<&str>| out.push_str(s.unwrap_or("null"));
    out.push_str(r#"{"id":"#);
    string(out, Some(id));
    out.push_str(r#","role":"#);
    string(out, Some(role));
    out.push_str(r#","content":"#);
    raw(out, content);
    out.push_str(r#","name":"#);
    string(out, name);
    out.push_str(r#","tool_call_id":"#);
    string(out, tool_call_id);
    out.push_str(r#","tool_calls":"#);
    raw(out, tool_calls);
    out.push_str(r#","images":null,"metadata":"#);
    raw(out, metadata);
    out.push_str(r#","native":"#);
    raw(out, native);
    out.push_str(r#","usage":"#);
    raw(out, usage);
    out.push_str(r#","created_at":"#);
    string(out, Some(created_at));
    out.push('}');
    Ok(true)
}

/// Column `i`'s `value` as text: `None` for NULL, an error when it is not UTF-8 text.
fn text_of(i: usize, value: rusqlite::types::ValueRef<'_>) -> rusqlite::Result<Option<&str>> {
    match value {
        rusqlite::types::ValueRef::Null => Ok(None),
        value => value
            .as_str()
            .map(Some)
            .map_err(|e| rusqlite::Error::FromSqlConversionFailure(i, value.data_type(), Box::new(e))),
    }
}

/// What a JSON string cannot hold unescaped (serde_json escapes exactly these).
fn needs_escape(b: u8) -> bool {
    b == b'"' || b == b'\\' || b < 0x20
}

/// Whether `bytes` is a JSON string of ASCII with nothing escaped: a quote at each end,
/// and between them no quote, no backslash, and no byte below a space or past ASCII
/// (as a signed byte, both are below a space). Most content is, and is checked in this
/// one pass for its UTF-8 and its JSON alike. The scan has no short cut: it is
/// branch-free and vectorizes.
fn is_plain_json_string(bytes: &[u8]) -> bool {
    let unplain = |b: u8| (b as i8) < 0x20 || b == b'"' || b == b'\\';
    match bytes {
        [b'"', inner @ .., b'"'] => !inner.iter().fold(false, |seen, &b| seen | unplain(b)),
        _ => false,
    }
}

/// Whether `text` is one JSON value with no line break in it. A string without escapes,
/// the common content, is checked by a scan; anything else is parsed.
fn is_one_json_line(text: &str) -> bool {
    let bytes = text.as_bytes();
    if let [b'"', inner @ .., b'"'] = bytes {
        // No short cut: the scan is branch-free and vectorizes.
        if !inner.iter().fold(false, |seen, &b| seen | needs_escape(b)) {
            return true;
        }
    }
    !bytes.iter().any(|&b| b == b'\n' || b == b'\r') && serde_json::from_str::<serde::de::IgnoredAny>(text).is_ok()
}

/// Replaces each image hash of `message` by the image it names.
pub fn load_images(conn: &Connection, message: &mut Message) -> Result<()> {
    let Some(hashes) = message.images.as_mut() else { return Ok(()) };
    let mut stmt = conn.prepare_cached("SELECT data FROM blobs WHERE hash = ?1").map_err(sql)?;
    for slot in hashes.iter_mut() {
        *slot = stmt
            .query_row([&*slot], |r| r.get(0))
            .optional()
            .map_err(sql)?
            .ok_or_else(|| Error::StorageUnavailable(format!("image {slot} is missing from the database")))?;
    }
    Ok(())
}

/// The key of the message row at (`segment`, `seq`): its place, `segment << 32 | seq`,
/// which is also its rowid in the search index (`words`).
pub fn place(segment: i64, seq: u64) -> Result<i64> {
    words::rowid(segment, seq)
}

/// The places of the message rows `lo <= seq < hi` of `segment`, as a half-open range.
pub fn places(segment: i64, lo: u64, hi: u64) -> Result<(i64, i64)> {
    let (base, end) = (place(segment, 0)?, 1u64 << words::SEQ_BITS);
    Ok((base + lo.min(end) as i64, base + hi.min(end).max(lo.min(end)) as i64))
}

pub fn insert_message(conn: &Connection, segment: i64, seq: u64, m: &Message, revision: u64) -> Result<()> {
    let hashes = m.images.as_ref().map(|images| images.iter().map(|i| store_blob(conn, i)).collect::<Result<Vec<_>>>());
    let hashes = hashes.transpose()?;
    let place = place(segment, seq)?;
    conn.prepare_cached(&format!(
        "INSERT INTO messages (place, {MESSAGE_COLUMNS}, revision) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)"
    ))
    .and_then(|mut s| {
        s.execute(params![
            place,
            m.id,
            role_name(m.role),
            to_json(&m.content),
            m.name,
            m.tool_call_id,
            opt_json(&m.tool_calls),
            opt_json(&hashes),
            opt_json(&m.metadata),
            opt_json(&m.native),
            opt_json(&m.usage),
            m.created_at,
            revision as i64,
        ])
    })
    .map_err(sql)?;
    words::insert(conn, segment, seq, m)
}

/// Stores an image once, however many messages carry it, with its ref
/// (`session::image`); returns its hash.
fn store_blob(conn: &Connection, image: &str) -> Result<String> {
    let hash = hex(&Sha256::digest(image.as_bytes()));
    let counted = conn
        .prepare_cached("UPDATE blobs SET refs = refs + 1 WHERE hash = ?1")
        .and_then(|mut s| s.execute([&hash]))
        .map_err(sql)?;
    if counted == 0 {
        let described = describe(image);
        conn.prepare_cached(
            "INSERT INTO blobs (hash, data, refs, ref, media_type, bytes) VALUES (?1, ?2, 1, ?3, ?4, ?5)",
        )
        .and_then(|mut s| {
            s.execute(params![hash, image, described.reference, described.media_type, described.bytes as i64])
        })
        .map_err(sql)?;
    }
    Ok(hash)
}

/// The image whose ref is `reference`.
pub fn image(conn: &Connection, reference: &str) -> Result<Option<String>> {
    conn.prepare_cached("SELECT data FROM blobs WHERE ref = ?1 LIMIT 1")
        .and_then(|mut s| s.query_row([reference], |r| r.get(0)).optional())
        .map_err(sql)
}

/// Gives every image stored before refs existed (schema version 4) its ref.
pub fn describe_old_images(conn: &Connection) -> rusqlite::Result<()> {
    let old: Vec<(String, String)> = conn
        .prepare("SELECT hash, data FROM blobs WHERE ref IS NULL")?
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<rusqlite::Result<_>>()?;
    let mut update = conn.prepare("UPDATE blobs SET ref = ?2, media_type = ?3, bytes = ?4 WHERE hash = ?1")?;
    for (hash, data) in old {
        let d = describe(&data);
        update.execute(params![hash, d.reference, d.media_type, d.bytes as i64])?;
    }
    Ok(())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Deletes the message rows of `segment` with `lo <= seq < hi`, releasing their images.
pub fn delete_messages(conn: &Connection, segment: i64, lo: u64, hi: u64) -> Result<()> {
    let (from, to) = places(segment, lo, hi)?;
    let images: Vec<String> = conn
        .prepare_cached("SELECT images FROM messages WHERE place >= ?1 AND place < ?2 AND images IS NOT NULL")
        .and_then(|mut s| s.query_map(params![from, to], |r| r.get(0))?.collect())
        .map_err(sql)?;
    for list in images {
        let hashes: Vec<String> = serde_json::from_str(&list).map_err(|e| Error::StorageUnavailable(e.to_string()))?;
        for hash in hashes {
            conn.prepare_cached("UPDATE blobs SET refs = refs - 1 WHERE hash = ?1")
                .and_then(|mut s| s.execute([&hash]))
                .and_then(|_| conn.prepare_cached("DELETE FROM blobs WHERE hash = ?1 AND refs <= 0"))
                .and_then(|mut s| s.execute([&hash]))
                .map_err(sql)?;
        }
    }
    conn.prepare_cached("DELETE FROM messages WHERE place >= ?1 AND place < ?2")
        .and_then(|mut s| s.execute(params![from, to]))
        .map_err(sql)?;
    words::delete(conn, segment, lo, hi)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::Role;

    fn spliced(values: [Option<&str>; 11]) -> rusqlite::Result<Option<String>> {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(&format!("CREATE TABLE messages ({MESSAGE_COLUMNS})")).unwrap();
        conn.execute("INSERT INTO messages VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)", values).unwrap();
        let mut out = String::new();
        let written =
            conn.query_row(&format!("SELECT {MESSAGE_COLUMNS} FROM messages"), [], |row| message_json(row, &mut out))?;
        Ok(written.then_some(out))
    }

    fn stored(m: &Message) -> [Option<String>; 11] {
        [
            m.id.clone(),
            Some(role_name(m.role).into()),
            Some(to_json(&m.content)),
            m.name.clone(),
            m.tool_call_id.clone(),
            opt_json(&m.tool_calls),
            None,
            opt_json(&m.metadata),
            opt_json(&m.native),
            opt_json(&m.usage),
            Some(m.created_at.clone()),
        ]
    }

    #[test]
    fn a_spliced_row_is_the_text_the_message_serializes_to() {
        let content = serde_json::json!([{"type": "text", "text": "quote \" and \\ and \u{1F600}\n"}]);
        let mut full = Message::new(Role::Assistant, content);
        full.name = Some("na\"me\u{7}".into());
        full.tool_calls = Some(vec![serde_json::from_str(r#"{"id":"c1","n":1.000000000000000000001}"#).unwrap()]);
        full.metadata = serde_json::from_str(r#"{"z":1,"a":[true,null,-0.5e-300]}"#).unwrap();
        let mut tool = Message::new(Role::Tool, Value::Null);
        tool.tool_call_id = Some("c1".into());
        for m in [full, tool, Message::new(Role::User, "hi".into())] {
            let row = stored(&m);
            let text = spliced(row.each_ref().map(Option::as_deref)).unwrap().expect("no images");
            assert_eq!(text, serde_json::to_string(&m).unwrap());
        }
    }

    #[test]
    fn content_is_checked_for_utf_8_on_the_plain_path_and_off_it() {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(&format!("CREATE TABLE messages ({MESSAGE_COLUMNS})")).unwrap();
        let row = stored(&Message::new(Role::User, "hi".into()));
        // The content column as the bytes `hex` spells, read back through `message_json`.
        let content = |hex: &str| -> rusqlite::Result<String> {
            conn.execute("DELETE FROM messages", []).unwrap();
            let sql = format!(
                "INSERT INTO messages VALUES (?1, ?2, CAST(x'{hex}' AS TEXT), ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)"
            );
            conn.execute(&sql, row.each_ref().map(Option::as_deref)).unwrap();
            let mut out = String::new();
            conn.query_row(&format!("SELECT {MESSAGE_COLUMNS} FROM messages"), [], |row| message_json(row, &mut out))?;
            Ok(out)
        };
        let parsed = |text: String| serde_json::from_str::<Value>(&text).unwrap()["content"].clone();
        // "hi", then "é" in UTF-8, then "a\"b" with its escape, then a DEL, the last ASCII.
        assert_eq!(parsed(content("22686922").unwrap()), "hi");
        assert_eq!(parsed(content("22c3a922").unwrap()), "\u{e9}");
        assert_eq!(parsed(content("22615c226222").unwrap()), "a\"b");
        assert_eq!(parsed(content("227f22").unwrap()), "\u{7f}");
        // A byte that is not UTF-8, bare or after an escape, is refused, and so is a
        // control character.
        for damaged in ["22ff22", "2261ff6222", "2280", "225c22ff22", "22c322", "220922"] {
            assert!(content(damaged).is_err(), "{damaged}");
        }
    }

    #[test]
    fn rows_with_images_are_not_spliced_and_damaged_rows_are_refused() {
        let m = Message::new(Role::User, "hi".into());
        let mut row = stored(&m);
        row[6] = Some(r#"["abc"]"#.into());
        assert!(spliced(row.each_ref().map(Option::as_deref)).unwrap().is_none());
        let mut row = stored(&m);
        row[2] = Some("{not json".into());
        assert!(spliced(row.each_ref().map(Option::as_deref)).is_err());
        let mut row = stored(&m);
        row[1] = Some("wizard".into());
        assert!(spliced(row.each_ref().map(Option::as_deref)).is_err());
        // Each JSON column must be one value on one line: anything else would break the
        // reply, or its line in NDJSON framing.
        for (column, damaged) in [
            (2, "\"a\"b\""),
            (2, "\"tab\there\""),
            (2, "\"a\" \"b\""),
            (2, "\""),
            (2, "1 2"),
            (2, "[1,\n2]"),
            (2, "\r\"hi\""),
            (2, ""),
            (5, "[{\"id\":\"c1\"}"),
            (7, "{\"a\":\n1}"),
        ] {
            let mut row = stored(&m);
            row[column] = Some(damaged.into());
            assert!(spliced(row.each_ref().map(Option::as_deref)).is_err(), "{damaged:?} in column {column}");
        }
        for (column, member, fine) in [
            (2, "content", "\"\""),
            (2, "content", "\"esc\\\"aped\\n\""),
            (2, "content", " [1, 2] "),
            (7, "metadata", "{}"),
        ] {
            let mut row = stored(&m);
            row[column] = Some(fine.into());
            let text = spliced(row.each_ref().map(Option::as_deref)).unwrap().expect("no images");
            let parsed: Value = serde_json::from_str(&text).unwrap();
            assert_eq!(parsed[member], serde_json::from_str::<Value>(fine).unwrap(), "{fine:?}");
        }
    }
}
