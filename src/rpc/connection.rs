//! One client connection: takes frames in the order they arrived, answers what is
//! malformed, runs each call through the method registry (jsonrpsee's `Methods`) in its
//! session's order and within the byte budget (`rpc::budget`), and keeps the lifecycle
//! (`shutdown`, `exit`, end of input).

use std::collections::HashSet;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures_util::FutureExt as _;
use futures_util::future::{BoxFuture, join_all, ready};
use jsonrpsee::types::{ErrorObjectOwned, Id, Params};
use jsonrpsee::{ConnectionId, Extensions, MethodCallback, MethodResponse, Methods};
use serde_json::value::RawValue;
use tokio::sync::Semaphore;

use crate::pool::Pool;
use crate::rpc::budget::Budget;
use crate::rpc::envelope::{Element, Frame, classify};
use crate::rpc::error::{
    INTERNAL_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, PARSE_ERROR, plain, reply_too_large, too_large,
};
use crate::rpc::framing::Incoming;
use crate::rpc::methods::Registry;
use crate::rpc::order::{self, Sequencer};
use crate::rpc::peer::Peer;
use crate::rpc::stdio::Input;
use crate::rpc::writer::{Outbox, Reply};

/// How many frames may be in flight before the connection stops reading (back-pressure).
pub const MAX_IN_FLIGHT: u32 = 1024;
/// The most requests one batch may hold.
pub const MAX_BATCH: usize = 1024;

/// A reply; `None` for a notification.
type Pending = BoxFuture<'static, Option<Reply>>;

pub struct Connection {
    methods: Methods,
    /// Methods that run on `cpu`, off this thread.
    pooled: HashSet<&'static str>,
    cpu: Pool,
    outbox: Outbox,
    peer: Arc<Peer>,
    sequencer: Arc<Sequencer>,
    in_flight: Arc<Semaphore>,
    budget: Budget,
    max_message_bytes: usize,
    shutting_down: bool,
    exit_code: Option<i32>,
}

impl Connection {
    pub fn new(registry: Registry, outbox: Outbox, peer: Arc<Peer>, limits: &crate::rpc::Config) -> Self {
        Connection {
            methods: registry.methods,
            pooled: registry.pooled,
            cpu: Pool::for_cpu("cpu"),
            outbox,
            peer,
            sequencer: Arc::default(),
            in_flight: Arc::new(Semaphore::new(MAX_IN_FLIGHT as usize)),
            budget: Budget::new(limits.max_pending_bytes),
            max_message_bytes: limits.max_message_bytes,
            shutting_down: false,
            exit_code: None,
        }
    }

    /// Waits until every frame taken so far has been answered.
    pub(crate) async fn settle(&self) {
        let _all = self.in_flight.acquire_many(MAX_IN_FLIGHT).await;
    }

    /// Serves until `exit` or the end of input, then waits for every call in flight to
    /// be answered. Returns the process exit code.
    pub async fn run(mut self, mut input: Input) -> i32 {
        let mut frames = Vec::new();
        while input.next(&mut frames).await {
            for next in frames.drain(..) {
                self.incoming(next).await;
                if self.exit_code.is_some() {
                    break;
                }
            }
            if self.exit_code.is_some() {
                break;
            }
        }
        self.settle().await;
        self.exit_code.unwrap_or(0)
    }

    pub(crate) async fn incoming(&mut self, next: Incoming) {
        {
            match next {
                Incoming::Frame(bytes) => self.frame(&bytes).await,
                Incoming::TooLarge { id, size } => {
                    self.reply_now(error_reply(id.as_deref(), too_large(size, self.max_message_bytes))).await
                }
                Incoming::Malformed(why) => {
                    self.reply_now(error_reply(None, plain(PARSE_ERROR, format!("parse error: {why}")))).await
                }
            }
        }
    }

    async fn reply_now(&self, json: String) {
        self.outbox.send(json).await;
    }

