//! The replies of a socket the crate reads itself (a multiplexed command
//! socket, the subscriber's, a pooled command connection), parsed from its
//! own buffer.
//!
//! redis-rs's reader (`redis::Parser` over a `Read`) zeroes 8 KiB of buffer
//! before every `read` and walks each byte through a general parser
//! combinator: about half of the client's own instructions for a lock +
//! unlock pair (callgrind, one thread: 28k with it, 14k with this reader).
//! This reader keeps one buffer, reads into it directly, and builds the
//! replies a lock's scripts get (`+`, `:`, `$`, `*`) itself. Anything else
//! (an error, a RESP3 type) is framed here and built by redis-rs from its
//! exact bytes, so that every reply is the `Value` redis-rs's own parser
//! would give (the tests compare the two), nesting limit included.
//!
//! A reply is read in two passes, each over its bytes once: framing, which
//! runs as bytes arrive and keeps its place across reads (where the next
//! element starts, the items each open aggregate still awaits, where the
//! search for a line's CRLF resumes), then building, once the reply is all
//! in. So a reply delivered in many reads costs what it costs in one, and
//! the buffer grows with the bytes that arrived, never with a length a
//! header announces: memory stays within about twice the bytes received
//! (plus [`INITIAL`]). A line (a simple string, an error, a length) longer
//! than [`MAX_LINE`] is a protocol error.

use std::io::{self, Read};

use redis::{ErrorKind, RedisError, RedisResult, Value};

/// What a buffer starts with, and the smallest buffer it is zeroed to.
const INITIAL: usize = 16 * 1024;
/// Room a read is given at least (the buffer is compacted or grown first).
const MIN_READ: usize = 4 * 1024;
/// A buffer grown past this is given back once it is empty.
const KEEP: usize = 256 * 1024;
/// Replies nested this deep are refused, as redis-rs's parser refuses them
/// (its `MAX_RECURSE_DEPTH`: a reply inside 100 aggregates is too deep).
const MAX_DEPTH: usize = 100;
/// Longer bulk strings or aggregates are taken for garbage (Redis's own
/// limit, `proto-max-bulk-len`, is 512 MiB by default).
const MAX_LEN: i64 = i32::MAX as i64;
/// The longest line taken (a simple string or error, a number, a length),
/// without its CRLF: Redis's own limit on an inline request
/// (`PROTO_INLINE_MAX_SIZE`, 64 KiB). Redis's replies that are lines are
/// short (status words, error messages); a longer one is taken for garbage
/// rather than buffered without end.
const MAX_LINE: usize = 64 * 1024;

/// The framing of the reply at the front of the unread bytes, kept across
/// reads. Offsets count from the reply's first byte.
#[derive(Default)]
struct Framing {
    /// Where the next element (not framed yet) starts.
    at: usize,
    /// Items each open aggregate still awaits, outermost first.
    open: Vec<usize>,
    /// Where the search for the CRLF of the element at `at` resumes (0:
    /// from its start).
    scan: usize,
    /// The element at `at` is not looked at again before this many bytes
    /// are in.
    need: usize,
    /// Bytes searched for a CRLF so far, over every reply (the fuzz target
    /// bounds it by the bytes fed: framing is linear, no byte rescanned).
    #[cfg(any(test, feature = "fuzzing"))]
    scanned: usize,
}

