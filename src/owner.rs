//! Who holds a lock: the `<clientUUID>:<threadId>` hash field (PROTOCOL §1.2).

use std::cell::Cell;
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
