//! The multiplexed socket against a real server: checkouts and their
//! sockets, pipelines and `ASKING`, a caller that gives up, a slow leader,
//! a connection killed or timed out mid-request, a socket past its
//! deadline, and many threads on one socket. (The hand-off's interleavings
//! are `socket/schedules.rs`'s, over an in-memory socket.)

use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use redis::{IntoConnectionInfo, Value};

use super::{Mux, Shared};
use crate::net::connection::Connector;
use crate::net::endpoint::Endpoint;
use crate::net::test_server::{TestServer, free_port};

fn connector(port: u16, response_timeout: Duration) -> Connector {
    let info = ("127.0.0.1", port).into_connection_info().expect("address");
    Connector::new(
        Arc::new(Endpoint::new(info)),
        Duration::from_secs(2),
        response_timeout,
    )
    .expect("connector")
}

fn packed(args: &[&str]) -> Vec<u8> {
    let mut cmd = redis::cmd(args[0]);
    for arg in &args[1..] {
        cmd.arg(*arg);
    }
    cmd.get_packed_command()
}

fn checkout(mux: &Mux, connector: &Connector) -> Shared {
    mux.get(connector, true)
        .expect("socket")
        .expect("opened on demand")
}

fn pong() -> Value {
    Value::SimpleString("PONG".into())
}

#[test]
fn checkouts_fill_the_first_socket_to_its_depth_before_the_next_opens() {
    let server = TestServer::start();
    let connector = connector(server.port, Duration::from_secs(3));
    let mux = Mux::new(2);
    assert!(
        mux.get(&connector, false).expect("no error").is_none(),
        "a checkout that may not open finds no socket"
    );
    assert_eq!(mux.state(), (0, 0));

    let mut shares: Vec<Shared> = (0..super::DEPTH)
        .map(|_| checkout(&mux, &connector))
        .collect();
    assert_eq!(mux.state(), (1, 0), "one socket takes the first DEPTH");
    shares.push(checkout(&mux, &connector));
    assert_eq!(mux.state(), (2, 0), "the next checkout opens the second");
    let clients: String = server.cmd(&["CLIENT", "LIST", "TYPE", "normal"]);
    assert_eq!(
        clients.lines().count(),
        3,
        "two sockets and ours: {clients}"
    );

    for shared in &mut shares {
        assert_eq!(
            shared.request_one(&packed(&["PING"])).expect("ping"),
            pong()
        );
    }
    for shared in &shares {
        mux.release(shared);
    }
    drop(shares);
    assert_eq!(mux.state(), (2, 2), "both open, neither used");
    let again = mux.get(&connector, false).expect("no error");
    assert!(again.is_some(), "an open socket is shared without opening");
    assert_eq!(mux.state(), (2, 1));
}

#[test]
fn with_every_socket_at_its_depth_checkouts_go_to_the_least_loaded() {
    let server = TestServer::start();
    let connector = connector(server.port, Duration::from_secs(3));
    let mux = Mux::new(2);
    let shares: Vec<Shared> = (0..2 * super::DEPTH + 4)
        .map(|_| checkout(&mux, &connector))
        .collect();
    let on_first = shares.iter().filter(|s| s.index == 0).count();
    assert_eq!(on_first, super::DEPTH + 2, "balanced past the depth");
    assert_eq!(mux.state(), (2, 0));
}

#[test]
fn a_failed_open_is_tried_again_by_the_next_caller() {
    let port = free_port();
    let connector = connector(port, Duration::from_secs(3));
    let mux = Mux::new(1);
    assert!(mux.get(&connector, true).is_err(), "nothing listens yet");
    let Some(_server) = TestServer::start_on(port) else {
        // Someone took the port in between: nothing to learn this time.
        return;
    };
    let mut shared = checkout(&mux, &connector);
    assert_eq!(
        shared.request_one(&packed(&["PING"])).expect("ping"),
        pong()
    );
    assert_eq!(mux.state(), (1, 0));
}

