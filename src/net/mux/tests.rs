//! The multiplexed socket against a real server: checkouts and their
//! sockets, pipelines and `ASKING`, a caller that gives up, a slow leader,
//! a reply just inside the response timeout, and many threads on one
//! socket; the sockets' faults are in [`faults`]. (The hand-off's interleavings are `socket/schedules.rs`'s,
//! over an in-memory socket.)

use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use redis::{IntoConnectionInfo, Value};

use super::{Mux, Shared};
use crate::net::connection::Connector;
use crate::net::endpoint::Endpoint;
use crate::net::test_server::{TestServer, free_port};

mod faults;

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

/// A thread whose `BLPOP` of `secs` leads the socket (it reads), started
/// 100 ms ago: a caller after it waits behind it.
fn slow_leader(
    mux: &Arc<Mux>,
    connector: &Arc<Connector>,
    secs: &str,
) -> thread::JoinHandle<redis::RedisResult<Value>> {
    let (mux, connector, secs) = (Arc::clone(mux), Arc::clone(connector), secs.to_owned());
    let slow = thread::spawn(move || {
        let mut shared = checkout(&mux, &connector);
        shared.request_one(&packed(&["BLPOP", "absent", &secs]))
    });
    thread::sleep(Duration::from_millis(100));
    slow
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
    let slow = slow_leader(&mux, &connector, "1.5");
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
    let slow = slow_leader(&mux, &connector, "1");
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
