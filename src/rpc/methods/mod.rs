//! The methods, declared once each in one table: name, the sessions it orders on,
//! where it runs, and its handler. Each handler is a thin adapter: it parses its params
//! (the one edge where wire JSON becomes domain values), calls one `ops` use-case, and
//! returns a result that serializes to the documented shape.
//!
//! A new method: its params and handler in its group's file (`sessions`, `messages` for
//! the add_* family, `history` for the view and what drops messages from it, `search`,
//! `dict`, `provider`, `runtime`, `watch`, `lifecycle`), one line in `module` below, and
//! its entry in `protocol/openrpc.json` (a test fails until both agree).

mod dict;
mod history;
mod lifecycle;
mod messages;
mod param_errors;
pub(crate) mod provider;
mod runtime;
mod search;
mod sessions;
mod shown;
mod watch;

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, OnceLock};

use futures_util::FutureExt as _;
use futures_util::future::{BoxFuture, ready};
use serde::de::{Deserialize, DeserializeOwned, Deserializer};

use crate::error::{Error, Result};
use crate::lock;
use crate::ops::{Call, Ops};
use crate::rpc::framing::FramingCell;
use crate::rpc::outgoing::{MethodResult, Outcome};
use crate::rpc::peer::Peer;
use crate::rpc::watch::Subscriptions;
use crate::session::export::Format;

/// What every handler can reach: the connection's operations and settings.
pub struct Ctx {
    pub ops: Ops,
    /// The client, for the notifications of subscriptions.
    pub peer: Arc<Peer>,
    pub subscriptions: Subscriptions,
    pub framing: Arc<FramingCell>,
    pub max_message_bytes: usize,
    /// Every registered method, sorted, for `initialize`.
    pub method_names: OnceLock<Vec<&'static str>>,
    /// `initialize`'s `runtime.format`.
    runtime_format: Mutex<Option<Format>>,
}

impl Ctx {
    pub fn new(ops: Ops, peer: Arc<Peer>, framing: Arc<FramingCell>, max_message_bytes: usize) -> Self {
        Ctx {
            ops,
            peer,
            subscriptions: Subscriptions::default(),
            framing,
            max_message_bytes,
            method_names: OnceLock::new(),
            runtime_format: Mutex::new(None),
        }
    }

    pub fn runtime_format(&self) -> Option<Format> {
        *lock(&self.runtime_format)
    }

    fn set_runtime_format(&self, format: Option<Format>) {
        *lock(&self.runtime_format) = format;
    }
}

/// Where a method runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Runs {
    /// On the thread that reads, orders and writes frames: it is quick.
    Inline,
    /// On the CPU pool (params parsed and reply serialized there too): its params, work
    /// or reply can be large. `$/cancelRequest` ends it while it computes.
    Pool,
    /// As `Pool`, but it writes: once started it runs to its end, since a committed
    /// change is not undone.
    PoolWrites,
    /// Waits for the host: it holds none of the running places, lets its session go
    /// (`Call::release`) and answers `$/cancelRequest` itself.
    Host,
}

/// Which sessions a request is ordered on (`rpc::order`), read from its params.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// None: it runs after every request received before it.
    Barrier,
    /// `session_id` (absent: a barrier).
    Session,
    /// `session_id`, or (absent) the session the server makes, which waits for nothing.
    Create,
    /// As `Session`, for a request whose one effect is an append: it may start once the
    /// request before it on its session has queued its write (`rpc::order`).
    Append,
    /// `session_id` and `new_session_id`.
    Fork,
    /// `data.session_id`.
    Import,
    /// Each of `session_ids` (absent: a barrier).
    Sessions,
}

/// Whether a method changes anything: a batch's replies over the size limit give up the
/// largest replies of requests that only read (`rpc::connection`), never a change's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    Reads,
    Changes,
}

/// How the connection runs a method.
#[derive(Debug, Clone, Copy)]
pub struct Spec {
    pub order: Order,
    pub runs: Runs,
    pub effect: Effect,
}

/// A method's handler: from its params' text and its call, the work that answers it.
/// A method that runs inline or waits for the host parses its params before it returns
/// (the work then holds them parsed, not the frame's text); one that runs on the CPU pool
/// holds a copy of the text and parses it there.
pub type Handler = Box<dyn Fn(Option<&str>, Arc<Call>) -> BoxFuture<'static, Outcome> + Send + Sync>;