/// A reply reader over its own buffer (see the module docs). Bytes read
/// past a reply wait for the next call; a read that fails leaves the buffer
/// and the framing as they were, so the caller may read again.
#[derive(Default)]
pub(crate) struct Reader {
    buf: Vec<u8>,
    /// The unread bytes are `buf[start..end]`.
    start: usize,
    end: usize,
    framing: Framing,
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
            if self.framing.frame(&self.buf[self.start..self.end])? {
                let len = self.framing.at;
                // Reset, its vector kept (no allocation per reply).
                self.framing.open.clear();
                self.framing.at = 0;
                self.framing.scan = 0;
                self.framing.need = 0;
                let (reply, used) = value(&self.buf[self.start..self.start + len], 0, 0)?;
                if used != len {
                    return Err(parse_error("a reply framed and built differently"));
                }
                self.start += len;
                if self.start == self.end {
                    self.start = 0;
                    self.end = 0;
                    if self.buf.len() > KEEP {
                        self.buf = Vec::new();
                    }
                }
                return Ok(reply);
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

    /// At least [`MIN_READ`] bytes of room after `end`: the unread bytes
    /// moved to the front, the buffer grown (doubled, zeroed) only when
    /// that is not enough. Never sized by what a reply announces.
    fn make_room(&mut self) {
        if self.buf.len() - self.end >= MIN_READ {
            return;
        }
        if self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.buf.len() - self.end < MIN_READ {
            let grown = (self.end + MIN_READ).max(self.buf.len() * 2).max(INITIAL);
            self.buf.resize(grown, 0);
        }
    }

    /// The buffer's size (tests: memory follows what arrived).
    #[cfg(any(test, feature = "fuzzing"))]
    pub(crate) fn buffer_len(&self) -> usize {
        self.buf.capacity()
    }

    /// Bytes searched for a CRLF while framing, since the reader was made
    /// (tests: the work follows what arrived).
    #[cfg(any(test, feature = "fuzzing"))]
    pub(crate) fn scanned(&self) -> usize {
        self.framing.scanned
    }
}

impl Framing {
    /// Frames what `buf` (the unread bytes) adds to the reply at its front:
    /// `true` once the reply is complete (it is `buf[..at]`).
    fn frame(&mut self, buf: &[u8]) -> RedisResult<bool> {
        loop {
            if buf.len() < self.need.max(self.at + 1) {
                return Ok(false);
            }
            let at = self.at;
            let kind = buf[at];
            if self.open.len() >= MAX_DEPTH {
                return Err(parse_error("nested too deep"));
            }
            let body = at + 1;
            let from = self.scan.max(body);
            let found = line_end(buf, from);
            #[cfg(any(test, feature = "fuzzing"))]
            {
                self.scanned += found.map_or(buf.len(), |end| end + 2) - from.min(buf.len());
            }
            let Some(end) = found else {
                if buf.len() - body > MAX_LINE + 1 {
                    return Err(parse_error("a line longer than 64 KiB"));
                }
                // A CR last may be the start of the CRLF.
                self.scan = buf.len() - 1;
                self.need = buf.len() + 1;
                return Ok(false);
            };
            if end - body > MAX_LINE {
                return Err(parse_error("a line longer than 64 KiB"));
            }
            self.scan = 0;
            let next = end + 2;
            let (items, next) = match kind {
                b'+' | b'-' | b':' | b'_' | b',' | b'#' | b'(' => (0, next),
                b'$' | b'!' | b'=' => match integer(&buf[body..end])? {
                    n if n < 0 => (0, next),
                    n => {
                        let after = next + length(n)? + 2;
                        if buf.len() < after {
                            // The header is read again then (a short line).
                            self.need = after;
                            return Ok(false);
                        }
                        (0, after)
                    }
                },
                b'*' | b'~' | b'>' | b'%' | b'|' => {
                    let per_item = if matches!(kind, b'%' | b'|') { 2 } else { 1 };
                    // An attribute is followed by the reply it describes.
                    let items = length(integer(&buf[body..end])?.max(0))?
                        .checked_mul(per_item)
                        .ok_or_else(|| parse_error("length out of range"))?
                        + usize::from(kind == b'|');
                    (items, next)
                }
                _ => return Err(parse_error("an unknown reply type")),
            };
            self.at = next;
            self.need = 0;
            if items > 0 {
                self.open.push(items);
                continue;
            }
            // An element is complete, and with it every aggregate it ends.
            loop {
                let Some(left) = self.open.last_mut() else {
                    return Ok(true);
                };
                *left -= 1;
                if *left > 0 {
                    break;
                }
                self.open.pop();
            }
        }
    }
}

/// Where the line whose CRLF is searched for from `from` ends (its `\r\n`),
/// if it is all in.
fn line_end(buf: &[u8], from: usize) -> Option<usize> {
    let mut i = from;
    while i + 1 < buf.len() {
        if buf[i] == b'\r' && buf[i + 1] == b'\n' {
            return Some(i);
        }
        i += 1;
    }
    None
}

/// The integer `line` holds.
fn integer(line: &[u8]) -> RedisResult<i64> {
    std::str::from_utf8(line)
        .ok()
        .and_then(|text| text.trim().parse::<i64>().ok())
        .ok_or_else(|| parse_error("expected an integer"))
}

/// The integer of the line that starts at `at`, and where the next line
/// begins (in a framed reply).
fn number(buf: &[u8], at: usize) -> RedisResult<(i64, usize)> {
    let end = line_end(buf, at).ok_or_else(|| parse_error("a line cut short"))?;
    Ok((integer(&buf[at..end])?, end + 2))
}

/// A length (of a bulk string or aggregate) that is sane.
fn length(n: i64) -> RedisResult<usize> {
    match n {
        0..=MAX_LEN => usize::try_from(n).map_err(|_| parse_error("length out of range")),
        _ => Err(parse_error("length out of range")),
    }
}

/// The reply that starts at `at` (nested `depth` deep) in a framed reply,
/// and where the next one begins.
fn value(buf: &[u8], at: usize, depth: usize) -> RedisResult<(Value, usize)> {
    if depth >= MAX_DEPTH {
        return Err(parse_error("nested too deep"));
    }
    let kind = *buf
        .get(at)
        .ok_or_else(|| parse_error("a reply cut short"))?;
    let body = at + 1;
    match kind {
        b'+' => {
            let end = line_end(buf, body).ok_or_else(|| parse_error("a line cut short"))?;
            let reply = match &buf[body..end] {
                b"OK" => Value::Okay,
                text => Value::SimpleString(
                    String::from_utf8(text.to_vec())
                        .map_err(|_| parse_error("a simple string that is not UTF-8"))?,
                ),
            };
            Ok((reply, end + 2))
        }
        b':' => number(buf, body).map(|(n, next)| (Value::Int(n), next)),
        b'$' => {
            let (n, data) = number(buf, body)?;
            if n < 0 {
                return Ok((Value::Nil, data));
            }
            let end = data + length(n)?;
            if buf.get(end..end + 2) != Some(b"\r\n") {
                return Err(parse_error("a bulk string not ended by CRLF"));
            }
            Ok((Value::BulkString(buf[data..end].to_vec()), end + 2))
        }
        b'*' => {
            let (n, mut next) = number(buf, body)?;
            if n < 0 {
                return Ok((Value::Nil, next));
            }
            let n = length(n)?;
            let mut items = Vec::with_capacity(n.min(1024));
            for _ in 0..n {
                let (item, after) = value(buf, next, depth + 1)?;
                items.push(item);
                next = after;
            }
            Ok((Value::Array(items), next))
        }
        // An error or a RESP3 type: built by redis-rs from its bytes.
        _ => {
            let end = frame_end(buf, at, depth)?;
            Ok((redis::parse_redis_value(&buf[at..end])?, end))
        }
    }
}

/// Where the reply that starts at `at` ends, whatever its type (in a
/// framed reply).
fn frame_end(buf: &[u8], at: usize, depth: usize) -> RedisResult<usize> {
    if depth >= MAX_DEPTH {
        return Err(parse_error("nested too deep"));
    }
    let kind = *buf
        .get(at)
        .ok_or_else(|| parse_error("a reply cut short"))?;
    let (n, mut next) = number_or_line(buf, at + 1, kind)?;
    let per_item = match kind {
        b'$' | b'!' | b'=' if n >= 0 => return Ok(next + length(n)? + 2),
        b'*' | b'~' | b'>' => 1,
        b'%' | b'|' => 2,
        _ => return Ok(next),
    };
    let items = length(n.max(0))?
        .checked_mul(per_item)
        .ok_or_else(|| parse_error("length out of range"))?
        + usize::from(kind == b'|');
    for _ in 0..items {
        next = frame_end(buf, next, depth + 1)?;
    }
    Ok(next)
}

/// The length or count a blob's or aggregate's line holds (0 for any
/// other line), and where the next line begins.
fn number_or_line(buf: &[u8], at: usize, kind: u8) -> RedisResult<(i64, usize)> {
    match kind {
        b'$' | b'!' | b'=' | b'*' | b'~' | b'>' | b'%' | b'|' => number(buf, at),
        _ => {
            let end = line_end(buf, at).ok_or_else(|| parse_error("a line cut short"))?;
            Ok((0, end + 2))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use super::tests_support::Chunks;

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
        // A lone CR or LF is text: only CRLF ends a line.
        b"+a\rb\nc\n\r\n",
        b"-ERR x\ry\r\n",
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
        // Nulls inside the types redis-rs builds (a map, a set).
        b"%1\r\n+a\r\n$-1\r\n",
        b"~2\r\n$-1\r\n*-1\r\n",
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

    /// A reply larger than the buffer kept between replies grows it; once
    /// read whole, the large buffer is given back (found by cargo-mutants:
    /// no test held the reader to it).
    #[test]
    fn the_grown_buffer_is_given_back_once_the_large_reply_is_read() {
        let big = vec![b'x'; KEEP * 2];
        let mut stream = format!("${}\r\n", big.len()).into_bytes();
        stream.extend_from_slice(&big);
        stream.extend_from_slice(b"\r\n");
        let mut reader = Reader::default();
        let mut source = Chunks {
            bytes: &stream,
            chunk: 64 * 1024,
        };
        assert_eq!(
            reader.next(&mut source).expect("the large reply"),
            Value::BulkString(big)
        );
        assert!(
            reader.buffer_len() <= KEEP,
            "{} bytes kept after the reply",
            reader.buffer_len()
        );
    }

    /// Records the room each read was given.
    struct Offered<'a> {
        inner: Chunks<'a>,
        rooms: Vec<usize>,
    }

    impl Read for Offered<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            self.rooms.push(buf.len());
            self.inner.read(buf)
        }
    }

