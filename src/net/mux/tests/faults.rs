//! The multiplexed socket's faults against a real server (and a scripted
//! one): a connection killed or timed out mid-request, a request behind an
//! abandoned one past its deadline, garbage after a reply, `READONLY` from
//! a watched master.

use std::thread;
use std::time::{Duration, Instant};

use redis::Value;

use super::{checkout, connector, packed, pong};
use crate::net::mux::Mux;
use crate::net::test_server::{TestServer, free_port};

#[test]
fn a_readonly_reply_from_a_watched_master_retires_the_socket() {
    let server = TestServer::start();
    // A replica (of a master that is not there) answers writes READONLY:
    // what a Sentinel-watched master says once a failover demoted it.
    let _: () = server.cmd(&["REPLICAOF", "127.0.0.1", &free_port().to_string()]);
    let connector = connector(server.port, Duration::from_secs(3));
    let (tx, rx) = crossbeam_channel::bounded(1);
    let mux = Mux::new(1);
    let mut shared = checkout(&mux, &connector);
    let reply = shared
        .request_one(&packed(&["SET", "k", "v"]))
        .expect("a reply");
    assert!(matches!(reply, Value::ServerError(_)), "{reply:?}");
    assert!(shared.is_open(), "unwatched: READONLY is only an error");
    connector.endpoint().watch_with(tx);
    let _ = shared.request_one(&packed(&["SET", "k", "v"]));
    assert!(
        !shared.is_open(),
        "watched: no new request on a former master"
    );
    assert!(rx.try_recv().is_ok(), "the endpoint is looked up again");
}

#[test]
fn a_connection_killed_mid_request_fails_it_at_once_and_suspects_the_server() {
    let server = TestServer::start();
    let connector = connector(server.port, Duration::from_secs(5));
    let (tx, rx) = crossbeam_channel::bounded(1);
    connector.endpoint().watch_with(tx);
    let mux = Mux::new(1);
    let mut shared = checkout(&mux, &connector);
    let killer = thread::spawn(move || {
        thread::sleep(Duration::from_millis(200));
        let killed: i64 = server.cmd(&["CLIENT", "KILL", "TYPE", "normal"]);
        (server, killed)
    });
    let began = Instant::now();
    let e = shared
        .request_one(&packed(&["BLPOP", "absent", "4"]))
        .expect_err("killed");
    let (_server, killed) = killer.join().expect("killer");
    assert_eq!(killed, 1);
    assert!(e.is_connection_dropped(), "a dropped connection: {e}");
    assert!(
        began.elapsed() < Duration::from_secs(2),
        "answered when the connection broke, not at the deadline: {:?}",
        began.elapsed()
    );
    assert!(!shared.is_open());
    assert!(
        rx.try_recv().is_ok(),
        "a dropped socket suspects its server"
    );
    assert_eq!(mux.state(), (0, 0));
}

#[test]
fn a_request_past_the_response_timeout_fails_as_unknown_and_suspects_nothing() {
    let server = TestServer::start();
    let connector = connector(server.port, Duration::from_millis(300));
    let (tx, rx) = crossbeam_channel::bounded(1);
    connector.endpoint().watch_with(tx);
    let mux = Mux::new(1);
    let mut shared = checkout(&mux, &connector);
    let e = shared
        .request_one(&packed(&["BLPOP", "absent", "2"]))
        .expect_err("timed out");
    assert!(e.is_timeout(), "outcome unknown: {e}");
    assert!(!e.is_connection_dropped(), "never to be sent again: {e}");
    assert!(!shared.is_open());
    assert!(
        rx.try_recv().is_err(),
        "a slow reply is no sign of a failover"
    );
    // The next checkout opens a new socket.
    let mut next = checkout(&mux, &connector);
    assert_eq!(next.request_one(&packed(&["PING"])).expect("ping"), pong());
    drop(server);
}

