//! The subscriber's TLS socket: one rustls session shared by the reading
//! thread and the writers, each with its own clone of the TCP socket, like
//! the plain socket's reader and writer.
//!
//! The reader decrypts under the session's mutex but reads the socket
//! without it, so a reader blocked on a silent server never holds up a
//! writer. A writer encrypts and writes under the mutex, bounded by the
//! socket's write timeout.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use rustls::pki_types::ServerName;

/// One end of a TLS connection (see the module docs).
pub(crate) struct TlsSocket {
    tcp: TcpStream,
    session: Arc<Mutex<rustls::ClientConnection>>,
    /// Bytes read from the socket that the session has not taken yet
    /// (reader only).
    backlog: Vec<u8>,
}

impl TlsSocket {
    /// Runs the TLS handshake with `host` on the connected `tcp`, within
    /// the socket's current timeouts. A certificate the configuration does
    /// not trust fails with `InvalidData` naming the problem.
    pub fn handshake(
        tcp: TcpStream,
        host: &str,
        config: Arc<rustls::ClientConfig>,
    ) -> io::Result<TlsSocket> {
        let name = ServerName::try_from(host.to_owned())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let mut session = rustls::ClientConnection::new(config, name).map_err(io::Error::other)?;
        let mut sock = &tcp;
        while session.is_handshaking() {
            match session.complete_io(&mut sock) {
                // A signal (see `Stream`'s `Read`): the session is as it
                // was, go on.
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                done => {
                    done?;
                }
            }
        }
        Ok(TlsSocket {
            tcp,
            session: Arc::new(Mutex::new(session)),
            backlog: Vec::new(),
        })
    }

    pub fn try_clone(&self) -> io::Result<TlsSocket> {
        Ok(TlsSocket {
            tcp: self.tcp.try_clone()?,
            session: Arc::clone(&self.session),
            backlog: Vec::new(),
        })
    }

    pub fn set_read_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        self.tcp.set_read_timeout(timeout)
    }

    pub fn set_write_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        self.tcp.set_write_timeout(timeout)
    }

    pub fn shutdown(&self) -> io::Result<()> {
        self.tcp.shutdown(Shutdown::Both)
    }

    /// Writes the session's pending TLS records (a write interrupted by a
    /// signal is written again: records the session accepted must go out,
    /// and a caller retrying the plaintext would send it twice).
    fn push(session: &mut rustls::ClientConnection, mut tcp: &TcpStream) -> io::Result<()> {
        while session.wants_write() {
            match session.write_tls(&mut tcp) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                done => {
                    done?;
                }
            }
        }
        Ok(())
    }
}

fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

impl Read for TlsSocket {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            {
                let mut session = self.session.lock();
                match session.reader().read(buf) {
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    // Data, a clean close (0), or an unclean one.
                    done => return done,
                }
                if !self.backlog.is_empty() {
                    // The plaintext buffer is empty, so the session takes
                    // at least some of the backlog.
                    let mut rest = self.backlog.as_slice();
                    let taken = session.read_tls(&mut rest)?;
                    if taken == 0 {
                        // Cannot happen with an empty plaintext buffer; never spin.
                        return Err(io::Error::other("the TLS session takes no more data"));
                    }
                    self.backlog.drain(..taken);
                    let processed = session.process_new_packets();
                    // Alerts, key updates: best effort, the error matters more.
                    let _ = Self::push(&mut session, &self.tcp);
                    processed.map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
                    continue;
                }
            }
            let mut raw = [0u8; 16 * 1024];
            // An interrupted read goes back to `Stream`, which reads again
            // (or looks at its deadline first): the backlog is kept.
            let n = (&self.tcp).read(&mut raw)?;
            if n == 0 {
                let mut session = self.session.lock();
                let _ = session.read_tls(&mut io::empty());
                session
                    .process_new_packets()
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
                return match session.reader().read(buf) {
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(0),
                    done => done,
                };
            }
            self.backlog.extend_from_slice(&raw[..n]);
        }
    }
}

impl Write for TlsSocket {
    /// Encrypts `buf` and writes it out. What the socket does not take
    /// within its write timeout stays queued in the session (the bytes count
    /// as written: they must not be sent twice) and goes out ahead of the
    /// next write or flush.
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut session = self.session.lock();
        Self::push(&mut session, &self.tcp)?;
        let n = session.writer().write(buf)?;
        match Self::push(&mut session, &self.tcp) {
            Err(e) if !is_timeout(&e) => Err(e),
            _ => Ok(n),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        let mut session = self.session.lock();
        Self::push(&mut session, &self.tcp)
    }
}
