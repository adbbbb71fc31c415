//! Scatter/gather (MultiLock and RedLock): each member's command written on
//! its own pooled connection before any reply is read (the decorators are
//! `crate::net::scatter`; where they can be written, the topology's).

use redis::ConnectionLike;

use super::Engine;
use crate::error::{Error, Result};
use crate::net::pool::RECONNECT_GRACE;
use crate::net::resend::once_more;
use crate::net::scatter::{InFlight, Prefetched};
#[cfg(doc)]
use crate::topology::Topology;

impl Engine {
    /// Whether this client's commands can be written ahead of their replies
    /// (see [`Topology::can_send_ahead`]) and need no `WAIT` each (replica
    /// sync); if not, they take the single-lock path, member after member.
    pub(crate) fn can_scatter(&self) -> bool {
        self.topology.can_send_ahead() && self.sync.is_none()
    }

    /// Writes `packed` on a pooled connection of this client, without
    /// waiting for one (see [`Topology::send_ahead`]): `None` when every
    /// connection is busy (the caller may hold them: several members on
    /// one client), then the command goes the single-lock way after the
    /// others' replies.
    pub(crate) fn send(&self, packed: &[u8]) -> Option<Result<InFlight<'_>>> {
        self.topology.send_ahead(packed)
    }

    /// [`Engine::with_connection`] whose first command is answered by a
    /// reply already read: `command` runs on `first` (its first command
    /// gets the prefetched reply, any further one goes to the server), and
    /// once more on a fresh connection of the same pool, as a resend, if
    /// that connection had dropped.
    pub(crate) fn with_prefetched<T>(
        &self,
        operation: &'static str,
        first: Prefetched<'_>,
        mut command: impl FnMut(&mut dyn ConnectionLike, bool) -> Result<T>,
    ) -> Result<T> {
        let timed_out_after = first.bound();
        let pool = first.home_pool();
        let fresh = || pool.get_within(RECONNECT_GRACE).map(Prefetched::from);
        let result = once_more(first, false, fresh, |con, resend| command(con, resend)).result();
        result.map_err(|e| match e {
            Error::Redis(e) if e.is_timeout() => Error::Timeout {
                operation,
                after: timed_out_after.min(self.config.response_timeout),
            },
            other => other,
        })
    }
}
