//! The engine's end on request ([`crate::Client::shutdown`]): waits woken,
//! holds released, threads joined.

use std::sync::Arc;
use std::sync::atomic::{Ordering, fence};
use std::time::{Duration, Instant};

use super::Engine;
use crate::error::{Error, LostReason, Result};

/// How often the shutdown looks whether the waits and holds are gone.
const LOOK: Duration = Duration::from_millis(1);

/// One blocking acquisition under way ([`Engine::enter`]); dropping it
/// leaves.
pub(crate) struct Active<'a>(&'a Engine);

impl Drop for Active<'_> {
    fn drop(&mut self) {
        self.0.active.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Engine {
    /// Counts an acquisition in until the returned value is dropped, and
    /// refuses it with [`Error::Closed`] once the client is shut down: a
    /// shutdown waits for those counted in before it releases what is left.
    /// No I/O.
    pub fn enter(&self) -> Result<Active<'_>> {
        self.active.fetch_add(1, Ordering::SeqCst);
        let active = Active(self);
        // Pairs with the shutdown's fence: either it sees this acquisition
        // counted, or this sees the client closed.
        fence(Ordering::SeqCst);
        self.check_open()?;
        Ok(active)
    }

    /// [`Error::Closed`] once the client is shut down. One atomic load.
    pub fn check_open(&self) -> Result<()> {
        if self.closed.is_cancelled() {
            return Err(Error::Closed);
        }
        Ok(())
    }

    /// See [`crate::Client::shutdown`].
    pub fn shutdown(self: &Arc<Self>, timeout: Duration) -> Result<()> {
        self.check_process()?;
        let mut done = self.shutting_down.lock();
        if *done {
            return Ok(());
        }
        let start = Instant::now();
        let until = start.checked_add(timeout);
        self.closed.cancel();
        fence(Ordering::SeqCst);
        // The waits, woken, leave after at most their attempt in flight
        // and a fair waiter's give-up: a round trip or two, whatever the
        // caller's timeout.
        let waits_until = start + self.config.response_timeout * 2;
        look_until(
            Some(until.map_or(waits_until, |until| until.max(waits_until))),
            || self.active.load(Ordering::SeqCst) == 0,
        );
        // The guards' own threads release theirs, until `timeout`.
        look_until(until, || self.registry.len() == 0);
        let mut first_error = None;
        for hold in self.registry.all() {
            self.registry.lose(&hold, LostReason::Shutdown);
            if let Err(e) = hold.release_in_redis(self) {
                log::warn!(
                    "redisson-lock: releasing `{}` at shutdown failed: {e}",
                    hold.name
                );
                first_error.get_or_insert(e);
            }
        }
        self.watchdog.stop();
        self.topology.close();
        self.registry.stop();
        if let Some(events) = &self.events {
            events.stop_and_join();
        }
        *done = true;
        first_error.map_or(Ok(()), Err)
    }
}

/// Looks every millisecond until `done` or `until` (`None`: never) passes.
fn look_until(until: Option<Instant>, mut done: impl FnMut() -> bool) {
    while !done() {
        if until.is_some_and(|until| Instant::now() >= until) {
            return;
        }
        std::thread::sleep(LOOK);
    }
}
