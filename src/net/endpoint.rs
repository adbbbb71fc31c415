//! Where a client's connections go: the one server it talks to now.
//!
//! For a standalone server the endpoint never changes. Under Sentinel it
//! is moved to the new master after a failover (`crate::topology::sentinel`), and
//! its generation counts the moves: pooled connections opened at an older
//! generation are discarded on their next checkout, the watchdog reopens its
//! connection, and the subscriber reconnects.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{LazyLock, OnceLock};
use std::time::{Duration, Instant};

use crossbeam_channel::Sender;
use parking_lot::{Condvar, Mutex, RwLock};
use redis::{ConnectionAddr, ConnectionInfo};

use crate::error::Verdict;

/// The server connections go to, and how to reach it.
pub(crate) struct Endpoint {
    info: RwLock<ConnectionInfo>,
    /// Mirrors `moves` for lock-free reads.
    generation: AtomicU64,
    moves: Mutex<u64>,
    moved: Condvar,
    /// The name command connections give themselves (`CLIENT SETNAME`).
    pub name: Option<std::sync::Arc<str>>,
    /// TLS for the subscriber's hand-written socket (`rediss://` only).
    #[cfg(feature = "tls-rustls")]
    pub tls: Option<std::sync::Arc<rustls::ClientConfig>>,
    /// Set when something watches the topology: asks it to check now.
    recheck: OnceLock<Sender<()>>,
    /// Replicas connected to the server when last seen, for replica sync
    /// (the engine's replica sync); -1: unknown. Forgotten when the endpoint moves.
    replicas: AtomicI64,
    /// When `replicas` was counted, in ms since [`EPOCH`].
    counted_at: AtomicU64,
}

/// The origin of [`Endpoint`]'s timestamps.
static EPOCH: LazyLock<Instant> = LazyLock::new(Instant::now);

/// How long "no replica connected" is believed: no `WAIT` is sent then, so
/// no `WAIT` reply would ever correct it (a replica that connects later, a
/// former master that rejoins as a replica).
const NO_REPLICA_BELIEVED: Duration = Duration::from_secs(1);

fn millis_since_epoch() -> u64 {
    u64::try_from(EPOCH.elapsed().as_millis()).unwrap_or(u64::MAX)
}

impl Endpoint {
    /// An endpoint at `info`, generation 0.
    pub fn new(info: ConnectionInfo) -> Self {
        Endpoint {
            info: RwLock::new(info),
            generation: AtomicU64::new(0),
            moves: Mutex::new(0),
            moved: Condvar::new(),
            name: None,
            #[cfg(feature = "tls-rustls")]
            tls: None,
            recheck: OnceLock::new(),
            replicas: AtomicI64::new(-1),
            counted_at: AtomicU64::new(0),
        }
    }

    /// The current server's connection info (a clone: no lock is held).
    pub fn info(&self) -> ConnectionInfo {
        self.info.read().clone()
    }

    /// How many times the endpoint moved.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// `host:port` of the current server, for messages.
    pub fn describe(&self) -> String {
        self.info.read().addr().to_string()
    }

    /// Whether the endpoint is at `host:port` now.
    pub fn is_at(&self, host: &str, port: u16) -> bool {
        same_server(self.info.read().addr(), host, port)
    }

    /// Points every new connection at `host:port` (keeping the scheme, TLS
    /// material, credentials and database); `false` if it already was.
    pub fn move_to(&self, host: &str, port: u16) -> bool {
        let mut moves = self.moves.lock();
        {
            let mut info = self.info.write();
            if same_server(info.addr(), host, port) {
                return false;
            }
            *info = with_server(info.clone(), host, port);
        }
        *moves += 1;
        self.forget_replicas();
        self.generation.store(*moves, Ordering::Release);
        self.moved.notify_all();
        true
    }

    /// Blocks until the endpoint has moved past `generation` or `within`
    /// passes; whether it did.
    pub fn await_move(&self, generation: u64, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        let mut moves = self.moves.lock();
        while *moves == generation {
            if self.moved.wait_until(&mut moves, deadline).timed_out() {
                break;
            }
        }
        *moves != generation
    }

    /// Installs the topology watcher's "check now" channel (once).
    pub fn watch_with(&self, recheck: Sender<()>) {
        let _ = self.recheck.set(recheck);
    }

    /// Whether something watches the topology (Sentinel).
    pub fn is_watched(&self) -> bool {
        self.recheck.get().is_some()
    }

    /// Whether an error with `verdict` from this server says it is a former
    /// master ([`Verdict::is_former_master`]) of a watched topology
    /// (Sentinel): then the watcher is asked to look again now (never
    /// blocks), and the caller retires its connection.
    pub fn is_former_master(&self, verdict: Verdict) -> bool {
        let former = verdict.is_former_master() && self.is_watched();
        if former {
            self.suspect();
        }
        former
    }

