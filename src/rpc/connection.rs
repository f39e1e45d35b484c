//! One client connection: takes frames in the order they arrived, answers what is
//! malformed, hands each call to its executor (`execute::Run`: its method's work, in its
//! session's order and within the byte budget), and keeps the lifecycle (`shutdown`,
//! `exit`, end of input). A call whose work finishes when first polled (an append to the
//! memory store, say) is answered right here, without a task of its own, its reply
//! written with the others made so (`Connection::flush`); one that runs
//! inline and finds nothing else running (`Connection::at_once`) also takes no place in
//! the order and no entry for `$/cancelRequest` unless its work waits.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Mutex};
use std::task::{Context, Poll, Waker};

use futures_util::FutureExt as _;
use futures_util::future::{BoxFuture, join_all, ready};
use jsonrpsee_types::ErrorObjectOwned;
use memchr::memmem::Finder;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::lock;
use crate::ops::Call;
use crate::pool::Pool;
use crate::rpc::budget::{Budget, Owed};
use crate::rpc::envelope::{Element, Frame, classify};
use crate::rpc::error::{
    INTERNAL_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, PARSE_ERROR, batch_too_large, plain, too_large,
};
use crate::rpc::execute::{Run, Stop, release};
use crate::rpc::framing::Incoming;
use crate::rpc::methods::{Effect, Handler, Order, Registry, Runs};
use crate::rpc::order::{self, Sequencer, Stage, Started};
use crate::rpc::outgoing::{Outcome, error_reply, with_id};
use crate::rpc::peer::Peer;
use crate::rpc::stdio::Input;
use crate::rpc::writer::{Outbox, Reply};
use crate::store::queued;

/// How many frames may be in flight before the connection stops reading (back-pressure).
pub const MAX_IN_FLIGHT: u32 = 1024;
/// The most requests one batch may hold.
pub const MAX_BATCH: usize = 1024;

/// What gives a call's reply (`None` for a notification): the reply itself when it is
/// known at once (an error, or work done on its first poll), else the work to come.
enum Pending {
    Now(Option<Reply>),
    Later(BoxFuture<'static, Option<Reply>>),
}

impl Future for Pending {
    type Output = Option<Reply>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Reply>> {
        match self.get_mut() {
            Pending::Now(reply) => Poll::Ready(reply.take()),
            Pending::Later(work) => work.as_mut().poll(cx),
        }
    }
}

/// How many turns may wait on the host at once (each also holds a frame in flight).
const MAX_HOST_TURNS: u32 = MAX_IN_FLIGHT;

/// After how many frames taken the replies made at once so far are written
/// (`Connection::flush`), besides at the end of each read. A client that pipelines reads
/// its first replies, and sends more, while the server works on the rest of what it read,
/// instead of both taking turns a whole read at a time (pipelined appends on one session:
/// about 20% more a second, interleaved `convo-bench` rounds; BENCHMARKS.md); it costs
/// one write for every this many frames of a long read. The floor (`convo-echo`) writes
/// as often, so that the two are compared at one policy: with 64 requests in flight,
/// writing every 32 is faster for both, and more so for the floor (BENCHMARKS.md).
const FRAMES_PER_WRITE: usize = 16;

/// How many frames the connection takes before it lets the runtime's other tasks run (the
/// work of calls that wait, the writer of their replies, watches). Each turn also polls
/// for I/O (`epoll_wait`): every 16 frames, that was 4% of a pipelined append's time. A
/// long read of small requests (64 KB holds some 500 appends) is where it matters.
const FRAMES_PER_TURN: usize = 256;

/// With `--deterministic` (`Config::one_at_a_time`), replies are queued in the order
/// they are made, as its requests run: each holds this lock from when it is made until
/// it is queued. Without it, a reply could pass one made before it that still waits in
/// its task: tokio's channel lets a sender that finds room pass one it has given room to
/// but that has not run yet, and `Outbox::send_now` writes past a task not yet queued.
type InOrder = Option<Arc<tokio::sync::Mutex<()>>>;

/// A reply's turn to be queued, when replies keep one order: at once, unless a reply made
/// before holds the lock. It is asked for unconstrained, so that the runtime's budget for
/// a turn never makes it wait without taking its place in line.
async fn turn_in(order: &InOrder) -> Option<tokio::sync::OwnedMutexGuard<()>> {
    match order {
        Some(order) => Some(tokio::task::unconstrained(order.clone().lock_owned()).await),
        None => None,
    }
}

pub struct Connection {
    methods: Registry,
    cpu: Pool,
    /// The requests in progress that `$/cancelRequest` can reach, by id as written.
    cancels: Arc<Cancels>,
    outbox: Outbox,
    peer: Arc<Peer>,
    sequencer: Arc<Sequencer>,
    in_flight: Arc<Semaphore>,
    /// A permit per turn waiting on the host: `shutdown` waits for all of them.
    host_turns: Arc<Semaphore>,
    budget: Budget,
    max_message_bytes: usize,
    /// Every request in one order (`Config::one_at_a_time`) when present, and with it
    /// what keeps their replies in the order they are made (`InOrder`).
    one_at_a_time: InOrder,
    /// Whether the store's appends say when their writes are queued
    /// (`Ops::appends_signal_queued`); an append is given a hook for it only then.
    queued_writes: bool,
    shutting_down: bool,
    exit_code: Option<i32>,
    /// Replies made at once, not yet handed to the output (`flush`), and their shares
    /// of the output budget, taken when they are.
    held: Vec<Reply>,
    owed: Owed,
    /// The `Call` the next inline call run at once is given: one is made again only when
    /// a call keeps it (its work waits, or something holds it past its end).
    spare: Option<Arc<Call>>,
}

impl Connection {
    pub fn new(
        registry: Registry,
        outbox: Outbox,
        peer: Arc<Peer>,
        limits: &crate::rpc::Config,
        queued_writes: bool,
    ) -> Self {
        Connection {
            methods: registry,
            cpu: Pool::for_cpu("cpu"),
            cancels: Arc::default(),
            outbox,
            peer,
            sequencer: Arc::default(),
            in_flight: Arc::new(Semaphore::new(MAX_IN_FLIGHT as usize)),
            host_turns: Arc::new(Semaphore::new(MAX_HOST_TURNS as usize)),
            budget: Budget::new(limits.max_pending_bytes),
            max_message_bytes: limits.max_message_bytes,
            one_at_a_time: limits.one_at_a_time.then(Arc::default),
            queued_writes,
            shutting_down: false,
            exit_code: None,
            held: Vec::new(),
            owed: Owed::default(),
            spare: None,
        }
    }

