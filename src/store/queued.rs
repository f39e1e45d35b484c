//! How a store says that a write is in its writer's queue. A backend whose writes on one
//! session are applied in the order they were queued (SQLite: one writer thread, FIFO)
//! calls [`signal`] right after queueing; the connection (`rpc::order`) then lets the
//! next append on that session queue its own write, so that appends pipelined on one
//! session share a commit instead of waiting for each other's; PostgreSQL's commit queue
//! calls it too. A backend that never calls it (memory: applied at once) says so
//! (`Histories::signals_queued`), is given no hook, and keeps the order as before: the
//! next request starts when this one has finished.
//!
//! The hook is a task-local set by whoever runs the request, around the whole of it; it
//! fires at most once, on the first write queued.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

type Hook = Box<dyn FnOnce() + Send>;

tokio::task_local! {
    static QUEUED: RefCell<Option<Hook>>;
}

/// `work` with `hook` (if any) to be called when its first write is queued.
pub fn scope<F: Future + Unpin>(hook: Option<Hook>, work: F) -> Scoped<F> {
    Scoped { hook, work }
}

/// A request's work, polled with its hook in reach until the hook fires. It is `Unpin`,
/// so that it can be polled where it was made and kept (moved) only if it waits.
pub struct Scoped<F> {
    hook: Option<Hook>,
    work: F,
}

impl<F: Future + Unpin> Future for Scoped<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.get_mut();
        let Some(hook) = this.hook.take() else {
            return Pin::new(&mut this.work).poll(cx);
        };
        let (poll, hook) = QUEUED.sync_scope(RefCell::new(Some(hook)), || {
            let poll = Pin::new(&mut this.work).poll(cx);
            (poll, QUEUED.with(|hook| hook.borrow_mut().take()))
        });
        this.hook = hook;
        poll
    }
}

/// A write of the current request has been queued, after every write queued before it.
pub fn signal() {
    let hook = QUEUED.try_with(|hook| hook.borrow_mut().take()).ok().flatten();
    if let Some(hook) = hook {
        hook();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test]
    async fn the_hook_fires_once_and_only_inside_its_scope() {
        let fired = Arc::new(AtomicUsize::new(0));
        super::signal();
        let counter = fired.clone();
        let hook = Box::new(move || {
            counter.fetch_add(1, Ordering::SeqCst);
        });
        super::scope(
            Some(hook),
            // The hook is kept across the polls before it fires.
            Box::pin(async {
                tokio::task::yield_now().await;
                super::signal();
                super::signal();
            }),
        )
        .await;
        super::signal();
        assert_eq!(fired.load(Ordering::SeqCst), 1);
    }
}
