//! Redisson's synchronizers (docs/synchronizers.md): counters and channels
//! shared with Java, waited on through the engine's one waiting loop
//! (`Engine::wait_on`). One file per type; their protocol files are in
//! `crate::locks`.

mod expirable;
mod latch;
mod semaphore;

pub use expirable::{ExpirablePermits, PermitExpirableSemaphore, PermitId};
pub use latch::CountDownLatch;
pub use semaphore::{Semaphore, SemaphorePermits};