    async fn frame(&mut self, bytes: &[u8]) {
        let input = self.budget.input(bytes.len()).await;
        let pending: Pending = match classify(bytes) {
            Frame::ParseError(e) => {
                ready(Some(error_reply(None, plain(PARSE_ERROR, format!("parse error: {e}"))).into())).boxed()
            }
            Frame::EmptyBatch => {
                ready(Some(error_reply(None, plain(INVALID_REQUEST, "invalid request: empty batch")).into())).boxed()
            }
            Frame::Single(element) => match self.element(element) {
                Some(pending) => pending,
                None => return,
            },
            Frame::Batch(elements) if elements.len() > MAX_BATCH => {
                let why = format!("a batch holds at most {MAX_BATCH} requests, this one {}", elements.len());
                ready(Some(error_reply(None, ErrorObjectOwned::from(crate::Error::TooLarge(why))).into())).boxed()
            }
            Frame::Batch(elements) => {
                // `exit` ends the batch too: nothing after it runs.
                let mut calls = Vec::new();
                for element in elements {
                    calls.extend(self.element(element));
                    if self.exit_code.is_some() {
                        break;
                    }
                }
                if calls.is_empty() {
                    return;
                }
                async move {
                    let replies: Vec<String> =
                        join_all(calls).await.into_iter().flatten().map(Reply::into_string).collect();
                    (!replies.is_empty()).then(|| format!("[{}]", replies.join(",")).into())
                }
                .boxed()
            }
        };
        let permit = self.in_flight.clone().acquire_owned().await;
        let (outbox, budget) = (self.outbox.clone(), self.budget.clone());
        tokio::spawn(async move {
            if let Some(reply) = pending.await {
                let output = budget.output(reply.len()).await;
                drop(input);
                outbox.send(reply.held_by(output)).await;
            }
            drop(permit);
        });
    }

    /// Starts one element of a frame: takes its place in the session order now, and
    /// returns what will produce its reply.
    fn element(&mut self, element: Element<'_>) -> Option<Pending> {
        match element {
            Element::Invalid { id, why } => {
                let reply =
                    error_reply(id.map(RawValue::get), plain(INVALID_REQUEST, format!("invalid request: {why}")));
                Some(ready(Some(reply.into())).boxed())
            }
            Element::Response { id, ok } => {
                if !self.peer.route(id, ok) {
                    tracing::debug!(id = id.get(), "a response to no request of ours; ignored");
                }
                None
            }
            Element::Call { id, method, params } => self.call(id.map(|id| id.get().to_owned()), &method, params),
        }
    }

    fn call(&mut self, id: Option<String>, method: &str, params: Option<&RawValue>) -> Option<Pending> {
        if method == "exit" {
            self.exit_code = Some(if self.shutting_down { 0 } else { 1 });
            return None;
        }
        let reject =
            |error: ErrorObjectOwned| id.as_deref().map(|id| ready(Some(error_reply(Some(id), error).into())).boxed());
        if self.shutting_down {
            return reject(plain(INVALID_REQUEST, "invalid request: the server is shutting down"));
        }
        let Some(callback) = self.methods.method(method).cloned() else {
            if id.is_none() {
                tracing::trace!(method, "ignoring a notification");
            }
            return reject(plain(METHOD_NOT_FOUND, format!("method not found: {method}")));
        };
        if method == "shutdown" {
            self.shutting_down = true;
        }
        let mut turn = self.sequencer.enter(order::keys(params));
        let params = Params::new(params.map(RawValue::get)).into_owned();
        let (budget, max) = (self.budget.clone(), self.max_message_bytes);
        let pool = self.pooled.contains(method).then(|| self.cpu.clone());
        Some(
            async move {
                turn.ready().await;
                let running = budget.start().await;
                let outcome = match pool {
                    Some(pool) => {
                        let runtime = tokio::runtime::Handle::current();
                        pool.run(move || runtime.block_on(invoke(callback, params, max))).await.map_err(drop)
                    }
                    None => AssertUnwindSafe(invoke(callback, params, max)).catch_unwind().await.map_err(drop),
                };
                drop((turn, running));
                let id = id?;
                Some(match outcome {
                    Ok(response) => with_id(&id, response, max),
                    Err(_) => {
                        error_reply(Some(&id), plain(INTERNAL_ERROR, "internal error: the method panicked")).into()
                    }
                })
            }
            .boxed(),
        )
    }
}

/// Runs a method; a result that would make a reply over `max` bytes becomes an error
/// (the registry stops serializing at the limit).
async fn invoke(callback: MethodCallback, params: Params<'static>, max: usize) -> MethodResponse {
    match callback {
        MethodCallback::Sync(f) => f(Id::Null, params, max, Extensions::new()),
        MethodCallback::Async(f) => f(Id::Null, params, ConnectionId(0), max, Extensions::new()).await,
        MethodCallback::Subscription(_) | MethodCallback::Unsubscription(_) => {
            MethodResponse::error(Id::Null, plain(METHOD_NOT_FOUND, "method not found: subscriptions are not offered"))
        }
    }
}

