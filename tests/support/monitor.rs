//! `MONITOR`: every `EVALSHA` a test server runs, with its time, its
//! number of keys and the client that sent it.

use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use super::RedisServer;

/// One `EVALSHA` as `MONITOR` reported it.
#[derive(Debug)]
pub struct Call {
    /// Server time, in microseconds.
    pub at_us: u64,
    /// The script's number of keys.
    pub keys: usize,
    /// The client connection that sent it (`127.0.0.1:<port>`).
    pub client: String,
}

/// Every `EVALSHA` the server runs, seen through `MONITOR`, until `enough`
/// says so or `window` passes.
pub fn monitor_evalsha(
    server: &RedisServer,
    window: Duration,
    enough: impl Fn(&[Call]) -> bool,
) -> Vec<Call> {
    let mut stream = TcpStream::connect(("127.0.0.1", server.port())).expect("connect");
    stream
        .write_all(&redis::cmd("MONITOR").get_packed_command())
        .expect("MONITOR");
    let mut parser = redis::Parser::new();
    let deadline = Instant::now() + window;
    let mut calls = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || enough(&calls) {
            return calls;
        }
        stream.set_read_timeout(Some(left)).expect("timeout");
        let line = match parser.parse_value(&mut stream) {
            Ok(redis::Value::SimpleString(line)) => line,
            Ok(_) => continue, // +OK
            Err(e) if e.is_timeout() => return calls,
            Err(e) => panic!("MONITOR connection failed: {e}"),
        };
        // 1700000000.123456 [0 127.0.0.1:4242] "EVALSHA" "<sha>" "100" "key" ...
        let quoted: Vec<&str> = line.split('"').collect();
        if quoted.len() < 6 || !quoted[1].eq_ignore_ascii_case("evalsha") {
            continue;
        }
        let mut words = line.split(' ');
        let (secs, micros) = words
            .next()
            .and_then(|ts| ts.split_once('.'))
            .expect("a timestamp");
        let client = words
            .nth(1)
            .map(|addr| addr.trim_end_matches(']').to_owned())
            .expect("a client address");
        calls.push(Call {
            at_us: secs.parse::<u64>().expect("seconds") * 1_000_000
                + micros.parse::<u64>().expect("microseconds"),
            keys: quoted[5].parse().expect("numkeys"),
            client,
        });
    }
}
