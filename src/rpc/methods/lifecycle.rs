//! `initialize` and `shutdown`. (`exit` is a notification the connection handles itself.)

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::ops::Call;
use crate::rpc::framing::Framing;
use crate::rpc::methods::Ctx;
use crate::session::empty_table;
use crate::session::export::Format;

/// The protocol version this server speaks.
pub const PROTOCOL_VERSION: u32 = 1;

/// Whatever an LSP-style client sends (process id, client info, ...) is accepted; convo
/// reads `runtime.format` (the provider body its runtime requests should carry).
#[derive(Deserialize)]
pub struct InitializeParams {
    #[serde(default, deserialize_with = "empty_table::optional_object")]
    runtime: Option<RuntimeOptions>,
}

#[derive(Deserialize)]
struct RuntimeOptions {
    #[serde(default)]
    format: Option<Format>,
}

/// `shutdown` takes no params (any are ignored).
#[derive(Deserialize)]
pub struct NoParams {}

#[derive(Serialize, Clone)]
pub struct InitializeResult {
    server_info: ServerInfo,
    protocol_version: u32,
    capabilities: Capabilities,
    store: StoreState,
}

/// The store as this server opened it.
#[derive(Serialize, Clone)]
struct StoreState {
    /// Opened for reading only (a file or file system this process cannot write):
    /// reads are answered, every write is 1006.
    read_only: bool,
}

#[derive(Serialize, Clone)]
struct ServerInfo {
    name: &'static str,
    version: &'static str,
}

#[derive(Serialize, Clone)]
struct Capabilities {
    methods: Vec<&'static str>,
    store: &'static str,
    max_message_bytes: usize,
    framing: &'static str,
    /// The provider body formats export, validate, add_response and import take.
    formats: [&'static str; 5],
    /// Appends take `message_id`, and a retry is answered instead of stored twice.
    exactly_once: bool,
    /// The options of context management (spec section 17) export and count_tokens take.
    context: [&'static str; 5],
}

pub async fn initialize(ctx: Arc<Ctx>, p: InitializeParams, _: Arc<Call>) -> Result<InitializeResult> {
    ctx.set_runtime_format(p.runtime.and_then(|r| r.format));
    Ok(InitializeResult {
        server_info: ServerInfo { name: "convo", version: env!("CARGO_PKG_VERSION") },
        protocol_version: PROTOCOL_VERSION,
        capabilities: Capabilities {
            methods: ctx.method_names.get().cloned().unwrap_or_default(),
            store: ctx.ops.store_kind(),
            max_message_bytes: ctx.max_message_bytes,
            framing: ctx.framing.get().unwrap_or(Framing::Lsp).name(),
            formats: Format::ALL.map(Format::name),
            exactly_once: true,
            context: ["compaction", "clear_thinking", "clear_tool_results", "fit", "cache"],
        },
        store: StoreState { read_only: ctx.ops.store_read_only().is_some() },
    })
}

/// Makes every acknowledged write durable; the connection rejects requests after it.
pub async fn shutdown(ctx: Arc<Ctx>, _: NoParams, _: Arc<Call>) -> Result<()> {
    ctx.ops.flush().await
}
