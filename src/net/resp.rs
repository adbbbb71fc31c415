//! The replies of a socket the crate reads itself (a multiplexed command
//! socket, the subscriber's), parsed from its own buffer.
//!
//! redis-rs's reader (`redis::Parser` over a `Read`) zeroes 8 KiB of buffer
//! before every `read` and walks each byte through a general parser
//! combinator: about half of the client's own instructions for a lock +
//! unlock pair (callgrind, one thread: 28k with it, 14k with this reader).
//! This reader keeps one buffer, zeroed once, reads into it directly, and
//! builds the replies a lock's scripts get (`+`, `:`, `$`, `*`) itself.
//! Anything else (an error, a RESP3 type) is framed here and built by
//! redis-rs from its exact bytes, so that every reply is the `Value`
//! redis-rs's own parser would give (the tests compare the two).

use std::io::{self, Read};

use redis::{ErrorKind, RedisError, RedisResult, Value};

/// What a buffer starts with, and the smallest buffer it is zeroed to.
const INITIAL: usize = 16 * 1024;
/// Room a read is given at least (the buffer is compacted or grown first).
const MIN_READ: usize = 4 * 1024;
/// A buffer grown past this is given back once it is empty.
const KEEP: usize = 256 * 1024;
/// Nesting deeper than this is refused (as redis-rs's parser does).
const MAX_DEPTH: usize = 100;
/// Longer bulk strings or aggregates are taken for garbage (Redis's own
/// limit, `proto-max-bulk-len`, is 512 MiB by default).
const MAX_LEN: i64 = i32::MAX as i64;

/// One reply's parse so far.
enum Step<T> {
    /// Complete: the value (or nothing) and where the next reply begins.
    Done(T, usize),
    /// Incomplete: the reply is at least this long.
    More(usize),
}

/// A reply reader over its own buffer (see the module docs). Bytes read
/// past a reply wait for the next call; a read that fails leaves the buffer
/// as it was, so the caller may read again.
pub(crate) struct Reader {
    buf: Vec<u8>,
    /// The unread bytes are `buf[start..end]`.
    start: usize,
    end: usize,
    /// The first reply is known to be at least this long (no parse before).
    need: usize,
}

impl Default for Reader {
    fn default() -> Reader {
        Reader {
            buf: Vec::new(),
            start: 0,
            end: 0,
            need: 1,
        }
    }
}

fn parse_error(what: &'static str) -> RedisError {
    RedisError::from((ErrorKind::Parse, "unreadable reply", what.to_owned()))
}

impl Reader {
    /// The next reply, reading `source` as often as it takes (each read
    /// into the buffer's free room, none when a reply is buffered already).
    /// The end of the stream, a failed read and bytes that are not RESP are
    /// errors; only a failed read (a timeout) may be retried.
    pub fn next(&mut self, source: &mut impl Read) -> RedisResult<Value> {
        loop {
            if self.end - self.start >= self.need {
                match value(&self.buf[self.start..self.end], 0, 0)? {
                    Step::Done(reply, used) => {
                        self.start += used;
                        self.need = 1;
                        if self.start == self.end {
                            self.start = 0;
                            self.end = 0;
                            if self.buf.len() > KEEP {
                                self.buf = Vec::new();
                            }
                        }
                        return Ok(reply);
                    }
                    Step::More(need) => self.need = need.max(self.end - self.start + 1),
                }
            }
            self.make_room();
            let read = source.read(&mut self.buf[self.end..])?;
            if read == 0 {
                return Err(RedisError::from(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the server closed the connection",
                )));
            }
            self.end += read;
        }
    }

    /// Room for the reply being read (`need`) and at least [`MIN_READ`]
    /// more bytes after `end`: the unread bytes moved to the front, the
    /// buffer grown (zeroed) only when that is not enough.
    fn make_room(&mut self) {
        let unread = self.end - self.start;
        let wanted = self.need.max(unread + MIN_READ);
        if self.buf.len() - self.start < wanted || self.buf.len() - self.end < MIN_READ {
            self.buf.copy_within(self.start..self.end, 0);
            self.start = 0;
            self.end = unread;
        }
        if self.buf.len() < wanted {
            let grown = wanted.max(self.buf.len() * 2).max(INITIAL);
            self.buf.resize(grown, 0);
        }
    }
}

