//! What the subscriber thread reads: unlock messages, handed to the parking
//! lot, and replies, matched in order with the commands that the connection
//! record says are awaiting one.

use std::io;

use redis::{RedisError, ServerError, Value};

use super::SubscriberState;
use super::conn::Pending;
use crate::error::Verdict;
use crate::names::{READ_UNLOCK_MESSAGE, UNLOCK_MESSAGE};

/// A reply that answers the command at the front of
/// [`Conn::pending`](super::conn::Conn::pending).
#[derive(Debug)]
pub(super) enum Reply {
    Subscribed(String),
    Unsubscribed(String),
    Pong,
    Refused(ServerError),
}

impl SubscriberState {
    /// Hands a message to the lot, or a reply to the command it answers.
    pub(super) fn dispatch(&self, value: Value, answered: &mut bool) -> io::Result<()> {
        if !matches!(value, Value::ServerError(_)) {
            *answered = true;
        }
        let reply = match value {
            Value::Array(items) => match items.as_slice() {
                [Value::BulkString(kind), Value::BulkString(name), payload] => {
                    let name = String::from_utf8_lossy(name).into_owned();
                    match kind.as_slice() {
                        b"message" | b"smessage" => {
                            self.deliver(&name, payload);
                            return Ok(());
                        }
                        b"subscribe" | b"ssubscribe" => Reply::Subscribed(name),
                        b"unsubscribe" => Reply::Unsubscribed(name),
                        b"sunsubscribe" => {
                            if !self.answers_front_unsubscribe(&name) {
                                self.shard_lost(&name);
                                return Ok(());
                            }
                            Reply::Unsubscribed(name)
                        }
                        _ => return Ok(()),
                    }
                }
                [Value::BulkString(kind), _] if kind.eq_ignore_ascii_case(b"pong") => Reply::Pong,
                _ => return Ok(()),
            },
            Value::SimpleString(s) if s.eq_ignore_ascii_case("pong") => Reply::Pong,
            Value::ServerError(e) => {
                // Before the connection has answered anything, an error other
                // than an ACL refusal is the server turning the connection
                // away (maxclients, protected mode), and it closes it: a
                // failed connect, not a refusal of the front command.
                if !*answered && Verdict::of_code(e.code()) != Verdict::Forbidden {
                    return Err(io::Error::new(
                        io::ErrorKind::ConnectionRefused,
                        format!("the server turned the connection away: {}", e.code()),
                    ));
                }
                *answered = true;
                Reply::Refused(e)
            }
            _ => return Ok(()),
        };
        self.settle(reply)
    }

    fn deliver(&self, channel: &str, payload: &Value) {
        match payload {
            Value::BulkString(message) if message == UNLOCK_MESSAGE.as_bytes() => {
                self.lot.lock().deliver(channel, false);
            }
            Value::BulkString(message) if message == READ_UNLOCK_MESSAGE.as_bytes() => {
                self.lot.lock().deliver(channel, true);
            }
            // A synchronizer's message (a semaphore's permit count, which
            // may be negative): only "try again now" for every waiter on
            // the channel, never counted (docs/synchronizers.md).
            Value::BulkString(message) if is_integer(message) => {
                self.lot.lock().deliver(channel, true);
            }
            _ => log::debug!("redisson-lock: ignoring unknown message on {channel}"),
        }
    }

    /// Matches `reply` with the command at the front of the record. A
    /// subscription confirmed, with nothing else in flight for its channel,
    /// activates the channel's entries; one refused fails their waiters and
    /// is forgotten, so that the next waiter asks again. A reply that answers
    /// no command means the stream is out of step: an error, and the
    /// connection is dropped.
    fn settle(&self, reply: Reply) -> io::Result<()> {
        let mut conn = self.conn.lock();
        let Some(front) = conn.answered() else {
            return Err(io::Error::other(format!(
                "subscriber reply {reply:?} to no command"
            )));
        };
        match (front, reply) {
            (Pending::Subscribe(channel), Reply::Subscribed(name)) if *channel == *name => {
                if conn.settled(&channel) && conn.subscribed.contains(&channel) {
                    self.lot.lock().activate(&channel);
                }
            }
            (Pending::Unsubscribe(channel), Reply::Unsubscribed(name)) if *channel == *name => {
                conn.settled(&channel);
            }
            (Pending::Ping, Reply::Pong) => {}
            // A refused PING still proves the server alive.
            (Pending::Ping, Reply::Refused(_)) => {}
            (Pending::Subscribe(channel), Reply::Refused(e))
                if self.flavour.in_cluster() && Verdict::of_code(e.code()).served_elsewhere() =>
            {
                if conn.settled(&channel) && conn.subscribed.contains(&channel) {
                    // Both: the classic half was confirmed before.
                    self.drop_classic_half(&mut conn, &channel);
                    conn.subscribed.remove(&channel);
                    let woken = self.lot.lock().moved(&channel);
                    log::debug!(
                        "redisson-lock: subscribing to {channel} got {}: {woken} waiting \
                         thread(s) subscribe again at the slot's master",
                        e.code()
                    );
                }
            }
            (Pending::Subscribe(channel), Reply::Refused(e)) => {
                if conn.settled(&channel) && conn.subscribed.remove(&channel) {
                    let error = RedisError::from(e);
                    let failed = self.lot.lock().refuse(&channel, &error);
                    log::warn!(
                        "redisson-lock: the server refused to subscribe to {channel} ({error}): \
                         {failed} waiting thread(s) get the error"
                    );
                } else if self.flavour == super::Flavour::Both && conn.subscribed.contains(&channel)
                {
                    // The other flavour's reply settles the channel: its
                    // waiters hear that flavour only.
                    log::warn!(
                        "redisson-lock: the server refused one of SUBSCRIBE/SSUBSCRIBE {channel} \
                         ({}): its waiters hear the other flavour only",
                        e.code()
                    );
                } else {
                    log::debug!("redisson-lock: a superseded SUBSCRIBE {channel} was refused");
                }
            }
            (Pending::Unsubscribe(channel), Reply::Refused(e)) => {
                // The server may go on sending its messages; nobody is
                // waiting for them.
                conn.settled(&channel);
                log::warn!("redisson-lock: the server refused to unsubscribe from {channel}: {e}");
            }
            (front, reply) => {
                return Err(io::Error::other(format!(
                    "subscriber reply {reply:?} does not answer {front:?}"
                )));
            }
        }
        Ok(())
    }
}

/// Whether `text` is decimal integer text (`-3`, `42`): what Redisson's
/// synchronizers publish (Java decodes it with `LongCodec`).
fn is_integer(text: &[u8]) -> bool {
    let digits = text.strip_prefix(b"-").unwrap_or(text);
    !digits.is_empty() && digits.len() <= 19 && digits.iter().all(u8::is_ascii_digit)
}

#[cfg(test)]
mod tests {
    use super::is_integer;

    #[test]
    fn synchronizer_counts_are_integers() {
        for yes in ["0", "5", "-2", "2147483647", "-9223372036854775808"] {
            assert!(is_integer(yes.as_bytes()), "{yes}");
        }
        for no in ["", "-", "1.5", "+1", "abc", " 1", "12345678901234567890"] {
            assert!(!is_integer(no.as_bytes()), "{no}");
        }
    }
}
