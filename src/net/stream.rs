//! A socket the crate owns and speaks RESP on itself (the subscriber's, the
//! multiplexed command connections'): TCP, TLS or Unix, connected and
//! authenticated.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
#[cfg(unix)]
use std::os::unix::net::UnixStream;
use std::time::Duration;

use redis::{ConnectionAddr, Value};

use crate::net::endpoint::Endpoint;
use crate::net::resp;

/// The subscriber's socket. Reads happen on the subscriber thread, writes
/// under the connection mutex, each through its own clone of the socket.
pub(crate) enum Stream {
    Tcp(TcpStream),
    #[cfg(unix)]
    Unix(UnixStream),
    #[cfg(feature = "tls-rustls")]
    Tls(crate::net::tls::TlsSocket),
    /// In memory, for the schedule tests (`crate::sync::pipe`).
    #[cfg(all(test, feature = "shuttle"))]
    Mem(crate::sync::pipe::Pipe),
}

/// A TCP connection to `host:port` (the first address that answers), with
/// Nagle off.
fn tcp_connect(host: &str, port: u16, timeout: Duration) -> io::Result<TcpStream> {
    let mut last = None;
    for addr in (host, port).to_socket_addrs()? {
        match TcpStream::connect_timeout(&addr, timeout) {
            Ok(tcp) => {
                tcp.set_nodelay(true)?;
                return Ok(tcp);
            }
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::other("address resolved to nothing")))
}

impl Stream {
    /// Connects to the server `info` names and authenticates, within
    /// `timeout` for each step; the socket's read and write timeouts are
    /// `timeout` until changed.
    pub(crate) fn connect(endpoint: &Endpoint, timeout: Duration) -> io::Result<Stream> {
        let info = endpoint.info();
        let mut stream = Stream::open(endpoint, timeout)?;
        let settings = info.redis_settings();
        if let Some(password) = settings.password() {
            let mut auth = redis::cmd("AUTH");
            if let Some(username) = settings.username() {
                auth.arg(username);
            }
            auth.arg(password);
            stream.write_all(&auth.get_packed_command())?;
            let mut read_timeout = timeout;
            let mut until = crate::net::direct::Until {
                stream: &mut stream,
                timeout: &mut read_timeout,
                deadline: std::time::Instant::now() + timeout,
                slack: timeout / crate::net::direct::SLACK_DIVISOR,
            };
            let reply = resp::Reader::default()
                .next(&mut until)
                .map_err(io::Error::other)?;
            if let Value::ServerError(e) = reply {
                return Err(io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    format!("AUTH failed: {}", e.code()),
                ));
            }
        }
        Ok(stream)
    }

    /// Connects to the server `endpoint` names (the TLS handshake
    /// included), without authenticating, within `timeout` for each step;
    /// the socket's read and write timeouts are `timeout` until changed.
    pub(crate) fn open(endpoint: &Endpoint, timeout: Duration) -> io::Result<Stream> {
        let stream = match endpoint.info().addr() {
            ConnectionAddr::Tcp(host, port) => Stream::Tcp(tcp_connect(host, *port, timeout)?),
            #[cfg(feature = "tls-rustls")]
            ConnectionAddr::TcpTls { host, port, .. } => {
                let tcp = tcp_connect(host, *port, timeout)?;
                tcp.set_read_timeout(Some(timeout))?;
                tcp.set_write_timeout(Some(timeout))?;
                let config = endpoint.tls.clone().ok_or_else(|| {
                    io::Error::new(io::ErrorKind::Unsupported, "no TLS configuration")
                })?;
                Stream::Tls(crate::net::tls::TlsSocket::handshake(tcp, host, config)?)
            }
            #[cfg(unix)]
            ConnectionAddr::Unix(path) => Stream::Unix(UnixStream::connect(path)?),
            other => {
                return Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    format!("the subscriber does not support {other:?} connections"),
                ));
            }
        };
        stream.set_read_timeout(Some(timeout))?;
        stream.set_write_timeout(Some(timeout))?;
        Ok(stream)
    }

    pub(crate) fn try_clone(&self) -> io::Result<Stream> {
        Ok(match self {
            Stream::Tcp(s) => Stream::Tcp(s.try_clone()?),
            #[cfg(unix)]
            Stream::Unix(s) => Stream::Unix(s.try_clone()?),
            #[cfg(feature = "tls-rustls")]
            Stream::Tls(s) => Stream::Tls(s.try_clone()?),
            #[cfg(all(test, feature = "shuttle"))]
            Stream::Mem(s) => Stream::Mem(s.try_clone()?),
        })
    }

    pub(crate) fn set_read_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.set_read_timeout(timeout),
            #[cfg(unix)]
            Stream::Unix(s) => s.set_read_timeout(timeout),
            #[cfg(feature = "tls-rustls")]
            Stream::Tls(s) => s.set_read_timeout(timeout),
            #[cfg(all(test, feature = "shuttle"))]
            Stream::Mem(s) => s.set_read_timeout(timeout),
        }
    }

    pub(crate) fn set_write_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.set_write_timeout(timeout),
            #[cfg(unix)]
            Stream::Unix(s) => s.set_write_timeout(timeout),
            #[cfg(feature = "tls-rustls")]
            Stream::Tls(s) => s.set_write_timeout(timeout),
            #[cfg(all(test, feature = "shuttle"))]
            Stream::Mem(_) => Ok(()),
        }
    }

    /// Ends the connection both ways; the reader sees it at once.
    pub(crate) fn shutdown(&self) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.shutdown(Shutdown::Both),
            #[cfg(unix)]
            Stream::Unix(s) => s.shutdown(Shutdown::Both),
            #[cfg(feature = "tls-rustls")]
            Stream::Tls(s) => s.shutdown(),
            #[cfg(all(test, feature = "shuttle"))]
            Stream::Mem(s) => s.shutdown(),
        }
    }
}

