//! Lua scripts sent as `EVALSHA`, with the request written straight into
//! its wire form.
//!
//! `redis::Script` keeps every key and argument in its own `Vec` and copies
//! them into a command on each call: on a lock + unlock pair that is a dozen
//! allocations and about a tenth of the client's work. An [`Invocation`]
//! appends each key and argument, already framed as a RESP bulk string, to
//! one of two buffers, and the request is their concatenation behind the
//! `EVALSHA` header. The semantics are `Script::invoke`'s: a `NOSCRIPT`
//! reply (proof that nothing ran) loads the script and sends the request
//! once more; every other reply or error is the caller's.

use std::io;

use redis::{ConnectionLike, ErrorKind, FromRedisValue, RedisResult, RedisWrite, ToRedisArgs};

use crate::names::Decimal;

/// A Lua script and its SHA-1, as `redis::Script` has them.
pub(crate) struct Lua {
    code: &'static str,
    hash: String,
}

impl Lua {
    pub fn new(code: &'static str) -> Lua {
        Lua {
            code,
            hash: redis::Script::new(code).get_hash().to_owned(),
        }
    }

    /// The script's SHA-1 in hex, for `EVALSHA`.
    pub fn get_hash(&self) -> &str {
        &self.hash
    }

    /// `SCRIPT LOAD` of this script. One round trip.
    pub fn load(&self, con: &mut dyn ConnectionLike) -> RedisResult<()> {
        redis::cmd("SCRIPT")
            .arg("LOAD")
            .arg(self.code)
            .query::<String>(con)?;
        Ok(())
    }

    /// A call with `key` as its first key.
    pub fn key<T: ToRedisArgs>(&self, key: T) -> Invocation<'_> {
        let mut invocation = self.prepare();
        invocation.key(key);
        invocation
    }

    fn prepare(&self) -> Invocation<'_> {
        Invocation {
            lua: self,
            // Sized for a lock's keys and arguments: no regrowth.
            keys: Bulks::with_capacity(128),
            args: Bulks::with_capacity(256),
        }
    }
}

/// One call of a [`Lua`] script being built: keys and arguments in the order
/// they were added, each list kept apart (keys may be added after arguments).
pub(crate) struct Invocation<'a> {
    lua: &'a Lua,
    keys: Bulks,
    args: Bulks,
}

impl Invocation<'_> {
    pub fn key<T: ToRedisArgs>(&mut self, key: T) -> &mut Self {
        key.write_redis_args(&mut self.keys);
        self
    }

    pub fn arg<T: ToRedisArgs>(&mut self, arg: T) -> &mut Self {
        arg.write_redis_args(&mut self.args);
        self
    }

    /// Sends the call and converts its reply. One round trip (two more, a
    /// `SCRIPT LOAD` and the resend, after a `NOSCRIPT`).
    pub fn invoke<T: FromRedisValue>(&self, con: &mut dyn ConnectionLike) -> RedisResult<T> {
        let request = self.request();
        let reply = match con.req_packed_command(&request) {
            Ok(reply) => reply.extract_error(),
            Err(e) => Err(e),
        };
        let reply = match reply {
            Err(e) if e.kind() == ErrorKind::Server(redis::ServerErrorKind::NoScript) => {
                self.lua.load(con)?;
                con.req_packed_command(&request)?.extract_error()
            }
            other => other,
        }?;
        Ok(redis::from_redis_value(reply)?)
    }

    /// `EVALSHA <sha> <numkeys> <keys...> <args...>` in RESP.
    fn request(&self) -> Vec<u8> {
        let (keys, args) = (&self.keys, &self.args);
        let mut out = Vec::with_capacity(80 + keys.buf.len() + args.buf.len());
        push_header(&mut out, b'*', 3 + keys.count + args.count);
        push_bulk(&mut out, b"EVALSHA");
        push_bulk(&mut out, self.lua.hash.as_bytes());
        push_bulk(&mut out, Decimal::default().of(keys.count as u64));
        out.extend_from_slice(&keys.buf);
        out.extend_from_slice(&args.buf);
        out
    }
}

/// Arguments already framed as RESP bulk strings.
struct Bulks {
    buf: Vec<u8>,
    count: usize,
}

impl Bulks {
    fn with_capacity(bytes: usize) -> Bulks {
        Bulks {
            buf: Vec::with_capacity(bytes),
            count: 0,
        }
    }
}

impl RedisWrite for Bulks {
    fn write_arg(&mut self, arg: &[u8]) {
        push_bulk(&mut self.buf, arg);
        self.count += 1;
    }

    fn writer_for_next_arg(&mut self) -> impl io::Write + '_ {
        NextArg {
            bulks: self,
            bytes: Vec::new(),
        }
    }
}

/// Collects one argument written through `io::Write`; framed when dropped
/// (the length goes first on the wire).
struct NextArg<'a> {
    bulks: &'a mut Bulks,
    bytes: Vec<u8>,
}

impl io::Write for NextArg<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.bytes.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for NextArg<'_> {
    fn drop(&mut self) {
        let bytes = std::mem::take(&mut self.bytes);
        self.bulks.write_arg(&bytes);
    }
}

fn push_bulk(out: &mut Vec<u8>, bytes: &[u8]) {
    push_header(out, b'$', bytes.len());
    out.extend_from_slice(bytes);
    out.extend_from_slice(b"\r\n");
}

fn push_header(out: &mut Vec<u8>, kind: u8, n: usize) {
    out.push(kind);
    out.extend_from_slice(Decimal::default().of(n as u64));
    out.extend_from_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_request_is_what_redis_script_sends() {
        let code = "return {KEYS[1], ARGV[1], ARGV[2]}";
        let ours = Lua::new(code);
        let mut invocation = ours.key("lock");
        invocation
            .arg(30_000u64)
            .arg("uuid:1")
            .key("{lock}:x")
            .arg(0u32);
        let theirs = redis::cmd("EVALSHA")
            .arg(ours.get_hash())
            .arg(2)
            .arg("lock")
            .arg("{lock}:x")
            .arg(30_000u64)
            .arg("uuid:1")
            .arg(0u32)
            .get_packed_command();
        assert_eq!(invocation.request(), theirs);
    }
}
