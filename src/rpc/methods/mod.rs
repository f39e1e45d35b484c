//! The methods of protocol version 1, registered in one `RpcModule` by one table (name,
//! where it runs, handler). Each handler parses its params (the one edge where wire JSON
//! becomes domain values), calls the store and returns a result that serializes to the
//! documented shape.

mod dict;
mod lifecycle;
mod messages;
mod param_errors;
mod provider;
mod sessions;

use std::collections::HashSet;
use std::future::Future;
use std::sync::{Arc, OnceLock};

use jsonrpsee::types::Params;
use jsonrpsee::{Methods, RpcModule};
use serde::Serialize;
use serde::de::{Deserialize, DeserializeOwned, Deserializer};

use crate::error::{Error, Result};
use crate::rpc::framing::FramingCell;
use crate::store::Store;

/// The most messages one request may carry (`add_messages`, `from_dict`) and the most
/// one reply may hold (`history`, `to_dict`): beyond them, error 1005.
pub const MAX_MESSAGES: u64 = 100_000;

fn check_count(what: &str, n: usize) -> Result<()> {
    if n as u64 > MAX_MESSAGES {
        return Err(Error::TooLarge(format!("{what} holds {n} messages; the limit is {MAX_MESSAGES}")));
    }
    Ok(())
}

/// What every handler can reach.
pub struct Ctx {
    pub store: Arc<dyn Store>,
    pub framing: Arc<FramingCell>,
    pub max_message_bytes: usize,
    /// Every registered method, sorted, for `initialize`.
    pub method_names: OnceLock<Vec<&'static str>>,
}

/// Where a method runs: on the thread that reads, orders and writes frames, or (with
/// its params parsed and its reply serialized) on the CPU pool, because its params,
/// its work or its reply can be large.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Runs {
    Inline,
    Pool,
}

/// The registered methods, and the ones that run on the CPU pool.
pub struct Registry {
    pub methods: Methods,
    pub pooled: HashSet<&'static str>,
}

pub fn module(ctx: Ctx) -> Registry {
    use Runs::{Inline, Pool};
    let ctx = Arc::new(ctx);
    let mut t = Table { module: RpcModule::from_arc(ctx.clone()), pooled: HashSet::new() };
    t.add("initialize", Inline, lifecycle::initialize);
    t.add("shutdown", Inline, lifecycle::shutdown);
    t.add("session/create", Inline, sessions::create);
    t.add("session/get", Inline, sessions::get);
    t.add("session/list", Inline, sessions::list);
    t.add("session/update", Inline, sessions::update);
    t.add("session/delete", Inline, sessions::delete);
    t.add("session/fork", Inline, sessions::fork);
    t.add("session/clear", Inline, sessions::clear);
    t.add("session/add_user", Inline, messages::add_user);
    t.add("session/add_assistant", Inline, messages::add_assistant);
    t.add("session/add_tool_result", Inline, messages::add_tool_result);
    t.add("session/add_message", Inline, messages::add_message);
    t.add("session/add_messages", Pool, messages::add_messages);
    t.add("session/history", Pool, messages::history);
    t.add("session/trim", Pool, messages::trim);
    t.add("session/to_dict", Pool, dict::to_dict);
    t.add("session/from_dict", Pool, dict::from_dict);
    t.add("session/export", Pool, provider::export);
    t.add("session/validate", Pool, provider::validate);
    t.add("session/count_tokens", Pool, provider::count_tokens);
    let mut names: Vec<&'static str> = t.module.method_names().collect();
    names.sort_unstable();
    let _ = ctx.method_names.set(names);
    Registry { methods: t.module.into(), pooled: t.pooled }
}

struct Table {
    module: RpcModule<Ctx>,
    pooled: HashSet<&'static str>,
}

impl Table {
    fn add<P, T, F, Fut>(&mut self, name: &'static str, runs: Runs, handler: F)
    where
        P: DeserializeOwned + Send + 'static,
        T: Serialize + Clone + Send + 'static,
        F: Fn(Arc<Ctx>, P) -> Fut + Copy + Send + Sync + 'static,
        Fut: Future<Output = Result<T>> + Send + 'static,
    {
        let result = self.module.register_async_method(name, move |params: Params<'static>, ctx, _| async move {
            let parsed = parse::<P>(&params)?;
            // The params' text is not needed once parsed: a large request holds its
            // memory once, not twice, while it waits for the store.
            drop(params);
            handler(ctx, parsed).await
        });
        if let Err(e) = result {
            unreachable!("method {name} registered twice: {e}");
        }
        if runs == Runs::Pool {
            self.pooled.insert(name);
        }
    }
}

/// Named params only: an object, or nothing at all (read as `{}`).
fn parse<P: DeserializeOwned>(params: &Params) -> Result<P> {
    let raw = params.as_str().unwrap_or("{}");
    if !raw.starts_with('{') {
        return Err(Error::invalid("params must be an object"));
    }
    // The fast path; on failure, parse again to name the member at fault
    // (`messages[2].role: unknown variant ...`).
    serde_json::from_str(raw).map_err(|_| {
        match serde_path_to_error::deserialize::<_, P>(&mut serde_json::Deserializer::from_str(raw)) {
            Err(e) => {
                let path = e.path().to_string();
                param_errors::describe(raw, &path, e.into_inner())
            }
            Ok(_) => Error::invalid("params do not parse"),
        }
    })
}

/// For fields where `null` (clear) and absent (leave alone) differ.
fn present<'de, T: Deserialize<'de>, D: Deserializer<'de>>(d: D) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

/// Params of the methods that only name a session.
#[derive(serde::Deserialize)]
struct SessionParams {
    session_id: crate::session::SessionId,
}

/// Params of the methods that only name a session and may check its revision.
#[derive(serde::Deserialize)]
struct RevisionParams {
    session_id: crate::session::SessionId,
    #[serde(default)]
    expected_revision: Option<u64>,
}
