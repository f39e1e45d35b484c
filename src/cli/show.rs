//! `convo show ID`: a session as a transcript a person can read — each message with its
//! index and role, tool calls with their results under them, cancelled and partial
//! messages marked, images as `[image 34 KB png]` — or, with `--format`, the request
//! body a provider would get (`session/export`).

use std::collections::HashMap;
use std::io::Write;

use clap::Args;
use serde::Serialize;
use serde_json::Value;

use crate::ops::Ops;
use crate::session::context::{Cache, Context, Fit};
use crate::session::export::{self, Options};
use crate::session::native::UsageTotals;
use crate::session::{Message, Role, SessionInfo, role_name};

use crate::cli::output::{self, Fail, FormatArg, paint, plural, style, when};

#[derive(Args, Debug)]
#[command(after_long_help = "Examples:\n  convo show demo\n  convo show demo --json\n  \
                             convo show demo --format openai_chat > body.json\n  \
                             convo show demo --format anthropic_messages --fit 100000 --cache")]
pub struct ShowArgs {
    /// The session.
    #[arg(value_name = "ID")]
    id: String,
    /// Print the request body for a provider, as session/export makes it (its warnings
    /// go to stderr).
    #[arg(long, value_enum, value_name = "FORMAT")]
    format: Option<FormatArg>,
    /// With --format: leave the trailing calls without results as they are (no
    /// synthetic results).
    #[arg(long, requires = "format")]
    no_repair: bool,
    /// With --format: make the body fit in this many tokens (as `fit` does: older
    /// tool results cleared, then older reasoning, then whole oldest turns; the last
    /// turn is always kept). The stored history does not change.
    #[arg(long, requires = "format", value_name = "TOKENS")]
    fit: Option<u64>,
    /// With --format: mark the body for the provider's prompt cache (`cache: true`).
    #[arg(long, requires = "format")]
    cache: bool,
    /// Print JSON: `{"session": SessionInfo, "messages": [Message]}` (the stored
    /// history), or with --format `{"payload", "warnings"}` (and `context`, `fit`
    /// when something was left out).
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct Shown<'a> {
    session: &'a SessionInfo,
    messages: &'a [std::sync::Arc<Message>],
}

pub async fn show(ops: &Ops, args: &ShowArgs) -> Result<u8, Fail> {
    if let Some(format) = args.format {
        let context = Context {
            fit: args.fit.map(|max_tokens| Fit { max_tokens, keep_turns: 1 }),
            cache: args.cache.then(Cache::default),
            ..Context::default()
        };
        let exported = ops.export(&args.id, format.into(), !args.no_repair, Options::default(), &context).await?;
        if args.json {
            output::json(&exported)?;
            return Ok(0);
        }
        output::json(&exported.payload)?;
        let mut err = output::stderr();
        for w in &exported.warnings {
            let at = w.index.map(|i| format!("message {i}: ")).unwrap_or_default();
            writeln!(err, "{} {at}{}", paint(style::WARN, "warning:"), w.message)?;
        }
        return Ok(0);
    }
    let (info, stored) = ops.transcript(&args.id).await?;
    if args.json {
        output::json(&Shown { session: &info, messages: &stored })?;
        return Ok(0);
    }
    let messages: Vec<&Message> = stored.iter().map(|m| &**m).collect();
    let mut out = output::stdout();
    header(&mut out, &info)?;
    transcript(&mut out, &messages)?;
    out.flush()?;
    Ok(0)
}

