//! Opening connections: one factory shared by the pool, the watchdog and
//! the subscriber, so that every connection gets the same timeouts.

use std::time::Duration;

use redis::{ConnectionInfo, RedisResult};

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
    type Connection = redis::Connection;
    type Error = redis::RedisError;

    fn connect(&self) -> RedisResult<redis::Connection> {
        Connector::connect(self)
    }

    fn is_valid(&self, con: &mut redis::Connection) -> RedisResult<()> {
        redis::cmd("PING").query::<()>(con)
    }

    fn has_broken(&self, con: &mut redis::Connection) -> bool {
        !redis::ConnectionLike::is_open(con)
    }
}