#[test]
fn a_request_behind_an_abandoned_request_past_its_deadline_is_not_sent() {
    let server = TestServer::start();
    let connector = connector(server.port, Duration::from_millis(400));
    let mux = Mux::new(1);
    let mut shared = checkout(&mux, &connector);
    shared
        .send_packed(&packed(&["BLPOP", "absent", "3"]))
        .expect("sent");
    assert!(
        shared
            .recv_within(Duration::from_millis(50), Duration::from_millis(400))
            .is_err()
    );
    // Nobody reads, and the abandoned request's time runs out.
    thread::sleep(Duration::from_millis(600));
    let e = shared
        .request_one(&packed(&["INCR", "counted"]))
        .expect_err("the socket is past its deadline");
    assert!(
        e.is_connection_dropped(),
        "not sent: a dropped connection, safe to send again: {e}"
    );
    assert!(!shared.is_open());
    let counted: Option<i64> = server.cmd(&["GET", "counted"]);
    assert_eq!(counted, None);
}

/// A server that answers the handshake's `PING`, then reads `requests`
/// commands and answers them all with `reply`'s chunks, each written
/// its delay after those commands came.
fn scripted_server(
    requests: usize,
    reply: &'static [(u64, &'static [u8])],
) -> (u16, thread::JoinHandle<()>) {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("address").port();
    let server = thread::spawn(move || {
        let (mut socket, _) = listener.accept().expect("accept");
        socket.set_nodelay(true).expect("nodelay");
        let mut seen = Vec::new();
        let mut buf = [0u8; 1024];
        let count = |seen: &[u8]| seen.windows(4).filter(|w| w == b"PING").count();
        let mut answered_handshake = false;
        while count(&seen) < requests + 1 {
            let n = socket.read(&mut buf).expect("read");
            if n == 0 {
                return;
            }
            seen.extend_from_slice(&buf[..n]);
            if !answered_handshake && count(&seen) >= 1 {
                socket.write_all(b"+PONG\r\n").expect("write");
                answered_handshake = true;
            }
        }
        let came = Instant::now();
        for (ms, chunk) in reply {
            let at = came + Duration::from_millis(*ms);
            thread::sleep(at.saturating_duration_since(Instant::now()));
            socket.write_all(chunk).expect("write");
        }
        // Held open until the client closes it.
        let _ = socket.read(&mut buf);
    });
    (port, server)
}

#[test]
fn replies_read_before_garbage_still_reach_their_callers() {
    // Two requests; their first reply comes, then bytes that are no RESP,
    // in the same read: the first caller keeps its reply, the second gets
    // a dropped connection.
    let (port, server) = scripted_server(2, &[(0, b"+FIRST\r\n\x00garbage\r\n")]);
    let connector = connector(port, Duration::from_secs(3));
    let mux = Mux::new(1);
    let mut first = checkout(&mux, &connector);
    first.send_packed(&packed(&["PING"])).expect("sent");
    let mut second = checkout(&mux, &connector);
    let e = second
        .request_one(&packed(&["PING"]))
        .expect_err("garbage for a reply");
    assert!(e.is_connection_dropped(), "{e}");
    assert_eq!(
        first
            .recv_within(Duration::from_secs(3), Duration::from_secs(3))
            .expect("its reply, read before the garbage"),
        Value::SimpleString("FIRST".into())
    );
    assert!(!first.is_open());
    drop((first, second));
    server.join().expect("server");
}

#[test]
fn a_reply_ending_in_the_last_eighth_of_the_response_timeout_is_read() {
    // 1.6 s to reply (the slack an eighth: 200 ms); the reply's bytes come
    // at once, at 1.45 s and at 1.5 s: a read begun in the last eighth
    // before the deadline still reads until it.
    let (port, server) = scripted_server(1, &[(0, b"+P"), (1450, b"O"), (1500, b"NG\r\n")]);
    let connector = connector(port, Duration::from_millis(1600));
    let mux = Mux::new(1);
    let mut shared = checkout(&mux, &connector);
    let reply = shared.request_one(&packed(&["PING"]));
    assert_eq!(reply.expect("the whole reply, within the limit"), pong());
    drop(shared);
    drop(mux);
    server.join().expect("server");
}
