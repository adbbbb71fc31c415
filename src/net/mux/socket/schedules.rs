//! Schedule tests of the multiplexed socket (RELIABILITY.md, "Schedule
//! exploration"): three callers share one [`Socket`] over an in-memory
//! stream to a fake server, and `shuttle`'s random scheduler runs them over
//! many interleavings, on the virtual clock of `crate::sync` (feature
//! `shuttle`; `cargo test --features shuttle --lib schedules::`). The clock
//! moves only when every thread is blocked: a prompt server never lets a
//! timeout pass, and a timeout means nothing could have answered.

use redis::IntoConnectionInfo;

use super::*;
use crate::sync::explore::{self, check, coin, pick, sleep};
use crate::sync::pipe::{Pipe, pipe};
use crate::sync::thread;

/// The response timeout.
const USUAL: Duration = Duration::from_millis(500);
const CALLERS: usize = 3;
const REQUESTS: usize = 2;

/// How the fake server behaves in one execution.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Server {
    /// Answers every command at once.
    Prompt,
    /// Answers the first `after` commands, then each next one three response
    /// timeouts late (held back: the caller times out, the command ran).
    Stalls { after: usize },
    /// Answers the first `after` commands, then closes the connection with
    /// the next one read (which may have run: a dropped connection).
    Breaks { after: usize },
}

/// The fake server: reads `ECHO token` commands, records each token, and
/// answers each with its token (in one write or two), as `behaviour` says.
fn serve(mut end: Pipe, behaviour: Server, seen: &Mutex<Vec<Vec<u8>>>) {
    let mut commands = resp::Reader::default();
    let mut count = 0;
    loop {
        let Ok(Value::Array(args)) = commands.next(&mut end) else {
            return; // the socket was closed
        };
        let Some(Value::BulkString(token)) = args.get(1) else {
            panic!("not an ECHO: {args:?}");
        };
        count += 1;
        seen.lock().push(token.clone());
        match behaviour {
            Server::Breaks { after } if count > after => {
                let _ = end.shutdown();
                return;
            }
            Server::Stalls { after } if count > after => sleep(USUAL * 3),
            _ => {}
        }
        let mut reply = format!("${}\r\n", token.len()).into_bytes();
        reply.extend_from_slice(token);
        reply.extend_from_slice(b"\r\n");
        let split = match coin(0.3) {
            true => 1 + pick(reply.len() - 1),
            false => reply.len(),
        };
        if end.write(&reply[..split]).is_err() {
            return;
        }
        if split < reply.len() {
            thread::yield_now();
            if end.write(&reply[split..]).is_err() {
                return;
            }
        }
    }
}

/// How a caller waits for its request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Wait {
    /// For the reply (`Shared::request`).
    Reply,
    /// For at most a quarter of the response timeout, then abandons it
    /// (`Shared::recv_within` with a short limit).
    GiveUp,
    /// Not at all: drops it once sent (`Shared::discard`).
    Forget,
}

/// One request and what its caller got.
struct Asked {
    tokens: Vec<Vec<u8>>,
    wait: Wait,
    sent: Instant,
    done: Instant,
    /// `None`: forgotten.
    result: Option<RedisResult<Vec<Value>>>,
}

fn ask(socket: &Socket, tokens: Vec<Vec<u8>>, wait: Wait) -> Asked {
    let mut packed = Vec::new();
    for token in &tokens {
        packed.extend(redis::cmd("ECHO").arg(token).get_packed_command());
    }
    let sent = crate::sync::now();
    let result = match socket.send(&packed, tokens.len()) {
        Err(e) => Some(Err(e)),
        Ok(slot) => match wait {
            Wait::Reply => Some(socket.receive(&slot, None).map(Replies::into_vec)),
            Wait::GiveUp => Some(
                socket
                    .receive(&slot, Some(crate::sync::now() + USUAL / 4))
                    .map(Replies::into_vec),
            ),
            Wait::Forget => {
                socket.forget(&slot);
                None
            }
        },
    };
    Asked {
        tokens,
        wait,
        sent,
        done: crate::sync::now(),
        result,
    }
}

