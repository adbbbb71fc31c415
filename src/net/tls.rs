//! TLS (`rediss://`, feature `tls-rustls`): the certificates a client is
//! built with, applied to redis-rs's connections (Sentinel nodes) and to
//! the sockets the crate owns (command connections, pooled or multiplexed,
//! the watchdog's, the subscriber's), which this module wraps in a rustls
//! session. Without the feature only the (empty) settings type
//! exists, and every connection is the plain socket it always was.

use redis::ConnectionInfo;

use crate::error::{Error, Result};
use crate::net::endpoint::Endpoint;

/// What every endpoint of one client is made with: the TLS material given
/// to the builder, and the name its connections give themselves.
#[derive(Clone, Default)]
pub(crate) struct EndpointSettings {
    /// `CLIENT SETNAME` of every command connection (see
    /// [`connection_name`]).
    pub name: Option<std::sync::Arc<str>>,
    #[cfg(feature = "tls-rustls")]
    root_ca_pem: Option<Vec<u8>>,
    #[cfg(feature = "tls-rustls")]
    client_pem: Option<(Vec<u8>, Vec<u8>)>,
}

impl EndpointSettings {
    /// Trusts the CAs in `pem` instead of the system's (checked when used).
    #[cfg(feature = "tls-rustls")]
    pub fn set_root_ca_pem(&mut self, pem: Vec<u8>) {
        self.root_ca_pem = Some(pem);
    }

    /// Presents this client certificate chain and key (checked when used).
    #[cfg(feature = "tls-rustls")]
    pub fn set_client_cert_pem(&mut self, cert_pem: Vec<u8>, key_pem: Vec<u8>) {
        self.client_pem = Some((cert_pem, key_pem));
    }
}

impl EndpointSettings {
    /// Whether a certificate was given (which needs a `rediss://` URL).
    fn is_empty(&self) -> bool {
        #[cfg(feature = "tls-rustls")]
        {
            self.root_ca_pem.is_none() && self.client_pem.is_none()
        }
        #[cfg(not(feature = "tls-rustls"))]
        {
            true
        }
    }

    /// `info` with the certificates attached when it is `rediss://`;
    /// unchanged otherwise. For Sentinel nodes.
    pub fn apply(&self, info: ConnectionInfo) -> Result<ConnectionInfo> {
        #[cfg(feature = "tls-rustls")]
        if let redis::ConnectionAddr::TcpTls { insecure, .. } = info.addr() {
            if *insecure {
                return Err(Error::invalid(
                    "insecure TLS (`#insecure`) is not supported: give the server's CA with \
                     `tls_root_ca_pem` instead",
                ));
            }
            ensure_provider();
            if self.is_empty() {
                return Ok(info);
            }
            let certificates = redis::TlsCertificates {
                client_tls: self.client_pem.clone().map(|(client_cert, client_key)| {
                    redis::ClientTlsConfig {
                        client_cert,
                        client_key,
                    }
                }),
                root_cert: self.root_ca_pem.clone(),
            };
            return redis::Client::build_with_tls(info, certificates)
                .map(|client| client.get_connection_info().clone())
                .map_err(|e| Error::invalid(format!("unusable TLS certificates: {e}")));
        }
        Ok(info)
    }

    /// The endpoint for `info`, with TLS prepared for every connection when
    /// it is `rediss://`. Fails with [`Error::InvalidArgument`] for
    /// certificates given with a `redis://` URL or that cannot be parsed.
    pub fn endpoint(&self, info: ConnectionInfo) -> Result<Endpoint> {
        let tls_url = matches!(info.addr(), redis::ConnectionAddr::TcpTls { .. });
        if !tls_url && !self.is_empty() {
            return Err(Error::invalid(
                "TLS certificates were given, but the URL is not `rediss://`",
            ));
        }
        let info = self.apply(info)?;
        let mut endpoint = Endpoint::new(info);
        endpoint.name.clone_from(&self.name);
        #[cfg(feature = "tls-rustls")]
        if tls_url {
            endpoint.tls = Some(self.subscriber_config()?);
        }
        Ok(endpoint)
    }
}

/// The name a client's connections give themselves (`CLIENT SETNAME`):
/// `redisson-lock/<client id>/<process id>`, then `/<application>` when the
/// builder was given one; what `Client::identify_holders` reads back from
/// `CLIENT LIST`.
pub(crate) fn connection_name(client_id: &str, application: Option<&str>) -> String {
    let mut name = format!("redisson-lock/{client_id}/{}", std::process::id());
    if let Some(application) = application {
        name.push('/');
        name.push_str(application);
    }
    name
}

#[cfg(feature = "tls-rustls")]
pub(crate) use socket::TlsSocket;

