//! The socket's own accounting, against a real server: which requests a
//! failure finds written and which it finds never sent.

use std::sync::Arc;
use std::time::Duration;

use redis::{IntoConnectionInfo, RedisError};

use super::{Slot, Socket, SocketFailure};
use crate::net::endpoint::Endpoint;
use crate::net::test_server::TestServer;

fn ping() -> Vec<u8> {
    redis::cmd("PING").get_packed_command()
}

fn error_of(slot: &Arc<Slot>) -> RedisError {
    match slot.inner.lock().outcome.take() {
        Some(Err(e)) => e,
        Some(Ok(_)) => panic!("an error, not replies"),
        None => panic!("an error, not no outcome"),
    }
}

#[test]
fn requests_never_written_get_a_dropped_connection_when_the_socket_times_out() {
    let server = TestServer::start();
    let info = ("127.0.0.1", server.port)
        .into_connection_info()
        .expect("address");
    let endpoint = Arc::new(Endpoint::new(info));
    let socket =
        Socket::open(&endpoint, Duration::from_secs(2), Duration::from_secs(3)).expect("socket");
    let written = socket.send(&ping(), 1).expect("sent");
    // A caller handed a reply has not taken it yet: the next requests are
    // left for it to write (`SocketState::woken`).
    socket.state.lock().woken = 1;
    let left: Vec<_> = (0..2)
        .map(|_| socket.send(&ping(), 1).expect("queued"))
        .collect();
    assert_eq!(socket.state.lock().unwritten, 2);
    socket.fail(SocketFailure::TimedOut);
    let e = error_of(&written);
    assert!(
        e.is_timeout(),
        "the written request's outcome is unknown: {e}"
    );
    for slot in &left {
        let e = error_of(slot);
        assert!(
            e.is_connection_dropped() && !e.is_timeout(),
            "a request never written may be sent again: {e}"
        );
    }
}
