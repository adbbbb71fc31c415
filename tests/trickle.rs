//! The response timeout bounds a whole reply, not each read of it: a
//! server that trickles a reply one byte every 2 ms (a reply that would
//! take 5 s) gets a lone caller with a 500 ms response timeout a
//! timeout in about 500 ms, on a multiplexed connection and on a pooled
//! one, during the connection's handshake as after it.

mod support;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use redisson_lock::Client;
use support::proxy::resp_len;

const RESPONSE_TIMEOUT: Duration = Duration::from_millis(500);
/// A reply of 2500 bytes: 5 s at one byte every [`TRICKLE`]. (A byte every
/// 20 ms let the multiplexed leader of 5656822 time out now and then: the
/// read timeout it kept after its deadline was sometimes shorter.)
const SLOW_REPLY_LEN: usize = 2500;
const TRICKLE: Duration = Duration::from_millis(2);

/// A fake server on a free loopback port: every command whose name is in
/// `slow` is answered one byte every [`TRICKLE`] (a bulk string), any
/// other at once (`+PONG` to a `PING`, `+OK` otherwise). Stops when dropped.
struct Trickler {
    port: u16,
    stop: Arc<AtomicBool>,
}

impl Trickler {
    fn start(slow: &'static [&'static str]) -> Trickler {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("address").port();
        listener.set_nonblocking(true).expect("nonblocking");
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        thread::spawn(move || {
            while !stopped.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((socket, _)) => {
                        let stopped = Arc::clone(&stopped);
                        thread::spawn(move || serve(socket, slow, &stopped));
                    }
                    Err(_) => thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Trickler { port, stop }
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }
}

impl Drop for Trickler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// The command name (upper case) of a packed command.
fn command_name(packed: &[u8]) -> String {
    let mut lines = packed.split(|&b| b == b'\n');
    let _count = lines.next();
    let _len = lines.next();
    let name = lines.next().unwrap_or_default();
    String::from_utf8_lossy(name).trim_end().to_uppercase()
}

fn serve(mut socket: TcpStream, slow: &[&str], stopped: &AtomicBool) {
    socket.set_nonblocking(false).expect("blocking");
    socket
        .set_read_timeout(Some(Duration::from_millis(100)))
        .expect("timeout");
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    while !stopped.load(Ordering::Relaxed) {
        match socket.read(&mut chunk) {
            Ok(0) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(_) => continue,
        }
        while let Some(len) = resp_len(&buf) {
            let name = command_name(&buf[..len]);
            buf.drain(..len);
            if slow.contains(&name.as_str()) {
                let mut reply = format!("${SLOW_REPLY_LEN}\r\n").into_bytes();
                reply.extend(std::iter::repeat_n(b'x', SLOW_REPLY_LEN));
                reply.extend_from_slice(b"\r\n");
                for byte in reply {
                    if stopped.load(Ordering::Relaxed) || socket.write_all(&[byte]).is_err() {
                        return;
                    }
                    thread::sleep(TRICKLE);
                }
            } else {
                let reply: &[u8] = if name == "PING" {
                    b"+PONG\r\n"
                } else {
                    b"+OK\r\n"
                };
                if socket.write_all(reply).is_err() {
                    return;
                }
            }
        }
    }
}

/// Takes a lock through `client` against the trickling server: it must
/// fail within twice the response timeout (the reply would take 5 s).
fn times_out_in_time(client: &Client, what: &str) {
    let began = Instant::now();
    let result = client.lock(format!("trickle-{what}")).try_lock();
    let took = began.elapsed();
    eprintln!("{what}: {took:?} {result:?}");
    assert!(
        result.is_err(),
        "{what}: a reply of garbage taken: {result:?}"
    );
    assert!(
        took <= RESPONSE_TIMEOUT * 2,
        "{what}: answered after {took:?} with {result:?}, the response timeout is {RESPONSE_TIMEOUT:?}"
    );
}

fn builder(url: &str) -> redisson_lock::ClientBuilder {
    Client::builder(url)
        .response_timeout(RESPONSE_TIMEOUT)
        .connect_timeout(RESPONSE_TIMEOUT)
}

#[test]
fn a_trickled_reply_times_out_within_the_response_timeout_multiplexed() {
    let server = Trickler::start(&["EVALSHA", "EVAL"]);
    let client = builder(&server.url())
        .multiplexed(1)
        .build()
        .expect("client");
    times_out_in_time(&client, "multiplexed");
}

#[test]
fn a_trickled_reply_times_out_within_the_response_timeout_pooled() {
    let server = Trickler::start(&["EVALSHA", "EVAL"]);
    let client = builder(&server.url()).pool_size(1).build().expect("client");
    times_out_in_time(&client, "pooled");
}

#[test]
fn a_trickled_handshake_times_out_within_the_timeouts() {
    let server = Trickler::start(&["PING", "CLIENT"]);
    for multiplexed in [true, false] {
        // The client may connect when built, or with its first command.
        let began = Instant::now();
        let built = match multiplexed {
            true => builder(&server.url()).multiplexed(1).build(),
            false => builder(&server.url()).pool_size(1).build(),
        };
        let result = built.map(|client| client.lock("trickle-handshake").try_lock().map(|_| ()));
        let took = began.elapsed();
        eprintln!("multiplexed {multiplexed}: {took:?} {result:?}");
        assert!(result.is_err() || result.as_ref().is_ok_and(|r| r.is_err()));
        assert!(
            took <= RESPONSE_TIMEOUT * 3,
            "multiplexed {multiplexed}: {took:?}"
        );
    }
}