/// Where the line that starts at `at` ends (its `\r\n`), if it is all in.
fn line_end(buf: &[u8], at: usize) -> Option<usize> {
    let mut i = at;
    while i + 1 < buf.len() {
        if buf[i] == b'\r' && buf[i + 1] == b'\n' {
            return Some(i);
        }
        i += 1;
    }
    None
}

/// The integer of the line that starts at `at`, and where the next line
/// begins.
fn number(buf: &[u8], at: usize) -> RedisResult<Step<i64>> {
    let Some(end) = line_end(buf, at) else {
        return Ok(Step::More(buf.len() + 1));
    };
    let n = std::str::from_utf8(&buf[at..end])
        .ok()
        .and_then(|text| text.trim().parse::<i64>().ok())
        .ok_or_else(|| parse_error("expected an integer"))?;
    Ok(Step::Done(n, end + 2))
}

/// A length (of a bulk string or aggregate) that is sane.
fn length(n: i64) -> RedisResult<usize> {
    match n {
        0..=MAX_LEN => usize::try_from(n).map_err(|_| parse_error("length out of range")),
        _ => Err(parse_error("length out of range")),
    }
}

/// The reply that starts at `at` (nested `depth` deep).
fn value(buf: &[u8], at: usize, depth: usize) -> RedisResult<Step<Value>> {
    if depth > MAX_DEPTH {
        return Err(parse_error("nested too deep"));
    }
    let Some(&kind) = buf.get(at) else {
        return Ok(Step::More(at + 1));
    };
    let body = at + 1;
    match kind {
        b'+' => {
            let Some(end) = line_end(buf, body) else {
                return Ok(Step::More(buf.len() + 1));
            };
            let reply = match &buf[body..end] {
                b"OK" => Value::Okay,
                text => Value::SimpleString(
                    String::from_utf8(text.to_vec())
                        .map_err(|_| parse_error("a simple string that is not UTF-8"))?,
                ),
            };
            Ok(Step::Done(reply, end + 2))
        }
        b':' => Ok(match number(buf, body)? {
            Step::Done(n, next) => Step::Done(Value::Int(n), next),
            Step::More(need) => Step::More(need),
        }),
        b'$' => {
            let (n, data) = match number(buf, body)? {
                Step::Done(n, data) => (n, data),
                Step::More(need) => return Ok(Step::More(need)),
            };
            if n < 0 {
                return Ok(Step::Done(Value::Nil, data));
            }
            let end = data + length(n)?;
            if buf.len() < end + 2 {
                return Ok(Step::More(end + 2));
            }
            if &buf[end..end + 2] != b"\r\n" {
                return Err(parse_error("a bulk string not ended by CRLF"));
            }
            Ok(Step::Done(
                Value::BulkString(buf[data..end].to_vec()),
                end + 2,
            ))
        }
        b'*' => {
            let (n, mut next) = match number(buf, body)? {
                Step::Done(n, next) => (n, next),
                Step::More(need) => return Ok(Step::More(need)),
            };
            if n < 0 {
                return Ok(Step::Done(Value::Nil, next));
            }
            let n = length(n)?;
            let mut items = Vec::with_capacity(n.min(1024));
            for _ in 0..n {
                match value(buf, next, depth + 1)? {
                    Step::Done(item, after) => {
                        items.push(item);
                        next = after;
                    }
                    Step::More(need) => return Ok(Step::More(need)),
                }
            }
            Ok(Step::Done(Value::Array(items), next))
        }
        // An error or a RESP3 type: framed here, built by redis-rs.
        _ => Ok(match frame(buf, at, depth)? {
            Step::Done((), end) => Step::Done(redis::parse_redis_value(&buf[at..end])?, end),
            Step::More(need) => Step::More(need),
        }),
    }
}

