//! `rediss://` in every topology (feature `tls-rustls`): a Redis Cluster
//! and a Sentinel setup whose nodes have a TLS port only (`port 0`; they
//! replicate, gossip and monitor over TLS too), each started once for this
//! binary with a CA made by openssl. Every lock type is taken, refused to a
//! second client and handed to that client's waiter, woken by the unlock
//! message through its subscriber (the spin lock: by its backoff): on every
//! cluster master with sharded and with classic pub/sub, and on the master
//! the sentinels name. So are Redisson's synchronizers (a semaphore, a
//! permit-expirable semaphore, a count-down latch): one client's release
//! or count-down wakes the other client's waiter, through its subscriber,
//! in both topologies. As there is no plain port, every connection of the
//! clients is TLS, the subscribers' included; the tests check the
//! subscribers' connections on the node serving the lock all the same
//! (`CLIENT LIST TYPE pubsub`, through TLS).
#![cfg(feature = "tls-rustls")]

mod support;

use std::sync::{LazyLock, Mutex, MutexGuard};
use std::time::Duration;

use redisson_lock::{Client, ShardedSubscription};
use support::every_kind::{Wake, every_kind};
use support::every_synchronizer::{KINDS as SYNCHRONIZERS, Sides, every_synchronizer};
use support::tls_topo::{MASTER_NAME, TlsCluster, TlsSentinels, pubsub_clients, tls_con};

static CLUSTER: LazyLock<TlsCluster> = LazyLock::new(TlsCluster::start);
static SENTINELS: LazyLock<TlsSentinels> = LazyLock::new(TlsSentinels::start);

/// The cluster, flushed, with the lock that serializes the tests using it.
fn cluster() -> (&'static TlsCluster, MutexGuard<'static, ()>) {
    static SERIAL: Mutex<()> = Mutex::new(());
    flushed(&CLUSTER, &SERIAL, TlsCluster::flush)
}

/// `setup` (started on first use), flushed, once the tests using it before
/// are done: `serial` held.
fn flushed<T>(
    setup: &'static LazyLock<T>,
    serial: &'static Mutex<()>,
    flush: fn(&T),
) -> (&'static T, MutexGuard<'static, ()>) {
    let serial = serial.lock().unwrap_or_else(|e| e.into_inner());
    let setup = &**setup;
    flush(setup);
    (setup, serial)
}

/// The value of `field=` in a `CLIENT LIST` line.
fn field<'a>(line: &'a str, field: &str) -> Option<&'a str> {
    line.split_whitespace()
        .find_map(|pair| pair.strip_prefix(field)?.strip_prefix('='))
}

/// While a waiter for `name` waits: the lock is on `master` (and, replica
/// sync being on, on `replica`), and for a message-woken type `master` has
/// a subscriber connection, on its TLS port, subscribed with the flavour's
/// command (`ssub` for sharded pub/sub, `sub` for classic).
fn check_served(
    certs: &support::tls::Certs,
    master: u16,
    replica: Option<u16>,
    name: &str,
    wake: Wake,
    sharded: bool,
) {
    let exists: i64 = redis::cmd("EXISTS")
        .arg(name)
        .query(&mut tls_con(certs, master).expect("TLS connection"))
        .expect("EXISTS");
    assert_eq!(exists, 1, "{name} is held on master {master}");
    if let Some(replica) = replica {
        let mut con = tls_con(certs, replica).expect("TLS connection");
        // Harmless outside a cluster: READONLY is refused there, EXISTS not.
        let _: redis::RedisResult<()> = redis::cmd("READONLY").query(&mut con);
        let exists: i64 = redis::cmd("EXISTS")
            .arg(name)
            .query(&mut con)
            .expect("EXISTS");
        assert_eq!(exists, 1, "{name} was replicated to {replica} over TLS");
    }
    if wake == Wake::Spin {
        return;
    }
    let flavour = if sharded { "ssub" } else { "sub" };
    let subscribed = |clients: &[String]| {
        clients
            .iter()
            .any(|line| field(line, flavour).is_some_and(|n| n != "0"))
    };
    // The client counts the waiter before its subscription is confirmed.
    let mut clients = Vec::new();
    support::eventually(Duration::from_secs(5), || {
        clients = pubsub_clients(certs, master);
        subscribed(&clients)
    });
    let on_tls_port = format!("127.0.0.1:{master}");
    for line in &clients {
        assert_eq!(
            field(line, "laddr"),
            Some(on_tls_port.as_str()),
            "a subscriber on the TLS port: {line}"
        );
    }
    assert!(
        subscribed(&clients),
        "{name}: a subscriber on master {master}, subscribed with {flavour}: {clients:?}"
    );
    let other = if sharded { "sub" } else { "ssub" };
    assert!(
        !clients
            .iter()
            .any(|line| field(line, other).is_some_and(|n| n != "0")),
        "{name}: one pub/sub flavour only, no {other}: {clients:?}"
    );
}

/// The Sentinel setup, flushed, with the lock that serializes the tests
/// using it.
fn sentinels() -> (&'static TlsSentinels, MutexGuard<'static, ()>) {
    static SERIAL: Mutex<()> = Mutex::new(());
    flushed(&SENTINELS, &SERIAL, TlsSentinels::flush)
}

fn cluster_client(cluster: &TlsCluster, mode: ShardedSubscription) -> Client {
    Client::cluster_builder(cluster.urls())
        .tls_root_ca_pem(cluster.certs.pem("ca.crt"))
        .sharded_subscription(mode)
        .connect_timeout(Duration::from_secs(5))
        .build()
        .expect("build a TLS cluster client")
}

