//! The transport: where a server is ([`endpoint`]), connections to it
//! ([`connection`], read and written by the crate itself in [`direct`],
//! over TLS with [`tls`]), the pool they are kept in
//! ([`pool`]), the shared sockets of the multiplexed mode ([`mux`]) and the
//! replies read from sockets the crate owns ([`resp`]), commands
//! written ahead of their replies ([`scatter`]), and the one rule for
//! sending a command again after its connection dropped ([`resend`]).
//! Nothing here knows a lock or a topology.

pub(crate) mod connection;
pub(crate) mod direct;
pub(crate) mod endpoint;
pub(crate) mod mux;
pub(crate) mod pool;
pub(crate) mod resend;
pub(crate) mod resp;
pub(crate) mod scatter;
pub(crate) mod stream;
#[cfg(test)]
pub(crate) mod test_server;
pub(crate) mod tls;

/// The `ConnectionLike` methods that a decorator over the connection in its
/// field `$con` passes through unchanged: all but `req_packed_command`,
/// the one a decorator is written for.
macro_rules! pass_through_connection {
    ($con:ident) => {
        fn req_packed_commands(
            &mut self,
            cmd: &[u8],
            offset: usize,
            count: usize,
        ) -> redis::RedisResult<Vec<redis::Value>> {
            self.$con.req_packed_commands(cmd, offset, count)
        }

        fn get_db(&self) -> i64 {
            self.$con.get_db()
        }

        fn check_connection(&mut self) -> bool {
            self.$con.check_connection()
        }

        fn is_open(&self) -> bool {
            self.$con.is_open()
        }
    };
}
pub(crate) use pass_through_connection;
