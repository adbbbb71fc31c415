//! Scatter/gather on the engine's one pool (MultiLock and RedLock): each
//! member's command written on its own pooled connection before any reply
//! is read (the decorators are `crate::net::scatter`).

use redis::ConnectionLike;

use super::Engine;
use crate::error::{Error, Result};
use crate::net::pool::RECONNECT_GRACE;
use crate::net::scatter::{InFlight, Prefetched};

impl Engine {
    /// Whether this client's commands can be written ahead of their replies
    /// on its one pool: not in a cluster (each name has its own master) nor
    /// with replica sync (each write needs its `WAIT`); those take the
    /// single-lock path, member after member.
    pub(crate) fn can_scatter(&self) -> bool {
        self.topology.pool().is_some() && self.sync.is_none()
    }

    /// Writes `packed` on a pooled connection of this client, without
    /// waiting for one: `None` when every connection is busy (the caller
    /// may hold them: several members on one client), then the command
    /// goes the single-lock way after the others' replies. `Err` when no
    /// connection could be had (nothing was sent); a failed write is kept
    /// for the reply (the single-lock path's resend rule then applies).
    pub(crate) fn send(&self, packed: &[u8]) -> Option<Result<InFlight<'_>>> {
        let con = match self.topology.pool()?.get_no_wait()? {
            Ok(con) => con,
            Err(e) => return Some(Err(e)),
        };
        Some(Ok(InFlight::send(con, packed)))
    }

    /// [`Engine::with_connection`] whose first command is answered by a
    /// reply already read: `command` runs on `first` (its first command
    /// gets the prefetched reply, any further one goes to the server), and
    /// once more on a fresh connection, as a resend, if that connection
    /// had dropped.
    pub(crate) fn with_prefetched<T>(
        &self,
        operation: &'static str,
        mut first: Prefetched<'_>,
        mut command: impl FnMut(&mut dyn ConnectionLike, bool) -> Result<T>,
    ) -> Result<T> {
        let timed_out_after = first.bound();
        let result = match command(&mut first, false) {
            Err(e) if e.is_connection_dropped() => {
                drop(first); // discarded by the pool
                match self
                    .topology
                    .pool()
                    .map(|pool| pool.get_within(RECONNECT_GRACE))
                {
                    Some(Ok(mut con)) => command(&mut con, true),
                    _ => Err(e),
                }
            }
            other => other,
        };
        result.map_err(|e| match e {
            Error::Redis(e) if e.is_timeout() => Error::Timeout {
                operation,
                after: timed_out_after.min(self.config.response_timeout),
            },
            other => other,
        })
    }
}
