//! The transport: where a server is ([`endpoint`]), connections to it
//! ([`connection`], over TLS with [`tls`]), the pool they are kept in
//! ([`pool`]), and commands written ahead of their replies ([`scatter`]).
//! Nothing here knows a lock or a topology.

pub(crate) mod connection;
pub(crate) mod endpoint;
pub(crate) mod pool;
pub(crate) mod scatter;
pub(crate) mod tls;
