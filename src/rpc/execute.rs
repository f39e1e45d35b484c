//! One call's execution, once the connection has read and classified it: it waits for
//! its place in its sessions' order (`order`) and among the running requests
//! (`budget`), runs its method where the method table says (inline, on the CPU pool, or
//! waiting for the host), answers cancellation, and keeps its session's replies in order.

use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex};

use futures_util::FutureExt as _;
use jsonrpsee::types::{Id, Params};
use jsonrpsee::{ConnectionId, Extensions, MethodCallback, MethodResponse};
use tokio_util::sync::CancellationToken;

use crate::lock;
use crate::ops::Call;
use crate::pool::Pool;
use crate::rpc::budget::Budget;
use crate::rpc::error::{METHOD_NOT_FOUND, plain};
use crate::rpc::methods::Runs;
use crate::rpc::order::Place;
use crate::rpc::outgoing::Written;

/// Why a call ended without its method's response.
pub enum Stop {
    Cancelled,
    Panicked,
}

/// One call on its way: waits for its place in its sessions' order and among the
/// running requests, then runs where its method runs.
pub struct Run {
    pub callback: MethodCallback,
    pub runs: Runs,
    pub params: Params<'static>,
    pub place: Place,
    /// For an append: what tells the next one that its write is queued.
    pub queued: Option<Box<dyn FnOnce() + Send>>,
    pub cancel: CancellationToken,
    pub budget: Budget,
    pub cpu: Pool,
    pub max: usize,
}

impl Run {
    pub async fn run(self) -> Result<MethodResponse, Stop> {
        let Run { callback, runs, params, place: mut turn, queued: on_queued, cancel, budget, cpu, max } = self;
        // Waiting in line may always be cancelled.
        let queued = async {
            turn.ready().await;
            match runs {
                Runs::Host => None,
                _ => budget.start().await,
            }
        };
        let running = tokio::select! {
            running = queued => running,
            () = cancel.cancelled() => return Err(Stop::Cancelled),
        };
        // An append whose write is queued trades its running place for one of the many
        // places to wait for a commit in (when one is free): it holds only its small reply
        // to come, and its request's bytes in the input budget, so that appends pipelined
        // on a session fill a commit however few running places there are.
        let running = Arc::new(Mutex::new(running));
        let on_queued = on_queued.map(|hook| {
            let (running, budget) = (running.clone(), budget.clone());
            Box::new(move || {
                hook();
                let mut place = lock(&running);
                if place.is_some()
                    && let Some(waiting) = budget.waiting()
                {
                    *place = Some(waiting);
                }
            }) as Box<dyn FnOnce() + Send>
        });
        // The method may let its session go before it ends (`Call::release`).
        let turn = Arc::new(Mutex::new(Some(turn)));
        let release = {
            let turn = turn.clone();
            Box::new(move || drop(lock(&turn).take())) as Box<dyn FnOnce() + Send>
        };
        let mut extensions = Extensions::new();
        extensions.insert(Arc::new(Call::new(cancel.clone(), release)));
        extensions.insert(Arc::new(Written::new(max)));
        let work = match runs {
            Runs::Inline | Runs::Host => {
                let work = AssertUnwindSafe(invoke(callback, params, max, extensions, on_queued)).catch_unwind();
                async move { work.await.map_err(|_| Stop::Panicked) }.boxed()
            }
            Runs::Pool | Runs::PoolWrites => {
                let runtime = tokio::runtime::Handle::current();
                let job = move || runtime.block_on(invoke(callback, params, max, extensions, on_queued));
                async move { cpu.run(job).await.map_err(|_| Stop::Panicked) }.boxed()
            }
        };
        let outcome = match runs {
            Runs::Pool => tokio::select! {
                outcome = work => outcome,
                () = cancel.cancelled() => Err(Stop::Cancelled),
            },
            _ => work.await,
        };
        let turn = lock(&turn).take();
        if let Some(mut turn) = turn {
            turn.finish_in_order().await;
        }
        drop(running);
        outcome
    }
}

/// Runs a method; a result that would make a reply over `max` bytes becomes an error
/// (the registry stops serializing at the limit). `on_queued`, for an append, is called
/// once the store has queued its write (`store::queued`).
async fn invoke(
    callback: MethodCallback,
    params: Params<'static>,
    max: usize,
    extensions: Extensions,
    on_queued: Option<Box<dyn FnOnce() + Send>>,
) -> MethodResponse {
    let work = async move {
        match callback {
            MethodCallback::Sync(f) => f(Id::Null, params, max, extensions),
            MethodCallback::Async(f) => f(Id::Null, params, ConnectionId(0), max, extensions).await,
            MethodCallback::Subscription(_) | MethodCallback::Unsubscription(_) => MethodResponse::error(
                Id::Null,
                plain(METHOD_NOT_FOUND, "method not found: subscriptions are not offered"),
            ),
        }
    };
    match on_queued {
        Some(hook) => crate::store::queued::scope(hook, work).await,
        None => work.await,
    }
}
