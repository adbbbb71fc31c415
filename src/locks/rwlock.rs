//! [`ReadWriteLock`], the pair of handles on one Redisson `RReadWriteLock`.

use super::{ReadLock, WriteLock};
use crate::client::Client;
use crate::lock::Lock;

/// A read/write lock: byte-for-byte a Redisson `RReadWriteLock`
/// (`getReadWriteLock`). Its two handles share one hash named after the
/// lock and the channel `redisson_rwlock:{<name>}`:
/// [`read_lock`](Self::read_lock) (many readers) and
/// [`write_lock`](Self::write_lock) (one writer, no readers). Each is a full
/// [`Lock`] with its own guards.
///
/// Making the handles does not talk to Redis. A `ReadWriteLock` is cheap to
/// clone.
#[derive(Clone, Debug)]
pub struct ReadWriteLock {
    client: Client,
    name: String,
}

impl ReadWriteLock {
    pub(crate) fn new(client: Client, name: String) -> Self {
        ReadWriteLock { client, name }
    }

    /// The lock's name: the Redis key of its hash.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The read lock (Redisson's `readLock()`). No round trip.
    pub fn read_lock(&self) -> ReadLock {
        Lock::new(self.client.clone(), self.name.clone())
    }

    /// The write lock (Redisson's `writeLock()`). No round trip.
    pub fn write_lock(&self) -> WriteLock {
        Lock::new(self.client.clone(), self.name.clone())
    }
}
