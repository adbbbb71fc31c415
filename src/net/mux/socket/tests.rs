//! The socket's own accounting, against a real server: which requests a
//! failure finds written and which it finds never sent.

use std::sync::Arc;
use std::time::{Duration, Instant};

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

/// A socket to `server`, connecting within `connect_timeout`, with a 3 s
/// response timeout.
fn socket_on(server: &TestServer, connect_timeout: Duration) -> Socket {
    let info = ("127.0.0.1", server.port)
        .into_connection_info()
        .expect("address");
    let endpoint = Arc::new(Endpoint::new(info));
    Socket::open(&endpoint, connect_timeout, Duration::from_secs(3)).expect("socket")
}

#[test]
fn requests_never_written_get_a_dropped_connection_when_the_socket_times_out() {
    let server = TestServer::start();
    let socket = socket_on(&server, Duration::from_secs(2));
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

/// A request left for a woken caller to write (`SocketState::woken`) goes
/// out at the leader's next look at the state, made before each read, even
/// when that read follows one that parsed nothing (here: a read timed out
/// at the leader's `give_up`): the woken caller may not run for a while.
/// Here it never does (`woken` set by hand), so only the leader can write
/// the request; skipping the look (RELIABILITY.md, the `mux` group's last
/// survivors), the request is never sent and its caller times out.
#[test]
fn the_leader_writes_requests_a_woken_caller_left_before_it_reads_again() {
    let server = TestServer::start();
    let socket = Arc::new(socket_on(&server, Duration::from_secs(3)));
    // Answered after 1.5 s (nil), past the leader's `give_up` at 1 s.
    let blocking = redis::cmd("BLPOP")
        .arg("the-leader-writes-left-requests")
        .arg(1.5)
        .get_packed_command();
    let leaders = socket.send(&blocking, 1).expect("sent");
    let leader = {
        let socket = Arc::clone(&socket);
        std::thread::spawn(move || {
            let give_up = Instant::now() + Duration::from_secs(1);
            socket.receive(&leaders, Some(give_up))
        })
    };
    // Once the leader reads (its first read needs no look: its caller
    // has just looked), a caller woken and not run yet...
    let began = Instant::now();
    while !socket.state.lock().reading {
        assert!(began.elapsed() < Duration::from_secs(5), "no leader");
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(300));
    socket.state.lock().woken = 1;
    // ...has a request left for it to write.
    let left = socket.send(&ping(), 1).expect("queued");
    assert_eq!(socket.state.lock().unwritten, 1);
    let given_up = leader.join().expect("leader");
    assert!(
        given_up.is_err_and(|e| e.is_timeout()),
        "the leader gives up at 1 s"
    );
    assert_eq!(
        socket.state.lock().unwritten,
        0,
        "written by the leader before its last read"
    );
    match socket.receive(&left, None) {
        Ok(super::Replies::One(redis::Value::SimpleString(s))) => assert_eq!(s, "PONG"),
        Ok(_) => panic!("PONG, not another reply"),
        Err(e) => panic!("the request left behind was never sent: {e}"),
    }
}