    /// Whether nothing but this loop can be waiting to run, for the input to wait on its
    /// own (`Input::next`): no frame is in flight, nothing is unwritten, and the runtime
    /// has no task but those it had when the connection began (`no_new_tasks`: the
    /// writer, which then waits for this loop's replies, the sweeper, on its timer, and a
    /// store's own). A watch, a write the pipe did not take at once, or work that waits
    /// on a store's thread each make a task.
    fn quiet(&self, no_new_tasks: bool) -> bool {
        no_new_tasks && self.in_flight.available_permits() == MAX_IN_FLIGHT as usize && self.outbox.is_idle()
    }

    /// Waits until every frame taken so far has been answered.
    pub(crate) async fn settle(&self) {
        let _all = self.in_flight.acquire_many(MAX_IN_FLIGHT).await;
    }

    /// The exit code once `exit` was received.
    pub(crate) fn exit_code(&self) -> Option<i32> {
        self.exit_code
    }

    /// Serves until `exit` or the end of input, then waits for every call in flight to
    /// be answered. Returns the process exit code.
    pub async fn run(mut self, mut input: Input) -> i32 {
        let mut frames = Vec::new();
        let mut taken = 0;
        let runtime = tokio::runtime::Handle::current().metrics();
        let tasks = runtime.num_alive_tasks();
        loop {
            let quiet = self.quiet(runtime.num_alive_tasks() == tasks);
            if !input.next(&mut frames, quiet).await {
                break;
            }
            for next in frames.drain(..) {
                self.incoming(next).await;
                if self.exit_code.is_some() {
                    break;
                }
                taken += 1;
                if taken % FRAMES_PER_WRITE == 0 {
                    self.flush().await;
                }
                if taken == FRAMES_PER_TURN {
                    taken = 0;
                    tokio::task::yield_now().await;
                }
            }
            self.flush().await;
            if self.exit_code.is_some() {
                break;
            }
        }
        // No answer can come from the client any more: what waits for one fails now.
        self.peer.close();
        self.settle().await;
        self.exit_code.unwrap_or(0)
    }

    /// Takes one frame. What it answers at once is held until `flush`.
    pub(crate) async fn incoming(&mut self, next: Incoming) {
        match next {
            Incoming::Frame(bytes) => self.frame(&bytes).await,
            Incoming::TooLarge { id, size } => {
                self.held.push(error_reply(id.as_deref(), too_large(size, self.max_message_bytes)).into())
            }
            Incoming::Malformed(why) => {
                self.held.push(error_reply(None, plain(PARSE_ERROR, format!("parse error: {why}"))).into())
            }
        }
    }