    /// Tells the topology watcher that the server may have changed (a
    /// `READONLY` reply, a lost connection). Never blocks.
    pub fn suspect(&self) {
        if let Some(recheck) = self.recheck.get() {
            let _ = recheck.try_send(());
        }
    }
}

impl Endpoint {
    /// The replicas connected to the server when last counted, if known. A
    /// count of none is only kept for a second.
    pub fn replicas(&self) -> Option<u32> {
        self.replicas_at(millis_since_epoch())
    }

    /// [`Endpoint::replicas`] at `now` ms since [`EPOCH`].
    fn replicas_at(&self, now: u64) -> Option<u32> {
        let n = u32::try_from(self.replicas.load(Ordering::Acquire)).ok()?;
        if n == 0 {
            let age = now.saturating_sub(self.counted_at.load(Ordering::Acquire));
            if u128::from(age) > NO_REPLICA_BELIEVED.as_millis() {
                return None;
            }
        }
        Some(n)
    }

    /// Remembers that `n` replicas are connected to the server.
    pub fn set_replicas(&self, n: u32) {
        self.counted_at
            .store(millis_since_epoch(), Ordering::Release);
        self.replicas.store(i64::from(n), Ordering::Release);
    }

    /// Forgets the replica count: it is read again before the next write.
    pub fn forget_replicas(&self) {
        self.replicas.store(-1, Ordering::Release);
    }
}

fn same_server(addr: &ConnectionAddr, host: &str, port: u16) -> bool {
    match addr {
        ConnectionAddr::Tcp(h, p)
        | ConnectionAddr::TcpTls {
            host: h, port: p, ..
        } => h == host && *p == port,
        _ => false,
    }
}

/// `info` pointed at `host:port`, keeping TLS (and its certificates) if it
/// had it.
pub(crate) fn with_server(info: ConnectionInfo, host: &str, port: u16) -> ConnectionInfo {
    let addr = match info.addr().clone() {
        ConnectionAddr::TcpTls {
            insecure,
            tls_params,
            ..
        } => ConnectionAddr::TcpTls {
            host: host.to_owned(),
            port,
            insecure,
            tls_params,
        },
        _ => ConnectionAddr::Tcp(host.to_owned(), port),
    };
    info.set_addr(addr)
}

#[cfg(test)]
mod tests {
    use super::*;
    use redis::IntoConnectionInfo;

    #[test]
    fn a_count_of_no_replicas_is_only_believed_for_a_second() {
        let endpoint = Endpoint::new(
            "redis://127.0.0.1:1000"
                .into_connection_info()
                .expect("url"),
        );
        assert_eq!(endpoint.replicas(), None);
        endpoint.set_replicas(2);
        assert_eq!(endpoint.replicas(), Some(2));
        endpoint.set_replicas(0);
        assert_eq!(endpoint.replicas(), Some(0));
        // Counted more than a second ago: read it again.
        let later = millis_since_epoch() + 1_500;
        assert_eq!(endpoint.replicas_at(later), None);
        // A positive count stays until a WAIT disagrees or the endpoint moves.
        endpoint.set_replicas(1);
        assert_eq!(endpoint.replicas_at(later), Some(1));
        assert!(endpoint.move_to("127.0.0.1", 1001));
        assert_eq!(endpoint.replicas(), None);
    }

    #[test]
    fn a_move_keeps_the_settings_and_bumps_the_generation() {
        let info = "redis://user:secret@127.0.0.1:1000/3"
            .into_connection_info()
            .expect("url");
        let endpoint = Endpoint::new(info);
        assert_eq!(endpoint.generation(), 0);
        assert!(!endpoint.move_to("127.0.0.1", 1000), "already there");
        assert!(endpoint.move_to("10.0.0.2", 2000));
        assert_eq!(endpoint.generation(), 1);
        assert!(endpoint.is_at("10.0.0.2", 2000));
        let moved = endpoint.info();
        assert_eq!(moved.redis_settings().db(), 3);
        assert_eq!(moved.redis_settings().username(), Some("user"));
        assert_eq!(moved.redis_settings().password(), Some("secret"));
        assert!(endpoint.await_move(0, Duration::ZERO), "moved past 0");
        assert!(
            !endpoint.await_move(1, Duration::from_millis(1)),
            "not past 1"
        );
    }

    #[test]
    fn suspecting_an_unwatched_endpoint_does_nothing() {
        let endpoint = Endpoint::new(("127.0.0.1", 1u16).into_connection_info().expect("addr"));
        assert!(!endpoint.is_watched());
        endpoint.suspect();
        let (tx, rx) = crossbeam_channel::bounded(1);
        endpoint.watch_with(tx);
        endpoint.suspect();
        endpoint.suspect(); // never blocks on a full channel
        assert!(rx.try_recv().is_ok());
    }
}