/// What jsonrpsee writes before the payload of a response to `Id::Null`.
const NULL_ID_PREFIX: &str = r#"{"jsonrpc":"2.0","id":null,"#;

/// The response with the request's id as the client wrote it (jsonrpsee's `Id` cannot
/// hold every JSON-RPC id, such as negative or fractional numbers); a reply over `max`
/// bytes is replaced by error 1005.
fn with_id(id: &str, response: MethodResponse, max: usize) -> Reply {
    if response.as_error_code() == Some(jsonrpsee::types::error::OVERSIZED_RESPONSE_CODE) {
        return error_reply(Some(id), reply_too_large(max)).into();
    }
    let json: Box<str> = response.into_json().into();
    if !json.starts_with(NULL_ID_PREFIX) {
        tracing::error!(response = &*json, "unexpected response layout from the registry");
        return error_reply(Some(id), plain(INTERNAL_ERROR, "internal error: unexpected response layout")).into();
    }
    let reply = Reply::spliced(format!(r#"{{"jsonrpc":"2.0","id":{id},"#), json, NULL_ID_PREFIX.len());
    if reply.len() > max {
        return error_reply(Some(id), reply_too_large(max)).into();
    }
    reply
}

pub fn error_reply(id: Option<&str>, error: ErrorObjectOwned) -> String {
    let error = serde_json::to_string(&error)
        .unwrap_or_else(|_| format!(r#"{{"code":{INTERNAL_ERROR},"message":"internal error"}}"#));
    format!(r#"{{"jsonrpc":"2.0","id":{},"error":{error}}}"#, id.unwrap_or("null"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rpc::framing::{Decoder, FramingCell};
    use crate::rpc::stdio::Source;
    use jsonrpsee::ResponsePayload;

    #[tokio::test]
    async fn a_panicking_method_gets_32603_and_the_connection_goes_on() {
        let mut module = jsonrpsee::RpcModule::new(());
        module.register_method::<Result<(), ErrorObjectOwned>, _>("boom", |_, _, _| panic!("boom")).unwrap();
        module.register_async_method("fine", |_, _, _| async { Ok::<_, ErrorObjectOwned>(1) }).unwrap();
        let (outbox, mut out_rx) = Outbox::channel();
        let limits = crate::rpc::Config { framing: None, max_message_bytes: 1024, max_pending_bytes: 1 << 20 };
        let registry = Registry { methods: module.into(), pooled: Default::default() };
        let connection = Connection::new(registry, outbox.clone(), Arc::new(Peer::new(outbox)), &limits);
        let frames =
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"boom\"}\n{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"fine\"}\n";
        let source = Source::Reader(Box::new(std::io::Cursor::new(frames)));
        let input = Input::new(source, Decoder::new(FramingCell::new(None), 1024)).unwrap();
        assert_eq!(connection.run(input).await, 0);
        let mut replies = vec![out_rx.recv().await.unwrap().into_string(), out_rx.recv().await.unwrap().into_string()];
        replies.sort();
        assert_eq!(
            replies,
            [
                r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"internal error: the method panicked"}}"#,
                r#"{"jsonrpc":"2.0","id":2,"result":1}"#,
            ]
        );
    }

    #[test]
    fn replies_carry_the_id_as_written() {
        let ok = MethodResponse::response(Id::Null, ResponsePayload::success(5), usize::MAX);
        assert_eq!(with_id("-1.5", ok, 100).into_string(), r#"{"jsonrpc":"2.0","id":-1.5,"result":5}"#);
        let err = MethodResponse::error(Id::Null, plain(1001, "no"));
        assert_eq!(
            with_id(r#""x""#, err, 100).into_string(),
            r#"{"jsonrpc":"2.0","id":"x","error":{"code":1001,"message":"no"}}"#
        );
        let big = MethodResponse::response(Id::Null, ResponsePayload::success("x".repeat(100)), usize::MAX);
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&with_id("7", big, 100).into_string()).unwrap()["error"]["code"],
            1005,
            "a reply over the limit is refused"
        );
        assert_eq!(
            error_reply(None, plain(-32700, "bad")),
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"bad"}}"#
        );
    }
}
