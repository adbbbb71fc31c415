//! TLS (`rediss://`, feature `tls-rustls`) against a TLS-only server with a
//! CA made by the test: every connection of the client goes through TLS
//! (the server has no plain TCP port), the subscriber's included, so a
//! waiter is woken by the unlock message, for every lock type, and by the
//! release or count-down for every synchronizer; mutual TLS with a client
//! certificate; a server certificate the client cannot verify (another
//! CA, another host name) or a missing client certificate is refused at once
//! with an error that is not transient (a configuration error), while a
//! server that refuses the connection stays `Unavailable`.
#![cfg(feature = "tls-rustls")]

mod support;

use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use redisson_lock::{Client, Error};
use support::every_kind::{Wake, every_kind};
use support::every_synchronizer::{KINDS, Sides, every_synchronizer};
use support::tls::{Certs, TlsServer};

fn tls_client(
    server: &TlsServer,
    certs: &Certs,
    client_cert: bool,
) -> redisson_lock::Result<Client> {
    let mut builder = Client::builder(server.url())
        .tls_root_ca_pem(certs.pem("ca.crt"))
        .connect_timeout(Duration::from_secs(5));
    if client_cert {
        builder = builder.tls_client_cert_pem(certs.pem("client.crt"), certs.pem("client.key"));
    }
    builder.build()
}

fn pubsub_clients(server: &TlsServer) -> usize {
    let list: String = redis::cmd("CLIENT")
        .arg("LIST")
        .arg("TYPE")
        .arg("pubsub")
        .query(&mut server.con())
        .expect("CLIENT LIST");
    list.lines().filter(|line| !line.trim().is_empty()).count()
}

/// One client holds `name`, another's thread waits for it; the release must
/// reach the waiter through its (TLS) subscriber well before the lease ends.
fn assert_contend_and_wake(server: &TlsServer, holder: &Client, waiter: &Client, name: &str) {
    let guard = holder.lock(name).lock().expect("lock over TLS");
    assert_eq!(holder.lock(name).hold_count().expect("hold count"), 1);
    let fields: Vec<String> = redis::cmd("HKEYS")
        .arg(name)
        .query(&mut server.con())
        .expect("HKEYS");
    assert_eq!(
        fields,
        vec![holder.owner_field()],
        "the lock hash is in Redis"
    );

    let (tx, rx) = mpsc::channel();
    let lock = waiter.lock(name);
    let handle = thread::spawn(move || {
        let guard = lock.lock().expect("the waiter gets the lock");
        tx.send(Instant::now()).expect("send");
        drop(guard);
    });
    assert!(
        support::eventually(Duration::from_secs(5), || waiter.diagnostics().waiters == 1
            && pubsub_clients(server) == 1),
        "the waiter subscribed over TLS"
    );
    assert!(
        waiter.lock(name).try_lock().expect("try_lock").is_none(),
        "the lock excludes the other client"
    );
    thread::sleep(Duration::from_millis(100));
    let released = Instant::now();
    guard.unlock().expect("unlock over TLS");
    let woken = rx
        .recv_timeout(Duration::from_secs(5))
        .expect("the waiter was woken");
    let handoff = woken.duration_since(released);
    eprintln!("TLS handoff {handoff:?}");
    assert!(
        handoff < Duration::from_millis(200),
        "woken by the unlock message, not by polling: {handoff:?}"
    );
    handle.join().expect("waiter thread");
}

#[test]
fn lock_contend_and_wake_up_over_tls() {
    let certs = Certs::make();
    let server = TlsServer::start(&certs, false);
    let holder = tls_client(&server, &certs, false).expect("build a TLS client");
    let waiter = tls_client(&server, &certs, false).expect("build a TLS client");
    assert_contend_and_wake(&server, &holder, &waiter, "tls-lock");
    // And once more on the same subscriber connection.
    assert_contend_and_wake(&server, &waiter, &holder, "tls-lock");
}

/// Every lock type over TLS: taken, refused to another client, handed to
/// that client's waiter by the unlock message through its TLS subscriber
/// (the spin lock: within its backoff).
#[test]
fn every_lock_type_over_tls() {
    let certs = Certs::make();
    let server = TlsServer::start(&certs, false);
    let holder = tls_client(&server, &certs, false).expect("build a TLS client");
    let waiter = tls_client(&server, &certs, false).expect("build a TLS client");
    let name_for = |kind: &str| format!("tls-every-{kind}");
    let handoffs = every_kind(&holder, &waiter, &name_for, &|name, wake| {
        let exists: bool = redis::cmd("EXISTS")
            .arg(name)
            .query(&mut server.con())
            .expect("EXISTS");
        assert!(exists, "{name} is held on the server");
        if wake == Wake::Message {
            assert!(
                support::eventually(Duration::from_secs(5), || pubsub_clients(&server) >= 1),
                "{name}: the waiter subscribed (over TLS: the only TCP port)"
            );
        }
    });
    assert_eq!(handoffs.len(), support::every_kind::KINDS.len());
}