    /// The buffer's sizes are part of the reader's cost (allocations,
    /// reads, memory kept): each held to its documented figure, in bytes
    /// written out (cargo-mutants found every constant free to change).
    #[test]
    fn the_buffer_is_sized_once_for_replies_under_16_kib() {
        // A thousand 10 KiB replies in 3 KiB reads: one buffer of 16 KiB,
        // never grown, every read given 4 KiB of room at least.
        let reply = format!("${}\r\n{}\r\n", 10_000, "v".repeat(10_000));
        let stream = reply.repeat(1_000).into_bytes();
        let mut reader = Reader::default();
        let mut source = Offered {
            inner: Chunks {
                bytes: &stream,
                chunk: 3_000,
            },
            rooms: Vec::new(),
        };
        for _ in 0..1_000 {
            reader.next(&mut source).expect("a reply");
            assert_eq!(reader.buffer_len(), 16 * 1024);
        }
        let least = source.rooms.iter().min().copied();
        assert!(least >= Some(4 * 1024), "a read given {least:?} bytes");
    }

    #[test]
    fn a_large_reply_is_read_in_few_reads() {
        // A 1 MB reply from a socket that fills whatever room it is given:
        // the buffer doubles, so a handful of reads, not one per 4 KiB.
        let mut stream = format!("${}\r\n", 1_000_000).into_bytes();
        stream.extend(std::iter::repeat_n(b'x', 1_000_000));
        stream.extend_from_slice(b"\r\n");
        let mut reader = Reader::default();
        let mut source = Offered {
            inner: Chunks {
                bytes: &stream,
                chunk: usize::MAX,
            },
            rooms: Vec::new(),
        };
        reader.next(&mut source).expect("the reply");
        assert!(source.rooms.len() <= 8, "{} reads", source.rooms.len());
    }

