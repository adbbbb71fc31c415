//! The TLS knobs of [`ClientBuilder`] (feature `tls-rustls`); the
//! mechanism is `crate::net::tls`.

use crate::client::ClientBuilder;

#[cfg_attr(docsrs, doc(cfg(feature = "tls-rustls")))]
impl ClientBuilder {
    /// Trusts the certificate authorities in `pem` (one or more PEM
    /// `CERTIFICATE` blocks) for `rediss://` servers, instead of the
    /// operating system's trust store. Applies to every connection of the
    /// client: commands, watchdog, subscriber, and Sentinel nodes reached
    /// with `rediss://`. Only with the `tls-rustls` feature.
    ///
    /// The PEM is parsed by [`build`](Self::build), which fails with
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for one that holds no certificate. A server
    /// whose certificate this CA did not sign, or whose name (the URL's host)
    /// it does not carry, is refused when connecting: `build` fails at once
    /// with [`Error::TlsCertificate`](crate::Error::TlsCertificate) naming the certificate problem (not
    /// transient: a configuration error).
    ///
    /// # Crypto provider
    ///
    /// rustls needs a process-wide `CryptoProvider`. If the application has
    /// installed none (`rustls::crypto::CryptoProvider::install_default`)
    /// when a `rediss://` client is built, `build` installs rustls's `ring`
    /// provider; to use another one (e.g. `aws-lc-rs`), install it before
    /// building the first client.
    ///
    /// ```no_run
    /// # #[cfg(feature = "tls-rustls")] {
    /// let client = redisson_lock::Client::builder("rediss://redis.internal:6380/")
    ///     .tls_root_ca_pem(std::fs::read("ca.crt")?)
    ///     .tls_client_cert_pem(std::fs::read("client.crt")?, std::fs::read("client.key")?)
    ///     .build()?;
    /// # }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn tls_root_ca_pem(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.tls.set_root_ca_pem(pem.into());
        self
    }

    /// Presents the client certificate chain `cert_pem` (PEM, leaf first)
    /// with its private key `key_pem` (PEM: PKCS#8, PKCS#1 or SEC1) to
    /// servers that ask for one (Redis's `tls-auth-clients yes`, mutual
    /// TLS), on every connection of the client. Only with the `tls-rustls`
    /// feature. Parsed by [`build`](Self::build), which fails with
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for an unusable certificate or key.
    pub fn tls_client_cert_pem(
        mut self,
        cert_pem: impl Into<Vec<u8>>,
        key_pem: impl Into<Vec<u8>>,
    ) -> Self {
        self.tls
            .set_client_cert_pem(cert_pem.into(), key_pem.into());
        self
    }
}
