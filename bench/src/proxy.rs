//! A delay proxy (issue 36): this machine's kernel has no netem, so a network
//! that is not loopback is made here. `rlock-bench proxy --upstream URL
//! --delays-us 0,250` listens on one free loopback port per delay (printed
//! on one line, in the order given) and forwards every connection to the
//! upstream server, each chunk it reads leaving after that fixed one-way
//! delay (250 µs each way: a 0.5 ms round trip on top of loopback's).
//!
//! Per connection, a pair of threads, one per direction: each reads a chunk
//! with the kernel's receive timestamp of it (`SO_TIMESTAMPNS`), sleeps
//! until that instant plus the delay, and writes it. Order is kept, and a
//! chunk that arrived while an earlier one waited is not held back by it
//! (its deadline runs from its own arrival, stamped by the kernel), so
//! pipelined requests are delayed once each, as a wire would delay them. At
//! delay 0 a chunk is written as soon as it is read. The threads run with a
//! timer slack of 1 ns, so that their sleeps end within the scheduler's
//! wake-up latency rather than the default 50 µs slack; the last `--spin-us`
//! before a deadline (default 0: none, the machine has 2 vCPUs) may be spun
//! instead.
//!
//! `rlock-bench proxy-ping` measures the proxy's own cost: PING round trips
//! straight to the server and through each proxy port, interleaved.
//!
//! The proxy runs until it is killed (by pid, from `scripts/bench.sh`).

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

use crate::common::{Args, percentile, us};

/// Largest chunk one read takes.
const CHUNK: usize = 64 * 1024;

/// `host:port` of a `redis://host:port[/db]` URL (or a bare `host:port`).
pub fn host_port(url: &str) -> Result<String> {
    let rest = url.strip_prefix("redis://").unwrap_or(url);
    let rest = rest.rsplit_once('@').map_or(rest, |(_, r)| r);
    let hp = rest.split('/').next().unwrap_or(rest);
    if !hp.contains(':') {
        bail!("no port in {url}");
    }
    Ok(hp.to_owned())
}

/// `rlock-bench proxy`.
pub fn run(args: &Args) -> Result<()> {
    let upstream = host_port(args.str("upstream")?)?;
    let spin = Duration::from_micros(args.num_or("spin-us", 0)?);
    let delays: Vec<Duration> = args
        .str_or("delays-us", "0,250")
        .split(',')
        .map(|d| d.trim().parse::<u64>().map(Duration::from_micros))
        .collect::<Result<_, _>>()
        .context("--delays-us takes whole microseconds, comma-separated")?;
    let mut ports = Vec::new();
    for delay in delays {
        let listener = bind_loopback()?;
        ports.push(listener.local_addr()?.port().to_string());
        let upstream = upstream.clone();
        std::thread::Builder::new()
            .name(format!("proxy-accept-{}us", delay.as_micros()))
            .spawn(move || accept_loop(listener, upstream, delay, spin))?;
    }
    println!("{}", ports.join(" "));
    std::io::stdout().flush()?;
    loop {
        std::thread::park();
    }
}

/// A listener on a free loopback port (never 6379).
fn bind_loopback() -> Result<TcpListener> {
    loop {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        if listener.local_addr()?.port() != 6379 {
            return Ok(listener);
        }
    }
}

fn accept_loop(listener: TcpListener, upstream: String, delay: Duration, spin: Duration) {
    for client in listener.incoming() {
        let Ok(client) = client else { continue };
        if let Err(e) = connect(client, &upstream, delay, spin) {
            eprintln!("proxy: a connection failed to start: {e:#}");
        }
    }
}

/// Starts forwarding one accepted connection both ways.
fn connect(client: TcpStream, upstream: &str, delay: Duration, spin: Duration) -> Result<()> {
    let server = TcpStream::connect(upstream).with_context(|| format!("connect {upstream}"))?;
    for s in [&client, &server] {
        s.set_nodelay(true)?;
        receive_timestamps(s)?;
    }
    forward(client.try_clone()?, server.try_clone()?, delay, spin, "up")?;
    forward(server, client, delay, spin, "down")?;
    Ok(())
}

