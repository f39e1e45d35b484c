//! The methods of protocol version 1, registered in one `RpcModule`. Each handler parses
//! its params (the one edge where wire JSON becomes domain values), calls the store and
//! returns a result that serializes to the documented shape.

mod dict;
mod lifecycle;
mod messages;
mod param_errors;
mod provider;
mod sessions;

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

pub fn module(ctx: Ctx) -> Methods {
    let ctx = Arc::new(ctx);
    let mut m = RpcModule::from_arc(ctx.clone());
    register(&mut m, "initialize", lifecycle::initialize);
    register(&mut m, "shutdown", lifecycle::shutdown);
    register(&mut m, "session/create", sessions::create);
    register(&mut m, "session/get", sessions::get);
    register(&mut m, "session/list", sessions::list);
    register(&mut m, "session/update", sessions::update);
    register(&mut m, "session/delete", sessions::delete);
    register(&mut m, "session/fork", sessions::fork);
    register(&mut m, "session/clear", sessions::clear);
    register(&mut m, "session/add_user", messages::add_user);
    register(&mut m, "session/add_assistant", messages::add_assistant);
    register(&mut m, "session/add_tool_result", messages::add_tool_result);
    register(&mut m, "session/add_message", messages::add_message);
    register(&mut m, "session/add_messages", messages::add_messages);
    register(&mut m, "session/history", messages::history);
    register(&mut m, "session/trim", messages::trim);
    register(&mut m, "session/to_dict", dict::to_dict);
    register(&mut m, "session/from_dict", dict::from_dict);
    register(&mut m, "session/export", provider::export);
    register(&mut m, "session/validate", provider::validate);
    register(&mut m, "session/count_tokens", provider::count_tokens);
    let mut names: Vec<&'static str> = m.method_names().collect();
    names.sort_unstable();
    let _ = ctx.method_names.set(names);
    m.into()
}

fn register<P, T, F, Fut>(m: &mut RpcModule<Ctx>, name: &'static str, handler: F)
where
    P: DeserializeOwned + Send + 'static,
    T: Serialize + Clone + Send + 'static,
    F: Fn(Arc<Ctx>, P) -> Fut + Copy + Send + Sync + 'static,
    Fut: Future<Output = Result<T>> + Send + 'static,
{
    let result = m.register_async_method(name, move |params: Params<'static>, ctx, _| async move {
        handler(ctx, parse::<P>(&params)?).await
    });
    if let Err(e) = result {
        unreachable!("method {name} registered twice: {e}");
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