fn sentinel_client(setup: &TlsSentinels) -> Client {
    Client::sentinel_builder(MASTER_NAME, setup.sentinel_urls())
        .tls_root_ca_pem(setup.certs.pem("ca.crt"))
        .connect_timeout(Duration::from_secs(5))
        .build()
        .expect("build a Sentinel client over TLS")
}

/// Every type on a name served by each master, with two clients in `mode`.
fn every_kind_on_every_master(mode: ShardedSubscription, sharded: bool) {
    let (cluster, _serial) = cluster();
    let slots = cluster.slots();
    // With `tls-cluster yes` the nodes announce their TLS ports: the only
    // ones they have, and the ones the client must connect to.
    for (start, end, master, replicas) in &slots {
        for port in std::iter::once(master).chain(replicas) {
            assert!(
                cluster.ports.contains(port),
                "slots {start}-{end}: {port} is not a TLS port"
            );
        }
    }
    assert_eq!(cluster.masters().len(), 3, "three masters: {slots:?}");
    let holder = cluster_client(cluster, mode);
    let waiter = cluster_client(cluster, mode);
    let prefix = if sharded {
        "tls-sharded"
    } else {
        "tls-classic"
    };
    on_every_master(cluster, prefix, |master, replica, name_for| {
        let handoffs = every_kind(&holder, &waiter, name_for, &|name, wake| {
            check_served(&cluster.certs, master, replica, name, wake, sharded)
        });
        assert_eq!(handoffs.len(), support::every_kind::KINDS.len());
    });
}

/// `run` for each master of `cluster`, with its first replica and the
/// name, made from `prefix` and a kind, of a key that master serves.
fn on_every_master(
    cluster: &TlsCluster,
    prefix: &str,
    run: impl Fn(u16, Option<u16>, &dyn Fn(&str) -> String),
) {
    let slots = cluster.slots();
    for master in cluster.masters() {
        let replica = slots
            .iter()
            .find(|r| r.2 == master)
            .and_then(|r| r.3.first().copied());
        let name_for = |kind: &str| {
            (0..10_000)
                .map(|i| format!("{prefix}-{kind}-{i}"))
                .find(|name| cluster.owner(name) == master)
                .expect("a name on every master")
        };
        run(master, replica, &name_for);
    }
}

/// Every synchronizer on a name served by each master, with two clients
/// in `mode`: the waiter's subscription on that master (`ssub` or `sub`),
/// the semaphores' state on its replica too (their writes wait for it; the
/// latch's, like Redisson's, do not).
fn every_synchronizer_on_every_master(mode: ShardedSubscription, sharded: bool) {
    let (cluster, _serial) = cluster();
    let holder = cluster_client(cluster, mode);
    let waiter = cluster_client(cluster, mode);
    let prefix = if sharded { "tls-ssync" } else { "tls-csync" };
    on_every_master(cluster, prefix, |master, replica, name_for| {
        let handoffs = every_synchronizer(&Sides {
            holder: &holder,
            waiter: &waiter,
            name_for,
            con_for: &|name| tls_con(&cluster.certs, cluster.owner(name)).expect("TLS connection"),
            while_waiting: &|kind, name, _| {
                let replica = replica.filter(|_| kind != "latch");
                check_served(
                    &cluster.certs,
                    master,
                    replica,
                    name,
                    Wake::Message,
                    sharded,
                );
            },
        });
        assert_eq!(handoffs.len(), SYNCHRONIZERS.len());
    });
}

#[test]
fn every_synchronizer_on_every_master_of_a_tls_cluster_with_sharded_and_classic_pubsub() {
    every_synchronizer_on_every_master(ShardedSubscription::Auto, true);
    every_synchronizer_on_every_master(ShardedSubscription::Off, false);
}

#[test]
fn every_lock_type_on_every_master_of_a_tls_cluster_with_sharded_and_classic_pubsub() {
    // Redis 7: `Auto` probes `PUBSUB SHARDNUMSUB 0` (over TLS) and picks
    // sharded pub/sub; `check_served` sees the waiters' `SSUBSCRIBE`.
    every_kind_on_every_master(ShardedSubscription::Auto, true);
    every_kind_on_every_master(ShardedSubscription::Off, false);
}

#[test]
fn every_lock_type_through_tls_sentinels() {
    let (setup, _serial) = sentinels();
    let (holder, waiter) = (sentinel_client(setup), sentinel_client(setup));
    let (master, replica) = (setup.master(), setup.data_ports[1]);
    let name_for = |kind: &str| format!("tls-sentinel-{kind}");
    let handoffs = every_kind(&holder, &waiter, &name_for, &|name, wake| {
        check_served(&setup.certs, master, Some(replica), name, wake, false)
    });
    assert_eq!(handoffs.len(), support::every_kind::KINDS.len());
}

#[test]
fn every_synchronizer_through_tls_sentinels() {
    let (setup, _serial) = sentinels();
    let (holder, waiter) = (sentinel_client(setup), sentinel_client(setup));
    let (master, replica) = (setup.master(), setup.data_ports[1]);
    let handoffs = every_synchronizer(&Sides {
        holder: &holder,
        waiter: &waiter,
        name_for: &|kind| format!("tls-sentinel-sync-{kind}"),
        con_for: &|_| tls_con(&setup.certs, master).expect("TLS connection"),
        while_waiting: &|kind, name, _| {
            let replica = Some(replica).filter(|_| kind != "latch");
            check_served(&setup.certs, master, replica, name, Wake::Message, false);
        },
    });
    assert_eq!(handoffs.len(), SYNCHRONIZERS.len());
}