/// One direction, one thread: each chunk read is written at the instant the
/// kernel received it plus `delay`. Its end is passed on as a half-close; an
/// error shuts both sockets down, which ends the other direction too.
fn forward(
    from: TcpStream,
    mut to: TcpStream,
    delay: Duration,
    spin: Duration,
    dir: &str,
) -> Result<()> {
    std::thread::Builder::new()
        .name(format!("proxy-{dir}"))
        .spawn(move || {
            precise_timers();
            let mut buf = vec![0u8; CHUNK];
            let delay_ns = delay.as_nanos() as i128;
            let failed = loop {
                let (n, stamp) = match read_stamped(&from, &mut buf) {
                    Ok((0, _)) => break false,
                    Ok(read) => read,
                    Err(_) => break true,
                };
                if delay_ns > 0 {
                    let now = realtime_ns();
                    let left = stamp.unwrap_or(now) + delay_ns - now;
                    if left > 0 {
                        wait_until(Instant::now() + Duration::from_nanos(left as u64), spin);
                    }
                }
                if to.write_all(&buf[..n]).is_err() {
                    break true;
                }
            };
            if failed {
                // Either side broke: end both directions.
                let _ = from.shutdown(Shutdown::Both);
                let _ = to.shutdown(Shutdown::Both);
            } else {
                // An orderly end: pass it on (a half-close), leaving the other
                // direction to finish what it carries.
                let _ = to.shutdown(Shutdown::Write);
            }
        })?;
    Ok(())
}

/// Asks the kernel to stamp what `s` receives (`SO_TIMESTAMPNS`).
fn receive_timestamps(s: &TcpStream) -> Result<()> {
    let on: libc::c_int = 1;
    // SAFETY: a valid socket and a c_int option of the size given.
    let rc = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPNS,
            (&on as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error()).context("setsockopt SO_TIMESTAMPNS");
    }
    Ok(())
}

/// `CLOCK_REALTIME` in ns (the clock of the kernel's receive timestamps).
fn realtime_ns() -> i128 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    ts.tv_sec as i128 * 1_000_000_000 + ts.tv_nsec as i128
}

/// One read into `buf`: the bytes read and the kernel's receive timestamp
/// of them (`CLOCK_REALTIME` ns; for TCP, of the last segment the read
/// took), `None` if the kernel gave none.
fn read_stamped(s: &TcpStream, buf: &mut [u8]) -> std::io::Result<(usize, Option<i128>)> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // Room for a few control messages, aligned for cmsghdr.
    let mut control = [0u64; 16];
    loop {
        // SAFETY: an all-zero msghdr is valid; its pointers are set below to
        // live buffers of the lengths given.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&control) as _;
        // SAFETY: `msg` describes valid, writable buffers.
        let n = unsafe { libc::recvmsg(s.as_raw_fd(), &mut msg, 0) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        let mut stamp = None;
        // SAFETY: walking the control messages the kernel wrote into `msg`
        // with the libc macros; the timestamp is read unaligned.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(&msg);
            while !c.is_null() {
                if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPNS {
                    let t: libc::timespec =
                        std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<libc::timespec>());
                    stamp = Some(t.tv_sec as i128 * 1_000_000_000 + t.tv_nsec as i128);
                }
                c = libc::CMSG_NXTHDR(&msg, c);
            }
        }
        return Ok((n as usize, stamp));
    }
}

/// This thread's timer slack to 1 ns (Linux; the default 50 µs would add up
/// to 50 µs to every delayed chunk).
fn precise_timers() {
    // SAFETY: PR_SET_TIMERSLACK takes one integer argument and affects only
    // the calling thread.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
}

/// Sleeps until `deadline`, spinning (with yields) through its last `spin`.
fn wait_until(deadline: Instant, spin: Duration) {
    loop {
        let now = Instant::now();
        if now >= deadline {
            return;
        }
        let left = deadline - now;
        if left > spin {
            std::thread::sleep(left - spin);
        } else {
            std::thread::yield_now();
        }
    }
}

/// PING round trips on one raw connection: `n` of them, in ns.
struct Pinger {
    con: TcpStream,
    buf: [u8; 64],
}

impl Pinger {
    fn open(addr: &str) -> Result<Pinger> {
        let con = TcpStream::connect(addr).with_context(|| format!("connect {addr}"))?;
        con.set_nodelay(true)?;
        Ok(Pinger { con, buf: [0; 64] })
    }

    /// One PING, its round trip in ns.
    fn ping(&mut self) -> Result<u64> {
        let start = Instant::now();
        self.con.write_all(b"PING\r\n")?;
        let mut got = 0;
        while !self.buf[..got].ends_with(b"\r\n") {
            let n = self.con.read(&mut self.buf[got..])?;
            if n == 0 {
                bail!("connection closed during PING");
            }
            got += n;
        }
        if &self.buf[..got] != b"+PONG\r\n" {
            bail!("unexpected reply to PING");
        }
        Ok(start.elapsed().as_nanos() as u64)
    }
}

