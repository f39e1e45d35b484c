//! Bounded pools of blocking work. A pool runs at most `size` jobs at once, each on one
//! of tokio's blocking threads; the rest wait for a place without a thread. So the
//! threads, and whatever each job opens (a database connection), stay bounded however
//! many requests arrive, and the thread that reads and writes frames never computes.

use std::sync::Arc;

use tokio::sync::Semaphore;

use crate::error::{Error, Result};

#[derive(Clone, Debug)]
pub struct Pool {
    name: &'static str,
    places: Arc<Semaphore>,
}

impl Pool {
    pub fn new(name: &'static str, size: usize) -> Self {
        Pool { name, places: Arc::new(Semaphore::new(size.max(1))) }
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
        tokio::task::spawn_blocking(move || {
            let _place = place;
            job()
        })
        .await
        .map_err(|_| Error::Internal(format!("a job of the {} pool panicked", self.name)))
    }

    fn stopped(&self) -> Error {
        Error::Internal(format!("the {} pool has stopped", self.name))
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
}
