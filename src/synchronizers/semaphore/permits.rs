//! [`SemaphorePermits`], the permits one [`Semaphore`] acquisition took.

use std::fmt;

use super::Semaphore;
use crate::error::Result;

/// Permits taken by one [`Semaphore::acquire`] (or `try_acquire*`): released
/// when dropped (an error is then logged, not reported), by
/// [`SemaphorePermits::release`] with its error reported, or kept for good
/// by [`SemaphorePermits::forget`].
///
/// Redisson's permits are not owned, so this is only bookkeeping on the
/// caller's side: it is `Send` (another thread may return them) and any
/// client may release permits it never took. A guard of 0 permits (from
/// `acquire(0)`) releases nothing.
#[must_use = "dropping the permits releases them at once"]
#[clippy::has_significant_drop]
pub struct SemaphorePermits {
    semaphore: Semaphore,
    count: u32,
    done: bool,
}

impl SemaphorePermits {
    pub(super) fn new(semaphore: Semaphore, count: u32) -> SemaphorePermits {
        SemaphorePermits {
            semaphore,
            count,
            done: false,
        }
    }

    /// How many permits this holds.
    pub fn count(&self) -> u32 {
        self.count
    }

    /// The semaphore they were taken from.
    pub fn semaphore(&self) -> &Semaphore {
        &self.semaphore
    }

    /// Returns the permits now: [`Semaphore::release`] of
    /// [`SemaphorePermits::count`], with its errors (a lost reply is
    /// [`Error::OutcomeUnknown`](crate::Error::OutcomeUnknown) and is not sent again). One round trip,
    /// none for 0 permits.
    pub fn release(mut self) -> Result<()> {
        self.done = true;
        self.semaphore.release(self.count)
    }

    /// Keeps the permits taken: nothing is released, now or on drop (they
    /// can still be returned by anyone with [`Semaphore::release`]).
    /// Returns how many they were. No round trip.
    pub fn forget(mut self) -> u32 {
        self.done = true;
        self.count
    }
}

impl Drop for SemaphorePermits {
    fn drop(&mut self) {
        if self.done || self.count == 0 {
            return;
        }
        if let Err(e) = self.semaphore.release(self.count) {
            log::warn!(
                "redisson-lock: releasing {} permit(s) of semaphore `{}` on drop failed: {e}",
                self.count,
                self.semaphore.name
            );
        }
    }
}

impl fmt::Debug for SemaphorePermits {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SemaphorePermits")
            .field("semaphore", &self.semaphore.name)
            .field("count", &self.count)
            .finish()
    }
}
