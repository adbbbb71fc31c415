//! The client from the connection options, and the tool's own failures as
//! sysexits codes.

use std::time::Duration;

use redisson_lock::{Client, ClientBuilder, Error};

use crate::args::ConnArgs;

/// sysexits(3): the command was used incorrectly.
pub const EX_USAGE: u8 = 64;
/// sysexits(3): Redis is unreachable (or answered an error).
pub const EX_UNAVAILABLE: u8 = 69;
/// sysexits(3): an internal error (a reply the tool cannot read).
pub const EX_SOFTWARE: u8 = 70;
/// sysexits(3): refused by Redis's authentication or ACL.
pub const EX_NOPERM: u8 = 77;
/// sysexits(3): the configuration is unusable (a URL, a certificate file).
pub const EX_CONFIG: u8 = 78;

/// A failure of the tool itself: a message for stderr and an exit code.
#[derive(Debug)]
pub struct Failure {
    /// What went wrong, for stderr.
    pub message: String,
    /// The exit code.
    pub code: u8,
}

impl Failure {
    /// A failure with this code.
    pub fn new(code: u8, message: impl Into<String>) -> Failure {
        Failure {
            message: message.into(),
            code,
        }
    }
}

impl From<Error> for Failure {
    fn from(error: Error) -> Failure {
        let code = exit_code(&error);
        Failure::new(code, error.to_string())
    }
}

/// The sysexits code for a library error.
pub fn exit_code(error: &Error) -> u8 {
    match error {
        Error::Redis(e)
            if e.kind() == redisson_lock::redis::ErrorKind::AuthenticationFailed
                || matches!(e.code(), Some("WRONGPASS" | "NOAUTH" | "NOPERM"))
                // A server with a password closes an unauthenticated client
                // that sends a large command (a script) with this.
                || e.to_string().contains("unauthenticated") =>
        {
            EX_NOPERM
        }
        Error::Redis(e) if e.kind() == redisson_lock::redis::ErrorKind::InvalidClientConfig => {
            EX_CONFIG
        }
        Error::InvalidArgument(_) | Error::TlsCertificate { .. } => EX_CONFIG,
        Error::UnexpectedReply(_) => EX_SOFTWARE,
        _ => EX_UNAVAILABLE,
    }
}

/// The URLs to use: `--url` (or `REDISSON_LOCK_URL`, read by clap), else
/// `REDIS_URL`, else the local default.
pub fn urls(conn: &ConnArgs) -> Vec<String> {
    if !conn.url.is_empty() {
        return conn.url.clone();
    }
    match std::env::var("REDIS_URL") {
        Ok(value) if !value.trim().is_empty() => value
            .split(',')
            .map(|url| url.trim().to_owned())
            .filter(|url| !url.is_empty())
            .collect(),
        _ => vec!["redis://127.0.0.1:6379".to_owned()],
    }
}

/// Builds the client: single server, cluster (`--cluster`) or Sentinel
/// (`--sentinel`), with TLS files and timeouts, and the watchdog timeout
/// `lease` when given.
pub fn client(conn: &ConnArgs, lease: Option<Duration>) -> Result<Client, Failure> {
    let urls = urls(conn);
    let mut builder: ClientBuilder = if let Some(master) = &conn.sentinel {
        Client::sentinel_builder(master, urls.iter().map(String::as_str))
    } else if conn.cluster {
        Client::cluster_builder(urls.iter().map(String::as_str))
    } else {
        if urls.len() > 1 {
            return Err(Failure::new(
                EX_USAGE,
                "several URLs need --cluster or --sentinel MASTER",
            ));
        }
        Client::builder(urls[0].as_str())
    };
    if let Some(timeout) = conn.connect_timeout {
        builder = builder.connect_timeout(timeout);
    }
    if let Some(timeout) = conn.response_timeout {
        builder = builder.response_timeout(timeout);
    }
    if let Some(lease) = lease {
        builder = builder.watchdog_timeout(lease);
    }
    builder = tls(builder, conn)?;
    Ok(builder.build()?)
}

#[cfg(feature = "tls-rustls")]
fn tls(mut builder: ClientBuilder, conn: &ConnArgs) -> Result<ClientBuilder, Failure> {
    let read = |path: &std::path::Path| {
        std::fs::read(path)
            .map_err(|e| Failure::new(EX_CONFIG, format!("cannot read {}: {e}", path.display())))
    };
    if let Some(ca) = &conn.tls_ca {
        builder = builder.tls_root_ca_pem(read(ca)?);
    }
    if let (Some(cert), Some(key)) = (&conn.tls_cert, &conn.tls_key) {
        builder = builder.tls_client_cert_pem(read(cert)?, read(key)?);
    }
    Ok(builder)
}

#[cfg(not(feature = "tls-rustls"))]
fn tls(builder: ClientBuilder, conn: &ConnArgs) -> Result<ClientBuilder, Failure> {
    if conn.tls_ca.is_some() || conn.tls_cert.is_some() {
        return Err(Failure::new(
            EX_CONFIG,
            "this build has no TLS support (feature tls-rustls)",
        ));
    }
    Ok(builder)
}
