//! Redisson's synchronizers (docs/synchronizers.md): counters and channels
//! shared with Java, waited on through the engine's one waiting loop
//! (`Engine::wait_on`). One file per type; their protocol files are in
//! `crate::protocol`.

mod latch;
mod permit_expirable;
mod semaphore;

pub use latch::CountDownLatch;
pub use permit_expirable::{ExpirablePermits, PermitExpirableSemaphore, PermitId};
pub use semaphore::{Semaphore, SemaphorePermits};
