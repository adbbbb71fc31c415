//! Lua scripts sent as `EVALSHA`, with the request written straight into
//! its wire form.
//!
//! `redis::Script` keeps every key and argument in its own `Vec` and copies
//! them into a command on each call: on a lock + unlock pair that is a dozen
//! allocations and about a tenth of the client's work. An [`Invocation`]
//! writes each key and argument, already framed as a RESP bulk string, into
//! one buffer, behind room left for the `EVALSHA` header, which is written
//! there when the request is sent: one allocation per call, no copy. The
//! semantics are `Script::invoke`'s: a `NOSCRIPT` reply (proof that nothing
//! ran) loads the script and sends the request once more; every other reply
//! or error is the caller's.

use std::io;

use redis::{ConnectionLike, FromRedisValue, RedisResult, RedisWrite, ToRedisArgs};

use crate::error::Verdict;
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
        let mut buf = Vec::with_capacity(HEADER_ROOM + 384);
        buf.resize(HEADER_ROOM, 0);
        Invocation {
            lua: self,
            buf,
            keys_end: HEADER_ROOM,
            keys: 0,
            args: 0,
        }
    }
}

/// Room left at the front of an invocation's buffer for the request's
/// header: `*<n>`, `EVALSHA`, the SHA-1 and `<numkeys>`, each framed, with
/// both numbers at their longest (20 digits).
const HEADER_ROOM: usize = 128;

/// One call of a [`Lua`] script being built: keys and arguments in the order
/// they were added (keys may be added after arguments), framed as RESP bulk
/// strings in one buffer, behind room for the header. One allocation.
pub(crate) struct Invocation<'a> {
    lua: &'a Lua,
    /// `HEADER_ROOM` bytes, the keys, then the arguments.
    buf: Vec<u8>,
    /// Where the keys end and the arguments begin.
    keys_end: usize,
    keys: usize,
    args: usize,
}

impl Invocation<'_> {
    pub fn key<T: ToRedisArgs>(&mut self, key: T) -> &mut Self {
        key.write_redis_args(&mut Writer {
            invocation: self,
            keys: true,
        });
        self
    }

    pub fn arg<T: ToRedisArgs>(&mut self, arg: T) -> &mut Self {
        arg.write_redis_args(&mut Writer {
            invocation: self,
            keys: false,
        });
        self
    }

    /// Sends the call and converts its reply. One round trip (two more, a
    /// `SCRIPT LOAD` and the resend, after a `NOSCRIPT`).
    pub fn invoke<T: FromRedisValue>(&mut self, con: &mut dyn ConnectionLike) -> RedisResult<T> {
        let lua = self.lua;
        let request = self.request();
        // tests/failpoints.rs `a_script_cache_flushed_before_evalsha_*`: NOSCRIPT.
        crate::failpoint::failpoint!("script-before-send");
        let reply = match con.req_packed_command(request) {
            Ok(reply) => reply.extract_error(),
            Err(e) => Err(e),
        };
        let reply = match reply {
            Err(e) if Verdict::of_redis(&e) == Verdict::NoScript => {
                lua.load(con)?;
                con.req_packed_command(request)?.extract_error()
            }
            other => other,
        }?;
        Ok(redis::from_redis_value(reply)?)
    }

    /// `EVALSHA <sha> <numkeys> <keys...> <args...>` in RESP: the header
    /// written into the room left for it, right before the keys.
    fn request(&mut self) -> &[u8] {
        let mut room = [0u8; HEADER_ROOM];
        let mut at = 0;
        let mut put = |bytes: &[u8]| {
            room[at..at + bytes.len()].copy_from_slice(bytes);
            at += bytes.len();
        };
        put(b"*");
        put(Decimal::default().of((3 + self.keys + self.args) as u64));
        put(b"\r\n$7\r\nEVALSHA\r\n$");
        put(Decimal::default().of(self.lua.hash.len() as u64));
        put(b"\r\n");
        put(self.lua.hash.as_bytes());
        put(b"\r\n$");
        let mut numkeys = Decimal::default();
        let numkeys = numkeys.of(self.keys as u64);
        put(Decimal::default().of(numkeys.len() as u64));
        put(b"\r\n");
        put(numkeys);
        put(b"\r\n");
        let begin = HEADER_ROOM - at;
        self.buf[begin..HEADER_ROOM].copy_from_slice(&room[..at]);
        &self.buf[begin..]
    }

    /// Appends `arg`, framed, as the last key.
    fn push_key(&mut self, arg: &[u8]) {
        let len = self.buf.len();
        push_bulk(&mut self.buf, arg);
        if self.args > 0 {
            // Keys go before the arguments already added.
            let framed = self.buf.len() - len;
            self.buf[self.keys_end..].rotate_right(framed);
        }
        self.keys_end += self.buf.len() - len;
        self.keys += 1;
    }

    /// Appends `arg`, framed, as the last argument.
    fn push_arg(&mut self, arg: &[u8]) {
        push_bulk(&mut self.buf, arg);
        self.args += 1;
    }
}