    /// Hands the replies made at once to the output, in the order made: written in one
    /// go, by this task, when nothing else waits to be written (`Outbox::send_now`). Held
    /// replies hold their share of the output budget, so this comes before anything the
    /// connection waits for, as well as after every `FRAMES_PER_WRITE` frames and at the
    /// end of each read.
    pub(crate) async fn flush(&mut self) {
        // The batch's shares in one hold, kept by its last reply: given back once all of
        // it is written. (Held replies hold nothing of their own.)
        let Some(last) = self.held.pop() else { return };
        let hold = self.budget.pay(&mut self.owed).await;
        self.held.push(last.held_by(hold));
        let _turn = turn_in(&self.one_at_a_time).await;
        self.outbox.send_now(&mut self.held).await;
    }

    async fn frame(&mut self, bytes: &[u8]) {
        // The frame's share of the input budget is only looked at here, and taken if its
        // work waits: a frame answered at once gives it back before anything else runs.
        let mut input = None;
        if !self.budget.input_fits(bytes.len()) {
            self.flush().await;
            input = self.budget.input(bytes.len()).await;
        }
        let mut pending: Pending = match classify(bytes) {
            Frame::ParseError(e) => {
                Pending::Now(Some(error_reply(None, plain(PARSE_ERROR, format!("parse error: {e}"))).into()))
            }
            Frame::EmptyBatch => {
                Pending::Now(Some(error_reply(None, plain(INVALID_REQUEST, "invalid request: empty batch")).into()))
            }
            // A stream's deltas are handed over here, in the order they arrived.
            Frame::Single(Element::Call { id: None, method, params }) if method == "runtime/delta" => {
                self.flush().await;
                self.peer.delta(params).await;
                return;
            }
            Frame::Single(element) => match self.element(element, true) {
                Some(pending) => pending,
                None => return,
            },
            Frame::Batch(elements) if elements.len() > MAX_BATCH => {
                let why = format!("a batch holds at most {MAX_BATCH} requests, this one {}", elements.len());
                Pending::Now(Some(error_reply(None, ErrorObjectOwned::from(crate::Error::TooLarge(why))).into()))
            }
            Frame::Batch(elements) => {
                // `exit` ends the batch too: nothing after it runs.
                let mut calls = Vec::new();
                for element in elements {
                    let sheddable = self.sheddable(&element);
                    if let Some(call) = self.element(element, false) {
                        calls.push(call.map(move |reply| reply.map(|r| (r, sheddable))));
                    }
                    if self.exit_code.is_some() {
                        break;
                    }
                }
                if calls.is_empty() {
                    return;
                }
                let max = self.max_message_bytes;
                Pending::Later(
                    async move {
                        let replies = bounded(join_all(calls).await.into_iter().flatten().collect(), max);
                        (!replies.is_empty()).then(|| format!("[{}]", replies.join(",")).into())
                    }
                    .boxed(),
                )
            }
        };
        // Polled once here: what is done at once, and fits the output budget now, is
        // answered without a task (and was never in flight).
        let pending = match std::future::poll_fn(|cx| Poll::Ready(Pin::new(&mut pending).poll(cx))).await {
            Poll::Ready(None) => return,
            Poll::Ready(Some(reply)) if self.budget.owe(&mut self.owed, reply.len()) => {
                drop(input);
                self.held.push(reply);
                return;
            }
            // In one order, a reply that does not fit waits for room here, not in a task
            // that replies made after it could pass.
            Poll::Ready(Some(reply)) if self.one_at_a_time.is_some() => {
                self.flush().await;
                let _turn = turn_in(&self.one_at_a_time).await;
                let output = self.budget.output(reply.len()).await;
                drop(input);
                self.outbox.send_now(&mut vec![reply.held_by(output)]).await;
                return;
            }
            Poll::Ready(Some(reply)) => Pending::Now(Some(reply)),
            Poll::Pending => pending,
        };
        let input = input.or_else(|| self.budget.try_input(bytes.len()));
        // The replies held so far answer frames before this one: they go out before any
        // task this frame starts could send its own, and before waiting for a place in
        // flight (or a turn the runtime's budget forces on the wait below).
        self.flush().await;
        let permit = self.in_flight.clone().acquire_owned().await;
        let (outbox, budget, order) = (self.outbox.clone(), self.budget.clone(), self.one_at_a_time.clone());
        tokio::spawn(async move {
            if let Some(reply) = pending.await {
                // In the poll that made the reply: nothing made after it comes first.
                let _turn = turn_in(&order).await;
                let output = budget.output(reply.len()).await;
                drop(input);
                outbox.send(reply.held_by(output)).await;
            }
            drop(permit);
        });
    }

    /// The id of a batch element whose reply may be given up for the batch's bound: a
    /// request that only reads.
    fn sheddable(&self, element: &Element<'_>) -> Option<String> {
        match element {
            Element::Call { id: Some(id), method, .. } => {
                let reads = self.methods.get(&**method).is_some_and(|m| m.spec.effect == Effect::Reads);
                reads.then(|| (*id).to_owned())
            }
            _ => None,
        }
    }

