//! Internals reachable by the fuzz targets of `fuzz/` (feature `fuzzing`),
//! as thin wrappers: the RESP reader of `net::resp`, and every lock and
//! synchronizer script's call and reply decoding on a connection the
//! target answers itself. **Not an API**: hidden from the docs, outside
//! semver, for the crate's own fuzz crate only; it may change or go at any
//! release.

use std::io::Read;
use std::time::Duration;

use redis::{ConnectionLike, RedisResult, Value};

use crate::config::Config;
use crate::error::Result;
use crate::net::resp;
use crate::protocol::sealed::Protocol;
use crate::protocol::{
    AcquireRequest, Fair, Fenced, NonReentrant, NonReentrantFair, Queue, Read as ReadSide,
    Reentrant, ReleaseRequest, Spin, Write,
};
use crate::protocol::{inspect, latch, lease, permit_expirable, replies, semaphore};
use crate::topology::cluster::table::Table;

/// The crate's RESP reader (`net::resp::Reader`).
#[derive(Default)]
pub struct RespReader(resp::Reader);

impl RespReader {
    /// A reader with an empty buffer.
    pub fn new() -> Self {
        Self::default()
    }

    /// The next reply, reading `source` as often as it takes.
    pub fn next(&mut self, source: &mut impl Read) -> RedisResult<Value> {
        self.0.next(source)
    }

    /// The capacity of the reader's buffer, in bytes.
    pub fn buffer_capacity(&self) -> usize {
        self.0.buffer_len()
    }

    /// Bytes searched for a CRLF while framing, since the reader was made.
    pub fn scanned(&self) -> usize {
        self.0.scanned()
    }
}

const NAME: &str = "fuzz{lock}";
const FIELD: &str = "0b6e5c3a-6f43-4d3e-9a57-8f5cbe7c1d2a:1";
const ID: [u8; 16] = [7; 16];

/// How many script calls [`call_script`] knows.
pub const SCRIPT_CALLS: usize = 8 * 9 + 26;

/// One acquire, release, latched unlock, force unlock, owned force unlock,
/// `is_locked` or give-up (by `op`) of lock type `kind`.
fn lock_call<K: Protocol>(op: usize, con: &mut dyn ConnectionLike) -> Result<String> {
    let lock = K::new(NAME, &Config::default());
    let field = lock.owner_field(FIELD.to_owned());
    let acquire = |queue, known, marker| AcquireRequest {
        name: NAME,
        lease_ms: 30_000,
        field: &field,
        known,
        marker,
        resend: known > 0,
        queue,
    };
    let release = |remaining| ReleaseRequest {
        name: NAME,
        lease_ms: 30_000,
        field: &field,
        publish: "PUBLISH",
        remaining,
        kept_ttl_ms: std::cell::Cell::new(None),
    };
    Ok(match op {
        0 => format!("{:?}", lock.acquire(con, &acquire(None, 0, None))?),
        1 => format!(
            "{:?}",
            lock.acquire(con, &acquire(Some(Queue { wait_ms: 500 }), 0, None))?
        ),
        2 => format!(
            "{:?}",
            lock.acquire(con, &acquire(None, 2, Some(("marker", 1_000))))?
        ),
        3 => {
            let request = release(0);
            let outcome = lock.release(con, &request)?;
            format!("{outcome:?} {:?}", request.kept_ttl_ms.get())
        }
        4 => {
            let request = release(1);
            let outcome = lock.release(con, &request)?;
            format!("{outcome:?} {:?}", request.kept_ttl_ms.get())
        }
        5 => format!(
            "{:?}",
            lock.unlock_latched(con, &release(0), "latch", 1_000)?
        ),
        6 => format!("{:?}", lock.force_unlock(con, NAME, "PUBLISH")?),
        7 => format!(
            "{:?}",
            lock.force_unlock_owned(con, NAME, &field, "PUBLISH")?
        ),
        _ => {
            let locked = lock.is_locked(con, NAME)?;
            lock.give_up(con, &field, 500)?;
            format!("{locked}")
        }
    })
}

