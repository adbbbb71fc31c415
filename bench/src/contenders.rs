//! The Rust contenders, each handing out [`Session`]s (one thread's handle
//! on one lock name) from a [`Factory`] shared by a process's threads.
//!
//! - `floor`, the true floor: Redisson's acquire and unlock exactly as
//!   PROTOCOL §2.1 and §2.2 describe them, without the unlock latch (§1.7),
//!   in the benchmark's own Lua (`bench/lua/floor_*.lua`), sent with plain
//!   redis-rs `Script` calls on one connection per thread. No pool, no
//!   registry, no watchdog, no shared subscriber. When contended, each thread
//!   keeps its own subscription to the lock's channel and waits for a message
//!   (or the TTL) before retrying: the least a pub/sub hand-off can cost.
//! - `raw`: the same harness sending the crate's own scripts
//!   (`lua/rlock_acquire.lua` with its known-holds argument,
//!   `lua/rlock_release.lua`, which sets the count the thread keeps): what
//!   the crate's script extensions cost on the server, without the crate's
//!   client code.
//! - `crate`: redisson-lock as a user would call it (`Client::lock`, guard).
//! - `rslock`: rslock's `LockManager::acquire` / `LockGuard::release`, each
//!   thread with its own current-thread tokio runtime and manager (rslock's
//!   multiplexed connection is driven by the runtime that created it).

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::sync::LazyLock;
use std::time::Duration;

use anyhow::{Result, bail};
use redis::Script;

use crate::lock_types::{BenchedLock, TypedFloor, crate_typed};
use crate::session::{FLOOR_ACQUIRE, FLOOR_UNLOCK, LEASE, Session, braced, crate_session};

/// The crate's own RLock scripts, sent raw by the `raw` contender.
static CRATE_ACQUIRE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../lua/rlock_acquire.lua")));
static CRATE_RELEASE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../lua/rlock_release.lua")));

/// Which implementation a scenario measures, as `--contender` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Contender {
    /// The true floor: Redisson's protocol minimum, no latch.
    Floor,
    /// The crate's own scripts, sent raw by the floor's harness.
    Raw,
    Crate,
    Rslock,
}

impl Contender {
    pub fn parse(s: &str) -> Result<Contender> {
        Ok(match s {
            "floor" => Contender::Floor,
            "raw" => Contender::Raw,
            "crate" => Contender::Crate,
            "rslock" => Contender::Rslock,
            other => {
                bail!("unknown contender {other} (floor, raw, crate, rslock; redisson is Java)")
            }
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Contender::Floor => "floor",
            Contender::Raw => "raw",
            Contender::Crate => "crate",
            Contender::Rslock => "rslock",
        }
    }
}

/// What the threads of one process share.
pub struct Factory {
    kind: Contender,
    url: String,
    redis: redis::Client,
    client: Option<redisson_lock::Client>,
    /// The floor's stand-in for a client UUID.
    floor_id: String,
    /// Which lock type sessions take (scenario 5; RLock otherwise).
    lock_type: BenchedLock,
}

impl Factory {
    pub fn new(kind: Contender, url: &str, watchdog: Duration) -> Result<Factory> {
        Factory::with_connections(kind, url, watchdog, None)
    }

    /// [`Factory::new`], the crate's client multiplexed over that many
    /// connections when `multiplexed` is set (`--multiplexed N`; 0: pooled),
    /// else with its default connections.
    pub fn with_connections(
        kind: Contender,
        url: &str,
        watchdog: Duration,
        multiplexed: Option<u32>,
    ) -> Result<Factory> {
        let client = match kind {
            Contender::Crate => {
                let builder = redisson_lock::Client::builder(url).watchdog_timeout(watchdog);
                // `--multiplexed 0`: the pool, asked for explicitly (the
                // default for one server is multiplexed).
                let builder = match multiplexed {
                    Some(0) => builder.pool_size(32),
                    Some(n) => builder.multiplexed(n),
                    None => builder,
                };
                Some(builder.build()?)
            }
            _ => None,
        };
        Ok(Factory {
            kind,
            url: url.to_owned(),
            redis: redis::Client::open(url)?,
            client,
            floor_id: uuid::Uuid::new_v4().to_string(),
            lock_type: BenchedLock::Lock,
        })
    }

    /// Command connections the crate's client has open (pooled, or
    /// multiplexed sockets); `None` for other contenders.
    pub fn connections(&self) -> Option<u32> {
        self.client
            .as_ref()
            .map(|c| c.diagnostics().pooled_connections)
    }

    /// The crate's connection mode as built: its multiplexed sockets per
    /// server, 0 when pooled; `None` for other contenders.
    pub fn multiplexed(&self) -> Option<u32> {
        self.client
            .as_ref()
            .map(|c| c.diagnostics().multiplexed.unwrap_or(0))
    }

    /// Sessions take `lock_type` instead of RLock (scenario 5).
    pub fn with_lock_type(mut self, lock_type: BenchedLock) -> Self {
        self.lock_type = lock_type;
        self
    }