    #[test]
    fn a_reply_that_fits_once_compacted_does_not_grow_the_buffer() {
        // `+OK` and the first 12,288 bytes of a 12,310-byte reply in the
        // first read: compacted, the buffer has exactly 4 KiB of room, as
        // a read needs, and the reply fits in its 16 KiB.
        let mut stream = b"+OK\r\n$12300\r\n".to_vec();
        stream.extend(std::iter::repeat_n(b'x', 12_300));
        stream.extend_from_slice(b"\r\n");
        let mut reader = Reader::default();
        let mut source = Chunks {
            bytes: &stream,
            chunk: 5 + 12_288,
        };
        assert_eq!(reader.next(&mut source).expect("+OK"), Value::Okay);
        reader.next(&mut source).expect("the bulk string");
        assert_eq!(reader.buffer_len(), 16 * 1024);
    }

    #[test]
    fn replies_cut_by_every_read_do_not_grow_the_buffer() {
        // 5-byte replies in 4,093-byte reads: nearly every read ends inside
        // a reply, so the unread bytes are never all consumed: they must be
        // moved to the front rather than the buffer grown.
        let stream = b"+OK\r\n".repeat(200_000);
        let mut reader = Reader::default();
        let mut source = Chunks {
            bytes: &stream,
            chunk: 4_093,
        };
        for _ in 0..200_000 {
            assert_eq!(reader.next(&mut source).expect("a reply"), Value::Okay);
        }
        assert_eq!(reader.buffer_len(), 16 * 1024);
    }

