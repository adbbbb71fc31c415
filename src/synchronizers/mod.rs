//! Redisson's synchronizers, one file each: their public faces over the
//! engine's waiting loop ([`crate::engine::waiting`]) and their protocol
//! files in `crate::locks`.

mod expirable;

pub use expirable::{ExpirablePermits, PermitExpirableSemaphore, PermitId};