fn header(out: &mut impl Write, info: &SessionInfo) -> std::io::Result<()> {
    let title = info.title.as_deref().map(|t| format!("  {}", crate::error::quote(t))).unwrap_or_default();
    writeln!(out, "{}{title}", paint(style::HEADER, format!("session {}", info.session_id)))?;
    let mut facts = vec![plural(info.message_count as usize, "message"), format!("revision {}", info.revision)];
    facts.push(format!("created {}", when(&info.created_at)));
    facts.push(format!("updated {}", when(&info.updated_at)));
    if let Some(cwd) = &info.cwd {
        facts.push(format!("cwd {cwd}"));
    }
    if let Some(from) = &info.forked_from {
        let at = from.message_id.as_deref().map(|m| format!(" at {m}")).unwrap_or_default();
        facts.push(format!("forked from {}{at}", from.session_id));
    }
    let usage = &info.usage;
    if *usage != UsageTotals::default() {
        let mut spent = format!("tokens {} in, {} out", usage.input_tokens, usage.output_tokens);
        if usage.reasoning_tokens > 0 {
            spent.push_str(&format!(" ({} reasoning)", usage.reasoning_tokens));
        }
        if usage.cache_read_tokens > 0 || usage.cache_write_tokens > 0 {
            spent.push_str(&format!(", cache {} read, {} written", usage.cache_read_tokens, usage.cache_write_tokens));
        }
        facts.push(spent);
    }
    writeln!(out, "{}", paint(style::DIM, facts.join(" · ")))?;
    if let Some(metadata) = &info.metadata {
        writeln!(out, "{}", paint(style::DIM, format!("metadata {}", Value::Object(metadata.clone()))))?;
    }
    if let Some(system) = &info.system {
        writeln!(out)?;
        writeln!(out, "{}", paint(style::SYSTEM, "system prompt"))?;
        lines(out, 4, system)?;
    }
    Ok(())
}

/// Every message once: a tool result under the call it answers when it follows that
/// call's assistant message, else in its place.
fn transcript(out: &mut impl Write, messages: &[&Message]) -> std::io::Result<()> {
    let mut shown_under_call = vec![false; messages.len()];
    for (i, m) in messages.iter().enumerate() {
        if shown_under_call[i] {
            continue;
        }
        writeln!(out)?;
        message_head(out, i, m)?;
        body(out, 4, m)?;
        if m.role == Role::Assistant && m.tool_calls.is_some() {
            // The results right after this message, by the call they answer.
            let results: HashMap<&str, usize> = (i + 1..messages.len())
                .take_while(|&j| messages[j].role == Role::Tool)
                .filter_map(|j| messages[j].tool_call_id.as_deref().map(|c| (c, j)))
                .collect();
            for call in export::calls(m) {
                let args = paint(style::DIM, &call.args);
                writeln!(
                    out,
                    "    {} {args}  {}",
                    paint(style::CALL, format!("→ {}", call.name)),
                    paint(style::DIM, &call.id)
                )?;
                match results.get(call.id.as_str()) {
                    Some(&j) => {
                        shown_under_call[j] = true;
                        result(out, j, messages[j])?;
                    }
                    None => writeln!(out, "      {}", paint(style::DIM, "← no result yet"))?,
                }
            }
        }
    }
    Ok(())
}

fn message_head(out: &mut impl Write, index: usize, m: &Message) -> std::io::Result<()> {
    let role = match m.role {
        Role::User => style::USER,
        Role::Assistant => style::ASSISTANT,
        Role::System => style::SYSTEM,
        Role::Tool => style::TOOL,
    };
    let name = m.name.as_deref().map(|n| format!(" ({n})")).unwrap_or_default();
    let answers = m.tool_call_id.as_deref().map(|c| format!(" for {c}")).unwrap_or_default();
    let mark = marks(m).map(|mark| format!(" {}", paint(style::WARN, mark))).unwrap_or_default();
    let at = paint(style::DIM, format!("  {}", when(&m.created_at)));
    writeln!(
        out,
        "{} {}{name}{answers}{mark}{at}",
        paint(style::DIM, format!("[{index}]")),
        paint(role, role_name(m.role))
    )
}

/// A tool result under its call.
fn result(out: &mut impl Write, index: usize, m: &Message) -> std::io::Result<()> {
    let mark = marks(m).map(|mark| format!(" {}", paint(style::WARN, mark))).unwrap_or_default();
    writeln!(out, "      ← {} {}{mark}", paint(style::DIM, format!("[{index}]")), paint(style::TOOL, "tool"))?;
    body(out, 8, m)
}