    pub fn plain_connection(&self) -> Result<redis::Connection> {
        Ok(self.redis.get_connection()?)
    }

    /// A session on `name` for the calling thread (`thread` numbers the
    /// floor's owner field). `contended` makes the floor subscribe up front.
    pub fn session(&self, name: &str, thread: u64, contended: bool) -> Result<Box<dyn Session>> {
        if self.lock_type != BenchedLock::Lock {
            if contended && self.kind == Contender::Floor {
                bail!("floor: no contended floor for {:?}", self.lock_type);
            }
            return self.typed_session(name, thread);
        }
        Ok(match self.kind {
            Contender::Floor | Contender::Raw => {
                Box::new(FloorSession::new(self, name, thread, contended)?)
            }
            Contender::Crate => crate_session(self.crate_client().lock(name)),
            Contender::Rslock => Box::new(RslockSession::new(vec![self.url.clone()], name)?),
        })
    }

    /// A session of the factory's lock type other than RLock (scenario 5).
    fn typed_session(&self, name: &str, thread: u64) -> Result<Box<dyn Session>> {
        Ok(match self.kind {
            Contender::Floor => Box::new(TypedFloor::new(
                self.plain_connection()?,
                &self.floor_id,
                self.lock_type,
                name,
                thread,
            )?),
            Contender::Crate => crate_typed(self.crate_client(), self.lock_type, name),
            other => bail!("the lock family is not measured for {}", other.name()),
        })
    }

    fn crate_client(&self) -> &redisson_lock::Client {
        self.client.as_ref().expect("crate contender has a client")
    }
}

// ---------------------------------------------------------------- floor

/// The floor's harness: one plain connection, one `Script` call per
/// operation. `own` selects the crate's own scripts (`raw`) over the true
/// floor's.
struct FloorSession {
    con: redis::Connection,
    own: bool,
    name: String,
    channel: String,
    field: String,
    sub: Option<FloorSubscription>,
    /// The unlock's publish command: `publish`, or `spublish` on a cluster
    /// with sharded pub/sub (the cluster scenario).
    publish: &'static str,
}

impl FloorSession {
    fn new(factory: &Factory, name: &str, thread: u64, contended: bool) -> Result<Self> {
        let channel = braced("redisson_lock__channel", name);
        let sub = if contended {
            Some(FloorSubscription::new(&factory.url, &channel)?)
        } else {
            None
        };
        Ok(FloorSession {
            con: factory.redis.get_connection()?,
            own: factory.kind == Contender::Raw,
            name: name.to_owned(),
            channel,
            field: format!("{}:{thread}", factory.floor_id),
            sub,
            publish: "publish",
        })
    }

    /// `None` when acquired, else the holder's TTL.
    fn attempt(&mut self) -> Result<Option<Duration>> {
        // PROTOCOL §2.1: lease, owner field. The crate's script (`raw`) takes
        // what src/protocol/reentrant.rs sends it: those and the holds the
        // caller knows it has (the harness never re-enters: 0).
        let script = if self.own {
            &*CRATE_ACQUIRE
        } else {
            &*FLOOR_ACQUIRE
        };
        let mut call = script.key(&self.name);
        call.arg(LEASE.as_millis() as u64).arg(&self.field);
        if self.own {
            call.arg(0);
        }
        let reply: Option<i64> = call.invoke(&mut self.con)?;
        Ok(reply.map(|ttl| Duration::from_millis(ttl.max(1) as u64)))
    }
}

impl Session for FloorSession {
    fn lock(&mut self) -> Result<()> {
        loop {
            if let Some(sub) = self.sub.as_mut() {
                // Releases announced before this attempt are seen by it.
                sub.drain()?;
            }
            let Some(ttl) = self.attempt()? else {
                return Ok(());
            };
            match self.sub.as_mut() {
                Some(sub) => sub.wait(ttl)?,
                None => std::thread::sleep(ttl.min(Duration::from_millis(1))),
            }
        }
    }

    fn unlock(&mut self) -> Result<()> {
        // PROTOCOL §2.2 less the latch: message, lease, owner field, publish
        // command. The crate's script (`raw`) takes the holds the thread
        // keeps too: its last one goes (0).
        let script = if self.own {
            &*CRATE_RELEASE
        } else {
            &*FLOOR_UNLOCK
        };
        let mut call = script.key(&self.name);
        call.key(&self.channel)
            .arg("0")
            .arg(LEASE.as_millis() as u64)
            .arg(&self.field)
            .arg(self.publish);
        if self.own {
            call.arg(0);
        }
        let reply: Option<i64> = call.invoke(&mut self.con)?;
        if reply.is_none() {
            bail!(
                "{}: unlock of {} found it not held",
                self.kind_name(),
                self.name
            );
        }
        Ok(())
    }
}

impl FloorSession {
    fn kind_name(&self) -> &'static str {
        if self.own { "raw" } else { "floor" }
    }
}