/// A method: how it runs, and its handler.
pub struct Method {
    pub spec: Spec,
    pub handler: Handler,
}

/// The methods by name: the connection dispatches straight from here to the handler.
pub type Registry = HashMap<&'static str, Method, foldhash::fast::RandomState>;

pub fn module(ctx: Ctx) -> Registry {
    use Effect::{Changes, Reads};
    use Order::{Append, Barrier, Create, Fork, Import, Session, Sessions};
    use Runs::{Host, Inline, Pool, PoolWrites};
    let ctx = Arc::new(ctx);
    let mut t = Table { ctx: ctx.clone(), methods: Registry::default() };
    t.add("initialize", Barrier, Inline, Reads, lifecycle::initialize);
    t.add("shutdown", Barrier, Inline, Changes, lifecycle::shutdown);
    t.add("session/create", Create, Inline, Changes, sessions::create);
    t.add("session/get", Session, Inline, Reads, sessions::get);
    t.add("session/list", Barrier, Inline, Reads, sessions::list);
    t.add("session/update", Session, Inline, Changes, sessions::update);
    t.add("session/delete", Session, Inline, Changes, sessions::delete);
    t.add("session/delete_many", Sessions, Inline, Changes, sessions::delete_many);
    t.add("session/fork", Fork, Inline, Changes, sessions::fork);
    t.add("session/clear", Session, Inline, Changes, sessions::clear);
    t.add("session/rewind", Session, PoolWrites, Changes, history::rewind);
    t.add("session/pop", Session, Inline, Changes, history::pop);
    t.add("session/image", Barrier, Pool, Reads, search::image);
    t.add("session/compact", Session, Host, Changes, history::compact);
    t.add("session/search", Barrier, Pool, Reads, search::search);
    t.add("session/add_user", Append, Inline, Changes, messages::add_user);
    t.add("session/add_assistant", Append, Inline, Changes, messages::add_assistant);
    t.add("session/add_tool_result", Append, Inline, Changes, messages::add_tool_result);
    t.add("session/add_message", Append, Inline, Changes, messages::add_message);
    t.add("session/add_messages", Append, PoolWrites, Changes, messages::add_messages);
    // Its calls' ids may be numbered after the session's: it waits for the request before it.
    t.add("session/add_response", Session, Inline, Changes, messages::add_response);
    t.add("session/history", Session, Pool, Reads, history::history);
    t.add("session/trim", Session, PoolWrites, Changes, history::trim);
    t.add("session/to_dict", Session, Pool, Reads, dict::to_dict);
    t.add("session/from_dict", Import, PoolWrites, Changes, dict::from_dict);
    t.add("session/export", Session, Pool, Reads, provider::export);
    t.add("session/validate", Session, Pool, Reads, provider::validate);
    t.add("session/count_tokens", Session, Pool, Reads, provider::count_tokens);
    t.add("session/run", Session, Host, Changes, runtime::run);
    t.add("session/json", Session, Host, Changes, runtime::json);
    t.add("session/stream", Session, Host, Changes, runtime::stream);
    t.add("session/subscribe", Barrier, Inline, Changes, watch::subscribe);
    t.add("session/unsubscribe", Barrier, Inline, Changes, watch::unsubscribe);
    let mut names: Vec<&'static str> = t.methods.keys().copied().collect();
    names.sort_unstable();
    let _ = ctx.method_names.set(names);
    t.methods
}

struct Table {
    ctx: Arc<Ctx>,
    methods: Registry,
}