/// Redisson's synchronizers over TLS: a semaphore's, a permit-expirable
/// semaphore's and a count-down latch's waiter on one client is woken by
/// the other client's release (count-down) through its TLS subscriber.
#[test]
fn every_synchronizer_over_tls() {
    let certs = Certs::make();
    let server = TlsServer::start(&certs, false);
    let holder = tls_client(&server, &certs, false).expect("build a TLS client");
    let waiter = tls_client(&server, &certs, false).expect("build a TLS client");
    let handoffs = every_synchronizer(&Sides {
        holder: &holder,
        waiter: &waiter,
        name_for: &|kind| format!("tls-sync-{kind}"),
        con_for: &|_| server.con(),
        while_waiting: &|_, name, channel| {
            let exists: bool = redis::cmd("EXISTS")
                .arg(name)
                .query(&mut server.con())
                .expect("EXISTS");
            assert!(exists, "{name} is on the server");
            assert!(
                support::eventually(Duration::from_secs(5), || {
                    let (_, subscribers): (String, i64) = redis::cmd("PUBSUB")
                        .arg("NUMSUB")
                        .arg(channel)
                        .query(&mut server.con())
                        .expect("PUBSUB NUMSUB");
                    subscribers == 1 && pubsub_clients(&server) >= 1
                }),
                "{name}: the waiter subscribed to {channel} (over TLS: the only TCP port)"
            );
        },
    });
    assert_eq!(handoffs.len(), KINDS.len());
}

#[test]
fn mutual_tls_with_a_client_certificate() {
    let certs = Certs::make();
    let server = TlsServer::start(&certs, true);
    let holder = tls_client(&server, &certs, true).expect("build an mTLS client");
    let waiter = tls_client(&server, &certs, true).expect("build an mTLS client");
    assert_contend_and_wake(&server, &holder, &waiter, "mtls-lock");

    // Without the client certificate the server turns the client away.
    let started = Instant::now();
    let refused = tls_client(&server, &certs, false);
    let error = refused.expect_err("no client certificate, no connection");
    eprintln!("no client certificate: {error}");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "refused at once"
    );
    assert!(!error.is_transient(), "a configuration error: {error:?}");
}

/// Builds a client for `url` trusting `ca` and asserts it fails at once
/// with a non-transient [`Error::TlsCertificate`] whose message contains
/// `expected` (and names the certificate).
fn assert_certificate_refused(url: &str, certs: &Certs, ca: &str, expected: &str) {
    let started = Instant::now();
    let result = Client::builder(url)
        .tls_root_ca_pem(certs.pem(ca))
        .connect_timeout(Duration::from_secs(5))
        .build();
    let elapsed = started.elapsed();
    let error = result.expect_err("a server certificate the client cannot verify");
    let message = error.to_string();
    eprintln!("{url} with {ca} after {elapsed:?}: {message}");
    assert!(elapsed < Duration::from_secs(2), "fails fast: {elapsed:?}");
    assert!(matches!(error, Error::TlsCertificate { .. }), "{error:?}");
    assert!(!error.is_transient(), "a configuration error: {error:?}");
    assert!(
        message.to_lowercase().contains("certificate") && message.contains(expected),
        "the error names the certificate problem ({expected}): {message}"
    );
}

#[test]
fn a_server_signed_by_another_ca_is_refused_fast_and_clearly() {
    let certs = Certs::make();
    let server = TlsServer::start(&certs, false);
    assert_certificate_refused(&server.url(), &certs, "other-ca.crt", "UnknownIssuer");
    // The same server with the right CA is fine.
    tls_client(&server, &certs, false).expect("the right CA");
}

#[test]
fn a_server_certificate_for_another_host_is_refused_fast_and_clearly() {
    let certs = Certs::make();
    let server = TlsServer::start_as(&certs, "wrong-name", false);
    assert_certificate_refused(&server.url(), &certs, "ca.crt", "not valid for name");
}

#[test]
fn sentinels_whose_certificate_cannot_be_verified_are_a_configuration_error() {
    let certs = Certs::make();
    // The handshake fails before any command, so a TLS server standing in
    // for the sentinels shows what a client makes of their certificates.
    let server = TlsServer::start(&certs, false);
    let error = Client::sentinel_builder("mymaster", [server.url(), server.url()])
        .tls_root_ca_pem(certs.pem("other-ca.crt"))
        .connect_timeout(Duration::from_secs(5))
        .build()
        .expect_err("sentinels with an unknown issuer");
    eprintln!("sentinels with another CA: {error}");
    assert!(matches!(error, Error::TlsCertificate { .. }), "{error:?}");
    assert!(!error.is_transient(), "{error:?}");
    assert!(error.to_string().contains("UnknownIssuer"), "{error}");
}

#[test]
fn a_refused_tls_connection_stays_unavailable() {
    let certs = Certs::make();
    // A port nobody listens on: bound, then closed.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port();
    let error = Client::builder(format!("rediss://127.0.0.1:{port}/"))
        .tls_root_ca_pem(certs.pem("ca.crt"))
        .connect_timeout(Duration::from_secs(5))
        .build()
        .expect_err("nobody listens");
    assert!(matches!(error, Error::Unavailable { .. }), "{error:?}");
    assert!(error.is_transient(), "{error:?}");
}

#[test]
fn certificates_need_a_rediss_url_and_a_parsable_pem() {
    let error = Client::builder("redis://127.0.0.1:1/")
        .tls_root_ca_pem(b"-----BEGIN CERTIFICATE-----\n".to_vec())
        .build()
        .expect_err("certificates with a plain URL");
    assert!(matches!(error, Error::InvalidArgument(_)), "{error:?}");
    let error = Client::builder("rediss://127.0.0.1:1/")
        .tls_root_ca_pem(b"not a pem".to_vec())
        .build()
        .expect_err("a PEM without certificates");
    assert!(matches!(error, Error::InvalidArgument(_)), "{error:?}");
}
