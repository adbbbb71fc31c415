//! `failpoint!(name)`: a fail point of tikv's `fail` crate with the
//! `failpoints` feature (the crate's own tests, tests/failpoints.rs, set
//! what it does: a pause, a sleep, a callback), and nothing at all
//! without it. `failpoint!(name, reset)`: the same, and when a test
//! configures it to `return`, the enclosing function returns there with a
//! connection reset by the peer (an `io::Error` or a `RedisError`: a reply
//! lost with its connection).

/// A named fail point; nothing without the `failpoints` feature.
macro_rules! failpoint {
    ($name:literal) => {{
        #[cfg(feature = "failpoints")]
        fail::fail_point!($name);
    }};
    ($name:literal, reset) => {{
        #[cfg(feature = "failpoints")]
        fail::fail_point!($name, |_| Err($crate::failpoint::connection_reset().into()));
    }};
}
pub(crate) use failpoint;

/// The error of a read whose connection was reset by the peer: what a
/// fail point returns to lose a reply.
#[cfg(feature = "failpoints")]
pub(crate) fn connection_reset() -> std::io::Error {
    std::io::Error::from(std::io::ErrorKind::ConnectionReset)
}
