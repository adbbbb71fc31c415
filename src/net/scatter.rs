//! Scatter/gather of one command per server on the caller's thread: each
//! command is written on its own pooled connection, then the replies are
//! read, so that N servers cost one round trip instead of N (MultiLock and
//! RedLock). The commands are the ones the single-lock path sends,
//! captured by running the same protocol code on a [`Recorder`]; the reply
//! is then handed back to that code by a [`Prefetched`] connection, which
//! sends anything further (a `NOSCRIPT` fallback, say) synchronously.

use std::time::{Duration, Instant};

use redis::{ConnectionLike, ErrorKind, RedisError, RedisResult, Value};

use crate::net::pool::{Checkout, Pool};

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

impl<'a> InFlight<'a> {
    /// Writes `packed` on `con` (a failed write is kept for the reply: the
    /// single-lock path's resend rule then applies).
    pub fn send(mut con: Checkout<'a>, packed: &[u8]) -> Self {
        let sent = con.send_packed(packed);
        InFlight {
            con: Some(con),
            sent,
        }
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

impl<'a> Prefetched<'a> {
    /// How long its reply was awaited: the bound a timeout reports.
    pub fn bound(&self) -> Duration {
        self.bound
    }

    /// The pool its connection came from.
    pub fn home_pool(&self) -> &'a Pool {
        self.con.home_pool()
    }
}

impl<'a> From<Checkout<'a>> for Prefetched<'a> {
    /// A connection with no reply read ahead: every command goes to the
    /// server.
    fn from(con: Checkout<'a>) -> Self {
        Prefetched {
            con,
            pending: None,
            bound: Duration::ZERO,
        }
    }
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

    super::pass_through_connection!(con);
}
