//! The crate's RESP reader (src/net/resp.rs) against redis-rs's parser.
//!
//! Input: `[n, size_1 .. size_n, stream...]`: the reader gets `stream` in
//! reads of `size_1, size_2, ..` bytes (cycling; a size 0 means "as much as
//! the buffer takes"), redis-rs's `Parser` gets it whole. Asserts:
//!
//! * the replies are the same, in the same order, and both stop with an
//!   error at the same reply (the end of the stream is an error to both);
//!   except where the crate's documented limits refuse what redis-rs takes:
//!   a line (simple string, error, number, length) longer than 64 KiB
//!   (`MAX_LINE`: the reply refused holds such a text, as redis-rs read it,
//!   or the stream has a run that long of what a padded number is made
//!   of), and a bulk or aggregate length above `i32::MAX`
//!   (`MAX_LEN`; redis-rs then waits for the bytes, so it errors too, at
//!   the end of the stream). The nesting limit is redis-rs's own (a reply
//!   inside 100 aggregates is refused by both), so it needs no exception;
//! * the limits are kept, not only allowed: no reply the crate returns
//!   holds a line longer than 64 KiB;
//! * no panic;
//! * the reader's buffer never exceeds a constant + twice the bytes fed,
//!   and its framing searches at most three times the bytes fed for CRLFs
//!   (each byte once, plus the CR a read may have cut and a bulk string's
//!   header read again when its body is in): the work is linear, whatever
//!   the chunks.

#![no_main]

use std::io::{self, Read};

use libfuzzer_sys::fuzz_target;
use redis::Value;
use redisson_lock::__fuzzing::RespReader;

/// The crate's line limit (`MAX_LINE` in src/net/resp.rs): 64 KiB.
const MAX_LINE: usize = 64 * 1024;
/// What the buffer may hold beyond twice the bytes fed: its initial size
/// (16 KiB) and twice the room a read is given (4 KiB).
const SLACK: usize = 16 * 1024 + 2 * 4 * 1024;

/// Hands out `bytes` in reads of the sizes given, then the end of the stream.
struct Chunks<'a> {
    bytes: &'a [u8],
    sizes: &'a [u8],
    next: usize,
    fed: usize,
}

impl Read for Chunks<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let size = match self.sizes.get(self.next % self.sizes.len().max(1)) {
            Some(0) | None => buf.len(),
            Some(&n) => usize::from(n),
        };
        self.next += 1;
        let n = size.min(buf.len()).min(self.bytes.len());
        buf[..n].copy_from_slice(&self.bytes[..n]);
        self.bytes = &self.bytes[n..];
        self.fed += n;
        Ok(n)
    }
}

/// Whether `reply` (as redis-rs read it) holds a line the crate refuses:
/// a simple string, an error or a big number longer than `MAX_LINE`.
fn has_long_text(reply: &Value) -> bool {
    match reply {
        Value::SimpleString(text) => text.len() > MAX_LINE,
        // The line is `<code> <details>`.
        Value::ServerError(e) => e.code().len() + 1 + e.details().map_or(0, str::len) > MAX_LINE,
        Value::BigNumber(digits) => digits.len() > MAX_LINE,
        Value::Array(items) | Value::Set(items) => items.iter().any(has_long_text),
        Value::Push { data, .. } => data.iter().any(has_long_text),
        Value::Map(pairs) => pairs
            .iter()
            .any(|(k, v)| has_long_text(k) || has_long_text(v)),
        Value::Attribute { data, attributes } => {
            has_long_text(data)
                || attributes
                    .iter()
                    .any(|(k, v)| has_long_text(k) || has_long_text(v))
        }
        _ => false,
    }
}

