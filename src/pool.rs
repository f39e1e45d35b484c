//! Bounded pools of blocking work. A pool runs at most `size` jobs at once, each on a
//! thread of its own; the rest wait for a place without a thread. So the threads, and
//! whatever each job opens (a database connection), stay bounded however many requests
//! arrive, and the thread that reads and writes frames never computes.
//!
//! The thread that finished last takes the next job: its caches and its allocator's free
//! memory are warm. (Tokio's blocking threads take jobs in turn, so a 10 MB history read
//! from SQLite mostly found a cold heap, and the kernel zeroing fresh pages for it.)

use std::panic::AssertUnwindSafe;
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex, Weak};

use tokio::sync::{OwnedSemaphorePermit, Semaphore, oneshot};

use crate::error::{Error, Result};
use crate::lock;

/// A job as a worker runs it: the work, which returns what to do once the worker is
/// back among the idle ones (hand over the result, give back the place).
type Work = Box<dyn FnOnce() -> Box<dyn FnOnce() + Send> + Send>;

/// A job and the way back to the worker that runs it, for the idle stack.
struct Job {
    work: Work,
    home: Sender<Job>,
}

/// The idle workers, the one that finished last on top.
type Idle = Mutex<Vec<Sender<Job>>>;

#[derive(Clone)]
pub struct Pool {
    name: &'static str,
    places: Arc<Semaphore>,
    idle: Arc<Idle>,
}

impl Pool {
    pub fn new(name: &'static str, size: usize) -> Self {
        Pool { name, places: Arc::new(Semaphore::new(size.max(1))), idle: Arc::default() }
    }

    /// A pool for computing: two places per core, at least four, so that two long jobs
    /// do not hold up every other one on a small machine.
    pub fn for_cpu(name: &'static str) -> Self {
        Pool::new(name, std::thread::available_parallelism().map_or(4, |n| (2 * n.get()).max(4)))
    }

    /// Runs `job` once a place is free. The place is held until `job` returns, even if
    /// the caller stops waiting.
    pub async fn run<T, F>(&self, job: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        let place = self.places.clone().acquire_owned().await.map_err(|_| self.stopped())?;
        let done = self.start(place, job)?;
        self.outcome(done.await)
    }

    /// Runs `job` beside the caller, a thread outside the runtime (another job of a
    /// pool), when a place is free now; `None` when none is, and the caller does the
    /// work itself. The place is held until `job` returns.
    pub fn try_beside<T, F>(&self, job: F) -> Option<Beside<T>>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        let place = self.places.clone().try_acquire_owned().ok()?;
        let done = self.start(place, job).ok()?;
        Some(Beside { pool: self.clone(), done })
    }

    /// Hands `job` to a worker, which gives back `place` once it is done; what it
    /// returned (or that it panicked) arrives on the receiver.
    fn start<T, F>(&self, place: OwnedSemaphorePermit, job: F) -> Result<oneshot::Receiver<std::thread::Result<T>>>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        let work: Work = Box::new(move || {
            let result = std::panic::catch_unwind(AssertUnwindSafe(job));
            Box::new(move || {
                let _ = tx.send(result);
                drop(place);
            })
        });
        let home = self.worker()?;
        home.clone().send(Job { work, home }).map_err(|_| self.stopped())?;
        Ok(rx)
    }

    fn outcome<T>(&self, done: std::result::Result<std::thread::Result<T>, oneshot::error::RecvError>) -> Result<T> {
        match done {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(_panic)) => Err(Error::Internal(format!("a job of the {} pool panicked", self.name))),
            Err(_) => Err(self.stopped()),
        }
    }

    /// The idle worker that finished last, or a new one.
    fn worker(&self) -> Result<Sender<Job>> {
        if let Some(home) = lock(&self.idle).pop() {
            return Ok(home);
        }
        let (home, jobs) = channel();
        let idle = Arc::downgrade(&self.idle);
        std::thread::Builder::new()
            .name(format!("convo-{}", self.name))
            .spawn(move || work(&jobs, &idle))
            .map_err(|e| Error::Internal(format!("cannot start a thread for the {} pool: {e}", self.name)))?;
        Ok(home)
    }

    fn stopped(&self) -> Error {
        Error::Internal(format!("the {} pool has stopped", self.name))
    }
}