    /// Starts one element of a frame: takes its place in the session order now, and
    /// returns what will produce its reply. `alone`: the frame holds only this element,
    /// and what is returned is polled before the next frame is read.
    fn element(&mut self, element: Element<'_>, alone: bool) -> Option<Pending> {
        match element {
            Element::Invalid { id, why } => {
                let reply = error_reply(id, plain(INVALID_REQUEST, format!("invalid request: {why}")));
                Some(Pending::Now(Some(reply.into())))
            }
            Element::Response { id, ok } => {
                if !self.peer.route(id, ok) {
                    tracing::debug!(id, "a response to no request of ours; ignored");
                }
                None
            }
            Element::Call { id, method, params } => self.call(id, &method, params, alone),
        }
    }

    fn call(&mut self, id: Option<&str>, method: &str, params: Option<&str>, alone: bool) -> Option<Pending> {
        if method == "exit" {
            self.exit_code = Some(if self.shutting_down { 0 } else { 1 });
            return None;
        }
        if id.is_none() {
            match method {
                "$/cancelRequest" => return self.cancel_request(params),
                "runtime/delta" => {
                    let (peer, params) = (self.peer.clone(), params.map(str::to_owned));
                    return Some(Pending::Later(
                        async move {
                            peer.delta(params.as_deref()).await;
                            None
                        }
                        .boxed(),
                    ));
                }
                _ => {}
            }
        }
        let reject = |error: ErrorObjectOwned| id.map(|id| Pending::Now(Some(error_reply(Some(id), error).into())));
        if self.shutting_down {
            return reject(plain(INVALID_REQUEST, "invalid request: the server is shutting down"));
        }
        if let Some(id) = id
            && self.cancels.contains(id)
        {
            let why = format!("invalid request: the id {id} is already used by a request in flight");
            return reject(plain(INVALID_REQUEST, why));
        }
        let Some(found) = self.methods.get(method) else {
            if id.is_none() {
                tracing::trace!(method, "ignoring a notification");
            }
            return reject(plain(METHOD_NOT_FOUND, format!("method not found: {method}")));
        };
        let spec = found.spec;
        if method == "shutdown" {
            self.shutting_down = true;
        } else if alone
            && spec.runs == Runs::Inline
            && self.one_at_a_time.is_none()
            && self.sequencer.is_idle()
            && self.budget.could_start(&self.owed)
        {
            let call = self.spare.take().unwrap_or_else(|| Arc::new(Call::new(None, Box::new(|| ()))));
            let (pending, spare) = self.at_once(&found.handler, call, id, params, spec.order);
            self.spare = spare;
            return Some(pending);
        }
        // One key no session id can be: every request after the one before.
        let (keys, stage) = match (self.one_at_a_time.is_some(), spec.order) {
            (true, _) => (vec![String::new()], Stage::Done),
            (false, order) => (order::keys(order, params), stage(order, params)),
        };
        let place = self.sequencer.enter(keys, stage);
        // An append lets the next append on its session start once its write is queued.
        let queued = (stage == Stage::Queued && self.queued_writes).then(|| place.on_queued());
        let cancel = CancellationToken::new();
        let turn = Arc::default();
        let call = Arc::new(Call::new(Some(cancel.clone()), release(&turn)));
        let work = start(&found.handler, params, call);
        let id = id.map(str::to_owned);
        if let Some(id) = &id {
            self.cancels.insert(id.clone(), cancel.clone());
        }
        let run = Run {
            work,
            runs: spec.runs,
            place,
            turn,
            queued,
            cancel,
            budget: self.budget.clone(),
            cpu: self.cpu.clone(),
        };
        let (cancels, max) = (self.cancels.clone(), self.max_message_bytes);
        // A turn on the host holds a permit to its end; `shutdown` waits for them all
        // (each ends by its timeout at the latest).
        let host_turn = match spec.runs {
            Runs::Host => self.host_turns.clone().try_acquire_owned().ok(),
            _ => None,
        };
        let turns_done = (method == "shutdown").then(|| self.host_turns.clone());
        Some(Pending::Later(
            async move {
                if let Some(turns) = turns_done {
                    let _all = turns.acquire_many(MAX_HOST_TURNS).await;
                }
                let outcome = run.run().await;
                drop(host_turn);
                answered(&cancels, id, outcome, max)
            }
            .boxed(),
        ))
    }