/// Where `ToRedisArgs` writes: an invocation's keys or its arguments.
struct Writer<'i, 'a> {
    invocation: &'i mut Invocation<'a>,
    keys: bool,
}

impl Writer<'_, '_> {
    fn push(&mut self, arg: &[u8]) {
        match self.keys {
            true => self.invocation.push_key(arg),
            false => self.invocation.push_arg(arg),
        }
    }
}

impl RedisWrite for Writer<'_, '_> {
    fn write_arg(&mut self, arg: &[u8]) {
        self.push(arg);
    }

    fn writer_for_next_arg(&mut self) -> impl io::Write + '_ {
        NextArg {
            writer: self,
            bytes: Vec::new(),
        }
    }
}

/// Collects one argument written through `io::Write`; framed when dropped
/// (the length goes first on the wire).
struct NextArg<'w, 'i, 'a> {
    writer: &'w mut Writer<'i, 'a>,
    bytes: Vec<u8>,
}

impl io::Write for NextArg<'_, '_, '_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.bytes.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for NextArg<'_, '_, '_> {
    fn drop(&mut self) {
        let bytes = std::mem::take(&mut self.bytes);
        self.writer.push(&bytes);
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

    /// Writes one argument in two pieces, through `writer_for_next_arg`.
    struct Pieces(&'static str, &'static str);

    impl ToRedisArgs for Pieces {
        fn write_redis_args<W: ?Sized + RedisWrite>(&self, out: &mut W) {
            use std::io::Write;
            let mut writer = out.writer_for_next_arg();
            writer.write_all(self.0.as_bytes()).expect("in memory");
            writer.write_all(self.1.as_bytes()).expect("in memory");
        }
    }

    #[test]
    fn the_request_is_what_redis_script_sends() {
        let code = "return {KEYS[1], ARGV[1], ARGV[2]}";
        let ours = Lua::new(code);
        let mut invocation = ours.key("lock");
        invocation
            .arg(30_000u64)
            .arg("uuid:1")
            .key("{lock}:x")
            .arg(0u32)
            .key(&["{lock}:y", ""][..])
            .arg(&[u64::MAX, 7][..])
            .arg(Pieces("a", "b"))
            .key(Pieces("{lock}:", "z"));
        let theirs = redis::cmd("EVALSHA")
            .arg(ours.get_hash())
            .arg(5)
            .arg("lock")
            .arg("{lock}:x")
            .arg("{lock}:y")
            .arg("")
            .arg("{lock}:z")
            .arg(30_000u64)
            .arg("uuid:1")
            .arg(0u32)
            .arg(u64::MAX)
            .arg(7)
            .arg("ab")
            .get_packed_command();
        assert_eq!(invocation.request(), theirs);
    }
}
