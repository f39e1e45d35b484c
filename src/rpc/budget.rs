//! The memory a connection may hold for its client (`--max-pending-bytes`): the bytes
//! of requests read but not yet answered, and of replies made but not yet written, each
//! stay under the budget.
//!
//! - A frame takes its size from the input budget before it is handled and gives it
//!   back once its reply is queued; while the budget is spent the connection reads
//!   nothing more, so the client meets back-pressure in its pipe. A frame answered at
//!   once (on its work's first poll) only looks (`input_fits`): nothing else runs
//!   before it would give the share back. So does its running place (`could_start`).
//! - A reply takes its size from the output budget before it is queued and gives it back
//!   once written. Replies made at once are only counted (`Owed`) while the connection
//!   holds them, and their shares taken in one go when it hands them over (`pay`):
//!   nothing else runs in between. A request starts only when it holds one of `MAX_RUNNING` places and
//!   the output budget has room, so a client that sends much and reads nothing holds
//!   the server at about the budget plus `MAX_RUNNING` replies, however many requests
//!   it sends.
//!
//! Something larger than the whole budget takes all of it, and so passes alone.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// How many requests may run at once (past their session's order, not yet replied).
pub const MAX_RUNNING: usize = 32;

/// How many appends may wait for their commit, their writes queued, without holding
/// a running place (`Budget::waiting`).
pub const MAX_WAITING: usize = 1024;

/// The default budget, for input and for output each.
pub const DEFAULT_PENDING_BYTES: usize = 256 * 1024 * 1024;

/// A part of the budget, given back when dropped.
pub type Hold = OwnedSemaphorePermit;

/// The shares of the output budget that replies made at once will take once handed to
/// the output (`Budget::owe`, `Budget::pay`): the sum of their shares.
#[derive(Debug, Default)]
pub struct Owed(usize);

#[derive(Clone, Debug)]
pub struct Budget {
    bytes: u32,
    input: Arc<Semaphore>,
    output: Arc<Semaphore>,
    running: Arc<Semaphore>,
    waiting: Arc<Semaphore>,
}

impl Budget {
    /// A budget of `bytes` (at most `u32::MAX`) for input and for output each.
    pub fn new(bytes: usize) -> Self {
        let bytes = u32::try_from(bytes).unwrap_or(u32::MAX).max(1);
        Budget {
            bytes,
            input: Arc::new(Semaphore::new(bytes as usize)),
            output: Arc::new(Semaphore::new(bytes as usize)),
            running: Arc::new(Semaphore::new(MAX_RUNNING)),
            waiting: Arc::new(Semaphore::new(MAX_WAITING)),
        }
    }

    fn share(&self, len: usize) -> u32 {
        u32::try_from(len).unwrap_or(u32::MAX).clamp(1, self.bytes)
    }

    /// Whether a frame of `len` bytes fits in the input budget now, without taking its
    /// share: a frame answered at once gives it back before anything else could ask.
    pub fn input_fits(&self, len: usize) -> bool {
        self.input.available_permits() >= self.share(len) as usize
    }

    /// A frame's share of the input budget if it fits now.
    pub fn try_input(&self, len: usize) -> Option<Hold> {
        self.input.clone().try_acquire_many_owned(self.share(len)).ok()
    }

    /// Waits until a frame of `len` bytes fits in the input budget.
    pub async fn input(&self, len: usize) -> Option<Hold> {
        // Most frames fit at once: no future to poll for them.
        match self.try_input(len) {
            Some(hold) => Some(hold),
            None => self.input.clone().acquire_many_owned(self.share(len)).await.ok(),
        }
    }

    /// Waits until a reply of `len` bytes fits in the output budget.
    pub async fn output(&self, len: usize) -> Option<Hold> {
        self.output.clone().acquire_many_owned(self.share(len)).await.ok()
    }

    /// Counts a reply of `len` bytes made at once into `owed` if it fits in the output
    /// budget now beside what `owed` counts already.
    pub fn owe(&self, owed: &mut Owed, len: usize) -> bool {
        let total = owed.0.saturating_add(self.share(len) as usize);
        let fits = self.output.available_permits() >= total;
        if fits {
            owed.0 = total;
        }
        fits
    }

    /// Takes what `owed` counts from the output budget, and clears it. Nothing has taken
    /// from the budget since it was counted, so this does not wait but for a reply whose
    /// work was polled by another task in between (never, on one thread).
    pub async fn pay(&self, owed: &mut Owed) -> Option<Hold> {
        let total = std::mem::take(&mut owed.0);
        if total == 0 {
            return None;
        }
        let share = self.share(total);
        match self.output.clone().try_acquire_many_owned(share) {
            Ok(hold) => Some(hold),
            Err(_) => self.output.clone().acquire_many_owned(share).await.ok(),
        }
    }