    /// Runs an inline call's work now, when no request holds a place: none is in its
    /// way, and no later frame is read before this first poll. Work done on that poll (an
    /// append to the memory store) never takes a place in the order, an entry for
    /// `$/cancelRequest` or a task; work that waits takes them then, as if it had waited
    /// for nothing, and goes on as `Run::run` would. `call` comes back when nothing
    /// else holds it, to be given to the next call run at once.
    fn at_once(
        &self,
        handler: &Handler,
        call: Arc<Call>,
        id: Option<&str>,
        params: Option<&str>,
        order: Order,
    ) -> (Pending, Option<Arc<Call>>) {
        // The gate the requests after it wait on, made now only if the work may open it
        // while it runs (a store that queues its writes); else when it waits.
        let stage = stage(order, params);
        let started = (stage == Stage::Queued && self.queued_writes).then(Started::default);
        let on_queued = started.as_ref().map(Started::on_queued);
        // An inline method never lets its session go before it ends (only one waiting for
        // the host does): its place, if it takes one, is given up when it finishes. So
        // its call's `release` does nothing.
        let mut work = AssertUnwindSafe(queued::scope(on_queued, start(handler, params, call.clone()))).catch_unwind();
        let max = self.max_message_bytes;
        // Polled again, with a waker that wakes, by whoever polls what this returns.
        if let Poll::Ready(outcome) = Pin::new(&mut work).poll(&mut Context::from_waker(Waker::noop())) {
            drop(work);
            let reply = Pending::Now(id.map(|id| answer(id, outcome.map_err(|_| Stop::Panicked), max)));
            return (reply, unheld(call));
        }
        // It takes its running place now (`could_start` said one was free), or, queued
        // already, waits for its commit in a place of its own (see `Run::run`).
        let started = started.unwrap_or_default();
        let running =
            started.is_queued().then(|| self.budget.waiting()).flatten().or_else(|| self.budget.try_start(&self.owed));
        let mut place = self.sequencer.enter_started(order::keys(order, params), stage, started);
        let id = id.map(str::to_owned);
        if let Some(id) = &id {
            self.cancels.insert(id.clone(), call.cancel().clone());
        }
        drop(call);
        let cancels = self.cancels.clone();
        let pending = Pending::Later(
            async move {
                let outcome = work.await.map_err(|_| Stop::Panicked);
                place.finish_in_order().await;
                drop(place);
                drop(running);
                answered(&cancels, id, outcome, max)
            }
            .boxed(),
        );
        (pending, None)
    }

    /// `$/cancelRequest {id}`: ends the request it names, if it is still waiting or
    /// computing.
    fn cancel_request(&self, params: Option<&str>) -> Option<Pending> {
        #[derive(serde::Deserialize)]
        struct Cancel<'a> {
            #[serde(borrow)]
            id: &'a serde_json::value::RawValue,
        }
        let cancel = params.and_then(|p| serde_json::from_str::<Cancel>(p).ok());
        if let Some(token) = cancel.and_then(|c| self.cancels.get(c.id.get())) {
            token.cancel();
        }
        None
    }
}

/// How far the request before an `order` request on its session must have gone for it to
/// start: an append, only until its write is queued.
fn stage(order: Order, params: Option<&str>) -> Stage {
    static GEMINI_CONTENTS: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new("\"gemini_contents\""));
    // A Gemini turn's calls may need ids numbered after the session's: it waits for the
    // writes before it to land.
    match order {
        Order::Append if params.is_none_or(|p| GEMINI_CONTENTS.find(p.as_bytes()).is_none()) => Stage::Queued,
        _ => Stage::Done,
    }
}

/// `call` if nothing else holds it, and nothing cancelled it: a call run at once that
/// ended without keeping it leaves it as it was given.
fn unheld(call: Arc<Call>) -> Option<Arc<Call>> {
    // A holder that let go on another thread did so before the count read here.
    let alone = Arc::strong_count(&call) == 1;
    std::sync::atomic::fence(Ordering::Acquire);
    (alone && !call.is_cancelled()).then_some(call)
}

/// A method's work, made by its handler from the params. The handler parses the params
/// of a method that runs inline now; it must not stop the connection, whatever they hold.
fn start(handler: &Handler, params: Option<&str>, call: Arc<Call>) -> BoxFuture<'static, Outcome> {
    std::panic::catch_unwind(AssertUnwindSafe(|| handler(params, call)))
        .unwrap_or_else(|_| ready(Err(plain(INTERNAL_ERROR, "internal error: the method panicked"))).boxed())
}

/// The calls in flight that `$/cancelRequest` may end, by id: each entered by the
/// connection, and removed by its call once answered.
#[derive(Default)]
struct Cancels {
    tokens: Mutex<HashMap<String, CancellationToken>>,
    /// How many `tokens` holds, written with it. Every request's id is checked against
    /// the calls in flight, and there are usually none when it runs at once: the count
    /// says so without the lock and its two atomic operations. Only the connection
    /// enters, so a stale count is too high, never too low.
    len: AtomicUsize,
}

