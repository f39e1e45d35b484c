//! How a store says that a write is in its writer's queue. A backend whose writes on one
//! session are applied in the order they were queued (SQLite: one writer thread, FIFO)
//! calls [`signal`] right after queueing; the connection (`rpc::order`) then lets the
//! next append on that session queue its own write, so that appends pipelined on one
//! session share a commit instead of waiting for each other's. A backend that never
//! calls it (memory: applied at once; PostgreSQL: several writers) keeps the order as
//! before: the next request starts when this one has finished.
//!
//! The hook is a task-local set by whoever runs the request, around the whole of it; it
//! fires at most once, on the first write queued.

use std::cell::RefCell;
use std::future::Future;

type Hook = Box<dyn FnOnce() + Send>;

tokio::task_local! {
    static QUEUED: RefCell<Option<Hook>>;
}

/// Runs `work` with `hook` to be called when its first write is queued.
pub async fn scope<F: Future>(hook: Hook, work: F) -> F::Output {
    QUEUED.scope(RefCell::new(Some(hook)), work).await
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
        super::scope(hook, async {
            super::signal();
            super::signal();
        })
        .await;
        super::signal();
        assert_eq!(fired.load(Ordering::SeqCst), 1);
    }
}
