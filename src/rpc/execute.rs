//! One call's execution, once the connection has read and classified it: it waits for
//! its place in its sessions' order (`order`) and among the running requests
//! (`budget`), runs its method's work where the method table says (inline, on the CPU
//! pool, or waiting for the host), answers cancellation, and keeps its session's replies
//! in order.

use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex};

use futures_util::FutureExt as _;
use futures_util::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use crate::lock;
use crate::pool::Pool;
use crate::rpc::budget::Budget;
use crate::rpc::methods::Runs;
use crate::rpc::order::Place;
use crate::rpc::outgoing::Outcome;

/// Why a call ended without its method's outcome.
pub enum Stop {
    Cancelled,
    Panicked,
}

/// Where a running call's place in its sessions' order is kept, so that the method can
/// let its session go before it ends (`ops::Call::release`).
pub type Turn = Arc<Mutex<Option<Place>>>;

/// What lets the session of `turn` go.
pub fn release(turn: &Turn) -> Box<dyn FnOnce() + Send> {
    let turn = turn.clone();
    Box::new(move || drop(lock(&turn).take()))
}

/// One call on its way: waits for its place in its sessions' order and among the
/// running requests, then runs its work where its method runs.
pub struct Run {
    /// The method's work, made by its handler (`methods::Handler`).
    pub work: BoxFuture<'static, Outcome>,
    pub runs: Runs,
    pub place: Place,
    /// Where `place` goes once it is reached; emptied by `release`.
    pub turn: Turn,
    /// For an append: what tells the next one that its write is queued.
    pub queued: Option<Box<dyn FnOnce() + Send>>,
    pub cancel: CancellationToken,
    pub budget: Budget,
    pub cpu: Pool,
}

impl Run {
    pub async fn run(self) -> Result<Outcome, Stop> {
        let Run { work, runs, mut place, turn, queued: on_queued, cancel, budget, cpu } = self;
        // Waiting in line may always be cancelled.
        let queued = async {
            place.ready().await;
            match runs {
                Runs::Host => None,
                _ => budget.start().await,
            }
        };
        let running = tokio::select! {
            biased;
            running = queued => running,
            () = cancel.cancelled() => return Err(Stop::Cancelled),
        };
        *lock(&turn) = Some(place);
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
        let outcome = match runs {
            Runs::Inline | Runs::Host => AssertUnwindSafe(crate::store::queued::scope(on_queued, work))
                .catch_unwind()
                .await
                .map_err(|_| Stop::Panicked),
            Runs::Pool | Runs::PoolWrites => {
                let runtime = tokio::runtime::Handle::current();
                let job = cpu.run(move || runtime.block_on(crate::store::queued::scope(on_queued, work)));
                let job = async move { job.await.map_err(|_| Stop::Panicked) };
                match runs {
                    Runs::Pool => tokio::select! {
                        outcome = job => outcome,
                        () = cancel.cancelled() => Err(Stop::Cancelled),
                    },
                    _ => job.await,
                }
            }
        };
        finish_in_order(&turn).await;
        drop(running);
        outcome
    }
}

/// Before a call ends: waits for the request before it on its session to finish, so that
/// replies on a session leave in the order received, then gives up its place.
pub async fn finish_in_order(turn: &Turn) {
    let place = lock(turn).take();
    if let Some(mut place) = place {
        place.finish_in_order().await;
    }
}
