//! Redis Sentinel: finding the master, and following it across failovers.
//!
//! The master is the address the sentinels give for the master name
//! (`SENTINEL GET-MASTER-ADDR-BY-NAME`, asked of each sentinel in turn until
//! one answers), confirmed by the server itself (`ROLE` says `master`). A
//! thread (`rlock-sentinel`) asks again every second, as Redisson's
//! Sentinel manager does, and at once when a connection gets a `READONLY`
//! reply or is lost. When the master moved, the client's [`Endpoint`] moves:
//! pooled connections to the former master are discarded on their next
//! checkout (a demoted master still answers `PING`, but every write with
//! `READONLY`), the watchdog reopens its connection, and the subscriber
//! reconnects to the new master, resubscribes and wakes its waiters to try
//! again.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, select};
use parking_lot::Mutex;
use redis::{ConnectionInfo, RedisResult, Value};

use crate::error::{Error, Result};
use crate::net::endpoint::{Endpoint, with_server};
use crate::net::tls::EndpointSettings;
use crate::pubsub::SubscriberHandle;
use crate::spawn::Stoppable;

/// How often the sentinels are asked for the master by default (Redisson's
/// `scanInterval` for Sentinel, 1 s).
const POLL_INTERVAL: Duration = Duration::from_secs(1);
/// The least time between two lookups, however often one is asked for.
const RECHECK_MIN: Duration = Duration::from_millis(50);

/// What `Client::sentinel_builder` was given.
pub(crate) struct SentinelSettings {
    master_name: String,
    sentinels: Vec<RedisResult<ConnectionInfo>>,
    scan_interval: Duration,
}

impl SentinelSettings {
    /// The sentinels at `sentinels`, asked for `master_name`, every second
    /// by default.
    pub fn new(master_name: &str, sentinels: Vec<RedisResult<ConnectionInfo>>) -> Self {
        SentinelSettings {
            master_name: master_name.to_owned(),
            sentinels,
            scan_interval: POLL_INTERVAL,
        }
    }

    /// How often the sentinels are asked (checked by [`Self::locate`]).
    pub fn set_scan_interval(&mut self, interval: Duration) {
        self.scan_interval = interval;
    }
}

impl SentinelSettings {
    /// Checks the sentinel URLs (attaching TLS to the `rediss://` ones) and
    /// points `endpoint` at the master they name ([`Sentinels::locate`]).
    pub fn locate(
        self,
        tls: &EndpointSettings,
        endpoint: &Endpoint,
        timeouts: (Duration, Duration),
    ) -> Result<Sentinels> {
        let sentinels = self.prepare(tls)?;
        sentinels.locate(endpoint, timeouts)?;
        Ok(sentinels)
    }

    /// Checks the sentinel URLs, attaching TLS to the `rediss://` ones.
    fn prepare(self, tls: &EndpointSettings) -> Result<Sentinels> {
        if self.master_name.is_empty() {
            return Err(Error::invalid("the Sentinel master name is empty"));
        }
        if !(Duration::from_millis(10)..=Duration::from_secs(24 * 3600))
            .contains(&self.scan_interval)
        {
            return Err(Error::invalid(format!(
                "the Sentinel scan interval must be between 10 ms and 24 h, got {:?}",
                self.scan_interval
            )));
        }
        let mut nodes = Vec::with_capacity(self.sentinels.len());
        for info in self.sentinels {
            let info =
                info.map_err(|e| Error::invalid(format!("invalid sentinel address: {e}")))?;
            // A sentinel has no databases: the URL's database is the master's.
            let settings = info.redis_settings().clone().set_db(0);
            nodes.push(SentinelNode {
                info: tls.apply(info.set_redis_settings(settings))?,
                con: Mutex::new(None),
            });
        }
        Ok(Sentinels {
            master_name: self.master_name,
            nodes,
            first: AtomicUsize::new(0),
            scan_interval: self.scan_interval,
        })
    }
}

/// The checked sentinel addresses and the master name.
pub(crate) struct Sentinels {
    master_name: String,
    nodes: Vec<SentinelNode>,
    /// The sentinel that answered last: asked first next time.
    first: AtomicUsize,
    scan_interval: Duration,
}

/// One sentinel, and the connection kept open to it between lookups (a
/// lookup a second must not cost a connect, or a TLS handshake, each time).
struct SentinelNode {
    info: ConnectionInfo,
    con: Mutex<Option<redis::Connection>>,
}