/// `rlock-bench proxy-ping --url U --via-ports P0,P250 --delays-us 0,250
/// --samples N`: PING round trips straight to `--url` and through each proxy
/// port, one of each in turn (so that the machine's drift is shared), after
/// a warm-up; one JSON line with each target's p50/p99/mean and the overhead
/// of each proxy over the direct path less its nominal delay.
pub fn ping(args: &Args) -> Result<Value> {
    let direct = host_port(args.str("url")?)?;
    let ports: Vec<&str> = args.str("via-ports")?.split(',').collect();
    let delays: Vec<u64> = args
        .str_or("delays-us", "0,250")
        .split(',')
        .map(str::parse)
        .collect::<Result<_, _>>()
        .context("--delays-us takes whole microseconds, comma-separated")?;
    if delays.len() != ports.len() {
        bail!("--via-ports and --delays-us differ in length");
    }
    let samples = args.num_or("samples", 2_000)?.max(1) as usize;
    let mut targets = vec![Pinger::open(&direct)?];
    for p in &ports {
        targets.push(Pinger::open(&format!("127.0.0.1:{p}"))?);
    }
    for t in targets.iter_mut() {
        for _ in 0..100 {
            t.ping()?;
        }
    }
    let mut times = vec![Vec::with_capacity(samples); targets.len()];
    for _ in 0..samples {
        for (i, t) in targets.iter_mut().enumerate() {
            times[i].push(t.ping()?);
        }
    }
    let summary = |v: &mut Vec<u64>| {
        v.sort_unstable();
        let mean = v.iter().sum::<u64>() as f64 / v.len().max(1) as f64;
        (us(percentile(v, 0.5)), us(percentile(v, 0.99)), mean / 1e3)
    };
    let (d50, d99, dmean) = summary(&mut times[0]);
    let mut via = Vec::new();
    for (i, delay) in delays.iter().enumerate() {
        let (p50, p99, mean) = summary(&mut times[i + 1]);
        let nominal = 2.0 * *delay as f64;
        via.push(json!({
            "delay_us": delay,
            "rtt_p50_us": p50,
            "rtt_p99_us": p99,
            "rtt_mean_us": mean,
            // What the proxy adds beyond the direct path and its nominal delay.
            "overhead_p50_us": p50 - d50 - nominal,
            "overhead_p99_us": p99 - d99 - nominal,
            "overhead_mean_us": mean - dmean - nominal,
        }));
    }
    Ok(json!({
        "kind": "proxy_ping",
        "scenario": "proxy_ping",
        "samples": samples,
        "direct_p50_us": d50,
        "direct_p99_us": d99,
        "direct_mean_us": dmean,
        "via": via,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_give_their_host_and_port() {
        assert_eq!(
            host_port("redis://127.0.0.1:7000").expect("url"),
            "127.0.0.1:7000"
        );
        assert_eq!(
            host_port("redis://:pw@127.0.0.1:7000/2").expect("url"),
            "127.0.0.1:7000"
        );
        assert_eq!(host_port("127.0.0.1:7000").expect("bare"), "127.0.0.1:7000");
        assert!(host_port("redis://localhost").is_err());
    }

    /// An echo server behind the proxy: bytes come back whole, in order, and
    /// a round trip takes at least twice the delay.
    #[test]
    fn the_proxy_delays_and_keeps_order() {
        let echo = bind_loopback().expect("bind");
        let upstream = echo.local_addr().expect("addr").to_string();
        std::thread::spawn(move || {
            for s in echo.incoming().flatten() {
                std::thread::spawn(move || {
                    let mut r = s.try_clone().expect("clone");
                    let mut w = s;
                    let _ = std::io::copy(&mut r, &mut w);
                });
            }
        });
        let listener = bind_loopback().expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let delay = Duration::from_millis(2);
        std::thread::spawn(move || accept_loop(listener, upstream, delay, Duration::ZERO));
        let mut c = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        let start = Instant::now();
        let sent: Vec<u8> = (0..50_000u32).map(|i| (i % 251) as u8).collect();
        for part in sent.chunks(997) {
            c.write_all(part).expect("write");
        }
        let mut got = vec![0u8; sent.len()];
        c.read_exact(&mut got).expect("read");
        assert!(start.elapsed() >= 2 * delay);
        assert_eq!(got, sent);
        // A half-close travels through: the echo server sees the end, closes,
        // and that end comes back.
        c.write_all(b"last").expect("write");
        c.shutdown(Shutdown::Write).expect("half-close");
        let mut rest = Vec::new();
        c.read_to_end(&mut rest).expect("read to the end");
        assert_eq!(rest, b"last");
    }
}