/// Script call number `which % SCRIPT_CALLS` on `con`, whose replies the
/// caller makes up: what the crate decoded (its `Debug` text) or the error
/// it decoded instead.
pub fn call_script(which: usize, con: &mut dyn ConnectionLike) -> Result<String> {
    let which = which % SCRIPT_CALLS;
    let (kind, op) = (which / 9, which % 9);
    match kind {
        0 => return lock_call::<Reentrant>(op, con),
        1 => return lock_call::<Fair>(op, con),
        2 => return lock_call::<Fenced>(op, con),
        3 => return lock_call::<NonReentrant>(op, con),
        4 => return lock_call::<NonReentrantFair>(op, con),
        5 => return lock_call::<ReadSide>(op, con),
        6 => return lock_call::<Write>(op, con),
        7 => return lock_call::<Spin>(op, con),
        _ => {}
    }
    let pes = permit_expirable::PermitExpirableKeys::new(NAME);
    let sem = semaphore::SemaphoreKeys {
        name: NAME,
        channel: "redisson_sc:{fuzz{lock}}",
        publish: "PUBLISH",
    };
    let channel = "redisson_countdownlatch__channel__{fuzz{lock}}";
    Ok(match which - 8 * 9 {
        0 => {
            let field = lease::Renewal::Field;
            let read = lease::Renewal::ReadMarkers {
                prefix: "{fuzz{lock}}:x:rwlock_timeout".into(),
            };
            let permits = lease::Renewal::Permits(std::sync::Arc::new(lease::PermitRenewal {
                timeout: "{fuzz{lock}}:timeout".into(),
                ids: vec![[7u8; 16], [9u8; 16]].into(),
            }));
            let chunks = [
                lease::RenewChunk {
                    items: vec![(NAME, FIELD, &field), ("other", FIELD, &field)],
                },
                lease::RenewChunk {
                    items: vec![(NAME, FIELD, &read)],
                },
                lease::RenewChunk {
                    items: vec![(NAME, FIELD, &permits)],
                },
            ];
            format!("{:?}", lease::renew_chunks(con, &chunks, 30_000)?)
        }
        1 => format!("{:?}", inspect::inspect(con, NAME)?),
        2 => format!("{:?}", replies::expire_if_held(con, NAME, FIELD, 30_000)?),
        3 => format!(
            "{:?}",
            latch::try_set_count(con, NAME, channel, 3, "PUBLISH")?
        ),
        4 => format!("{:?}", latch::count_down(con, NAME, channel, "PUBLISH")?),
        5 => format!("{:?}", latch::delete(con, NAME, channel, "PUBLISH")?),
        6 => format!("{:?}", latch::count(con, NAME)?),
        7 => format!("{:?}", semaphore::try_acquire(con, NAME, 2)?),
        8 => format!("{:?}", semaphore::release(con, &sem, 2)?),
        9 => format!("{:?}", semaphore::release_if_exists(con, &sem, 2)?),
        10 => format!("{:?}", semaphore::drain(con, NAME)?),
        11 => format!(
            "{:?}",
            semaphore::try_set_permits(con, &sem, 2, Some(1_000))?
        ),
        12 => format!("{:?}", semaphore::add_permits(con, &sem, -1)?),
        13 => format!("{:?}", semaphore::available(con, NAME)?),
        14 => format!("{:?}", semaphore::delete(con, NAME)?),
        15 => {
            let expiry = permit_expirable::expiry_score(1_000, Some(Duration::from_secs(1)));
            format!(
                "{:?}",
                permit_expirable::try_acquire(
                    con,
                    &pes,
                    &[ID, ID],
                    expiry,
                    1_000,
                    "PUBLISH",
                    crate::config::PermitIdEncoding::Raw,
                )?
            )
        }
        16 => format!(
            "{:?}",
            permit_expirable::try_release_one(con, &pes, &ID, 1_000, "PUBLISH")?
        ),
        17 => format!(
            "{:?}",
            permit_expirable::try_release_many(con, &pes, &[ID, ID], 1_000, "PUBLISH")?
        ),
        18 => format!(
            "{:?}",
            permit_expirable::count(
                con,
                &pes,
                permit_expirable::Count::Available,
                1_000,
                "PUBLISH"
            )?
        ),
        19 => format!(
            "{:?}",
            permit_expirable::set_permits(con, &pes, 5, "PUBLISH")?
        ),
        20 => format!(
            "{:?}",
            permit_expirable::try_set_permits(con, &pes, 5, "PUBLISH")?
        ),
        21 => format!(
            "{:?}",
            permit_expirable::add_permits(con, &pes, -2, "PUBLISH")?
        ),
        22 => format!(
            "{:?}",
            permit_expirable::update_lease(con, &pes, &ID, 5_000, 1_000, "PUBLISH")?
        ),
        23 => format!(
            "{:?}",
            permit_expirable::lease_time(con, &pes, &ID, 1_000, "PUBLISH")?
        ),
        24 => format!("{:?}", permit_expirable::delete(con, &pes)?),
        _ => {
            // Not a script: CLUSTER SLOTS, which the client reads itself.
            let reply = con.req_command(redis::cmd("CLUSTER").arg("SLOTS"))?;
            if let Value::ServerError(e) = reply {
                return Err(crate::error::Error::Redis(e.into()));
            }
            let table = Table::parse(reply, "10.0.0.1")?;
            let masters: Vec<_> = table.masters().collect();
            format!("{masters:?} {}", table.is_complete())
        }
    })
}

/// A cluster redirect (`-MOVED <slot> <host:port>` or `-ASK ...`, the error
/// line `line` without its `-` and CRLF) from the node `replied` (`host:port`)
/// as the cluster router reads it: where to send again, and the slot.
pub fn cluster_redirect(line: &str, replied: &str) -> Option<(String, u16)> {
    let bytes = format!("-{line}\r\n");
    let Ok(Value::ServerError(e)) = redis::parse_redis_value(bytes.as_bytes()) else {
        return None;
    };
    crate::topology::cluster::redirect(&e.into(), replied).map(|(to, slot)| (to.to_string(), slot))
}

/// A URL as the client takes it (redis-rs's parsing), then as an endpoint
/// names it and after a move to `host:port` (the crate's own handling of
/// the parsed address): `(described, described after the move, is_at)`.
pub fn endpoint(url: &str, host: &str, port: u16) -> Option<(String, String, bool)> {
    use redis::IntoConnectionInfo;
    let info = url.into_connection_info().ok()?;
    let endpoint = crate::net::endpoint::Endpoint::new(info.clone());
    let before = endpoint.describe();
    let moved = crate::net::endpoint::with_server(info, host, port);
    let after = crate::net::endpoint::Endpoint::new(moved);
    Some((before, after.describe(), after.is_at(host, port)))
}

/// `ClientBuilder::redisson_compat`'s version parser: the version as it
/// prints (`MAJOR.MINOR.PATCH`), and the settings it implies (`Debug`).
pub fn redisson_version(text: &str) -> Result<(String, String)> {
    let version = crate::config::compat::parse(text)?;
    let compat = crate::config::compat::Compat::for_version(version);
    Ok((version.to_string(), format!("{compat:?}")))
}