    #[test]
    fn a_buffer_of_256_kib_is_kept_and_a_larger_one_given_back() {
        // Grown by doubling from 16 KiB: a 200,000-byte reply leaves it at
        // exactly 256 KiB, kept for the next; a 300,000-byte one at 512
        // KiB, given back once read.
        for (size, kept) in [(200_000, 256 * 1024), (300_000, 0)] {
            let mut stream = format!("${size}\r\n").into_bytes();
            stream.extend(std::iter::repeat_n(b'x', size));
            stream.extend_from_slice(b"\r\n");
            let mut reader = Reader::default();
            let mut source = Chunks {
                bytes: &stream,
                chunk: 4 * 1024,
            };
            reader.next(&mut source).expect("the reply");
            assert_eq!(reader.buffer_len(), kept, "after a {size}-byte reply");
        }
    }

    #[test]
    fn a_line_of_64_kib_is_taken_and_one_byte_more_refused() {
        for (len, taken) in [(65_536, true), (65_537, false)] {
            let mut line = b"+".to_vec();
            line.extend(std::iter::repeat_n(b'y', len));
            line.extend_from_slice(b"\r\n");
            let reply = Reader::default().next(&mut line.as_slice());
            assert_eq!(reply.is_ok(), taken, "a {len}-byte line: {reply:?}");
        }
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

#[cfg(test)]
mod limits {
    use std::time::{Duration, Instant};

    use super::*;

    /// Hands out `first`, then fails every read with a timeout.
    struct ThenSilence<'a>(&'a [u8]);

    impl Read for ThenSilence<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            if self.0.is_empty() {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            self.0.read(buf)
        }
    }