impl SentinelNode {
    /// The master address this sentinel gives for `name`, if it knows it:
    /// on the kept connection, or on a new one if there is none or it
    /// failed (the sentinel restarted, say).
    fn ask(
        &self,
        name: &str,
        timeouts: (Duration, Duration),
    ) -> Result<Option<(String, u16)>, Failure> {
        let kept = self.con.lock().take();
        let reused = kept.is_some();
        let mut con = match kept {
            Some(con) => con,
            None => connect_sentinel(&self.info, timeouts)?,
        };
        let answer = match get_master_addr(&mut con, name) {
            Err(_) if reused => {
                con = connect_sentinel(&self.info, timeouts)?;
                get_master_addr(&mut con, name)
            }
            other => other,
        };
        if answer.is_ok() {
            *self.con.lock() = Some(con);
        }
        answer
    }
}

impl Sentinels {
    /// Finds the master and points `endpoint` at it; whether it moved. One
    /// round trip per sentinel asked, starting with the one that answered
    /// last, on a connection kept from the previous lookup (a new one if
    /// needed); a connection and a `ROLE` more for a new address. Each
    /// connect and reply is bounded by `timeouts`.
    pub fn locate(&self, endpoint: &Endpoint, timeouts: (Duration, Duration)) -> Result<bool> {
        let mut failures = Vec::new();
        let mut certificates = 0;
        let first = self.first.load(Ordering::Relaxed);
        let order = (0..self.nodes.len()).map(|i| (first + i) % self.nodes.len());
        for (i, node) in order.filter_map(|i| Some((i, self.nodes.get(i)?))) {
            let answer = node.ask(&self.master_name, timeouts).and_then(|found| {
                let (host, port) = found.ok_or(Failure::from("does not know the master name"))?;
                // The current master needs no confirming: nothing would change.
                if endpoint.is_at(&host, port) {
                    return Ok((host, port));
                }
                confirm(&with_server(endpoint.info(), &host, port), timeouts).map_err(|e| {
                    Failure {
                        message: format!("named {host}:{port}, which {}", e.message),
                        ..e
                    }
                })?;
                Ok((host, port))
            });
            match answer {
                Ok((host, port)) => {
                    self.first.store(i, Ordering::Relaxed);
                    let moved = endpoint.move_to(&host, port);
                    if moved {
                        log::info!(
                            "redisson-lock: Sentinel master `{}` is {host}:{port}",
                            self.master_name
                        );
                    }
                    return Ok(moved);
                }
                Err(e) => {
                    certificates += usize::from(e.certificate);
                    failures.push(format!("sentinel {}: {}", node.info.addr(), e.message));
                }
            }
        }
        // Every sentinel refused over a TLS certificate: a configuration
        // error, not an outage.
        if certificates > 0 && certificates == failures.len() {
            return Err(Error::TlsCertificate {
                server: format!("the sentinels of `{}`", self.master_name),
                reason: failures.join("; "),
            });
        }
        Err(Error::Unavailable {
            reason: format!(
                "no sentinel named a master for `{}`: {}",
                self.master_name,
                if failures.is_empty() {
                    "no sentinel address given".to_owned()
                } else {
                    failures.join("; ")
                }
            ),
        })
    }

    /// Starts the thread that follows the master (see the module docs).
    pub fn watch(
        self,
        endpoint: Arc<Endpoint>,
        subscriber: SubscriberHandle,
        timeouts: (Duration, Duration),
    ) -> Result<SentinelWatch> {
        let (recheck, recheck_rx) = crossbeam_channel::bounded(1);
        endpoint.watch_with(recheck);
        let run = move |stop_rx| {
            let watcher = Watcher {
                sentinels: self,
                endpoint,
                subscriber,
                timeouts,
                stop_rx,
                recheck_rx,
            };
            watcher.run();
        };
        let thread = Stoppable::spawn("rlock-sentinel", "the Sentinel thread", run)?;
        Ok(SentinelWatch { thread })
    }
}

/// The client's Sentinel thread. Dropping this stops it;
/// [`SentinelWatch::stop`] also waits for it.
pub(crate) struct SentinelWatch {
    thread: Stoppable,
}

impl SentinelWatch {
    /// Stops the thread and waits for it (at most its current look-up,
    /// bounded by the timeouts).
    pub fn stop(&self) {
        self.thread.stop_and_join();
    }
}