impl Cancels {
    fn contains(&self, id: &str) -> bool {
        self.len.load(Ordering::Acquire) > 0 && lock(&self.tokens).contains_key(id)
    }

    fn get(&self, id: &str) -> Option<CancellationToken> {
        lock(&self.tokens).get(id).cloned()
    }

    fn insert(&self, id: String, token: CancellationToken) {
        let mut tokens = lock(&self.tokens);
        tokens.insert(id, token);
        self.len.store(tokens.len(), Ordering::Release);
    }

    fn remove(&self, id: &str) {
        let mut tokens = lock(&self.tokens);
        tokens.remove(id);
        self.len.store(tokens.len(), Ordering::Release);
    }
}

/// The reply to a call that took an entry for `$/cancelRequest` (none for a notification),
/// which it gives up now.
fn answered(cancels: &Cancels, id: Option<String>, outcome: Result<Outcome, Stop>, max: usize) -> Option<Reply> {
    let id = id?;
    cancels.remove(&id);
    Some(answer(&id, outcome, max))
}

/// The reply to request `id`.
fn answer(id: &str, outcome: Result<Outcome, Stop>, max: usize) -> Reply {
    match outcome {
        Ok(response) => with_id(id, response, max),
        Err(Stop::Cancelled) => {
            error_reply(Some(id), crate::Error::Cancelled { message_ids: Vec::new() }.into()).into()
        }
        Err(Stop::Panicked) => {
            error_reply(Some(id), plain(INTERNAL_ERROR, "internal error: the method panicked")).into()
        }
    }
}