/// The certificate problem behind a failed connect, if that is what it was:
/// a server certificate rustls refused (unknown issuer, wrong host name,
/// expired, ...) or a certificate alert from the server (it refused the
/// client's certificate or its absence). Walks `error`'s sources, looking
/// into redis-rs's and `std::io`'s wrappers.
#[cfg(feature = "tls-rustls")]
pub(crate) fn certificate_problem(error: &(dyn std::error::Error + 'static)) -> Option<String> {
    use rustls::AlertDescription as Alert;
    let found = find_rustls_error(error, 0)?;
    let refused = match found {
        rustls::Error::InvalidCertificate(_)
        | rustls::Error::NoCertificatesPresented
        | rustls::Error::InvalidCertRevocationList(_) => true,
        rustls::Error::AlertReceived(alert) => matches!(
            alert,
            Alert::BadCertificate
                | Alert::UnsupportedCertificate
                | Alert::CertificateRevoked
                | Alert::CertificateExpired
                | Alert::CertificateUnknown
                | Alert::UnknownCA
                | Alert::CertificateRequired
        ),
        _ => false,
    };
    refused.then(|| found.to_string())
}

/// Without the feature there is no TLS, so no certificate problem.
#[cfg(not(feature = "tls-rustls"))]
pub(crate) fn certificate_problem(_error: &(dyn std::error::Error + 'static)) -> Option<String> {
    None
}

/// The `rustls::Error` in `error`'s chain. redis-rs keeps its cause in an
/// `Arc<dyn Error>` whose `source()` skips the cause itself, and an
/// `io::Error` does the same with its payload, so both are opened by hand.
#[cfg(feature = "tls-rustls")]
fn find_rustls_error<'a>(
    error: &'a (dyn std::error::Error + 'static),
    depth: usize,
) -> Option<&'a rustls::Error> {
    type SharedError = std::sync::Arc<dyn std::error::Error + Send + Sync>;
    if depth > 16 {
        return None;
    }
    if let Some(found) = error.downcast_ref::<rustls::Error>() {
        return Some(found);
    }
    let inner: Option<&'a (dyn std::error::Error + 'static)> =
        if let Some(shared) = error.downcast_ref::<SharedError>() {
            Some(&**shared)
        } else if let Some(io) = error.downcast_ref::<std::io::Error>() {
            io.get_ref().map(|payload| payload as _)
        } else {
            None
        };
    inner
        .and_then(|inner| find_rustls_error(inner, depth + 1))
        .or_else(|| find_rustls_error(error.source()?, depth + 1))
}

#[cfg(feature = "tls-rustls")]
use rustls::pki_types::pem::PemObject;

/// Installs rustls's `ring` provider as the process default unless the
/// application installed one (a lost race with another installer is fine:
/// some provider is installed either way).
#[cfg(feature = "tls-rustls")]
fn ensure_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}

#[cfg(feature = "tls-rustls")]
impl EndpointSettings {
    /// The rustls configuration of the crate's own sockets: the same roots
    /// and client certificate as redis-rs's connections.
    fn subscriber_config(&self) -> Result<std::sync::Arc<rustls::ClientConfig>> {
        use rustls::pki_types::{CertificateDer, PrivateKeyDer};
        let invalid = |what: &str, e: &dyn std::fmt::Display| {
            Error::invalid(format!("unusable TLS {what}: {e}"))
        };
        let mut roots = rustls::RootCertStore::empty();
        match &self.root_ca_pem {
            Some(pem) => {
                for cert in CertificateDer::pem_slice_iter(pem) {
                    let cert = cert.map_err(|e| invalid("root CA PEM", &e))?;
                    roots.add(cert).map_err(|e| invalid("root CA", &e))?;
                }
                if roots.is_empty() {
                    return Err(Error::invalid("the TLS root CA PEM holds no certificate"));
                }
            }
            None => {
                let found = rustls_native_certs::load_native_certs();
                let _ = roots.add_parsable_certificates(found.certs);
            }
        }
        let provider = rustls::crypto::CryptoProvider::get_default()
            .cloned()
            .unwrap_or_else(|| std::sync::Arc::new(rustls::crypto::ring::default_provider()));
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| invalid("configuration", &e))?
            .with_root_certificates(roots);
        let config = match &self.client_pem {
            Some((cert_pem, key_pem)) => {
                let chain = CertificateDer::pem_slice_iter(cert_pem)
                    .collect::<std::result::Result<Vec<_>, _>>()
                    .map_err(|e| invalid("client certificate PEM", &e))?;
                let key = PrivateKeyDer::from_pem_slice(key_pem)
                    .map_err(|e| invalid("client key PEM", &e))?;
                builder
                    .with_client_auth_cert(chain, key)
                    .map_err(|e| invalid("client certificate", &e))?
            }
            None => builder.with_no_client_auth(),
        };
        Ok(std::sync::Arc::new(config))
    }
}

#[cfg(feature = "tls-rustls")]
mod socket;
