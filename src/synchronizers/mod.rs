//! Redisson's synchronizers (docs/synchronizers.md): counters and channels
//! shared with Java, waited on through the engine's one waiting loop
//! (`Engine::wait_on`). One file per type; their protocol files are in
//! `crate::protocol`.

/// A synchronizer handle's `Debug`, as a lock's: its name (the field
/// path given), the token its waits watch, and its client's id.
macro_rules! debug_handle {
    ($type:ident, $($name:ident).+) => {
        impl std::fmt::Debug for $type {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($type))
                    .field("name", &self.$($name).+)
                    .field("cancel", &self.cancel)
                    .field("client", &self.engine.id)
                    .finish()
            }
        }
    };
}

mod latch;
mod permit_expirable;
mod semaphore;

pub use latch::CountDownLatch;
pub use permit_expirable::{ExpirablePermits, PermitExpirableSemaphore, PermitId};
pub use semaphore::{Semaphore, SemaphorePermits};