/// (a) A reply goes to its own caller; (c) a request the server may have
/// run is never given an error that allows a resend (a dropped connection)
/// unless the connection did drop, and nothing is sent twice; and no
/// request waits past the socket's deadline (a lost hand-off of the reading
/// would leave a caller to its own backstop, twice the response timeout);
/// (d) no leader waits for the reader lock.
/// Three callers, two requests each (one or two commands; waiting for the
/// reply, giving up early, or forgetting it), the reading handed from
/// leader to follower as each is answered; the server prompt, stalling or
/// breaking the connection.
#[test]
fn each_reply_goes_to_its_own_caller_and_a_timed_out_request_is_not_resent() {
    check(explore::iterations(2500), 0.0, || {
        let behaviour = match pick(4) {
            0 | 1 => Server::Prompt,
            2 => Server::Stalls { after: pick(5) },
            _ => Server::Breaks { after: pick(5) },
        };
        let (client, server_end) = pipe();
        client.set_read_timeout(Some(USUAL)).expect("in memory");
        let endpoint = Arc::new(Endpoint::new(
            "redis://127.0.0.1:1".into_connection_info().expect("a URL"),
        ));
        let socket = Arc::new(
            Socket::over(
                Stream::Mem(client),
                resp::Reader::default(),
                USUAL,
                0,
                &endpoint,
            )
            .expect("in memory"),
        );
        let seen = Arc::new(Mutex::new(Vec::new()));
        let server = {
            let seen = Arc::clone(&seen);
            thread::spawn(move || serve(server_end, behaviour, &seen))
        };
        let callers: Vec<_> = (0..CALLERS)
            .map(|caller| {
                let socket = Arc::clone(&socket);
                thread::spawn(move || {
                    (0..REQUESTS)
                        .map(|request| {
                            let tokens = (0..1 + pick(2))
                                .map(|i| format!("c{caller}r{request}t{i}").into_bytes())
                                .collect();
                            let wait = match pick(6) {
                                0 => Wait::GiveUp,
                                1 => Wait::Forget,
                                _ => Wait::Reply,
                            };
                            ask(&socket, tokens, wait)
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let asked: Vec<Asked> = callers
            .into_iter()
            .flat_map(|caller| caller.join().expect("a caller"))
            .collect();
        // (d) A leader never waits for the reader lock: the one before it
        // let it go before it gave up the reading (on one CPU a wait there
        // spins and yields behind a thread that is done).
        let reader_waits = socket.reader_waits.load(Ordering::Relaxed);
        drop(socket); // closes the stream: the server ends
        server.join().expect("the server");
        assert_eq!(
            reader_waits, 0,
            "a leader waited for the reader lock ({behaviour:?})"
        );
        let seen = std::mem::take(&mut *seen.lock());

        let mut unique = seen.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), seen.len(), "a command was sent twice");
        for asked in &asked {
            let Some(result) = &asked.result else {
                continue;
            };
            let label = String::from_utf8_lossy(&asked.tokens[0]).into_owned();
            match result {
                Ok(replies) => {
                    let expected: Vec<Value> = asked
                        .tokens
                        .iter()
                        .map(|token| Value::BulkString(token.clone()))
                        .collect();
                    assert_eq!(replies, &expected, "{label} got another caller's reply");
                }
                Err(e) => {
                    assert!(
                        behaviour != Server::Prompt,
                        "{label} ({:?}) failed with a prompt server: {e}",
                        asked.wait
                    );
                    let ran = asked.tokens.iter().any(|token| seen.contains(token));
                    let broke = matches!(behaviour, Server::Breaks { .. });
                    assert!(
                        !(ran && e.is_connection_dropped() && !broke),
                        "{label} may have run, yet got a dropped connection (a resend) \
                         while the connection was up ({behaviour:?}): {e}"
                    );
                    let waited = asked.done.saturating_duration_since(asked.sent);
                    assert!(
                        waited < USUAL * 2,
                        "{label} waited {waited:?} ({behaviour:?}): past the socket's deadline"
                    );
                }
            }
        }
    });
}
