//! Opening connections: one factory shared by the pool, the watchdog and
//! the subscriber, so that every connection gets the same timeouts.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use redis::{ConnectionLike, ErrorKind, RedisError, RedisResult, Value};

use crate::error::{Error, Verdict};
use crate::net::direct::Direct;
use crate::net::endpoint::Endpoint;

/// Opens command connections with the client's connect and response timeouts:
/// a lock library must never hang on a dead server.
#[derive(Clone)]
pub(crate) struct Connector {
    /// Where connections go (moves on a Sentinel failover).
    endpoint: Arc<Endpoint>,
    pub connect_timeout: Duration,
    pub response_timeout: Duration,
    /// Bumped whenever a pooled connection is found dropped: pooled
    /// connections checked out or validated before that are suspect.
    drops: Arc<AtomicU64>,
}

/// A pooled command connection.
///
/// A connection can die while it sits idle in the pool (the server restarted,
/// a proxy or the server closed it), and the first command on it then fails
/// before any server saw it. So a connection that fails with a dropped
/// connection is discarded (redis-rs leaves one whose read was reset marked
/// open), and every other connection that was idle at that moment answers a
/// `PING` on its next checkout before it is handed out. Checkouts cost no
/// round trip otherwise.
///
/// The connection is the crate's own ([`Direct`]), not redis-rs's: its
/// response timeout bounds each whole reply, and a signal never fails it.
pub(crate) struct PooledConnection {
    con: Direct,
    /// The [`Connector::drops`] count this connection is known good at.
    checked_at: u64,
    dropped: bool,
    drops: Arc<AtomicU64>,
    /// The [`Endpoint::generation`] it was opened at: an older one is a
    /// connection to a former master, discarded on its next checkout.
    generation: u64,
    endpoint: Arc<Endpoint>,
}

impl PooledConnection {
    fn record<T>(&mut self, result: RedisResult<T>) -> RedisResult<T> {
        if let Err(e) = &result {
            if e.is_connection_dropped() && !self.dropped {
                self.drops.fetch_add(1, Ordering::AcqRel);
            }
            // A reply that timed out may still arrive: never reuse the
            // connection (its next command could read that reply).
            self.dropped |= e.is_connection_dropped() || e.is_timeout();
            // A former master (Sentinel failover): never reuse it, and have
            // the master looked up again; likewise for a lost connection.
            if self.endpoint.is_former_master(Verdict::of_redis(e)) {
                self.dropped = true;
            } else if e.is_connection_dropped() {
                self.endpoint.suspect();
            }
        }
        result
    }
}

impl PooledConnection {
    /// Writes `cmd` without reading its reply (scatter/gather over several
    /// servers: see `crate::net::scatter`).
    pub fn send_packed(&mut self, cmd: &[u8]) -> RedisResult<()> {
        let result = self.con.send(cmd);
        self.record(result)
    }

    /// Reads the reply to a command sent by [`PooledConnection::send_packed`],
    /// waiting at most `within` when that is shorter than the response
    /// timeout. A reply not read in time discards the connection.
    pub fn recv_within(&mut self, within: Duration) -> RedisResult<Value> {
        let result = self
            .con
            .recv_until(Instant::now() + within.min(self.con.usual()));
        self.record(result)
    }

    /// Never hand this connection out again (a reply on it was not read).
    pub fn discard(&mut self) {
        self.dropped = true;
    }
}

impl ConnectionLike for PooledConnection {
    fn req_packed_command(&mut self, cmd: &[u8]) -> RedisResult<Value> {
        let result = self.con.request(cmd);
        self.record(result)
    }

    fn req_packed_commands(
        &mut self,
        cmd: &[u8],
        offset: usize,
        count: usize,
    ) -> RedisResult<Vec<Value>> {
        let result = pipeline(&mut self.con, cmd, offset, count);
        let result = self.record(result);
        // A pipeline's errors come as values: one from a former master
        // retires the connection as an error reply does (as a multiplexed
        // socket does, see `mux::socket`).
        if let Ok(replies) = &result
            && replies
                .iter()
                .any(|reply| self.endpoint.is_former_master(Verdict::of_reply(reply)))
        {
            self.dropped = true;
        }
        result
    }

    fn get_db(&self) -> i64 {
        self.con.db()
    }

    fn check_connection(&mut self) -> bool {
        let ping = redis::cmd("PING").get_packed_command();
        matches!(self.con.request(&ping), Ok(Value::SimpleString(_)))
    }

