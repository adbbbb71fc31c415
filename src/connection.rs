//! Opening connections: one factory shared by the pool, the watchdog and
//! the subscriber, so that every connection gets the same timeouts.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use redis::{ConnectionInfo, ConnectionLike, RedisResult, Value};

/// Opens command connections with the client's connect and response timeouts.
///
/// It is also the pool's [`r2d2::ManageConnection`]: redis-rs's own
/// implementation opens connections without any timeout, and a lock library
/// must never hang on a dead server.
#[derive(Clone)]
pub(crate) struct Connector {
    client: redis::Client,
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
}

impl PooledConnection {
    fn record<T>(&mut self, result: RedisResult<T>) -> RedisResult<T> {
        if let Err(e) = &result
            && e.is_connection_dropped()
            && !self.dropped
        {
            self.dropped = true;
            self.drops.fetch_add(1, Ordering::AcqRel);
        }
        result
    }
}

impl ConnectionLike for PooledConnection {
    fn req_packed_command(&mut self, cmd: &[u8]) -> RedisResult<Value> {
        let result = self.con.req_packed_command(cmd);
        self.record(result)
    }

    fn req_packed_commands(
        &mut self,
        cmd: &[u8],
        offset: usize,
        count: usize,
    ) -> RedisResult<Vec<Value>> {
        let result = self.con.req_packed_commands(cmd, offset, count);
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

impl Connector {
    pub fn new(
        info: ConnectionInfo,
        connect_timeout: Duration,
        response_timeout: Duration,
    ) -> RedisResult<Self> {
        Ok(Connector {
            client: redis::Client::open(info)?,
            connect_timeout,
            response_timeout,
            drops: Arc::new(AtomicU64::new(0)),
        })
    }

    pub fn info(&self) -> &ConnectionInfo {
        self.client.get_connection_info()
    }

    pub fn connect(&self) -> RedisResult<redis::Connection> {
        let con = self
            .client
            .get_connection_with_timeout(self.connect_timeout)?;
        con.set_read_timeout(Some(self.response_timeout))?;
        con.set_write_timeout(Some(self.response_timeout))?;
        Ok(con)
    }
}

impl r2d2::ManageConnection for Connector {
    type Connection = PooledConnection;
    type Error = redis::RedisError;

    fn connect(&self) -> RedisResult<PooledConnection> {
        // Read before connecting: a drop seen meanwhile may predate us.
        let checked_at = self.drops.load(Ordering::Acquire);
        Ok(PooledConnection {
            con: Connector::connect(self)?,
            checked_at,
            dropped: false,
            drops: Arc::clone(&self.drops),
        })
    }

    /// Called on every checkout: free unless a pooled connection was found
    /// dropped since this one was last known good, then one `PING`.
    fn is_valid(&self, con: &mut PooledConnection) -> RedisResult<()> {
        let drops = self.drops.load(Ordering::Acquire);
        if con.checked_at == drops {
            return Ok(());
        }
        redis::cmd("PING").query::<()>(con)?;
        con.checked_at = drops;
        Ok(())
    }

    fn has_broken(&self, con: &mut PooledConnection) -> bool {
        !con.is_open()
    }
}