/// What marks a message as not said by the model or the tool: a result the rules
/// stored for a call that never got one, or a stream's partial answer.
fn marks(m: &Message) -> Option<String> {
    let metadata = m.metadata.as_ref()?;
    if metadata.get("synthetic") == Some(&Value::Bool(true)) {
        return Some("[cancelled: synthetic result]".into());
    }
    if metadata.get("partial") == Some(&Value::Bool(true)) {
        let reason = metadata.get("reason").and_then(Value::as_str).unwrap_or("unknown");
        return Some(format!("[partial: {reason}]"));
    }
    None
}

/// The content, the images and the metadata of a message.
fn body(out: &mut impl Write, indent: usize, m: &Message) -> std::io::Result<()> {
    match &m.content {
        Value::Null => {}
        Value::String(text) => lines(out, indent, text)?,
        Value::Array(parts) => {
            for part in parts {
                match part.get("type").and_then(Value::as_str) {
                    Some("text") => lines(out, indent, part.get("text").and_then(Value::as_str).unwrap_or_default())?,
                    _ => lines(out, indent, &paint(style::CALL, part_label(part)))?,
                }
            }
        }
        other => lines(out, indent, &other.to_string())?,
    }
    for image in m.images.iter().flatten() {
        lines(out, indent, &paint(style::CALL, image_label(image)))?;
    }
    let shown = m.metadata.as_ref().filter(|_| marks(m).is_none());
    if let Some(metadata) = shown {
        lines(out, indent, &paint(style::DIM, format!("metadata {}", Value::Object(metadata.clone()))))?;
    }
    Ok(())
}

fn lines(out: &mut impl Write, indent: usize, text: &str) -> std::io::Result<()> {
    for line in text.lines() {
        writeln!(out, "{:indent$}{line}", "")?;
    }
    Ok(())
}

/// A content part that is not text: an image as its size and type, anything else as
/// its type.
fn part_label(part: &Value) -> String {
    let data = match part.get("type").and_then(Value::as_str) {
        Some("image_url") => part
            .pointer("/image_url/url")
            .and_then(Value::as_str)
            .map(|url| url.split_once(";base64,").map_or(Err(url), |(_, data)| Ok(data))),
        Some("image") => part.pointer("/source/data").and_then(Value::as_str).map(Ok),
        _ => None,
    };
    match data {
        Some(Ok(base64)) => image_label(base64),
        Some(Err(url)) => format!("[image {url}]"),
        None => format!("[{} part]", part.get("type").and_then(Value::as_str).unwrap_or("unknown")),
    }
}

/// `[image 34 KB png]`: the decoded size and the type read from the bytes.
fn image_label(base64: &str) -> String {
    let trimmed = base64.trim_end_matches('=');
    let bytes = trimmed.len() * 3 / 4;
    let kind = export::media_type(base64).map_or("of unknown type", |t| t.trim_start_matches("image/"));
    format!("[image {} {kind}]", size(bytes))
}

fn size(bytes: usize) -> String {
    match bytes {
        0..1024 => format!("{bytes} B"),
        1024..1_048_576 => format!("{} KB", (bytes + 512) / 1024),
        _ => format!("{:.1} MB", bytes as f64 / 1_048_576.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_show_their_size_and_type() {
        let png = base64_of(&[b"\x89PNG\r\n\x1a\n".as_slice(), &[0; 34 * 1024 - 8]].concat());
        assert_eq!(image_label(&png), "[image 34 KB png]");
        assert_eq!(image_label(&base64_of(b"hello there, world")), "[image 18 B of unknown type]");
        let part =
            serde_json::json!({"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{png}")}});
        assert_eq!(part_label(&part), "[image 34 KB png]");
        assert_eq!(part_label(&serde_json::json!({"type": "audio"})), "[audio part]");
        assert_eq!(size(3 * 1_048_576 / 2), "1.5 MB");
    }

    fn base64_of(bytes: &[u8]) -> String {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(bytes)
    }
}