/// Where the reply that starts at `at` ends, whatever its type.
fn frame(buf: &[u8], at: usize, depth: usize) -> RedisResult<Step<()>> {
    if depth > MAX_DEPTH {
        return Err(parse_error("nested too deep"));
    }
    let Some(&kind) = buf.get(at) else {
        return Ok(Step::More(at + 1));
    };
    let body = at + 1;
    // Lines, blobs (a length, then that many bytes) and aggregates (a
    // count, then that many replies per item).
    let per_item = match kind {
        b'+' | b'-' | b':' | b'_' | b',' | b'#' | b'(' => {
            return Ok(match line_end(buf, body) {
                Some(end) => Step::Done((), end + 2),
                None => Step::More(buf.len() + 1),
            });
        }
        b'$' | b'!' | b'=' => {
            let (n, data) = match number(buf, body)? {
                Step::Done(n, data) => (n, data),
                Step::More(need) => return Ok(Step::More(need)),
            };
            if n < 0 {
                return Ok(Step::Done((), data));
            }
            let end = data + length(n)? + 2;
            return Ok(match buf.len() >= end {
                true => Step::Done((), end),
                false => Step::More(end),
            });
        }
        b'*' | b'~' | b'>' => 1,
        b'%' | b'|' => 2,
        _ => return Err(parse_error("an unknown reply type")),
    };
    let (n, mut next) = match number(buf, body)? {
        Step::Done(n, next) => (n, next),
        Step::More(need) => return Ok(Step::More(need)),
    };
    // An attribute is followed by the reply it describes.
    let items = length(n.max(0))?
        .checked_mul(per_item)
        .ok_or_else(|| parse_error("length out of range"))?
        + usize::from(kind == b'|');
    for _ in 0..items {
        match frame(buf, next, depth + 1)? {
            Step::Done((), after) => next = after,
            Step::More(need) => return Ok(Step::More(need)),
        }
    }
    Ok(Step::Done((), next))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hands out its bytes `chunk` at a time, then the end of the stream.
    struct Chunks<'a> {
        bytes: &'a [u8],
        chunk: usize,
    }

    impl Read for Chunks<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = self.chunk.min(buf.len()).min(self.bytes.len());
            buf[..n].copy_from_slice(&self.bytes[..n]);
            self.bytes = &self.bytes[n..];
            Ok(n)
        }
    }

    /// Every reply in `stream`, read `chunk` bytes at a time.
    fn read_all(stream: &[u8], chunk: usize) -> Vec<Value> {
        let mut reader = Reader::default();
        let mut source = Chunks {
            bytes: stream,
            chunk,
        };
        let mut out = Vec::new();
        while let Ok(reply) = reader.next(&mut source) {
            out.push(reply);
        }
        out
    }

    const REPLIES: &[&[u8]] = &[
        b"+OK\r\n",
        b"+QUEUED\r\n",
        b"+\r\n",
        b":0\r\n",
        b":-42\r\n",
        b":9223372036854775807\r\n",
        b"$-1\r\n",
        b"$0\r\n\r\n",
        b"$5\r\nhe\r\nl\r\n",
        b"*-1\r\n",
        b"*0\r\n",
        b"*3\r\n:1\r\n$-1\r\n*2\r\n+a\r\n$1\r\nb\r\n",
        b"-ERR wrong number of arguments\r\n",
        b"-NOSCRIPT No matching script\r\n",
        b"-MOVED 3999 127.0.0.1:7002\r\n",
        b"-ASK 3999 127.0.0.1:7002\r\n",
        b"-READONLY You can't write against a read only replica.\r\n",
        b"-CUSTOMCODE\r\n",
        b"*2\r\n-BUSY script\r\n:7\r\n",
        b"_\r\n",
        b",3.25\r\n",
        b"#t\r\n",
        b"(12345678901234567890\r\n",
        b"!9\r\nSYNTAX xy\r\n",
        b"=8\r\ntxt:some\r\n",
        b"%2\r\n+a\r\n:1\r\n+b\r\n*1\r\n:2\r\n",
        b"~2\r\n:1\r\n:2\r\n",
        b">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$1\r\nx\r\n",
        b"|1\r\n+key\r\n+val\r\n:5\r\n",
    ];

    #[test]
    fn every_reply_is_what_redis_rs_parses() {
        for reply in REPLIES {
            let expected = redis::parse_redis_value(reply).expect("redis-rs parses it");
            for chunk in 1..=reply.len() {
                assert_eq!(
                    read_all(reply, chunk),
                    vec![expected.clone()],
                    "{:?} in chunks of {chunk}",
                    String::from_utf8_lossy(reply)
                );
            }
        }
    }

    #[test]
    fn pipelined_replies_come_out_in_order_across_reads() {
        let stream: Vec<u8> = REPLIES.concat();
        let expected: Vec<Value> = REPLIES
            .iter()
            .map(|r| redis::parse_redis_value(r).expect("redis-rs parses it"))
            .collect();
        for chunk in [1, 2, 3, 7, 64, 4096, stream.len()] {
            assert_eq!(read_all(&stream, chunk), expected, "chunks of {chunk}");
        }
    }

    #[test]
    fn a_large_reply_grows_the_buffer_and_is_read_whole() {
        let big = vec![b'x'; 300_000];
        let mut stream = format!("*2\r\n${}\r\n", big.len()).into_bytes();
        stream.extend_from_slice(&big);
        stream.extend_from_slice(b"\r\n:1\r\n+OK\r\n");
        let replies = read_all(&stream, 10_000);
        assert_eq!(
            replies,
            vec![
                Value::Array(vec![Value::BulkString(big), Value::Int(1)]),
                Value::Okay
            ]
        );
    }

    #[test]
    fn garbage_and_the_end_of_the_stream_are_errors_not_panics() {
        for garbage in [
            &b"?what\r\n"[..],
            b":12x\r\n",
            b"$3\r\nabcd\r\n",
            b"$99999999999\r\n",
            b"*-2x\r\n",
            b"+\xff\r\n",
        ] {
            let mut reader = Reader::default();
            let mut source = Chunks {
                bytes: garbage,
                chunk: 3,
            };
            assert!(reader.next(&mut source).is_err(), "{garbage:?}");
        }
        let nested = "*1\r\n".repeat(200) + ":1\r\n";
        assert!(Reader::default().next(&mut nested.as_bytes()).is_err());
        let mut reader = Reader::default();
        let error = reader.next(&mut &b"$5\r\nab"[..]).expect_err("cut short");
        assert!(error.is_io_error() && !error.is_timeout());
    }

    /// A small xorshift generator: the same replies on every run.
    struct Rng(u64);

    impl Rng {
        fn below(&mut self, n: u64) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0 % n
        }
    }

    /// A random RESP2 reply (nested `depth` deep at most), as bytes.
    fn random_reply(rng: &mut Rng, depth: u32, out: &mut Vec<u8>) {
        match rng.below(if depth == 0 { 6 } else { 7 }) {
            0 => out.extend_from_slice(b"+OK\r\n"),
            1 => {
                // Any i64, negative ones included.
                let n = rng.below(u64::MAX) as i64;
                out.extend_from_slice(format!(":{n}\r\n").as_bytes());
            }
            2 => out.extend_from_slice(b"$-1\r\n"),
            3 => {
                // Any bytes, CR and LF included.
                let len = rng.below(40) as usize;
                let bytes: Vec<u8> = (0..len).map(|_| rng.below(256) as u8).collect();
                out.extend_from_slice(format!("${len}\r\n").as_bytes());
                out.extend_from_slice(&bytes);
                out.extend_from_slice(b"\r\n");
            }
            4 => out.extend_from_slice(b"-ERR something went wrong\r\n"),
            5 => out.extend_from_slice(b"+a simple string\r\n"),
            _ => {
                let n = rng.below(5);
                out.extend_from_slice(format!("*{n}\r\n").as_bytes());
                for _ in 0..n {
                    random_reply(rng, depth - 1, out);
                }
            }
        }
    }

    #[test]
    fn random_replies_read_as_redis_rs_reads_them() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for _ in 0..300 {
            let mut stream = Vec::new();
            let mut expected = Vec::new();
            for _ in 0..rng.below(6) + 1 {
                let mut reply = Vec::new();
                random_reply(&mut rng, 4, &mut reply);
                expected.push(redis::parse_redis_value(&reply).expect("redis-rs parses it"));
                stream.extend_from_slice(&reply);
            }
            let chunk = rng.below(stream.len() as u64) as usize + 1;
            assert_eq!(read_all(&stream, chunk), expected, "chunks of {chunk}");
        }
    }

    /// Fails its first read with a timeout, then reads from `inner`.
    struct TimesOutOnce<'a> {
        inner: &'a [u8],
        failed: bool,
    }

    impl Read for TimesOutOnce<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            if !std::mem::replace(&mut self.failed, true) {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            self.inner.read(buf)
        }
    }

    #[test]
    fn a_failed_read_keeps_the_partial_reply() {
        let mut reader = Reader::default();
        reader
            .next(&mut &b"+OK\r\n$5\r\nhe"[..])
            .expect("one reply");
        let mut source = TimesOutOnce {
            inner: b"llo\r\n",
            failed: false,
        };
        assert!(
            reader
                .next(&mut source)
                .expect_err("timed out")
                .is_timeout()
        );
        assert_eq!(
            reader.next(&mut source).expect("the rest"),
            Value::BulkString(b"hello".to_vec())
        );
    }
}