/// An uncontended true-floor session on `name` over one plain connection
/// from `redis` (in the cluster scenario, to the master serving the name's
/// slot), owner field `<floor_id>:<thread>`, unlocking with `publish`
/// (`publish` or `spublish`).
pub fn floor_session_on(
    redis: &redis::Client,
    floor_id: &str,
    name: &str,
    thread: u64,
    publish: &'static str,
) -> Result<Box<dyn Session>> {
    Ok(Box::new(FloorSession {
        con: redis.get_connection()?,
        own: false,
        name: name.to_owned(),
        channel: braced("redisson_lock__channel", name),
        field: format!("{floor_id}:{thread}"),
        sub: None,
        publish,
    }))
}

/// A raw subscribed socket. Every message on the one channel is the same
/// byte string, so waiting is reading one frame's worth of bytes.
struct FloorSubscription {
    stream: TcpStream,
    frame: Vec<u8>,
    buf: Vec<u8>,
}

impl FloorSubscription {
    fn new(url: &str, channel: &str) -> Result<Self> {
        let info = redis::IntoConnectionInfo::into_connection_info(url)?;
        let redis::ConnectionAddr::Tcp(host, port) = info.addr() else {
            bail!("floor: TCP URLs only");
        };
        let mut stream = TcpStream::connect((host.as_str(), *port))?;
        stream.set_nodelay(true)?;
        stream.write_all(&redis::cmd("SUBSCRIBE").arg(channel).get_packed_command())?;
        let confirm = bulk_array(&[b"subscribe", channel.as_bytes()], ":1\r\n");
        let mut got = vec![0; confirm.len()];
        stream.read_exact(&mut got)?;
        if got != confirm {
            bail!(
                "floor: unexpected SUBSCRIBE reply {:?}",
                String::from_utf8_lossy(&got)
            );
        }
        Ok(FloorSubscription {
            stream,
            frame: bulk_array(&[b"message", channel.as_bytes()], "$1\r\n0\r\n"),
            buf: Vec::with_capacity(4096),
        })
    }

    /// Discards every message already received.
    fn drain(&mut self) -> Result<()> {
        self.stream.set_nonblocking(true)?;
        let mut chunk = [0u8; 4096];
        let result = loop {
            match self.stream.read(&mut chunk) {
                Ok(0) => break Err(anyhow::anyhow!("floor: subscription closed")),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == ErrorKind::WouldBlock => break Ok(()),
                Err(e) => break Err(e.into()),
            }
        };
        self.stream.set_nonblocking(false)?;
        result?;
        self.consume()?;
        Ok(())
    }

    /// Waits for one message, or `timeout`.
    fn wait(&mut self, timeout: Duration) -> Result<()> {
        let mut chunk = [0u8; 4096];
        self.stream
            .set_read_timeout(Some(timeout.max(Duration::from_millis(1))))?;
        while self.buf.len() < self.frame.len() {
            match self.stream.read(&mut chunk) {
                Ok(0) => bail!("floor: subscription closed"),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    return Ok(());
                }
                Err(e) => return Err(e.into()),
            }
        }
        self.consume()?;
        Ok(())
    }

    /// Drops whole frames from the buffer, checking that they are messages.
    fn consume(&mut self) -> Result<usize> {
        let whole = self.buf.len() / self.frame.len();
        for i in 0..whole {
            let frame = &self.buf[i * self.frame.len()..(i + 1) * self.frame.len()];
            if frame != self.frame.as_slice() {
                bail!(
                    "floor: unexpected pub/sub frame {:?}",
                    String::from_utf8_lossy(frame)
                );
            }
        }
        self.buf.drain(..whole * self.frame.len());
        Ok(whole)
    }
}

fn bulk_array(items: &[&[u8]], last: &str) -> Vec<u8> {
    let mut out = format!("*{}\r\n", items.len() + 1).into_bytes();
    for item in items {
        out.extend_from_slice(format!("${}\r\n", item.len()).as_bytes());
        out.extend_from_slice(item);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(last.as_bytes());
    out
}

// ---------------------------------------------------------------- rslock

struct RslockSession {
    rt: tokio::runtime::Runtime,
    manager: rslock::LockManager,
    name: String,
    guard: Option<rslock::LockGuard>,
}

/// An rslock session over `urls` (several: rslock's own RedLock).
pub fn rslock_session(urls: Vec<String>, name: &str) -> Result<Box<dyn Session>> {
    Ok(Box::new(RslockSession::new(urls, name)?))
}

impl RslockSession {
    fn new(urls: Vec<String>, name: &str) -> Result<Self> {
        Ok(RslockSession {
            rt: current_thread_runtime()?,
            manager: rslock::LockManager::new(urls),
            name: name.to_owned(),
            guard: None,
        })
    }
}

pub fn current_thread_runtime() -> Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?)
}

impl Session for RslockSession {
    fn lock(&mut self) -> Result<()> {
        let guard = self
            .rt
            .block_on(self.manager.acquire(self.name.as_bytes(), LEASE))?;
        self.guard = Some(guard);
        Ok(())
    }

    fn unlock(&mut self) -> Result<()> {
        match self.guard.take() {
            Some(guard) => {
                self.rt.block_on(guard.release());
                Ok(())
            }
            None => bail!("rslock: unlock without a guard"),
        }
    }
}
