//! Scatter/gather of one command per server on the caller's thread: each
//! command is written on its own pooled connection, then the replies are
//! read, so that N servers cost one round trip instead of N (MultiLock and
//! RedLock). The commands are the ones the single-lock path sends,
//! captured by running the same protocol code on a [`Recorder`]; the reply
//! is then handed back to that code by a [`Prefetched`] connection, which
//! sends anything further (a `NOSCRIPT` fallback, say) synchronously.

use std::time::{Duration, Instant};

use redis::{ConnectionLike, ErrorKind, RedisError, RedisResult, Value};

use crate::client::{Client, RECONNECT_GRACE};
use crate::error::{Error, Result};
use crate::pool::Checkout;

/// A connection that sends nothing: it keeps the first command a protocol
/// call packs and fails it.
#[derive(Default)]
pub(crate) struct Recorder {
    packed: Option<Vec<u8>>,
}

impl Recorder {
    /// The first command `call` sends, if any.
    pub fn record(call: impl FnOnce(&mut dyn ConnectionLike)) -> Option<Vec<u8>> {
        let mut recorder = Recorder::default();
        call(&mut recorder);
        recorder.packed
    }
}

fn recorded() -> RedisError {
    RedisError::from((ErrorKind::Client, "command recorded, not sent"))
}

impl ConnectionLike for Recorder {
    fn req_packed_command(&mut self, cmd: &[u8]) -> RedisResult<Value> {
        if self.packed.is_none() {
            self.packed = Some(cmd.to_vec());
        }
        Err(recorded())
    }

    fn req_packed_commands(&mut self, _: &[u8], _: usize, _: usize) -> RedisResult<Vec<Value>> {
        Err(recorded())
    }

    fn get_db(&self) -> i64 {
        0
    }

    fn check_connection(&mut self) -> bool {
        false
    }

    fn is_open(&self) -> bool {
        false
    }
}

/// A command written to a server whose reply is not read yet. Dropped
/// unread, its connection is discarded (the reply would otherwise answer
/// the connection's next command).
pub(crate) struct InFlight<'a> {
    /// `None` once the reply was read.
    con: Option<Checkout<'a>>,
    sent: std::result::Result<(), RedisError>,
}

impl Client {
    /// Whether this client's commands can be written ahead of their replies
    /// on its one pool: not in a cluster (each name has its own master) nor
    /// with replica sync (each write needs its `WAIT`); those take the
    /// single-lock path, member after member.
    pub(crate) fn can_scatter(&self) -> bool {
        self.inner.cluster.is_none() && self.inner.sync.is_none()
    }

    /// Writes `packed` on a pooled connection of this client, without
    /// waiting for one: `None` when every connection is busy (the caller
    /// may hold them: several members on one client), then the command
    /// goes the single-lock way after the others' replies. `Err` when no
    /// connection could be had (nothing was sent); a failed write is kept
    /// for the reply (the single-lock path's resend rule then applies).
    pub(crate) fn send(&self, packed: &[u8]) -> Option<Result<InFlight<'_>>> {
        let mut con = match self.inner.pool.get_no_wait()? {
            Ok(con) => con,
            Err(e) => return Some(Err(e)),
        };
        let sent = con.send_packed(packed);
        Some(Ok(InFlight {
            con: Some(con),
            sent,
        }))
    }

    /// [`Client::with_connection`] whose first command is answered by a
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
        let timed_out_after = first.bound;
        let result = match command(&mut first, false) {
            Err(e) if e.is_connection_dropped() => {
                drop(first); // discarded by the pool
                match self.inner.pool.get_within(RECONNECT_GRACE) {
                    Ok(mut con) => command(&mut con, true),
                    Err(_) => Err(e),
                }
            }
            other => other,
        };
        result.map_err(|e| match e {
            Error::Redis(e) if e.is_timeout() => Error::Timeout {
                operation,
                after: timed_out_after.min(self.inner.config.response_timeout),
            },
            other => other,
        })
    }
}

impl<'a> InFlight<'a> {
    /// Reads the reply, waiting until `deadline` at most (the response
    /// timeout at most, whatever the deadline). A reply not read in time
    /// is an error that discards the connection: a command that may have
    /// run.
    pub fn receive(mut self, deadline: Instant) -> Option<Prefetched<'a>> {
        let mut con = self.con.take()?;
        let bound = deadline.saturating_duration_since(Instant::now());
        let reply = match std::mem::replace(&mut self.sent, Ok(())) {
            Err(e) => Err(e),
            Ok(()) => con.recv_within(bound),
        };
        Some(Prefetched {
            con,
            pending: Some(reply),
            bound,
        })
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if let Some(con) = &mut self.con {
            con.discard();
        }
    }
}

/// A connection whose first command is answered by the reply already read
/// (that command is the one sent); see [`Client::with_prefetched`].
pub(crate) struct Prefetched<'a> {
    con: Checkout<'a>,
    /// The reply to the command sent, until the first command takes it.
    pending: Option<RedisResult<Value>>,
    bound: Duration,
}

impl ConnectionLike for Prefetched<'_> {
    fn req_packed_command(&mut self, cmd: &[u8]) -> RedisResult<Value> {
        // The protocol code sends the command it was recorded sending (a
        // clock argument, as the fair lock's, may have moved on since: the
        // reply is to the one the server ran).
        match self.pending.take() {
            Some(reply) => reply,
            None => self.con.req_packed_command(cmd),
        }
    }

    fn req_packed_commands(
        &mut self,
        cmd: &[u8],
        offset: usize,
        count: usize,
    ) -> RedisResult<Vec<Value>> {
        self.con.req_packed_commands(cmd, offset, count)
    }

    fn get_db(&self) -> i64 {
        self.con.get_db()
    }

    fn check_connection(&mut self) -> bool {
        self.con.check_connection()
    }

    fn is_open(&self) -> bool {
        self.con.is_open()
    }
}