impl Stream {
    /// One read, as the socket gives it: a signal that interrupts it is an
    /// `Interrupted` error (for a caller that looks at its deadline before
    /// reading again; [`Read::read`] reads again at once).
    pub(crate) fn read_once(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        // tests/failpoints.rs, `read-trickle` set to `return(ms)`: a server
        // trickling its replies, each read waiting `ms` and bringing one
        // byte (or a timeout, when nothing is there).
        #[cfg(feature = "failpoints")]
        fail::fail_point!("read-trickle", |ms: Option<String>| {
            let ms = ms.and_then(|ms| ms.parse().ok()).unwrap_or(10);
            std::thread::sleep(std::time::Duration::from_millis(ms));
            let one = buf.len().min(1);
            self.read_raw(&mut buf[..one])
        });
        self.read_raw(buf)
    }

    fn read_raw(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(buf),
            #[cfg(unix)]
            Stream::Unix(s) => s.read(buf),
            #[cfg(feature = "tls-rustls")]
            Stream::Tls(s) => s.read(buf),
            #[cfg(all(test, feature = "shuttle"))]
            Stream::Mem(s) => s.read_once(buf),
        }
    }
}

/// A read interrupted by a signal is read again: on Linux a socket with a
/// read timeout returns `EINTR` for any handled signal, `SA_RESTART` or not,
/// and std's `read` hands it on (`read_exact` and `write_all` retry it,
/// `read` does not). A signal never fails a read.
impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            match self.read_once(buf) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                done => return done,
            }
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write(buf),
            #[cfg(unix)]
            Stream::Unix(s) => s.write(buf),
            #[cfg(feature = "tls-rustls")]
            Stream::Tls(s) => s.write(buf),
            #[cfg(all(test, feature = "shuttle"))]
            Stream::Mem(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.flush(),
            #[cfg(unix)]
            Stream::Unix(s) => s.flush(),
            #[cfg(feature = "tls-rustls")]
            Stream::Tls(s) => s.flush(),
            #[cfg(all(test, feature = "shuttle"))]
            Stream::Mem(_) => Ok(()),
        }
    }
}
