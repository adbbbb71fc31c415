//! Opening connections: one factory shared by the pool, the watchdog and
//! the subscriber, so that every connection gets the same timeouts.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use redis::{ConnectionLike, ErrorKind, RedisError, RedisResult, Value};

use crate::error::Error;
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
pub(crate) struct PooledConnection {
    con: redis::Connection,
    /// The [`Connector::drops`] count this connection is known good at.
    checked_at: u64,
    dropped: bool,
    drops: Arc<AtomicU64>,
    /// The socket's read timeout when it is not the response timeout (set
    /// by [`PooledConnection::recv_within`], restored before the next
    /// ordinary command).
    read_timeout: Option<Duration>,
    /// The response timeout.
    usual: Duration,
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
            if e.code() == Some("READONLY") && self.endpoint.is_watched() {
                self.dropped = true;
                self.endpoint.suspect();
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
        let result = self.con.send_packed_command(cmd);
        self.record(result)
    }

    /// Reads the reply to a command sent by [`PooledConnection::send_packed`],
    /// waiting at most `within` (rounded up to the millisecond) when that
    /// is shorter than the response timeout. A reply not read in
    /// time discards the connection. The socket keeps the shorter timeout
    /// until an ordinary command needs the usual one back: a connection
    /// used for the same bound again costs no system call.
    pub fn recv_within(&mut self, within: Duration) -> RedisResult<Value> {
        let usual = self.usual;
        let within = Duration::from_millis(
            u64::try_from(within.as_nanos().div_ceil(1_000_000)).unwrap_or(u64::MAX),
        )
        .max(Duration::from_millis(1));
        let wanted = (within < usual).then_some(within);
        if wanted != self.read_timeout
            && let Err(e) = self.con.set_read_timeout(Some(wanted.unwrap_or(usual)))
        {
            self.dropped = true;
            return Err(e);
        }
        self.read_timeout = wanted;
        let result = self.con.recv_response();
        self.record(result)
    }

    /// Puts the response timeout back after [`PooledConnection::recv_within`]
    /// shortened it.
    fn usual_timeout(&mut self) -> RedisResult<()> {
        if self.read_timeout.take().is_some() {
            let usual = self.usual;
            if let Err(e) = self.con.set_read_timeout(Some(usual)) {
                self.dropped = true;
                return Err(e);
            }
        }
        Ok(())
    }

    /// Never hand this connection out again (a reply on it was not read).
    pub fn discard(&mut self) {
        self.dropped = true;
    }
}

impl ConnectionLike for PooledConnection {
    fn req_packed_command(&mut self, cmd: &[u8]) -> RedisResult<Value> {
        self.usual_timeout()?;
        let result = self.con.req_packed_command(cmd);
        self.record(result)
    }

    fn req_packed_commands(
        &mut self,
        cmd: &[u8],
        offset: usize,
        count: usize,
    ) -> RedisResult<Vec<Value>> {
        self.usual_timeout()?;
        let result = pipeline(&mut self.con, cmd, offset, count);
        self.record(result)
    }

    fn get_db(&self) -> i64 {
        self.con.get_db()
    }

    fn check_connection(&mut self) -> bool {
        self.con.check_connection()
    }

    fn is_open(&self) -> bool {
        !self.dropped && self.con.is_open()
    }
}

/// Sends `cmd` (several commands) and reads the replies of the `count`
/// after the first `offset`. Unlike redis-rs's own `req_packed_commands`,
/// which goes on reading after a reply timed out or the connection broke
/// (each further read waiting the whole response timeout again: a frozen
/// server held a pipeline of N commands for N timeouts), the first I/O
/// error ends it. Error replies are values, as in redis-rs.
fn pipeline(
    con: &mut redis::Connection,
    cmd: &[u8],
    offset: usize,
    count: usize,
) -> RedisResult<Vec<Value>> {
    con.send_packed_command(cmd)?;
    let mut replies = Vec::with_capacity(count);
    let mut read = 0;
    while read < offset + count {
        match con.recv_response()? {
            // RESP3 push data is not a reply.
            Value::Push { .. } => continue,
            reply if read >= offset => replies.push(reply),
            _ => {}
        }
        read += 1;
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

    /// A new connection to the endpoint's current server. (Building the
    /// redis-rs client is a clone of the connection info, no I/O.)
    pub fn connect(&self) -> RedisResult<redis::Connection> {
        let con = redis::Client::open(self.endpoint.info())?
            .get_connection_with_timeout(self.connect_timeout)?;
        con.set_read_timeout(Some(self.response_timeout))?;
        con.set_write_timeout(Some(self.response_timeout))?;
        Ok(con)
    }
}

impl Connector {
    /// A new connection for the pool.
    pub fn open_pooled(&self) -> RedisResult<PooledConnection> {
        // Read before connecting: a drop seen meanwhile may predate us.
        let checked_at = self.drops.load(Ordering::Acquire);
        let generation = self.endpoint.generation();
        Ok(PooledConnection {
            con: self.connect()?,
            checked_at,
            dropped: false,
            drops: Arc::clone(&self.drops),
            read_timeout: None,
            usual: self.response_timeout,
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
        if e.kind() == ErrorKind::AuthenticationFailed
            || matches!(e.code(), Some("WRONGPASS" | "NOAUTH" | "NOPERM"))
        {
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