/// A job running beside its caller (`Pool::try_beside`).
pub struct Beside<T> {
    pool: Pool,
    done: oneshot::Receiver<std::thread::Result<T>>,
}

impl<T> Beside<T> {
    /// What the job returned, once it has: blocks the calling thread, which must not be
    /// one of the runtime's.
    pub fn wait(self) -> Result<T> {
        self.pool.outcome(self.done.blocking_recv())
    }
}

/// A worker: runs its jobs until its pool is gone. It goes back among the idle workers
/// before the caller hears of the result, so the caller's next job finds it there.
fn work(jobs: &Receiver<Job>, idle: &Weak<Idle>) {
    while let Ok(Job { work, home }) = jobs.recv() {
        let finish = work();
        // Once the pool is gone its idle stack is too: the last way to this worker is
        // dropped, and `recv` ends the loop.
        if let Some(idle) = idle.upgrade() {
            lock(&idle).push(home);
        }
        // Dropping a result nobody waits for any more runs its code here: a panic in it
        // must not end a worker that is already on the idle stack.
        let _ = std::panic::catch_unwind(AssertUnwindSafe(finish));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test]
    async fn never_runs_more_than_its_size_at_once() {
        let pool = Pool::new("test", 3);
        let (now, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let jobs = (0..20).map(|_| {
            let (pool, now, most) = (pool.clone(), now.clone(), most.clone());
            tokio::spawn(async move {
                pool.run(move || {
                    most.fetch_max(now.fetch_add(1, Ordering::SeqCst) + 1, Ordering::SeqCst);
                    std::thread::sleep(std::time::Duration::from_millis(5));
                    now.fetch_sub(1, Ordering::SeqCst);
                })
                .await
            })
        });
        for job in jobs.collect::<Vec<_>>() {
            job.await.unwrap().unwrap();
        }
        assert!(most.load(Ordering::SeqCst) <= 3);
    }

    /// A job beside another runs only on a place free at once, and its caller waits for it.
    #[tokio::test]
    async fn a_job_beside_another_takes_a_free_place_or_none() {
        let pool = Pool::new("test", 2);
        let same = pool.clone();
        let got = pool
            .run(move || {
                let (go, wait) = std::sync::mpsc::channel::<()>();
                let beside = same.try_beside(move || wait.recv().map(|()| 7)).expect("a place is free");
                let third = same.try_beside(|| Ok::<i32, std::sync::mpsc::RecvError>(0));
                go.send(()).unwrap();
                (third.is_none(), beside.wait())
            })
            .await
            .unwrap();
        assert!(got.0, "both places were held");
        assert_eq!(got.1.unwrap(), Ok(7));
    }

    #[tokio::test]
    async fn the_worker_that_finished_last_takes_the_next_job() {
        let pool = Pool::new("test", 3);
        let here = || std::thread::current().id();
        let first = pool.run(here).await.unwrap();
        for _ in 0..5 {
            assert_eq!(pool.run(here).await.unwrap(), first);
        }
        let two = futures_util::future::join(pool.run(here), pool.run(here)).await;
        assert!(two.0.as_ref().unwrap() == &first || two.1.as_ref().unwrap() == &first);
    }

    #[tokio::test]
    async fn a_panicking_job_is_an_error_and_the_pool_goes_on() {
        let pool = Pool::new("test", 1);
        let failed = pool.run(|| panic!("boom")).await.unwrap_err();
        assert_eq!(failed.to_string(), "internal error: a job of the test pool panicked");
        assert_eq!(pool.run(|| 7).await.unwrap(), 7);
    }

    #[tokio::test]
    async fn its_threads_end_with_it() {
        thread_local! {
            static GUARD: std::cell::RefCell<Option<std::sync::mpsc::Sender<()>>> = const { std::cell::RefCell::new(None) };
        }
        let pool = Pool::new("test", 2);
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        // Dropped with the worker thread's locals, when the thread ends.
        pool.run(move || GUARD.with(|guard| *guard.borrow_mut() = Some(tx))).await.unwrap();
        drop(pool);
        let ended = rx.recv_timeout(std::time::Duration::from_secs(10));
        assert_eq!(ended, Err(std::sync::mpsc::RecvTimeoutError::Disconnected));
    }
}