#[test]
fn pipelines_return_the_replies_asked_for_and_asking_goes_ahead_unseen() {
    let server = TestServer::start();
    let connector = connector(server.port, Duration::from_secs(3));
    let mux = Mux::new(1);
    let mut shared = checkout(&mux, &connector);

    let mut three = packed(&["SET", "k", "1"]);
    three.extend(packed(&["INCR", "k"]));
    three.extend(packed(&["INCR", "k"]));
    assert_eq!(
        shared.request(&three, 0, 3).expect("pipeline"),
        vec![Value::Okay, Value::Int(2), Value::Int(3)]
    );
    assert_eq!(
        shared.request(&three, 1, 2).expect("pipeline"),
        vec![Value::Int(2), Value::Int(3)],
        "the first reply dropped"
    );
    assert_eq!(
        shared.request(&[], 0, 0).expect("nothing asked"),
        Vec::<Value>::new()
    );
    assert!(
        shared.request(&packed(&["INCR", "k"]), 0, 0).is_err(),
        "a request awaiting no reply is refused"
    );

    shared.ask_next();
    assert_eq!(
        shared.request_one(&packed(&["INCR", "k"])).expect("incr"),
        Value::Int(4),
        "ASKING's own reply (an error here: no cluster) is dropped"
    );
    shared.ask_next();
    assert_eq!(
        shared.request(&three, 1, 2).expect("pipeline"),
        vec![Value::Int(2), Value::Int(3)],
        "behind ASKING too"
    );
    assert_eq!(
        shared.request_one(&packed(&["GET", "k"])).expect("get"),
        Value::BulkString(b"3".to_vec()),
        "every reply to its own request: nothing left over"
    );
    let stats: String = server.cmd(&["INFO", "commandstats"]);
    let asking = stats
        .lines()
        .find(|l| l.starts_with("cmdstat_asking:"))
        .unwrap_or_else(|| panic!("ASKING was sent: {stats}"));
    assert!(asking.contains("calls=2,"), "{asking}");
}

#[test]
fn a_caller_that_gives_up_abandons_its_request_and_the_socket_stays() {
    let server = TestServer::start();
    let connector = connector(server.port, Duration::from_secs(5));
    let mux = Mux::new(1);
    let mut shared = checkout(&mux, &connector);
    shared
        .send_packed(&packed(&["BLPOP", "absent", "1.5"]))
        .expect("sent");
    let began = Instant::now();
    let e = shared
        .recv_within(Duration::from_millis(150), Duration::from_secs(5))
        .expect_err("given up");
    assert!(e.is_timeout(), "{e}");
    assert!(
        began.elapsed() < Duration::from_millis(1200),
        "gave up at its own limit, not the reply's: {:?}",
        began.elapsed()
    );
    assert!(shared.is_open(), "the socket is kept");
    // The abandoned reply (BLPOP's nil, 1.5 s later) is read and dropped.
    assert_eq!(
        shared.request_one(&packed(&["PING"])).expect("ping"),
        pong()
    );
    assert!(shared.is_open());

    // A reply that comes within the limit is the caller's.
    shared
        .send_packed(&packed(&["BLPOP", "absent", "0.2"]))
        .expect("sent");
    assert_eq!(
        shared
            .recv_within(Duration::from_secs(2), Duration::from_secs(5))
            .expect("within the limit"),
        Value::Nil
    );
    // A limit no shorter than the response timeout is the socket's own.
    shared
        .send_packed(&packed(&["BLPOP", "absent", "0.3"]))
        .expect("sent");
    assert_eq!(
        shared
            .recv_within(Duration::from_secs(5), Duration::from_secs(5))
            .expect("the reply"),
        Value::Nil
    );
    assert!(
        shared
            .recv_within(Duration::from_secs(1), Duration::from_secs(5))
            .is_err(),
        "nothing in flight"
    );
}

