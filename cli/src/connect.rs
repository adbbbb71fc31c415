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
    builder.build().map_err(|error| match &error {
        // redis-rs says only that a URL "did not parse": say what is wrong.
        Error::InvalidArgument(_) => match urls.iter().find_map(|url| url_problem(url)) {
            Some(problem) => Failure::new(EX_CONFIG, format!("invalid Redis URL: {problem}")),
            None => Failure::from(error),
        },
        _ => Failure::from(error),
    })
}

/// What is wrong with `url`, if this can tell: the scheme, the host, the
/// port or the database number. Never quotes the URL's credentials.
pub fn url_problem(url: &str) -> Option<String> {
    const FORMS: &str =
        "write redis://[[user]:password@]host[:port][/db], rediss://... or unix:///path";
    let url = url.trim();
    let Some((scheme, rest)) = url.split_once("://") else {
        return Some(format!("no scheme (`redis://`): {FORMS}"));
    };
    let scheme = scheme.to_ascii_lowercase();
    match scheme.as_str() {
        "unix" | "redis+unix" | "valkey+unix" => {
            return rest
                .is_empty()
                .then(|| format!("no socket path after `{scheme}://`: {FORMS}"));
        }
        "redis" | "rediss" | "valkey" | "valkeys" => {}
        other => {
            return Some(format!(
                "scheme `{other}` is not redis, rediss, valkey, valkeys or unix: {FORMS}"
            ));
        }
    }
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(end);
    if authority.matches('@').count() > 1 {
        return Some("more than one `@`: percent-encode the password's (`%40`)".into());
    }
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, hp)| hp);
    let (host, port) = if let Some(v6) = host_port.strip_prefix('[') {
        match v6.split_once(']') {
            Some((host, tail)) => (host, tail.strip_prefix(':')),
            None => return Some("an IPv6 address without its closing `]`".into()),
        }
    } else {
        match host_port.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (host_port, None),
        }
    };
    if host.is_empty() {
        return Some(format!("no host: {FORMS}"));
    }
    if let Some(port) = port
        && !port.is_empty()
        && !port.parse::<u16>().is_ok_and(|p| p > 0)
    {
        return Some(format!("port `{port}` is not a number from 1 to 65535"));
    }
    let db = path.split(['?', '#']).next().unwrap_or("");
    let db = db.strip_prefix('/').unwrap_or(db);
    if !db.is_empty() && db.parse::<u32>().is_err() {
        return Some(format!(
            "database `{db}` is not a number (the path is the database: redis://host:6379/0)"
        ));
    }
    None
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

#[cfg(test)]
mod tests {
    use super::url_problem;

    #[test]
    fn url_problems_name_the_part_that_is_wrong() {
        for good in [
            "redis://127.0.0.1:6379",
            "redis://:p%40ss@host/2",
            "rediss://user:pw@[::1]:6380/0?protocol=resp3",
            "unix:///run/redis.sock",
        ] {
            assert_eq!(url_problem(good), None, "{good}");
        }
        let says = |url: &str| url_problem(url).unwrap_or_default();
        assert!(says("host:6379").contains("no scheme"));
        assert!(says("http://h").contains("scheme `http`"));
        assert!(says("redis://h:0").contains("port `0`"));
        assert!(says("redis://h:6379/x").contains("database `x`"));
        assert!(says("redis://:a@b@h").contains("more than one `@`"));
        assert!(says("redis://:secret@").contains("no host"));
        assert!(!says("redis://:secret@h:99999").contains("secret"));
    }
}