struct Watcher {
    sentinels: Sentinels,
    endpoint: Arc<Endpoint>,
    subscriber: SubscriberHandle,
    timeouts: (Duration, Duration),
    stop_rx: Receiver<()>,
    recheck_rx: Receiver<()>,
}

impl Watcher {
    /// Until the client is dropped: waits for the scan interval or a
    /// "check now", looks the master up, and moves the client when it moved.
    /// (`build` has just looked it up: the first look-up waits too.)
    fn run(self) {
        let mut failing = false;
        let mut last = Instant::now();
        loop {
            let pause = RECHECK_MIN.saturating_sub(last.elapsed());
            select! {
                recv(self.stop_rx) -> _ => return,
                default(pause) => {}
            }
            select! {
                recv(self.stop_rx) -> _ => return,
                recv(self.recheck_rx) -> _ => {}
                default(self.sentinels.scan_interval) => {}
            }
            last = Instant::now();
            match self.sentinels.locate(&self.endpoint, self.timeouts) {
                Ok(true) => {
                    log::warn!(
                        "redisson-lock: Sentinel failover: the master of `{}` is now {}; \
                         moving every connection there",
                        self.sentinels.master_name,
                        self.endpoint.describe()
                    );
                    self.subscriber.reconnect();
                    failing = false;
                }
                Ok(false) => failing = false,
                Err(e) => {
                    if !failing {
                        log::warn!("redisson-lock: cannot look up the Sentinel master: {e}");
                    }
                    failing = true;
                }
            }
        }
    }
}

/// Why a sentinel gave no usable answer.
struct Failure {
    message: String,
    /// A TLS certificate was refused (see [`crate::net::tls::certificate_problem`]).
    certificate: bool,
}

impl From<String> for Failure {
    fn from(message: String) -> Self {
        Failure {
            message,
            certificate: false,
        }
    }
}

impl From<&str> for Failure {
    fn from(message: &str) -> Self {
        Failure::from(message.to_owned())
    }
}

/// One connection with the client's timeouts.
fn open(
    info: &ConnectionInfo,
    (connect, response): (Duration, Duration),
) -> Result<redis::Connection, Failure> {
    let con = redis::Client::open(info.clone())
        .and_then(|client| client.get_connection_with_timeout(connect))
        .map_err(|e| Failure {
            message: format!("cannot connect: {e}"),
            certificate: crate::net::tls::certificate_problem(&e).is_some(),
        })?;
    con.set_read_timeout(Some(response))
        .and_then(|()| con.set_write_timeout(Some(response)))
        .map_err(|e| Failure::from(e.to_string()))?;
    Ok(con)
}

/// A connection to the sentinel at `node`.
fn connect_sentinel(
    node: &ConnectionInfo,
    timeouts: (Duration, Duration),
) -> Result<redis::Connection, Failure> {
    match open(node, timeouts) {
        // The credentials are the master's, and this sentinel has none
        // (Redisson likewise uses the master's password for sentinels
        // unless told otherwise): connect without.
        Err(e) if e.message.contains("without any password configured") => {
            open(&without_credentials(node), timeouts)
        }
        other => other,
    }
}

/// `SENTINEL GET-MASTER-ADDR-BY-NAME name` on `con`.
fn get_master_addr(
    con: &mut redis::Connection,
    name: &str,
) -> Result<Option<(String, u16)>, Failure> {
    redis::cmd("SENTINEL")
        .arg("GET-MASTER-ADDR-BY-NAME")
        .arg(name)
        .query(con)
        .map_err(|e| Failure::from(e.to_string()))
}

/// `info` without a username or password.
fn without_credentials(info: &ConnectionInfo) -> ConnectionInfo {
    let settings = info.redis_settings();
    let bare = redis::RedisConnectionInfo::default()
        .set_protocol(settings.protocol())
        .set_db(settings.db());
    info.clone().set_redis_settings(bare)
}

/// Whether the server at `info` says it is a master.
fn confirm(info: &ConnectionInfo, timeouts: (Duration, Duration)) -> Result<(), Failure> {
    let mut con = open(info, timeouts)?;
    let role: Value = redis::cmd("ROLE")
        .query(&mut con)
        .map_err(|e| Failure::from(format!("answered ROLE with {e}")))?;
    match role {
        Value::Array(items) if matches!(items.first(), Some(Value::BulkString(r)) if r == b"master") => {
            Ok(())
        }
        _ => Err(Failure::from("is not a master (ROLE)")),
    }
}
