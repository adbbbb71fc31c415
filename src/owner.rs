//! Who holds a lock: the `<clientUUID>:<threadId>` hash field (docs/wire-format.md, "Keys"),
//! and who asked for an unlock: its [`RequestId`].

use std::cell::Cell;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

static NEXT_THREAD_ID: AtomicU64 = AtomicU64::new(1);

thread_local! {
    static THREAD_ID: Cell<u64> = const { Cell::new(0) };
}

/// This thread's number in lock owner fields: unique within the process,
/// assigned on first use, never reused. Java uses `Thread.getId()`; since the
/// field also carries the client's random UUID, the two never collide.
pub(crate) fn current_thread_id() -> u64 {
    THREAD_ID.with(|id| {
        if id.get() == 0 {
            id.set(NEXT_THREAD_ID.fetch_add(1, Ordering::Relaxed));
        }
        id.get()
    })
}

/// A fresh owner id for a hold that belongs to no thread (an owned guard):
/// drawn from the thread numbers' counter, so it is never a live thread's.
pub(crate) fn fresh_owner_id() -> u64 {
    NEXT_THREAD_ID.fetch_add(1, Ordering::Relaxed)
}

/// The hash field naming `thread_id` of client `client_id` as a holder.
pub(crate) fn owner_field(client_id: &str, thread_id: u64) -> String {
    // Built by hand: `format!` costs several times more, on every acquire.
    let digits = &mut crate::names::Decimal::default();
    let digits = digits.of(thread_id);
    let mut field = String::with_capacity(client_id.len() + 1 + digits.len());
    field.push_str(client_id);
    field.push(':');
    // ASCII digits only.
    field.extend(digits.iter().map(|&d| char::from(d)));
    field
}

/// Identifies one unlock request. Redisson's unlock latch keys the outcome of
/// an unlock by it, so sending the same request again (after a lost reply)
/// returns the first outcome instead of releasing twice.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct RequestId(String);

impl RequestId {
    /// A fresh id: 16 random bytes as 32 lowercase hex digits, like Redisson's.
    pub fn new() -> Self {
        RequestId(uuid::Uuid::new_v4().simple().to_string())
    }

    pub(crate) fn from_parts(prefix: u64, seq: u64) -> Self {
        RequestId(format!("{prefix:016x}{seq:016x}"))
    }

    /// The id as sent in the latch key.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Default for RequestId {
    fn default() -> Self {
        RequestId::new()
    }
}

impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RequestId({})", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_ids_are_stable_per_thread_and_distinct_across_threads() {
        let here = current_thread_id();
        assert_eq!(here, current_thread_id());
        let there = std::thread::spawn(current_thread_id)
            .join()
            .expect("thread");
        assert_ne!(here, there);
        assert!(here > 0 && there > 0);
    }
}