    #[test]
    fn a_header_alone_does_not_size_the_buffer() {
        let mut reader = Reader::default();
        let mut source = ThenSilence(b"$1000000000\r\n");
        let error = reader.next(&mut source).expect_err("no data yet");
        assert!(error.is_timeout(), "{error}");
        assert!(
            reader.buffer_len() <= 64 * 1024,
            "a 14-byte header made a buffer of {} bytes",
            reader.buffer_len()
        );
        // The same for an aggregate of huge blobs, header after header.
        let mut reader = Reader::default();
        let mut source = ThenSilence(b"*3\r\n$1000000000\r\n");
        assert!(reader.next(&mut source).expect_err("no data").is_timeout());
        assert!(reader.buffer_len() <= 64 * 1024);
    }

    /// `+` and then `x` without end, 8 KiB a read; fails a read once more
    /// than `limit` bytes were taken (the reader should have refused the
    /// line by then).
    struct EndlessLine {
        given: usize,
        limit: usize,
    }

    impl Read for EndlessLine {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            if self.given > self.limit {
                return Err(io::Error::other("the reader buffers the line without end"));
            }
            let n = buf.len().min(8192);
            buf[..n].fill(b'x');
            if self.given == 0 {
                buf[0] = b'+';
            }
            self.given += n;
            Ok(n)
        }
    }

    #[test]
    fn a_line_without_crlf_is_a_protocol_error_not_memory() {
        for kind in [b'+', b'$', b'*', b'-'] {
            let mut reader = Reader::default();
            // A 100 MB line, were it read to its end; refused by 1 MiB.
            let mut source = EndlessLine {
                given: 0,
                limit: 1024 * 1024,
            };
            let mut first = vec![kind];
            first.extend_from_slice(b"1");
            let mut chained = first.as_slice().chain(&mut source);
            let error = reader.next(&mut chained).expect_err("refused");
            assert_eq!(error.kind(), ErrorKind::Parse, "{error}");
            assert!(reader.buffer_len() <= 256 * 1024);
        }
        // A line of exactly the limit is taken.
        let mut line = b"+".to_vec();
        line.extend(std::iter::repeat_n(b'y', MAX_LINE));
        line.extend_from_slice(b"\r\n");
        let reply = Reader::default()
            .next(&mut line.as_slice())
            .expect("at the limit");
        assert_eq!(reply, Value::SimpleString("y".repeat(MAX_LINE)));
    }

    #[test]
    fn a_line_of_64_kib_cut_before_its_crlf_or_inside_it_is_taken() {
        // The first read ends after the text, or after its CR: neither may
        // be refused early as a line over the limit.
        let mut line = b"+".to_vec();
        line.extend(std::iter::repeat_n(b'y', MAX_LINE));
        line.extend_from_slice(b"\r\n");
        for cut in [1 + MAX_LINE, 2 + MAX_LINE] {
            let (first, rest) = line.split_at(cut);
            let reply = Reader::default().next(&mut first.chain(rest));
            assert_eq!(
                reply.expect("at the limit"),
                Value::SimpleString("y".repeat(MAX_LINE)),
                "cut after {cut} bytes"
            );
        }
    }

    /// Hands out its bytes `chunk` at a time, failing a read once `budget`
    /// has passed since the first.
    struct Budgeted<'a> {
        bytes: &'a [u8],
        chunk: usize,
        until: Instant,
    }

    impl Read for Budgeted<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            if Instant::now() > self.until {
                return Err(io::Error::other("over the time budget"));
            }
            let n = self.chunk.min(buf.len()).min(self.bytes.len());
            buf[..n].copy_from_slice(&self.bytes[..n]);
            self.bytes = &self.bytes[n..];
            Ok(n)
        }
    }

    #[test]
    fn a_long_array_in_small_chunks_parses_within_twice_redis_rs() {
        let n = 400_000;
        let mut stream = format!("*{n}\r\n").into_bytes();
        for i in 0..n {
            match i % 3 {
                0 => stream.extend_from_slice(
                    format!("${}\r\nv{i}\r\n", 1 + i.to_string().len()).as_bytes(),
                ),
                1 => stream.extend_from_slice(format!(":{i}\r\n").as_bytes()),
                _ => stream.extend_from_slice(b"+OK\r\n"),
            }
        }
        let began = Instant::now();
        let expected = redis::parse_redis_value(&stream).expect("redis-rs parses it");
        let theirs = began.elapsed();
        let began = Instant::now();
        let mut source = Budgeted {
            bytes: &stream,
            chunk: 1024,
            until: began + theirs * 2,
        };
        let ours = Reader::default().next(&mut source);
        let ours_took = began.elapsed();
        eprintln!(
            "{} bytes: redis-rs {theirs:?} in one piece, this reader {ours_took:?} in 1 KiB reads",
            stream.len()
        );
        assert_eq!(ours.expect("within the budget"), expected);
        assert!(ours_took <= theirs * 2 + Duration::from_millis(1));
    }

    #[test]
    fn framing_searches_each_byte_once_whatever_the_chunks() {
        // A long line, a padded bulk header and an array of short lines,
        // one byte a read: every read resumes the search where it stopped.
        let mut stream = b"+".to_vec();
        stream.extend(std::iter::repeat_n(b'x', 60_000));
        stream.extend_from_slice(b"\r\n$");
        stream.extend(std::iter::repeat_n(b' ', 1_000));
        stream.extend_from_slice(b"3000\r\n");
        stream.extend(std::iter::repeat_n(b'y', 3_000));
        stream.extend_from_slice(b"\r\n*500\r\n");
        for i in 0..500 {
            stream.extend_from_slice(format!(":{i}\r\n").as_bytes());
        }
        let mut reader = Reader::default();
        let mut source = super::tests_support::Chunks {
            bytes: &stream,
            chunk: 1,
        };
        for _ in 0..3 {
            reader.next(&mut source).expect("a reply");
        }
        let scanned = reader.scanned();
        assert!(
            scanned <= 3 * stream.len(),
            "{scanned} bytes searched for {} bytes",
            stream.len()
        );
    }

    /// `*1\r\n` `depth` times around `inner`.
    fn nested(depth: usize, opener: &str, inner: &str) -> Vec<u8> {
        (opener.repeat(depth) + inner).into_bytes()
    }

    #[test]
    fn the_nesting_limit_is_redis_rs_s() {
        for depth in [1, 98, 99, 100, 101, 150] {
            for (opener, inner) in [
                ("*1\r\n", ":1\r\n"),
                ("*1\r\n", "*0\r\n"),
                ("*1\r\n", "-ERR x\r\n"),
                ("~1\r\n", "*0\r\n"),
                ("%1\r\n+a\r\n", "%0\r\n"),
                ("*2\r\n:1\r\n", "$1\r\nz\r\n"),
            ] {
                let bytes = nested(depth, opener, inner);
                let theirs = redis::parse_redis_value(&bytes).ok();
                for chunk in [1, 7, bytes.len()] {
                    let mut source = super::tests_support::Chunks {
                        bytes: &bytes,
                        chunk,
                    };
                    let ours = Reader::default().next(&mut source).ok();
                    assert_eq!(ours, theirs, "{depth} x {opener:?} around {inner:?}");
                }
            }
        }
        // The boundary itself: 99 levels are taken, 100 are not.
        assert!(redis::parse_redis_value(&nested(99, "*1\r\n", ":1\r\n")).is_ok());
        assert!(redis::parse_redis_value(&nested(100, "*1\r\n", ":1\r\n")).is_err());
    }
}

#[cfg(test)]
mod tests_support {
    use std::io::{self, Read};

    /// Hands out its bytes `chunk` at a time, then the end of the stream.
    pub struct Chunks<'a> {
        pub bytes: &'a [u8],
        pub chunk: usize,
    }

    impl Read for Chunks<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = self.chunk.min(buf.len()).min(self.bytes.len());
            buf[..n].copy_from_slice(&self.bytes[..n]);
            self.bytes = &self.bytes[n..];
            Ok(n)
        }
    }
}