/// Whether `stream` has a run of more than `MAX_LINE` bytes that could be a
/// padded number (redis-rs trims a number's line; its value does not show
/// the length): whitespace, digits, signs, `.`, and the letters of `e`,
/// `inf` and `nan`.
fn has_long_number_line(stream: &[u8]) -> bool {
    let mut run = 0usize;
    for (i, &b) in stream.iter().enumerate() {
        // A CR or LF alone is whitespace inside the line; CRLF ends it.
        let line_end = b == b'\r' && stream.get(i + 1) == Some(&b'\n');
        if !line_end
            && (b.is_ascii_whitespace() || b.is_ascii_digit() || b"+-.eEinfaINFA".contains(&b))
        {
            run += 1;
            if run > MAX_LINE {
                return true;
            }
        } else {
            run = 0;
        }
    }
    false
}

/// Whether `stream` has a null (`_`) line longer than `MAX_LINE` (redis-rs
/// takes any text there and reads `Nil`): a line after a CRLF, or first.
fn has_long_null_line(stream: &[u8]) -> bool {
    let mut at = 0;
    while at < stream.len() {
        let end = stream[at..]
            .windows(2)
            .position(|pair| pair == b"\r\n")
            .map_or(stream.len(), |i| at + i);
        if stream[at] == b'_' && end - at > MAX_LINE + 1 {
            return true;
        }
        at = end + 2;
    }
    false
}

/// Whether `stream` announces a length above `i32::MAX` (a header the
/// crate refuses and redis-rs waits behind).
fn has_huge_length(stream: &[u8]) -> bool {
    stream
        .split(|&b| b == b'\n')
        .filter_map(|line| {
            let (&kind, rest) = line.split_first()?;
            b"$!=*~>%|".contains(&kind).then_some(rest)
        })
        .filter_map(|rest| std::str::from_utf8(rest).ok())
        .filter_map(|text| text.trim().parse::<i64>().ok())
        .any(|n| n > i64::from(i32::MAX))
}

fuzz_target!(|data: &[u8]| {
    let Some((&n, rest)) = data.split_first() else {
        return;
    };
    let n = usize::from(n % 8).min(rest.len());
    let (sizes, stream) = rest.split_at(n);

    // redis-rs: every reply until its first error.
    let mut theirs = Vec::new();
    let mut parser = redis::Parser::new();
    let mut whole = stream;
    while let Ok(reply) = parser.parse_value(&mut whole) {
        theirs.push(reply);
    }

    // The crate's reader, in chunks.
    let mut reader = RespReader::new();
    let mut source = Chunks {
        bytes: stream,
        sizes,
        next: 0,
        fed: 0,
    };
    let mut ours: Vec<Value> = Vec::new();
    let error = loop {
        let result = reader.next(&mut source);
        let capacity = reader.buffer_capacity();
        assert!(
            capacity <= SLACK + 2 * source.fed,
            "a buffer of {capacity} bytes for {} bytes fed",
            source.fed
        );
        let scanned = reader.scanned();
        assert!(
            scanned <= 3 * source.fed + 8,
            "{scanned} bytes searched for CRLFs for {} bytes fed",
            source.fed
        );
        match result {
            Ok(reply) => {
                assert!(
                    !has_long_text(&reply),
                    "the crate returned a line over 64 KiB"
                );
                ours.push(reply);
            }
            Err(e) => break e,
        }
        assert!(ours.len() <= stream.len(), "more replies than bytes");
    };

    if ours == theirs {
        return;
    }
    // Only a documented limit may stop the crate's reader earlier.
    // The reply the crate refused, as redis-rs read it.
    let refused = theirs.get(ours.len());
    let over_a_limit = refused.is_some_and(has_long_text)
        || has_long_number_line(stream)
        || has_long_null_line(stream)
        || has_huge_length(stream);
    let limited = over_a_limit
        && error.kind() == redis::ErrorKind::Parse
        && refused.is_some()
        && theirs[..ours.len()] == ours[..];
    assert!(
        limited,
        "the crate read {ours:?} (then {error}), redis-rs read {theirs:?}"
    );
});