    /// A place to wait for a commit in, if one is free now: an append whose write is
    /// queued trades its running place for it.
    pub fn waiting(&self) -> Option<Hold> {
        self.waiting.clone().try_acquire_owned().ok()
    }

    /// Whether `try_start` would give a place now, without taking it: work done on its
    /// first poll gives it back before anything else could ask.
    pub fn could_start(&self, owed: &Owed) -> bool {
        self.output.available_permits() > owed.0 && self.running.available_permits() > 0
    }

    /// A place to run in, if one is free and the output budget has room now beside what
    /// `owed` counts.
    pub fn try_start(&self, owed: &Owed) -> Option<Hold> {
        if self.output.available_permits() <= owed.0 {
            return None;
        }
        self.running.clone().try_acquire_owned().ok()
    }

    /// Waits for a place to run in and for room in the output budget (behind every
    /// reply already waiting for room).
    pub async fn start(&self) -> Option<Hold> {
        let place = self.running.clone().acquire_owned().await.ok()?;
        drop(self.output.acquire().await.ok()?);
        Some(place)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    async fn blocks<T>(f: impl std::future::Future<Output = T>) -> bool {
        tokio::time::timeout(Duration::from_millis(50), f).await.is_err()
    }

    #[test]
    fn places_to_wait_for_a_commit_are_bounded() {
        let budget = Budget::new(100);
        let held: Vec<Hold> = (0..MAX_WAITING).map(|_| budget.waiting().expect("a free place")).collect();
        assert!(budget.waiting().is_none());
        drop(held);
        assert!(budget.waiting().is_some());
    }

    #[tokio::test]
    async fn a_spent_budget_holds_the_next_frame_until_a_reply_is_queued() {
        let budget = Budget::new(100);
        let first = budget.input(60).await;
        assert!(blocks(budget.input(60)).await);
        drop(first);
        assert!(budget.input(60).await.is_some());
    }

    #[tokio::test]
    async fn nothing_starts_while_unwritten_replies_fill_the_output_budget() {
        let budget = Budget::new(100);
        let written_later = budget.output(1000).await.expect("larger than the budget: takes it all");
        assert!(blocks(budget.start()).await);
        drop(written_later);
        assert!(budget.start().await.is_some());
    }

    /// Looking takes nothing: what fits is what taking would get now.
    #[tokio::test]
    async fn what_fits_is_what_taking_would_get() {
        let budget = Budget::new(100);
        let held = budget.input(60).await;
        assert!(budget.input_fits(40) && budget.try_input(40).is_some());
        assert!(!budget.input_fits(41) && budget.try_input(41).is_none());
        drop(held);
        assert!(budget.input_fits(1000), "larger than the budget: fits when it is all free");

        let none = Owed::default();
        assert!(budget.could_start(&none));
        let running: Vec<Hold> = (0..MAX_RUNNING).map(|_| budget.try_start(&none).expect("a free place")).collect();
        assert!(!budget.could_start(&none) && budget.try_start(&none).is_none());
        drop(running);
        let written_later = budget.output(1000).await;
        assert!(!budget.could_start(&none) && budget.try_start(&none).is_none(), "no room in the output budget");
        drop(written_later);
        assert!(budget.could_start(&none));
    }

    /// Replies made at once count against the budget before they take from it, and take
    /// their shares in one hold.
    #[tokio::test]
    async fn what_is_owed_counts_before_it_is_paid() {
        let budget = Budget::new(100);
        let mut owed = Owed::default();
        assert!(budget.owe(&mut owed, 60) && budget.owe(&mut owed, 0), "an empty reply counts as one byte");
        assert!(!budget.owe(&mut owed, 40), "39 bytes are left");
        assert!(budget.could_start(&owed) && budget.try_start(&owed).is_some());
        assert!(budget.owe(&mut owed, 39));
        assert!(!budget.could_start(&owed) && budget.try_start(&owed).is_none(), "all of it is owed");

        let paid = budget.pay(&mut owed).await.expect("a hold");
        assert_eq!((paid.num_permits(), owed.0), (100, 0));
        assert!(budget.pay(&mut owed).await.is_none(), "nothing owed: nothing taken");
        assert!(!budget.owe(&mut owed, 1), "the paid shares are held until written");
        drop(paid);
        assert!(budget.owe(&mut owed, 1000), "larger than the budget: fits when it is all free");
        assert!(!budget.owe(&mut owed, 1));
    }

    #[tokio::test]
    async fn at_most_max_running_requests_run() {
        let budget = Budget::new(100);
        let mut running = Vec::new();
        for _ in 0..MAX_RUNNING {
            running.push(budget.start().await);
        }
        assert!(blocks(budget.start()).await);
        running.pop();
        assert!(budget.start().await.is_some());
    }
}