impl Table {
    fn add<P, T, F, Fut>(&mut self, name: &'static str, order: Order, runs: Runs, effect: Effect, handler: F)
    where
        P: DeserializeOwned + Send + 'static,
        T: MethodResult,
        F: Fn(Arc<Ctx>, P, Arc<Call>) -> Fut + Copy + Send + Sync + 'static,
        Fut: Future<Output = Result<T>> + Send + 'static,
    {
        let ctx = self.ctx.clone();
        let on_the_pool = matches!(runs, Runs::Pool | Runs::PoolWrites);
        let handler: Handler = Box::new(move |params: Option<&str>, call: Arc<Call>| {
            let (ctx, max) = (ctx.clone(), ctx.max_message_bytes);
            if on_the_pool {
                let params = params.map(str::to_owned);
                async move {
                    let parsed = parse::<P>(params.as_deref())?;
                    // The params' text is not needed once parsed: a large request holds
                    // its memory once, not twice, while it waits for the store.
                    drop(params);
                    handler(ctx, parsed, call).await?.write(max)
                }
                .boxed()
            } else {
                // The handler's own future, boxed as it is: an `async` block around it
                // would hold the params twice (as its capture, and in the future) and be
                // copied whole into the box (add_user's: 1,040 bytes, now 672).
                match parse::<P>(params) {
                    Ok(parsed) => handler(ctx, parsed, call).map(move |done| done?.write(max)).boxed(),
                    Err(e) => ready(Err(e.into())).boxed(),
                }
            }
        });
        let spec = Spec { order, runs, effect };
        if self.methods.insert(name, Method { spec, handler }).is_some() {
            unreachable!("method {name} registered twice");
        }
    }
}

/// Named params only: an object, or nothing at all (read as `{}`): no params, or an
/// empty array, as Lua writes an empty table (`session::empty_table`).
fn parse<P: DeserializeOwned>(params: Option<&str>) -> Result<P> {
    let raw = match params {
        None => "{}",
        Some(raw) if is_empty_array(raw) => "{}",
        Some(raw) => raw,
    };
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

/// `[]`, with any JSON whitespace inside (`params` is JSON already, and trimmed).
fn is_empty_array(raw: &str) -> bool {
    let inner = raw.strip_prefix('[').and_then(|r| r.strip_suffix(']'));
    inner.is_some_and(|inner| inner.trim_matches([' ', '\t', '\n', '\r']).is_empty())
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

#[cfg(test)]
mod tests {
    use super::shown::Shown;
    use crate::ops::{History, SessionDict};
    use crate::rpc::outgoing::{MethodResult, with_id};
    use crate::session::{DraftView, Message, Role};
    use crate::store::text::Text;
    use crate::store::{MessageJson, message_json};

    /// The reply a method's result makes, as the connection writes it.
    fn reply(result: impl MethodResult, max: usize) -> String {
        with_id("7", result.write(max), max).into_string()
    }

    fn messages() -> Vec<MessageJson> {
        let kept = |text: &str| MessageJson::Shared(Text::new(0, text).unwrap());
        let long = Message::new(Role::User, serde_json::json!("\"é\"\n".repeat(300)));
        vec![
            kept(r#"{"id":"a","content":"short"}"#),
            message_json(&long).unwrap(),
            kept(&format!(r#"{{"id":"b","content":"{}"}}"#, "x".repeat(600))),
            message_json(&Message::new(Role::Assistant, serde_json::json!("last"))).unwrap(),
        ]
    }

    #[test]
    fn spliced_results_are_what_they_serialize_to() {
        let draft = DraftView { stream_id: "s".into(), messages: vec![Message::new(Role::Assistant, "so far".into())] };
        for draft in [None, Some(None), Some(Some(draft))] {
            let history = History { messages: messages(), revision: 3, repaired: 1, draft };
            let expected =
                format!(r#"{{"jsonrpc":"2.0","id":7,"result":{}}}"#, serde_json::to_string(&history).unwrap());
            assert_eq!(reply(Shown::Made(history), usize::MAX), expected);
        }
        let dict = SessionDict {
            session_id: "d".into(),
            system: Some("be \"brief\"".into()),
            cwd: None,
            messages: messages(),
        };
        let expected = format!(r#"{{"jsonrpc":"2.0","id":7,"result":{}}}"#, serde_json::to_string(&dict).unwrap());
        assert_eq!(reply(Shown::Made(dict), usize::MAX), expected);
        assert_eq!(
            reply(Shown::<History>::Rewritten(serde_json::json!({"a": [1]})), 100),
            r#"{"jsonrpc":"2.0","id":7,"result":{"a":[1]}}"#
        );
    }

    #[test]
    fn a_spliced_result_over_the_limit_is_refused() {
        let history = || History { messages: messages(), revision: 3, repaired: 0, draft: None };
        let size = reply(Shown::Made(history()), usize::MAX).len();
        let wire = |max| serde_json::from_str::<serde_json::Value>(&reply(Shown::Made(history()), max)).unwrap();
        assert_eq!(wire(size)["result"]["revision"], 3, "a reply of exactly the limit is sent");
        assert_eq!(wire(size - 1)["error"]["code"], 1005);
        assert_eq!(wire(size - 40)["error"]["code"], 1005, "and so is a result over it");
    }
}
