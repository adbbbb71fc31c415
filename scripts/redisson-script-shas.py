#!/usr/bin/env python3
"""Records the SHA1s of the Lua scripts each Redisson release sends for its
locks and synchronizers, and writes the doctor's table
(src/client/doctor/scripts.rs) from them.

    scripts/redisson-script-shas.py 3.12.4 3.16.8 3.21.3 3.24.3 3.52.0 4.7.0

For each version: builds the interop driver (interop/java/build.sh), starts a
scratch redis-server on a free loopback port with MONITOR attached, runs the
driver through every lock kind and synchronizer the version has (contended,
so that the waiting scripts run too), holds locks through a watchdog renewal
(3 s watchdog), and hashes every EVAL body and records every EVALSHA hash
MONITOR saw. Only hashes are kept: the scripts are Redisson's. A hash seen in
several versions gets the range from the oldest to the newest of them.
Needs java, mvn and redis-server; stops every process it started.
"""

import hashlib
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "src", "client", "doctor", "scripts.rs")

# The driver's command lines; a version that lacks a kind answers ERR, which
# is fine (nothing is recorded for it).
KINDS = ["", "fair/", "fenced/", "spin/", "read/", "write/", "nonreentrant/", "nonreentrantfair/"]


def commands():
    for kind in KINDS:
        name = f"{kind}shas-{kind.strip('/') or 'lock'}"
        yield ("t1", f"lock {name}")
        yield ("t1", f"tryLockNow {name}")  # a reentry
        yield ("t2", f"tryLock {name} 300")  # waits, times out (fair: queue, give up)
        yield ("t1", "sleep 1500")  # through a renewal (3 s watchdog)
        yield ("t1", f"isLocked {name}")
        yield ("t1", f"remainTimeToLive {name}")
        yield ("t1", f"holdCount {name}")
        yield ("t1", f"unlock {name}")
        yield ("t1", f"unlock {name}")
        yield ("t2", f"lock {name}")
        yield ("t2", f"forceUnlock {name}")
    yield ("t1", "token fenced/shas-fenced")
    for verb in ["trySetPermits shas-sem 2", "acquire shas-sem 1", "tryAcquire shas-sem 1 10",
                 "release shas-sem 1", "addPermits shas-sem 1", "availablePermits shas-sem",
                 "drainPermits shas-sem", "releaseIfExists shas-sem 1"]:
        yield ("t1", "sem." + verb)
    for verb in ["trySetPermits shas-pes 2", "availablePermits shas-pes",
                 "tryAcquire shas-pes 10 10000"]:
        yield ("t1", "pes." + verb)
    yield ("t1", "pes.acquire shas-pes 10000")  # its id is used below
    for verb in ["trySetCount shas-latch 1", "getCount shas-latch", "awaitMs shas-latch 10",
                 "countDown shas-latch", "delete shas-latch"]:
        yield ("t1", "latch." + verb)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def unquote(text):
    """The arguments of one MONITOR line (redis-cli's repr quoting)."""
    args, i = [], text.find('"')
    while 0 <= i < len(text):
        i += 1
        out = bytearray()
        while i < len(text) and text[i] != '"':
            c = text[i]
            if c == "\\":
                n = text[i + 1]
                if n == "x":
                    out.append(int(text[i + 2:i + 4], 16))
                    i += 4
                    continue
                out += {"n": b"\n", "r": b"\r", "t": b"\t", "a": b"\a", "b": b"\b"}.get(
                    n, n.encode())
                i += 2
                continue
            out += c.encode()
            i += 1
        args.append(bytes(out))
        i = text.find('"', i + 1)
    return args


def record(version, jar):
    tmp = tempfile.mkdtemp(prefix="redisson-shas-")
    port = free_port()
    server = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "no", "--dir", tmp],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    monitor = driver = None
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), 0.1).close()
                break
            except OSError:
                time.sleep(0.05)
        monitor = subprocess.Popen(["redis-cli", "-p", str(port), "MONITOR"],
                                   stdout=subprocess.PIPE, text=True, errors="replace")
        seen = set()

        def read_monitor():
            for line in monitor.stdout:
                args = unquote(line)
                if not args:
                    continue
                cmd = args[0].upper()
                if cmd == b"EVAL" and len(args) > 1:
                    seen.add(hashlib.sha1(args[1]).hexdigest())
                elif cmd == b"EVALSHA" and len(args) > 1:
                    seen.add(args[1].decode().lower())
        reader = threading.Thread(target=read_monitor, daemon=True)
        reader.start()
        driver = subprocess.Popen(["java", "-jar", jar, f"redis://127.0.0.1:{port}", "3000"],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        ready = driver.stdout.readline()
        if not ready.startswith("READY"):
            raise RuntimeError(f"{version}: the driver did not start: {ready!r}")
        permit = None
        for actor, line in commands():
            driver.stdin.write(f"{actor} {line}\n")
            driver.stdin.flush()
            reply = driver.stdout.readline().split()
            if line.startswith("pes.acquire") and len(reply) > 3 and reply[2] == "OK":
                permit = reply[3]
        if permit:
            for verb in [f"getLeaseTime shas-pes {permit}", f"updateLeaseTime shas-pes {permit} 20000",
                         f"tryRelease shas-pes {permit}", f"release shas-pes {permit}"]:
                driver.stdin.write(f"t1 pes.{verb}\n")
                driver.stdin.flush()
                driver.stdout.readline()
        driver.stdin.write("quit\n")
        driver.stdin.flush()
        driver.wait(timeout=30)
        time.sleep(0.5)
        return seen
    finally:
        for process in (driver, monitor, server):
            if process and process.poll() is None:
                process.kill()
                process.wait()
        shutil.rmtree(tmp, ignore_errors=True)


def key(version):
    return tuple(int(x) for x in re.findall(r"\d+", version))


def main(versions):
    versions = sorted(versions, key=key)
    found = {}
    for version in versions:
        jar = subprocess.run([os.path.join(ROOT, "interop", "java", "build.sh"), version,
                              os.path.join(ROOT, "target", "interop")],
                             check=True, capture_output=True, text=True).stdout.split()[-1]
        shas = record(version, jar)
        print(f"{version}: {len(shas)} scripts", file=sys.stderr)
        for sha in shas:
            found.setdefault(sha, []).append(version)
    rows = sorted((min(v, key=key), max(v, key=key), sha) for sha, v in found.items())
    rows.sort(key=lambda r: (key(r[0]), key(r[1]), r[2]))
    with open(OUT) as f:
        head = f.read().split("/// `(sha1, from, to)`.")[0]
    with open(OUT, "w") as f:
        f.write(head)
        f.write("/// `(sha1, from, to)`.\n")
        f.write(f"/// Recorded from Redisson {', '.join(versions)}.\n")
        f.write("pub(crate) const REDISSON_SCRIPTS: &[(&str, &str, &str)] = &[\n")
        for frm, to, sha in rows:
            f.write(f'    ("{sha}", "{frm}", "{to}"),\n')
        f.write("];\n")
    print(f"{len(rows)} hashes written to {OUT}", file=sys.stderr)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
