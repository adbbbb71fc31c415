//! Records real replies of Redis to every script call the `replies` fuzz
//! target makes, as seeds: `fuzz/corpus/replies/<call>-<n>` holds the call's
//! number and the raw bytes Redis answered, and `fuzz/corpus/resp/<call>-<n>`
//! the bytes alone (behind a chunk-size prefix). Usage, with a throwaway
//! redis-server on port 6399:
//!
//! ```text
//! redis-server --port 6399 --save '' &
//! cargo run --manifest-path fuzz/capture/Cargo.toml -- 127.0.0.1:6399 fuzz/corpus
//! ```

use std::collections::HashSet;
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;

use redis::{ConnectionLike, RedisResult, Value};
use redisson_lock::__fuzzing::{RespReader, SCRIPT_CALLS, call_script};

/// Copies every byte read from the socket into `seen`.
struct Tee<'a> {
    inner: &'a mut TcpStream,
    seen: &'a mut Vec<u8>,
}

impl Read for Tee<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.seen.extend_from_slice(&buf[..n]);
        Ok(n)
    }
}

/// A connection that keeps the raw bytes of every reply.
struct Recording {
    socket: TcpStream,
    reader: RespReader,
    seen: Vec<u8>,
}

impl Recording {
    fn reply(&mut self) -> RedisResult<Value> {
        let mut tee = Tee {
            inner: &mut self.socket,
            seen: &mut self.seen,
        };
        self.reader.next(&mut tee)
    }
}

impl ConnectionLike for Recording {
    fn req_packed_command(&mut self, cmd: &[u8]) -> RedisResult<Value> {
        self.socket.write_all(cmd)?;
        self.reply()
    }

    fn req_packed_commands(
        &mut self,
        cmd: &[u8],
        offset: usize,
        count: usize,
    ) -> RedisResult<Vec<Value>> {
        self.socket.write_all(cmd)?;
        let mut replies = Vec::new();
        for _ in 0..offset + count {
            replies.push(self.reply()?);
        }
        Ok(replies.split_off(offset))
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

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:6399".to_owned());
    let out = PathBuf::from(args.next().unwrap_or_else(|| "fuzz/corpus".to_owned()));
    std::fs::create_dir_all(out.join("replies"))?;
    std::fs::create_dir_all(out.join("resp"))?;
    let mut con = Recording {
        socket: TcpStream::connect(&addr)?,
        reader: RespReader::new(),
        seen: Vec::new(),
    };
    let mut written = HashSet::new();
    let mut record = |con: &mut Recording, which: usize| -> io::Result<()> {
        con.seen.clear();
        let outcome = call_script(which, con);
        let bytes = std::mem::take(&mut con.seen);
        if bytes.is_empty() || !written.insert((which, bytes.clone())) {
            return Ok(());
        }
        let n = written.iter().filter(|(w, _)| *w == which).count();
        println!("{which}-{n}: {outcome:?}");
        let mut seed = vec![u8::try_from(which).unwrap_or(0)];
        seed.extend_from_slice(&bytes);
        std::fs::write(out.join("replies").join(format!("{which}-{n}")), &seed)?;
        // One chunk size (0: whole reads), then the stream.
        let mut stream = vec![1, 0];
        stream.extend_from_slice(&bytes);
        std::fs::write(out.join("resp").join(format!("{which}-{n}")), &stream)
    };
    let flush = |con: &mut Recording| con.req_command(&redis::cmd("FLUSHALL")).map(drop);
    // Each call on an empty server, then once more on what it left, then
    // after the lock type's acquire (someone holds it: this owner).
    for which in 0..SCRIPT_CALLS {
        flush(&mut con)?;
        record(&mut con, which)?;
        record(&mut con, which)?;
        flush(&mut con)?;
        let acquire = which - which % 9;
        if which < 8 * 9 {
            record(&mut con, acquire)?;
            record(&mut con, which)?;
        }
    }
    // A wrong type under the lock's name, for every call.
    for which in 0..SCRIPT_CALLS {
        flush(&mut con)?;
        con.req_command(redis::cmd("SET").arg("fuzz{lock}").arg("x"))?;
        record(&mut con, which)?;
    }
    Ok(())
}
