//! TLS test material: a CA, server and client certificates made with
//! `openssl` in a temporary directory, and a TLS-only `redis-server`
//! (`--port 0 --tls-port P`) inspected through a Unix socket.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::Ordering;
use std::thread;
use std::time::{Duration, Instant};

use super::{SERVERS, free_port, listens_on, redis_server_binary, run_ok};

/// Certificates made for one test binary.
pub struct Certs {
    pub dir: PathBuf,
}

fn openssl(dir: &Path, args: &[&str]) {
    let what = format!("openssl {args:?} (apt-get install openssl)");
    run_ok(Command::new("openssl").args(args).current_dir(dir), &what);
}

/// A self-signed CA `name` (`name.crt`, `name.key`).
fn make_ca(dir: &Path, name: &str) {
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-days",
            "2",
            "-subj",
            &format!("/CN={name}"),
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
            "-keyout",
            &format!("{name}.key"),
            "-out",
            &format!("{name}.crt"),
        ],
    );
}

/// A leaf `name` signed by CA `ca`, with the given extensions.
fn make_leaf(dir: &Path, ca: &str, name: &str, extensions: &str) {
    openssl(
        dir,
        &[
            "req",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-subj",
            &format!("/CN={name}"),
            "-keyout",
            &format!("{name}.key"),
            "-out",
            &format!("{name}.csr"),
        ],
    );
    std::fs::write(dir.join(format!("{name}.ext")), extensions).expect("write extensions");
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            &format!("{name}.csr"),
            "-CA",
            &format!("{ca}.crt"),
            "-CAkey",
            &format!("{ca}.key"),
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            &format!("{name}.ext"),
            "-out",
            &format!("{name}.crt"),
        ],
    );
}

impl Certs {
    /// `ca`, `server` (for 127.0.0.1 and localhost), `client` (signed by
    /// `ca`), `node` (like `server`, usable as a client certificate too),
    /// `wrong-name` (signed by `ca` for another host only) and an
    /// unrelated `other-ca`.
    pub fn make() -> Certs {
        let n = SERVERS.fetch_add(1, Ordering::Relaxed);
        let dir = super::test_dir(&format!("certs-{n}"));
        std::fs::create_dir_all(&dir).expect("create the certificates' directory");
        make_ca(&dir, "ca");
        make_ca(&dir, "other-ca");
        make_leaf(
            &dir,
            "ca",
            "server",
            "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n",
        );
        make_leaf(&dir, "ca", "client", "extendedKeyUsage=clientAuth\n");
        // Cluster nodes present theirs as clients too (the cluster bus
        // always checks the connecting node's certificate).
        make_leaf(
            &dir,
            "ca",
            "node",
            "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n",
        );
        make_leaf(
            &dir,
            "ca",
            "wrong-name",
            "subjectAltName=DNS:elsewhere.invalid\nextendedKeyUsage=serverAuth\n",
        );
        Certs { dir }
    }

    pub fn path(&self, file: &str) -> PathBuf {
        self.dir.join(file)
    }

    pub fn pem(&self, file: &str) -> Vec<u8> {
        std::fs::read(self.path(file)).expect("read a PEM file")
    }

    /// A PKCS12 truststore (`truststore.p12`, password
    /// [`TRUSTSTORE_PASSWORD`]) holding `ca.crt`, for Redisson: Java
    /// trusts the certificates of a PKCS12 store only when they are marked
    /// as trusted entries, which `keytool -importcert` does (OpenSSL 3.0's
    /// `pkcs12 -export` does not). Made on first call.
    pub fn java_truststore(&self) -> PathBuf {
        let store = self.path("truststore.p12");
        if !store.exists() {
            let what = "keytool -importcert (a JDK: apt-get install openjdk-17-jdk-headless)";
            run_ok(
                Command::new("keytool")
                    .args(["-importcert", "-noprompt", "-alias", "ca", "-file"])
                    .arg(self.path("ca.crt"))
                    .args(["-storetype", "PKCS12", "-storepass", TRUSTSTORE_PASSWORD])
                    .arg("-keystore")
                    .arg(&store),
                what,
            );
        }
        store
    }
}

/// The password of [`Certs::java_truststore`].
pub const TRUSTSTORE_PASSWORD: &str = "changeit";

impl Drop for Certs {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A `redis-server` that accepts TLS only (on [`TlsServer::port`]), plus a
/// Unix socket for the test's own inspection. Killed by pid on drop.
pub struct TlsServer {
    child: Child,
    port: u16,
    dir: PathBuf,
}

impl TlsServer {
    /// Starts it with the certificates of `certs`; `auth_clients` is
    /// Redis's `tls-auth-clients` (`yes`: a client certificate is required).
    pub fn start(certs: &Certs, auth_clients: bool) -> TlsServer {
        TlsServer::start_as(certs, "server", auth_clients)
    }

    /// [`TlsServer::start`] presenting the certificate `<cert>.crt` (with
    /// `<cert>.key`) of `certs`.
    pub fn start_as(certs: &Certs, cert: &str, auth_clients: bool) -> TlsServer {
        let n = SERVERS.fetch_add(1, Ordering::Relaxed);
        let dir = super::test_dir(&n.to_string());
        std::fs::create_dir_all(&dir).expect("create the server's directory");
        for _ in 0..5 {
            let port = free_port();
            let mut child = Command::new(redis_server_binary())
                .args(["--port", "0", "--tls-port", &port.to_string()])
                .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
                .args(["--daemonize", "no", "--loglevel", "warning"])
                .arg("--tls-cert-file")
                .arg(certs.path(&format!("{cert}.crt")))
                .arg("--tls-key-file")
                .arg(certs.path(&format!("{cert}.key")))
                .arg("--tls-ca-cert-file")
                .arg(certs.path("ca.crt"))
                .args([
                    "--tls-auth-clients",
                    if auth_clients { "yes" } else { "no" },
                ])
                .arg("--unixsocket")
                .arg(dir.join("redis.sock"))
                .arg("--dir")
                .arg(&dir)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::inherit())
                .spawn()
                .expect("run redis-server");
            let deadline = Instant::now() + Duration::from_secs(10);
            let mut up = false;
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    break; // the port was taken, most likely
                }
                if listens_on(child.id(), port) && dir.join("redis.sock").exists() {
                    up = true;
                    break;
                }
                thread::sleep(Duration::from_millis(5));
            }
            if up {
                return TlsServer { child, port, dir };
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!("could not start a TLS redis-server on a free port");
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// `rediss://127.0.0.1:<tls port>/`
    pub fn url(&self) -> String {
        format!("rediss://127.0.0.1:{}/", self.port)
    }

    /// A plain connection over the Unix socket, for inspection.
    pub fn con(&self) -> redis::Connection {
        let url = format!("redis+unix://{}", self.dir.join("redis.sock").display());
        redis::Client::open(url)
            .expect("unix url")
            .get_connection_with_timeout(Duration::from_secs(5))
            .expect("connect over the unix socket")
    }
}

impl Drop for TlsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