#[test]
fn a_waiter_behind_a_slow_leader_is_answered_within_the_response_timeout() {
    let server = TestServer::start();
    let connector = Arc::new(connector(server.port, Duration::from_secs(2)));
    let mux = Arc::new(Mux::new(1));
    let slow = {
        let (mux, connector) = (Arc::clone(&mux), Arc::clone(&connector));
        thread::spawn(move || {
            let mut shared = checkout(&mux, &connector);
            shared.request_one(&packed(&["BLPOP", "absent", "1.5"]))
        })
    };
    thread::sleep(Duration::from_millis(100));
    let mut shared = checkout(&mux, &connector);
    assert_eq!(
        shared
            .request_one(&packed(&["PING"]))
            .expect("behind the slow one"),
        pong()
    );
    assert_eq!(
        slow.join().expect("thread").expect("the slow one"),
        Value::Nil
    );
    assert!(shared.is_open());
}

#[test]
fn a_waiter_that_gives_up_leaves_the_socket_to_the_others() {
    let server = TestServer::start();
    let connector = Arc::new(connector(server.port, Duration::from_secs(3)));
    let mux = Arc::new(Mux::new(1));
    let slow = {
        let (mux, connector) = (Arc::clone(&mux), Arc::clone(&connector));
        thread::spawn(move || {
            let mut shared = checkout(&mux, &connector);
            shared.request_one(&packed(&["BLPOP", "absent", "1"]))
        })
    };
    thread::sleep(Duration::from_millis(100));
    // Behind the slow one (its leader reads): it waits, and gives up.
    let mut shared = checkout(&mux, &connector);
    shared.send_packed(&packed(&["PING"])).expect("sent");
    let began = Instant::now();
    let e = shared
        .recv_within(Duration::from_millis(200), Duration::from_secs(3))
        .expect_err("given up");
    assert!(e.is_timeout(), "{e}");
    assert!(
        began.elapsed() < Duration::from_millis(800),
        "{:?}",
        began.elapsed()
    );
    assert!(shared.is_open(), "the socket is kept");
    assert_eq!(
        slow.join()
            .expect("thread")
            .expect("the slow one is answered"),
        Value::Nil
    );
    assert_eq!(
        shared.request_one(&packed(&["PING"])).expect("ping"),
        pong()
    );
}

#[test]
fn a_reply_just_inside_the_response_timeout_is_taken() {
    let server = TestServer::start();
    let connector = connector(server.port, Duration::from_secs(1));
    let mux = Mux::new(1);
    let mut shared = checkout(&mux, &connector);
    assert_eq!(
        shared
            .request_one(&packed(&["BLPOP", "absent", "0.9"]))
            .expect("answered within the response timeout"),
        Value::Nil
    );
    assert!(shared.is_open());
}

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

#[test]
fn many_threads_on_one_socket_get_their_own_replies_promptly() {
    let server = TestServer::start();
    let connector = Arc::new(connector(server.port, Duration::from_secs(5)));
    let mux = Arc::new(Mux::new(1));
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let (mux, connector) = (Arc::clone(&mux), Arc::clone(&connector));
            thread::spawn(move || {
                let mut slowest = Duration::ZERO;
                let key = format!("count-{t}");
                for i in 1..=300 {
                    let mut shared = checkout(&mux, &connector);
                    let began = Instant::now();
                    let reply = shared.request_one(&packed(&["INCR", &key])).expect("incr");
                    slowest = slowest.max(began.elapsed());
                    assert_eq!(reply, Value::Int(i), "thread {t} got another's reply");
                    mux.release(&shared);
                }
                slowest
            })
        })
        .collect();
    for thread in threads {
        let slowest = thread.join().expect("thread");
        // A prompt server: nothing waits anywhere near the response
        // timeout (a request left unwritten would wait for it).
        assert!(slowest < Duration::from_millis(2500), "{slowest:?}");
    }
    assert_eq!(mux.state(), (1, 1));
}

/// A server that answers the handshake's `PING`, then reads `requests`
/// commands and answers them all with `reply` in one write.
fn scripted_server(requests: usize, reply: &'static [u8]) -> (u16, thread::JoinHandle<()>) {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("address").port();
    let server = thread::spawn(move || {
        let (mut socket, _) = listener.accept().expect("accept");
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
        socket.write_all(reply).expect("write");
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
    let (port, server) = scripted_server(2, b"+FIRST\r\n\x00garbage\r\n");
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
