//! The one resend rule of every command: a connection that turns out to
//! have dropped (it died idle in the pool, a proxy or the server closed
//! it) gets the command once more, on a fresh connection, flagged as a
//! resend, since the first may have run. Every lock command knows how to
//! treat a resend (`crate::engine::Engine::with_connection`).

use crate::error::{Error, Result};

/// What [`once_more`] got.
pub(crate) enum Resent<T> {
    /// The command's result, on the first connection or the fresh one.
    Done(Result<T>),
    /// The first connection dropped (`dropped`: its error; the command may
    /// have run) and no fresh one could be had (`fresh`: why).
    NoFresh { dropped: Error, fresh: Error },
}

impl<T> Resent<T> {
    /// The result; when no fresh connection could be had, the first
    /// connection's error: the caller must still learn that the command
    /// may have run.
    pub fn result(self) -> Result<T> {
        match self {
            Resent::Done(result) => result,
            Resent::NoFresh { dropped, .. } => Err(dropped),
        }
    }
}

/// Runs `command` on `first`, its second argument `resend` (whether an
/// earlier attempt may have run); when the connection turns out to have
/// dropped, lets it go (the pool discards it) and runs `command` once
/// more, flagged as a resend, on `fresh()`.
pub(crate) fn once_more<C, T>(
    mut first: C,
    resend: bool,
    fresh: impl FnOnce() -> Result<C>,
    mut command: impl FnMut(&mut C, bool) -> Result<T>,
) -> Resent<T> {
    match command(&mut first, resend) {
        Err(dropped) if dropped.is_connection_dropped() => {
            drop(first); // discarded by the pool
            match fresh() {
                Ok(mut con) => Resent::Done(command(&mut con, true)),
                Err(fresh) => Resent::NoFresh { dropped, fresh },
            }
        }
        other => Resent::Done(other),
    }
}