/// A batch's replies, bounded in total by `max` bytes (as one array): the largest replies
/// of requests that only read (those given an id in `replies`) become 1005 `too_large`
/// until the array fits. A change's reply is never given up.
fn bounded(replies: Vec<(Reply, Option<String>)>, max: usize) -> Vec<String> {
    let mut replies: Vec<(String, Option<String>)> =
        replies.into_iter().map(|(reply, id)| (reply.into_string(), id)).collect();
    let size = |replies: &[(String, Option<String>)]| replies.iter().map(|(r, _)| r.len() + 1).sum::<usize>() + 1;
    while size(&replies) > max {
        let largest = replies.iter_mut().filter(|(_, id)| id.is_some()).max_by_key(|(reply, _)| reply.len());
        let Some((reply, id)) = largest else { break };
        let shed = error_reply(id.as_deref(), batch_too_large(max));
        if shed.len() >= reply.len() {
            break;
        }
        *reply = shed;
        *id = None;
    }
    replies.into_iter().map(|(reply, _)| reply).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rpc::framing::{Decoder, FramingCell};
    use crate::rpc::methods::{Method, Spec};
    use crate::rpc::outgoing::MethodResult;

    use crate::rpc::stdio::{Sink, Source};
    use tokio::sync::mpsc;

    /// Serves `frames` (one per line) with the methods of `registry` until the end of
    /// input; the replies, in the order written.
    async fn serve(registry: Registry, frames: &[&str]) -> Vec<String> {
        let (connection, input, mut out_rx) = connect(registry, frames);
        run(connection, input).await;
        let mut replies = Vec::new();
        while let Ok(reply) = out_rx.try_recv() {
            replies.push(reply.into_string());
        }
        replies
    }

    /// A connection that reads `frames` (one per line, in one read), and where its
    /// replies go.
    fn connect(registry: Registry, frames: &[&str]) -> (Connection, Input, mpsc::Receiver<Reply>) {
        let (outbox, out_rx) = Outbox::channel();
        let (connection, input) = connect_to(registry, frames, outbox);
        (connection, input, out_rx)
    }

    /// `connect`, with replies going to `outbox`, for a store whose appends say when
    /// their writes are queued.
    fn connect_to(registry: Registry, frames: &[&str], outbox: Outbox) -> (Connection, Input) {
        connect_with(registry, frames, outbox, true)
    }

    /// `connect_to`, for a store whose appends say so (`queued_writes`) or not.
    fn connect_with(registry: Registry, frames: &[&str], outbox: Outbox, queued_writes: bool) -> (Connection, Input) {
        let limits = crate::rpc::Config {
            framing: None,
            max_message_bytes: 1024,
            max_pending_bytes: 1 << 20,
            one_at_a_time: false,
        };
        let connection = Connection::new(registry, outbox.clone(), Arc::new(Peer::new(outbox)), &limits, queued_writes);
        let source = Source::Reader(Box::new(std::io::Cursor::new(frames.join("\n") + "\n")));
        let input = Input::new(source, Decoder::new(FramingCell::new(None), 1024)).unwrap();
        (connection, input)
    }

    async fn run(connection: Connection, input: Input) {
        let ran = tokio::time::timeout(std::time::Duration::from_secs(20), connection.run(input)).await;
        assert_eq!(ran, Ok(0), "every request was answered");
    }

    /// The input waits on its own only while nothing else can be waiting: not while a
    /// frame is in flight or a reply is unwritten, nor once the runtime has more tasks
    /// than the connection began with.
    #[tokio::test]
    async fn the_input_waits_on_its_own_only_when_nothing_else_is_waiting() {
        let (connection, _input, mut out_rx) = connect(Registry::default(), &[]);
        assert!(connection.quiet(true));
        assert!(!connection.quiet(false));
        let in_flight = connection.in_flight.clone().acquire_owned().await.unwrap();
        assert!(!connection.quiet(true));
        drop(in_flight);
        connection.outbox.send(String::from("{}")).await;
        assert!(!connection.quiet(true));
        out_rx.recv().await.unwrap();
        assert!(connection.quiet(true));
    }

    /// Of 40 requests read at once and answered at once, the replies go out in three
    /// writes, of 16, 16 and 8, each made by the connection itself (no turn of the
    /// writer): a datagram socket as the output keeps each write apart.
    #[cfg(unix)]
    #[tokio::test]
    async fn replies_made_at_once_are_written_every_16_frames_and_at_the_end_of_a_read() {
        let method = Method {
            spec: Spec { order: Order::Barrier, runs: Runs::Inline, effect: Effect::Reads },
            handler: Box::new(|_, _| async { 1.write(1024) }.boxed()),
        };
        let registry: Registry = [("one", method)].into_iter().collect();
        let frames: Vec<String> =
            (1..=40).map(|id| format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"one"}}"#)).collect();
        let (ours, theirs) = std::os::unix::net::UnixDatagram::pair().unwrap();
        let framing = FramingCell::new(Some(crate::rpc::framing::Framing::Ndjson));
        let (outbox, writer) = crate::rpc::writer::spawn(Sink::Fd(ours.into()), framing).unwrap();
        let frames: Vec<&str> = frames.iter().map(String::as_str).collect();
        let (connection, input) = connect_to(registry, &frames, outbox);
        run(connection, input).await;
        writer.join().await;
        theirs.set_nonblocking(true).unwrap();
        let mut buf = vec![0; 1 << 16];
        let writes: Vec<usize> =
            std::iter::from_fn(|| theirs.recv(&mut buf).ok().map(|n| buf[..n].split(|&b| b == b'\n').count() - 1))
                .collect();
        assert_eq!(writes, [16, 16, 8]);
    }

    /// The first request, with nothing else running, starts at once; its work waits, so
    /// it takes its place then: the duplicate of its id is refused, `$/cancelRequest`
    /// reaches it, and the next request on its session waits for it.
    #[tokio::test]
    async fn a_call_started_at_once_that_waits_takes_its_place_then() {
        let method = |waits: bool| Method {
            spec: Spec { order: Order::Session, runs: Runs::Inline, effect: Effect::Changes },
            handler: Box::new(move |_, call: Arc<Call>| {
                async move {
                    if waits {
                        call.cancel().cancelled().await;
                        "saw the cancel".write(1024)
                    } else {
                        "after".write(1024)
                    }
                }
                .boxed()
            }),
        };
        let registry: Registry = [("waits", method(true)), ("next", method(false))].into_iter().collect();
        let frames = [
            r#"{"jsonrpc":"2.0","id":1,"method":"waits","params":{"session_id":"s"}}"#,
            r#"{"jsonrpc":"2.0","id":2,"method":"next","params":{"session_id":"s"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"next","params":{"session_id":"t"}}"#,
            r#"{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":1}}"#,
        ];
        assert_eq!(
            serve(registry, &frames).await,
            [
                r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32600,"message":"invalid request: the id 1 is already used by a request in flight"}}"#,
                r#"{"jsonrpc":"2.0","id":1,"result":"saw the cancel"}"#,
                r#"{"jsonrpc":"2.0","id":2,"result":"after"}"#,
            ]
        );
    }

    /// A call answered at once leaves its `Call` to the next call run at once, unless it
    /// keeps it: one that holds it on past its end, or one that waits (which
    /// `$/cancelRequest` then reaches alone).
    #[tokio::test]
    async fn a_call_answered_at_once_leaves_its_call_to_the_next_unless_it_keeps_it() {
        // Weak: each `Call` stays allocated, so a new one cannot take its address.
        let seen: Arc<Mutex<Vec<std::sync::Weak<Call>>>> = Arc::default();
        let kept: Arc<Mutex<Vec<Arc<Call>>>> = Arc::default();
        let method = |keeps: bool, waits: bool| {
            let (seen, kept) = (seen.clone(), kept.clone());
            Method {
                spec: Spec { order: Order::Session, runs: Runs::Inline, effect: Effect::Changes },
                handler: Box::new(move |_, call: Arc<Call>| {
                    lock(&seen).push(Arc::downgrade(&call));
                    if keeps {
                        lock(&kept).push(call.clone());
                    }
                    async move {
                        if waits {
                            call.cancel().cancelled().await;
                        }
                        "done".write(1024)
                    }
                    .boxed()
                }),
            }
        };
        let registry: Registry =
            [("plain", method(false, false)), ("keeps", method(true, false)), ("waits", method(false, true))]
                .into_iter()
                .collect();
        let frames = [
            r#"{"jsonrpc":"2.0","id":1,"method":"plain","params":{"session_id":"s"}}"#,
            r#"{"jsonrpc":"2.0","id":2,"method":"plain","params":{"session_id":"s"}}"#,
            r#"{"jsonrpc":"2.0","id":3,"method":"keeps","params":{"session_id":"s"}}"#,
            r#"{"jsonrpc":"2.0","id":4,"method":"plain","params":{"session_id":"s"}}"#,
            r#"{"jsonrpc":"2.0","id":5,"method":"waits","params":{"session_id":"s"}}"#,
            r#"{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":5}}"#,
        ];
        let replies = serve(registry, &frames).await;
        assert_eq!(
            replies,
            (1..=5).map(|id| format!(r#"{{"jsonrpc":"2.0","id":{id},"result":"done"}}"#)).collect::<Vec<_>>()
        );
        let seen = lock(&seen);
        let same = |a: usize, b: usize| seen[a].ptr_eq(&seen[b]);
        assert!(same(0, 1) && same(1, 2), "given again while no call keeps it");
        assert!(!same(2, 3), "the call that kept it keeps it alone");
        assert!(same(3, 4));
        assert!(!lock(&kept)[0].is_cancelled(), "cancelling the call that waited reaches no other");
    }

    /// With a store that never says its writes are queued (memory), an append started at
    /// once that waits is given no hook: one it calls anyway opens nothing, and the next
    /// append on its session starts once it has finished.
    #[tokio::test]
    async fn without_queued_writes_the_next_append_waits_for_the_one_before_to_finish() {
        let log = Arc::new(Mutex::new(Vec::new()));
        let method = |name: &'static str, waits: bool| {
            let log = log.clone();
            Method {
                spec: Spec { order: Order::Append, runs: Runs::Inline, effect: Effect::Changes },
                handler: Box::new(move |_, _| {
                    let log = log.clone();
                    async move {
                        lock(&log).push(format!("{name} started"));
                        if waits {
                            queued::signal();
                            for _ in 0..3 {
                                tokio::task::yield_now().await;
                            }
                        }
                        lock(&log).push(format!("{name} finished"));
                        name.write(1024)
                    }
                    .boxed()
                }),
            }
        };
        let registry: Registry =
            [("first", method("first", true)), ("second", method("second", false))].into_iter().collect();
        let frames = [
            r#"{"jsonrpc":"2.0","id":1,"method":"first","params":{"session_id":"s"}}"#,
            r#"{"jsonrpc":"2.0","id":2,"method":"second","params":{"session_id":"s"}}"#,
        ];
        let (outbox, mut out_rx) = Outbox::channel();
        let (connection, input) = connect_with(registry, &frames, outbox, false);
        run(connection, input).await;
        assert_eq!(*lock(&log), ["first started", "first finished", "second started", "second finished"]);
        let mut replies = Vec::new();
        while let Ok(reply) = out_rx.try_recv() {
            replies.push(reply.into_string());
        }
        assert_eq!(
            replies,
            [r#"{"jsonrpc":"2.0","id":1,"result":"first"}"#, r#"{"jsonrpc":"2.0","id":2,"result":"second"}"#]
        );
    }

    #[tokio::test]
    async fn a_panicking_method_gets_32603_and_the_connection_goes_on() {
        let method = |panics: bool| Method {
            spec: Spec { order: Order::Barrier, runs: Runs::Inline, effect: Effect::Reads },
            handler: Box::new(move |_, _| {
                async move {
                    assert!(!panics, "boom");
                    1.write(1024)
                }
                .boxed()
            }),
        };
        let registry: Registry = [("boom", method(true)), ("fine", method(false))].into_iter().collect();
        let frames = [r#"{"jsonrpc":"2.0","id":1,"method":"boom"}"#, r#"{"jsonrpc":"2.0","id":2,"method":"fine"}"#];
        let mut replies = serve(registry, &frames).await;
        replies.sort();
        assert_eq!(
            replies,
            [
                r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"internal error: the method panicked"}}"#,
                r#"{"jsonrpc":"2.0","id":2,"result":1}"#,
            ]
        );
    }
}