    fn is_open(&self) -> bool {
        !self.dropped && self.con.is_open()
    }
}

/// Sends `cmd` (several commands) and reads the replies of the `count`
/// after the first `offset`, all within one response timeout (as on a
/// multiplexed connection). The first error ends it (redis-rs's own
/// `req_packed_commands` goes on reading after a reply timed out: a
/// frozen server held a pipeline of N commands for N timeouts). Error
/// replies are values, as in redis-rs.
fn pipeline(con: &mut Direct, cmd: &[u8], offset: usize, count: usize) -> RedisResult<Vec<Value>> {
    con.send(cmd)?;
    let deadline = Instant::now() + con.usual();
    let mut replies = Vec::with_capacity(count);
    for read in 0..offset + count {
        let reply = con.recv_until(deadline)?;
        if read >= offset {
            replies.push(reply);
        }
    }
    Ok(replies)
}

impl Connector {
    pub fn new(
        endpoint: Arc<Endpoint>,
        connect_timeout: Duration,
        response_timeout: Duration,
    ) -> RedisResult<Self> {
        Ok(Connector {
            endpoint,
            connect_timeout,
            response_timeout,
            drops: Arc::new(AtomicU64::new(0)),
        })
    }

    pub fn endpoint(&self) -> &Arc<Endpoint> {
        &self.endpoint
    }
}

impl Connector {
    /// A new connection for the pool (or for one command of its own: a
    /// cluster node's slot table).
    pub fn open_pooled(&self) -> RedisResult<PooledConnection> {
        // Read before connecting: a drop seen meanwhile may predate us.
        let checked_at = self.drops.load(Ordering::Acquire);
        let generation = self.endpoint.generation();
        Ok(PooledConnection {
            con: Direct::open(&self.endpoint, self.connect_timeout, self.response_timeout)?,
            checked_at,
            dropped: false,
            drops: Arc::clone(&self.drops),
            generation,
            endpoint: Arc::clone(&self.endpoint),
        })
    }

    /// Called on every checkout of an idle connection: free unless a pooled
    /// connection was found dropped since this one was last known good, then
    /// one `PING`. A connection to a former master fails (it would answer
    /// the `PING`, but every write with `READONLY`).
    pub fn validate(&self, con: &mut PooledConnection) -> RedisResult<()> {
        if self.is_stale(con) {
            return Err(RedisError::from((
                ErrorKind::Io,
                "connection to a former master",
            )));
        }
        let drops = self.drops.load(Ordering::Acquire);
        if con.checked_at == drops {
            return Ok(());
        }
        redis::cmd("PING").query::<()>(con)?;
        con.checked_at = drops;
        Ok(())
    }

    /// Whether `con` was opened before the endpoint last moved.
    pub fn is_stale(&self, con: &PooledConnection) -> bool {
        con.generation != self.endpoint.generation()
    }

    /// A failed connect as the caller should see it: a refused connection or
    /// a silent server is [`Error::Unavailable`] (transient); a TLS
    /// certificate either side refused is [`Error::TlsCertificate`]; anything
    /// the server answered (a wrong password, a missing permission, a
    /// password the server has none for) stays the server's error, an
    /// authentication failure. Neither of the last two is transient.
    pub fn connect_error(&self, e: RedisError) -> Error {
        if let Some(reason) = crate::net::tls::certificate_problem(&e) {
            return Error::TlsCertificate {
                server: self.endpoint.describe(),
                reason,
            };
        }
        if e.kind() == ErrorKind::AuthenticationFailed || Verdict::of_redis(&e).refuses_client() {
            return Error::Redis(e);
        }
        // A password sent to a server that has none: Redis answers the
        // `AUTH` with a plain `ERR` ("AUTH <password> called without any
        // password configured ...", before 6.0 "Client sent AUTH, but no
        // password is set"). As permanent as a wrong password.
        if let Some(detail) = e.detail().filter(|d| d.contains("AUTH")) {
            return Error::Redis(RedisError::from((
                ErrorKind::AuthenticationFailed,
                "authentication refused",
                format!(
                    "{detail} (the URL carries a password the server does not expect: \
                     remove it from the URL, or configure it on the server)"
                ),
            )));
        }
        let what = if e.is_connection_refusal() {
            "connection refused"
        } else if e.is_timeout() {
            "no answer within the connect timeout"
        } else {
            "cannot connect"
        };
        Error::Unavailable {
            reason: format!("{what} ({}): {e}", self.endpoint.describe()),
        }
    }
}
