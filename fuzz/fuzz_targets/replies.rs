//! The reply decoding of every lock and synchronizer script (and of
//! `CLUSTER SLOTS`), on a connection whose replies the input makes up.
//!
//! Input: `[which, resp...]`: script call number `which` (every lock type's
//! acquire, release, latched unlock, force unlocks, `is_locked` and give-up;
//! the watchdog's renewal batch; the inspect script; the latch's, the
//! semaphore's and the permit-expirable semaphore's scripts; see
//! `redisson_lock::__fuzzing::call_script`) is made on a connection that
//! answers each request with the next reply parsed (by redis-rs) from
//! `resp`, a pipeline of `n` requests with the next `n`, and fails once
//! they run out. Any `redis::Value` can so reach a decoder, RESP3 types
//! included. Asserts: no panic, and the call ends in `Ok` or in an error
//! that describes the reply (`UnexpectedReply`, `NotALock`,
//! `NotReentrant`, or a `Redis` error: a server error or a type mismatch
//! in the reply, or the connection's own "no more replies").

#![no_main]

use std::collections::VecDeque;

use libfuzzer_sys::fuzz_target;
use redis::{ConnectionLike, RedisError, RedisResult, Value};
use redisson_lock::__fuzzing::{SCRIPT_CALLS, call_script};
use redisson_lock::Error;

/// Answers requests with made-up replies.
struct Scripted {
    replies: VecDeque<Value>,
    requests: usize,
}

fn exhausted() -> RedisError {
    std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "no more replies").into()
}

impl ConnectionLike for Scripted {
    fn req_packed_command(&mut self, _cmd: &[u8]) -> RedisResult<Value> {
        self.requests += 1;
        self.replies.pop_front().ok_or_else(exhausted)
    }

    fn req_packed_commands(
        &mut self,
        _cmd: &[u8],
        offset: usize,
        count: usize,
    ) -> RedisResult<Vec<Value>> {
        self.requests += 1;
        if self.replies.len() < offset + count {
            return Err(exhausted());
        }
        Ok(self.replies.drain(..offset + count).skip(offset).collect())
    }

    fn get_db(&self) -> i64 {
        0
    }

    fn check_connection(&mut self) -> bool {
        true
    }

    fn is_open(&self) -> bool {
        true
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&which, mut resp)) = data.split_first() else {
        return;
    };
    let mut parser = redis::Parser::new();
    let mut replies = VecDeque::new();
    while let Ok(reply) = parser.parse_value(&mut resp) {
        replies.push_back(reply);
        if replies.len() > 64 {
            break;
        }
    }
    let mut con = Scripted {
        replies,
        requests: 0,
    };
    let which = usize::from(which) % SCRIPT_CALLS;
    match call_script(which, &mut con) {
        Ok(_) => {}
        Err(Error::UnexpectedReply(_) | Error::NotALock { .. } | Error::NotReentrant { .. }) => {}
        Err(Error::Redis(_)) => {}
        Err(other) => panic!("script call {which}: an error that is not the reply's: {other:?}"),
    }
    // A script call is one request, two after NOSCRIPT (SCRIPT LOAD, then
    // again): never a loop of requests.
    assert!(
        con.requests <= 6,
        "script call {which}: {} requests",
        con.requests
    );
});
