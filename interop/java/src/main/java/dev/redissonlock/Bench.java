package dev.redissonlock;

import java.io.BufferedWriter;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.lang.management.ManagementFactory;
import java.lang.management.MemoryMXBean;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

import org.redisson.Redisson;
import org.redisson.api.RAtomicLong;
import org.redisson.api.RCountDownLatch;
import org.redisson.api.RFuture;
import org.redisson.api.RLock;
import org.redisson.api.RPermitExpirableSemaphore;
import org.redisson.api.RSemaphore;
import org.redisson.api.RedissonClient;
import org.redisson.client.codec.StringCodec;
import org.redisson.api.redisnode.RedisNode;
import org.redisson.api.redisnode.RedisNodes;
import org.redisson.api.redisnode.RedisSingle;
import org.redisson.config.Config;

/**
 * Redisson's side of the Rust crate's benchmarks (bench/, scripts/bench.sh):
 * the same scenarios as {@code rlock-bench run}, with the same arguments,
 * printing one JSON line on stdout.
 *
 * <pre>
 *   java -cp redisson-driver-&lt;v&gt;.jar dev.redissonlock.Bench \
 *       --scenario uncontended|scaled|contended|watchdog|family|sync_uncontended|sync_contended|redlock \
 *       --url redis://127.0.0.1:PORT [--key value ...]
 * </pre>
 *
 * The contended scenario writes one line per acquisition to {@code --events}:
 * {@code thread call acquired release released}, in {@link System#nanoTime()}
 * nanoseconds, which on Linux is CLOCK_MONOTONIC, the clock the Rust
 * processes stamp with, so the Rust analyser can merge both.
 * Locks are taken with {@code lock()} (watchdog mode) and released with
 * {@code unlock()}, as a Java service would.
 */
public final class Bench {

    /** The real stdout; System.out goes to stderr so only the result reaches it. */
    private static final PrintStream OUT =
            new PrintStream(new FileOutputStream(FileDescriptor.out), false, StandardCharsets.UTF_8);

    private Bench() {
    }

    public static void main(String[] argv) throws Exception {
        System.setOut(System.err);
        Map<String, String> a = parse(argv);
        String scenario = req(a, "scenario");
        Config config = new Config();
        config.useSingleServer().setAddress(req(a, "url"));
        if (scenario.equals("waiters")) {
            // Redisson's defaults (5 subscriptions a connection, 50 connections) hold 250
            // channels: waiters past them fail with "Unable to acquire subscription lock". A
            // channel per name (per waiter for the fair lock) needs room for 10,000.
            // And a fair lock's 1,000 waiters subscribing at once (a channel each) queue for
            // Redisson's subscription locks longer than its 7.5 s subscription timeout.
            config.useSingleServer().setSubscriptionsPerConnection(250);
            // The setting is newer than some Redisson versions the driver is built against.
            try {
                config.useSingleServer().getClass().getMethod("setSubscriptionTimeout", int.class)
                        .invoke(config.useSingleServer(), 120_000);
            } catch (ReflectiveOperationException e) {
                System.err.println("waiters: this Redisson has no subscription timeout setting");
            }
        }
        config.setLockWatchdogTimeout(num(a, "watchdog-ms", 30_000));
        RedissonClient client = Redisson.create(config);
        Json out;
        try {
            switch (scenario) {
                case "uncontended":
                    out = uncontended(client, a);
                    break;
                case "scaled":
                    out = scaled(client, a);
                    break;
                case "contended":
                    out = contended(client, a);
                    break;
                case "watchdog":
                    out = watchdog(client, a);
                    break;
                case "family":
                case "sync_uncontended":
                    out = family(client, a);
                    break;
                case "sync_contended":
                    out = syncContended(client, a);
                    break;
                case "redlock":
                    out = redlock(client, a);
                    break;
                case "waiters":
                    out = waiters(client, a);
                    break;
                default:
                    throw new IllegalArgumentException("scenario " + scenario + " does not apply to redisson");
            }
        } finally {
            client.shutdown(0, 2, TimeUnit.SECONDS);
        }
        out.put("scenario", scenario).put("contender", "redisson")
                .put("rep", num(a, "rep", 0)).put("run_id", a.getOrDefault("run-id", "0"))
                .put("lock_type", a.getOrDefault("lock-type", "lock"));
        OUT.println(out);
        OUT.flush();
        System.exit(0);
    }

    // ------------------------------------------------------------ scenarios

    /** Scenario 1: one thread, lock+unlock pairs on one name, for a fixed time. */
    static Json uncontended(RedissonClient client, Map<String, String> a) {
        RLock lock = client.getLock("bench:s1:" + a.getOrDefault("run-id", "0"));
        long warmup = num(a, "warmup", 2_000);
        long durationNs = TimeUnit.MILLISECONDS.toNanos(num(a, "duration-ms", 3_000));
        for (long i = 0; i < warmup; i++) {
            lock.lock();
            lock.unlock();
        }
        long[] lat = new long[1 << 16];
        int n = 0;
        long cpu0 = cpuNs();
        long start = System.nanoTime();
        long end = start + durationNs;
        while (true) {
            long t0 = System.nanoTime();
            if (t0 >= end) {
                break;
            }
            lock.lock();
            lock.unlock();
            if (n == lat.length) {
                lat = Arrays.copyOf(lat, n * 2);
            }
            lat[n++] = System.nanoTime() - t0;
        }
        double secs = (System.nanoTime() - start) / 1e9;
        long cpu = cpuNs() - cpu0;
        long[] sorted = Arrays.copyOf(lat, n);
        Arrays.sort(sorted);
        return new Json().put("threads", 1).put("pairs", n).put("pairs_per_s", n / secs)
                .put("p50_us", percentile(sorted, 0.50) / 1e3)
                .put("p99_us", percentile(sorted, 0.99) / 1e3)
                .put("cpu_us_per_pair", cpu / 1e3 / Math.max(1, n));
    }

    /**
     * Scenario 6: a {@code RedissonRedLock} over one client per {@code --urls}
     * server, lock()/unlock() pairs for a fixed time, alternating in 100 ms
     * slices with {@code getLock} on the first server ({@code client}) alone.
     */
    static Json redlock(RedissonClient client, Map<String, String> a) {
        String runId = a.getOrDefault("run-id", "0");
        long warmup = num(a, "warmup", 500);
        long durationNs = TimeUnit.MILLISECONDS.toNanos(num(a, "duration-ms", 2_000));
        String[] urls = req(a, "urls").split(",");
        List<RedissonClient> members = new ArrayList<>();
        try {
            RLock[] locks = new RLock[urls.length];
            for (int i = 0; i < urls.length; i++) {
                Config config = new Config();
                config.useSingleServer().setAddress(urls[i]);
                config.setLockWatchdogTimeout(num(a, "watchdog-ms", 30_000));
                RedissonClient member = Redisson.create(config);
                members.add(member);
                locks[i] = member.getLock("bench:s6:" + runId);
            }
            @SuppressWarnings("deprecation")
            RLock red = new org.redisson.RedissonRedLock(locks);
            RLock single = client.getLock("bench:s6:single:" + runId);
            for (long i = 0; i < warmup; i++) {
                single.lock();
                single.unlock();
                red.lock();
                red.unlock();
            }
            long[][] lat = {new long[1 << 14], new long[1 << 14]};
            int[] n = {0, 0};
            long redNs = 0;
            long redCpu = 0;
            long start = System.nanoTime();
            long slice = TimeUnit.MILLISECONDS.toNanos(100);
            while (System.nanoTime() - start < 2 * durationNs) {
                for (int side = 0; side < 2; side++) {
                    RLock lock = side == 0 ? single : red;
                    long c0 = cpuNs();
                    long s0 = System.nanoTime();
                    long end = s0 + slice;
                    while (true) {
                        long t0 = System.nanoTime();
                        if (t0 >= end) {
                            break;
                        }
                        lock.lock();
                        lock.unlock();
                        if (n[side] == lat[side].length) {
                            lat[side] = Arrays.copyOf(lat[side], n[side] * 2);
                        }
                        lat[side][n[side]++] = System.nanoTime() - t0;
                    }
                    if (side == 1) {
                        redNs += System.nanoTime() - s0;
                        redCpu += cpuNs() - c0;
                    }
                }
            }
            long[] one = Arrays.copyOf(lat[0], n[0]);
            long[] all = Arrays.copyOf(lat[1], n[1]);
            Arrays.sort(one);
            Arrays.sort(all);
            double p50 = percentile(all, 0.50) / 1e3;
            double singleP50 = percentile(one, 0.50) / 1e3;
            return new Json().put("threads", 1).put("members", urls.length).put("pairs", n[1])
                    .put("pairs_per_s", n[1] / (redNs / 1e9))
                    .put("p50_us", p50).put("p99_us", percentile(all, 0.99) / 1e3)
                    .put("cpu_us_per_pair", redCpu / 1e3 / Math.max(1, n[1]))
                    .put("single_pairs", n[0]).put("single_p50_us", singleP50)
                    .put("single_p99_us", percentile(one, 0.99) / 1e3)
                    .put("ratio_p50", singleP50 > 0 ? p50 / singleP50 : 0);
        } finally {
            for (RedissonClient member : members) {
                member.shutdown(0, 2, TimeUnit.SECONDS);
            }
        }
    }

    /** Scenario 2: N threads on distinct names, for a fixed time. */
    static Json scaled(RedissonClient client, Map<String, String> a) throws Exception {
        int threads = (int) num(a, "threads", 4);
        long warmup = num(a, "warmup", 500);
        long durationNs = TimeUnit.MILLISECONDS.toNanos(num(a, "duration-ms", 3_000));
        String runId = a.getOrDefault("run-id", "0");
        CyclicBarrier barrier = new CyclicBarrier(threads);
        long[] pairs = new long[threads];
        double[] rates = new double[threads];
        Throwable[] errors = new Throwable[threads];
        List<Thread> workers = new ArrayList<>();
        long cpu0 = cpuNs();
        for (int t = 0; t < threads; t++) {
            final int idx = t;
            Thread w = new Thread(() -> {
                try {
                    RLock lock = client.getLock("bench:s2:" + runId + ":" + idx);
                    for (long i = 0; i < warmup; i++) {
                        lock.lock();
                        lock.unlock();
                    }
                    barrier.await();
                    long start = System.nanoTime();
                    long end = start + durationNs;
                    long p = 0;
                    while (System.nanoTime() < end) {
                        lock.lock();
                        lock.unlock();
                        p++;
                    }
                    pairs[idx] = p;
                    rates[idx] = p / ((System.nanoTime() - start) / 1e9);
                } catch (Throwable e) {
                    errors[idx] = e;
                    barrier.reset();
                }
            }, "bench-" + t);
            w.start();
            workers.add(w);
        }
        for (Thread w : workers) {
            w.join();
        }
        for (Throwable e : errors) {
            if (e != null) {
                throw new RuntimeException(e);
            }
        }
        long cpu = cpuNs() - cpu0;
        long total = Arrays.stream(pairs).sum();
        return new Json().put("threads", threads).put("pairs", total)
                .put("pairs_per_s", Arrays.stream(rates).sum())
                .put("cpu_us_per_pair", cpu / 1e3 / Math.max(1, total))
                .put("connections", connectedClients(client));
    }

    /**
     * The connections the server has open ({@code INFO clients}), asked right after a run: on the
     * benchmark's own server these are Redisson's (its command pool as the run grew it, and its
     * pub/sub connection).
     */
    static long connectedClients(RedissonClient client) {
        RedisSingle single = client.getRedisNodes(RedisNodes.SINGLE);
        Map<String, String> info = single.getInstance().info(RedisNode.InfoSection.CLIENTS);
        return Long.parseLong(info.getOrDefault("connected_clients", "-1").trim());
    }

    /** Scenario 3, one process of it; see the class comment for the events file. */
    static Json contended(RedissonClient client, Map<String, String> a) throws Exception {
        int threads = (int) num(a, "threads", 4);
        long iterations = num(a, "iterations", 500);
        long warmup = num(a, "warmup", 20);
        long holdNs = TimeUnit.MICROSECONDS.toNanos(num(a, "hold-us", 100));
        long procs = num(a, "procs", 1);
        int procIndex = (int) num(a, "proc-index", 0);
        String runId = a.getOrDefault("run-id", "0");
        Path events = Path.of(req(a, "events"));
        CyclicBarrier ready = new CyclicBarrier(threads + 1);
        CyclicBarrier go = new CyclicBarrier(threads + 1);
        long[][] ev = new long[threads][];
        Throwable[] errors = new Throwable[threads];
        List<Thread> workers = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            final int idx = t;
            Thread w = new Thread(() -> {
                try {
                    RLock warm = lockOf(client, a, "bench:s3w:" + runId);
                    RLock hot = lockOf(client, a, "bench:s3:" + runId);
                    for (long i = 0; i < warmup; i++) {
                        warm.lock();
                        hold(holdNs);
                        warm.unlock();
                    }
                    ready.await();
                    go.await();
                    long[] mine = new long[(int) iterations * 4];
                    for (int i = 0; i < iterations; i++) {
                        long call = System.nanoTime();
                        hot.lock();
                        long acquired = System.nanoTime();
                        hold(holdNs);
                        long release = System.nanoTime();
                        hot.unlock();
                        long released = System.nanoTime();
                        mine[4 * i] = call;
                        mine[4 * i + 1] = acquired;
                        mine[4 * i + 2] = release;
                        mine[4 * i + 3] = released;
                    }
                    ev[idx] = mine;
                } catch (Throwable e) {
                    errors[idx] = e;
                    ready.reset();
                    go.reset();
                }
            }, "bench-" + t);
            w.start();
            workers.add(w);
        }
        ready.await();
        barrier(client, "bench:barrier:" + runId, procs);
        go.await();
        for (Thread w : workers) {
            w.join();
        }
        for (Throwable e : errors) {
            if (e != null) {
                throw new RuntimeException(e);
            }
        }
        int count = 0;
        try (BufferedWriter out = Files.newBufferedWriter(events, StandardCharsets.UTF_8)) {
            for (int t = 0; t < threads; t++) {
                long[] mine = ev[t];
                for (int i = 0; i < mine.length; i += 4) {
                    out.write((procIndex * 1000 + t) + " " + mine[i] + " " + mine[i + 1] + " "
                            + mine[i + 2] + " " + mine[i + 3] + "\n");
                    count++;
                }
            }
        }
        return new Json().put("kind", "process").put("events", count).put("proc_index", procIndex);
    }

    /**
     * Scenario 5, one measurement: {@code --threads} threads on ONE name of {@code --lock-type},
     * lock+unlock pairs for a fixed time (one thread for the uncontended rows, four readers
     * sharing a read lock). As {@code sync_uncontended} (scenario 7's Redisson rows), the same
     * for a synchronizer ({@code --lock-type semaphore|pes|latch}, see {@link #pairOf}).
     */
    static Json family(RedissonClient client, Map<String, String> a) throws Exception {
        int threads = (int) num(a, "threads", 1);
        long warmup = num(a, "warmup", 500);
        long durationNs = TimeUnit.MILLISECONDS.toNanos(num(a, "duration-ms", 1_500));
        String name = "bench:s5:" + a.getOrDefault("run-id", "0");
        CyclicBarrier barrier = new CyclicBarrier(threads);
        long[][] lat = new long[threads][];
        int[] counts = new int[threads];
        double[] rates = new double[threads];
        Throwable[] errors = new Throwable[threads];
        List<Thread> workers = new ArrayList<>();
        long cpu0 = cpuNs();
        for (int t = 0; t < threads; t++) {
            final int idx = t;
            Thread w = new Thread(() -> {
                try {
                    Pair pair = pairOf(client, a, name, threads);
                    for (long i = 0; i < warmup; i++) {
                        pair.run();
                    }
                    barrier.await();
                    long[] mine = new long[1 << 14];
                    int n = 0;
                    long start = System.nanoTime();
                    long end = start + durationNs;
                    while (true) {
                        long t0 = System.nanoTime();
                        if (t0 >= end) {
                            break;
                        }
                        pair.run();
                        if (n == mine.length) {
                            mine = Arrays.copyOf(mine, n * 2);
                        }
                        mine[n++] = System.nanoTime() - t0;
                    }
                    lat[idx] = mine;
                    counts[idx] = n;
                    rates[idx] = n / ((System.nanoTime() - start) / 1e9);
                } catch (Throwable e) {
                    errors[idx] = e;
                    barrier.reset();
                }
            }, "bench-" + t);
            w.start();
            workers.add(w);
        }
        for (Thread w : workers) {
            w.join();
        }
        for (Throwable e : errors) {
            if (e != null) {
                throw new RuntimeException(e);
            }
        }
        long cpu = cpuNs() - cpu0;
        int total = Arrays.stream(counts).sum();
        long[] sorted = new long[total];
        int at = 0;
        for (int t = 0; t < threads; t++) {
            System.arraycopy(lat[t], 0, sorted, at, counts[t]);
            at += counts[t];
        }
        Arrays.sort(sorted);
        return new Json().put("threads", threads).put("pairs", total)
                .put("pairs_per_s", Arrays.stream(rates).sum())
                .put("p50_us", percentile(sorted, 0.50) / 1e3)
                .put("p99_us", percentile(sorted, 0.99) / 1e3)
                .put("cpu_us_per_pair", cpu / 1e3 / Math.max(1, total));
    }

    /** One timed pair of scenario 5 or of scenario 7's synchronizer rows. */
    interface Pair {
        void run() throws Exception;
    }

    /** A latch's count: more count-downs than any run makes, so it never opens. */
    static final long LATCH_COUNT = 1_000_000_000_000L;

    /**
     * The pair of {@code --lock-type} on {@code name}, for {@code threads} threads sharing it:
     * a lock's {@code lock()} + {@code unlock()}; an RSemaphore's {@code acquire(1)} +
     * {@code release(1)} (one permit per thread, set if the semaphore has none); an
     * RPermitExpirableSemaphore's {@code acquire()} (a permanent permit) + {@code release(id)};
     * an RCountDownLatch's {@code countDown()} + {@code getCount()} on a count that never
     * reaches 0. The same pairs as the crate's rows (bench/src/sync_types.rs).
     */
    static Pair pairOf(RedissonClient client, Map<String, String> a, String name, int threads) {
        switch (a.getOrDefault("lock-type", "lock")) {
            case "semaphore": {
                RSemaphore semaphore = client.getSemaphore(name);
                semaphore.trySetPermits(threads);
                return () -> {
                    semaphore.acquire(1);
                    semaphore.release(1);
                };
            }
            case "pes": {
                RPermitExpirableSemaphore semaphore = client.getPermitExpirableSemaphore(name);
                semaphore.trySetPermits(threads);
                return () -> semaphore.release(semaphore.acquire());
            }
            case "latch": {
                RCountDownLatch latch = client.getCountDownLatch(name);
                latch.trySetCount(LATCH_COUNT);
                return () -> {
                    latch.countDown();
                    if (latch.getCount() == 0) {
                        throw new IllegalStateException("latch " + name + " opened");
                    }
                };
            }
            default: {
                RLock lock = lockOf(client, a, name);
                return () -> {
                    lock.lock();
                    lock.unlock();
                };
            }
        }
    }

    /**
     * Scenario 7's contended semaphore, Redisson's side: {@code --threads} threads over one
     * RSemaphore of {@code --permits} permits, each taking one permit ({@code acquire()})
     * {@code --iterations} times, holding it {@code --hold-us} and releasing it
     * ({@code release()}), after {@code --warmup} untimed ones on another semaphore. Hand-offs
     * as the crate's side computes them (bench/src/sync_types.rs {@code handoffs}).
     */
    static Json syncContended(RedissonClient client, Map<String, String> a) throws Exception {
        int threads = (int) Math.max(1, num(a, "threads", 8));
        int permits = (int) Math.max(1, num(a, "permits", 2));
        long iterations = num(a, "iterations", 500);
        long warmup = num(a, "warmup", 20);
        long holdNs = TimeUnit.MICROSECONDS.toNanos(num(a, "hold-us", 100));
        String runId = a.getOrDefault("run-id", "0");
        RSemaphore hot = client.getSemaphore("bench:semc:" + runId);
        RSemaphore warm = client.getSemaphore("bench:semcw:" + runId);
        hot.trySetPermits(permits);
        warm.trySetPermits(permits);
        CyclicBarrier barrier = new CyclicBarrier(threads);
        long[][] acquired = new long[threads][];
        long[][] releases = new long[threads][];
        Throwable[] errors = new Throwable[threads];
        List<Thread> workers = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            final int idx = t;
            Thread w = new Thread(() -> {
                try {
                    for (long i = 0; i < warmup; i++) {
                        warm.acquire();
                        hold(holdNs);
                        warm.release();
                    }
                    barrier.await();
                    long[] got = new long[(int) iterations];
                    long[] rel = new long[(int) iterations];
                    for (int i = 0; i < iterations; i++) {
                        hot.acquire();
                        got[i] = System.nanoTime();
                        hold(holdNs);
                        rel[i] = System.nanoTime();
                        hot.release();
                    }
                    acquired[idx] = got;
                    releases[idx] = rel;
                } catch (Throwable e) {
                    errors[idx] = e;
                    barrier.reset();
                }
            }, "bench-" + t);
            w.start();
            workers.add(w);
        }
        for (Thread w : workers) {
            w.join();
        }
        for (Throwable e : errors) {
            if (e != null) {
                throw new RuntimeException(e);
            }
        }
        long[] got = Arrays.stream(acquired).flatMapToLong(Arrays::stream).sorted().toArray();
        long[] rel = Arrays.stream(releases).flatMapToLong(Arrays::stream).sorted().toArray();
        long[] gaps = new long[got.length];
        int n = 0;
        long overlaps = 0;
        for (int k = permits; k < got.length; k++) {
            if (k - permits < rel.length && got[k] >= rel[k - permits]) {
                gaps[n++] = got[k] - rel[k - permits];
            } else {
                overlaps++;
            }
        }
        long[] handoff = Arrays.copyOf(gaps, n);
        Arrays.sort(handoff);
        long start = got.length == 0 ? 0 : got[0];
        long end = rel.length == 0 ? 0 : rel[rel.length - 1];
        return new Json().put("threads", threads).put("permits", permits)
                .put("acquisitions", got.length).put("total_ms", (end - start) / 1e6)
                .put("handoff_p50_us", percentile(handoff, 0.50) / 1e3)
                .put("handoff_p99_us", percentile(handoff, 0.99) / 1e3)
                .put("handoff_max_us", percentile(handoff, 1.0) / 1e3)
                .put("overlaps", overlaps);
    }

    /** The lock of {@code --lock-type} (default {@code lock}, RLock) called {@code name}. */
    static RLock lockOf(RedissonClient client, Map<String, String> a, String name) {
        String type = a.getOrDefault("lock-type", "lock");
        switch (type) {
            case "lock":
                return client.getLock(name);
            case "fair":
                return client.getFairLock(name);
            case "read":
                return client.getReadWriteLock(name).readLock();
            case "write":
                return client.getReadWriteLock(name).writeLock();
            case "fenced":
                return Compat.lockByName(client, "getFencedLock", name);
            case "spin":
                return Compat.lockByName(client, "getSpinLock", name);
            case "nonreentrant":
                // Since 4.4.0: by reflection, so the driver still builds against older releases.
                try {
                    return (RLock) client.getClass().getMethod("getNonReentrantLock", String.class)
                            .invoke(client, name);
                } catch (NoSuchMethodException e) {
                    throw new IllegalArgumentException("getNonReentrantLock is not in this Redisson version");
                } catch (ReflectiveOperationException e) {
                    throw new RuntimeException(e.getCause() == null ? e : e.getCause());
                }
            default:
                throw new IllegalArgumentException("unknown lock type " + type);
        }
    }

    /**
     * Scenario 4: hold N locks in watchdog mode while rlock-bench observe times the renewals.
     * With {@code --in-flight K} (K &gt; 0) the locks are taken with {@code lockAsync()} and
     * released with {@code unlockAsync()}, at most K calls outstanding (all from this thread,
     * so one owner field): a JVM on one vCPU needs ~150 µs of CPU per blocking
     * {@code lock()}, too slow for 100,000 locks. Renewal is the same either way.
     */
    static Json watchdog(RedissonClient client, Map<String, String> a) throws Exception {
        String runId = a.getOrDefault("run-id", "0");
        int n = (int) num(a, "locks", 10_000);
        int inFlight = (int) num(a, "in-flight", 0);
        long watchdogMs = num(a, "watchdog-ms", 3_000);
        long windowMs = watchdogMs * num(a, "window-permille", 3_500) / 3_000;
        String[] names = new String[n];
        for (int i = 0; i < n; i++) {
            names[i] = "bench:s4:" + runId + ":" + i;
        }
        if (num(a, "warm", 1) != 0) {
            RLock warm = client.getLock("bench:s4:warm");
            warm.lock();
            warm.unlock();
        }
        MemoryMXBean mem = ManagementFactory.getMemoryMXBean();
        System.gc();
        long rss0 = rssBytes();
        long heap0 = mem.getHeapMemoryUsage().getUsed();
        long t0 = System.nanoTime();
        List<RLock> held = new ArrayList<>(n);
        for (String name : names) {
            held.add(client.getLock(name));
        }
        if (inFlight > 0) {
            windowed(held, inFlight, RLock::lockAsync);
        } else {
            for (RLock lock : held) {
                lock.lock();
            }
        }
        double acquireS = (System.nanoTime() - t0) / 1e9;
        System.gc();
        long rss1 = rssBytes();
        long heap1 = mem.getHeapMemoryUsage().getUsed();
        long cpu1 = cpuNs();
        mark(client, runId, "holding");
        Thread.sleep(windowMs);
        long cpu2 = cpuNs();
        long rss2 = rssBytes();
        mark(client, runId, "done");
        long alive = client.getKeys().countExists(names);
        long t1 = System.nanoTime();
        if (inFlight > 0) {
            windowed(held, inFlight, RLock::unlockAsync);
        } else {
            for (RLock lock : held) {
                lock.unlock();
            }
        }
        double releaseS = (System.nanoTime() - t1) / 1e9;
        return new Json().put("kind", "holder").put("locks", n).put("watchdog_ms", watchdogMs)
                .put("window_ms", windowMs).put("acquire_s", acquireS).put("release_s", releaseS)
                .put("acquire_in_flight", inFlight)
                .put("cpu_ms_window", (cpu2 - cpu1) / 1e6)
                .put("rss_before_mb", rss0 / 1048576.0).put("rss_holding_mb", rss1 / 1048576.0)
                .put("rss_end_mb", rss2 / 1048576.0)
                .put("bytes_per_lock", Math.max(0, rss1 - rss0) / (double) n)
                .put("heap_bytes_per_lock", Math.max(0, heap1 - heap0) / (double) n)
                .put("keys_alive", alive)
                .put("renewal", "LockRenewalScheduler, lockWatchdogBatchSize 100, chunks sent one after another");
    }

    /** Runs {@code call} on every lock, at most {@code inFlight} outstanding; fails on the first error. */
    static void windowed(List<RLock> locks, int inFlight, java.util.function.Function<RLock, RFuture<Void>> call) {
        java.util.ArrayDeque<CompletableFuture<Void>> pending = new java.util.ArrayDeque<>(inFlight);
        for (RLock lock : locks) {
            if (pending.size() >= inFlight) {
                pending.removeFirst().join();
            }
            pending.addLast(call.apply(lock).toCompletableFuture());
        }
        while (!pending.isEmpty()) {
            pending.removeFirst().join();
        }
    }

    /**
     * Issue 36's waiters scenario (bench/src/waiters.rs has the crate's): one thread holds
     * {@code names} locks (60 s lease), {@code per-name} threads per name wait on each; once
     * every name has a subscriber and a second more has passed, the holder releases them all and
     * each waiter takes its name, holds it {@code hold-us}, releases it and waits again until
     * its name was taken {@code handoffs} times. Hand-off: a release's start to the next
     * acquisition of that name. Attempts: the server's EVAL/EVALSHA calls less the releases.
     */
    static Json waiters(RedissonClient client, Map<String, String> a) throws Exception {
        int names = (int) num(a, "names", 1_000);
        int perName = (int) num(a, "per-name", 10);
        long handoffs = Math.max(num(a, "handoffs", 20), perName);
        long holdNs = TimeUnit.MICROSECONDS.toNanos(num(a, "hold-us", 200));
        boolean fair = "fair".equals(a.getOrDefault("lock-type", "lock"));
        String runId = a.getOrDefault("run-id", "0");
        java.util.function.IntFunction<RLock> lockOf = i -> fair
                ? client.getFairLock("bench:wj:" + runId + ":" + i)
                : client.getLock("bench:wj:" + runId + ":" + i);
        // A lease no setup outlasts (10,000 Java threads take a while to start and park) and
        // no renewal (every script call measured is an acquire or a release).
        for (int i = 0; i < names; i++) {
            lockOf.apply(i).lock(600, TimeUnit.SECONDS);
        }
        java.util.concurrent.atomic.AtomicLongArray counts = new java.util.concurrent.atomic.AtomicLongArray(names);
        List<long[]>[] taken = new List[names];
        for (int i = 0; i < names; i++) {
            taken[i] = java.util.Collections.synchronizedList(new ArrayList<>());
        }
        List<Thread> threads = new ArrayList<>();
        for (int i = 0; i < names; i++) {
            for (int w = 0; w < perName; w++) {
                final int name = i;
                Thread t = new Thread(null, () -> {
                    RLock lock = lockOf.apply(name);
                    while (true) {
                        lock.lock(60, TimeUnit.SECONDS);
                        long acquired = System.nanoTime();
                        long n = counts.incrementAndGet(name);
                        hold(holdNs);
                        long release = System.nanoTime();
                        lock.unlock();
                        taken[name].add(new long[] {acquired, release});
                        if (n >= handoffs) {
                            break;
                        }
                    }
                }, "waiter-" + i + "-" + w, 256 * 1024);
                t.start();
                threads.add(t);
            }
        }
        // Every waiter parked: its channel subscribed (one per name for the lock, one per
        // waiter for the fair lock) and every thread waiting; then a second more.
        RedisSingle single = client.getRedisNodes(RedisNodes.SINGLE);
        long expected = fair ? (long) names * perName : names;
        long giveUp = System.nanoTime() + TimeUnit.SECONDS.toNanos(300);
        long looks = 0;
        while (true) {
            Map<String, String> info = single.getInstance().info(RedisNode.InfoSection.ALL);
            long channels = Long.parseLong(info.getOrDefault("pubsub_channels", "0").trim());
            long parked = threads.stream().filter(t -> t.getState() == Thread.State.WAITING
                    || t.getState() == Thread.State.TIMED_WAITING).count();
            if (channels >= expected && parked == threads.size()) {
                break;
            }
            if (System.nanoTime() > giveUp) {
                throw new IllegalStateException(channels + " of " + expected + " channels, "
                        + parked + " of " + threads.size() + " threads parked after 300 s");
            }
            if (++looks % 200 == 0) {
                System.err.println("waiters: " + channels + " of " + expected + " channels, "
                        + parked + " of " + threads.size() + " threads parked");
            }
            Thread.sleep(50);
        }
        Thread.sleep(1_000);
        long calls0 = scriptCalls(single);
        long serverCpu0 = serverCpuNs(single);
        long cpu0 = processCpuNs();
        long t0 = System.nanoTime();
        for (int i = 0; i < names; i++) {
            lockOf.apply(i).unlock();
        }
        for (Thread t : threads) {
            t.join();
        }
        long elapsed = System.nanoTime() - t0;
        long calls = scriptCalls(single) - calls0;
        // How busy each side's CPU was with the hand-offs, over the phase: this JVM (of the
        // CPUs it may run on: one when pinned) and Redis (its main thread: of one CPU).
        double clientBusy = (processCpuNs() - cpu0)
                / ((double) Math.max(1, elapsed) * Runtime.getRuntime().availableProcessors());
        double serverBusy = (serverCpuNs(single) - serverCpu0) / (double) Math.max(1, elapsed);
        long acquisitions = 0;
        List<Long> gaps = new ArrayList<>();
        for (int i = 0; i < names; i++) {
            List<long[]> events = new ArrayList<>(taken[i]);
            events.sort((x, y) -> Long.compare(x[0], y[0]));
            acquisitions += events.size();
            for (int k = 1; k < events.size(); k++) {
                gaps.add(Math.max(0, events.get(k)[0] - events.get(k - 1)[1]));
            }
        }
        long[] sorted = gaps.stream().mapToLong(Long::longValue).sorted().toArray();
        long releases = names + acquisitions;
        return new Json().put("kind", "waiters").put("names", names).put("per_name", perName)
                .put("waiters", (long) names * perName).put("acquisitions", acquisitions)
                .put("attempts_per_acquisition", Math.max(0, calls - releases) / (double) Math.max(1, acquisitions))
                .put("handoff_p50_us", percentile(sorted, 0.50) / 1000.0)
                .put("handoff_p99_us", percentile(sorted, 0.99) / 1000.0)
                .put("handoffs_per_s", acquisitions / (elapsed / 1e9))
                .put("client_busy", clientBusy).put("server_busy", serverBusy);
    }

    /** This JVM's CPU time so far (user + system), in nanoseconds. */
    static long processCpuNs() {
        java.lang.management.OperatingSystemMXBean os =
                java.lang.management.ManagementFactory.getOperatingSystemMXBean();
        return os instanceof com.sun.management.OperatingSystemMXBean
                ? ((com.sun.management.OperatingSystemMXBean) os).getProcessCpuTime() : 0;
    }

    /** Redis's own CPU time so far (user + system, INFO cpu), in nanoseconds. */
    static long serverCpuNs(RedisSingle single) {
        return (long) (sumInfo(single, RedisNode.InfoSection.CPU,
                new String[] {"used_cpu_user", "used_cpu_sys"}, Double::parseDouble) * 1e9);
    }

    /** The EVAL and EVALSHA calls the server ran so far. */
    static long scriptCalls(RedisSingle single) {
        return (long) sumInfo(single, RedisNode.InfoSection.COMMANDSTATS,
                new String[] {"cmdstat_eval", "cmdstat_evalsha"}, v -> {
                    for (String part : v.split(",")) {
                        if (part.startsWith("calls=")) {
                            return Long.parseLong(part.substring(6));
                        }
                    }
                    return 0;
                });
    }

    /** The sum of {@code value} over the {@code keys} of an INFO section that are there. */
    static double sumInfo(RedisSingle single, RedisNode.InfoSection section, String[] keys,
            java.util.function.ToDoubleFunction<String> value) {
        Map<String, String> info = single.getInstance().info(section);
        double sum = 0;
        for (String key : keys) {
            String v = info.get(key);
            if (v != null) {
                sum += value.applyAsDouble(v.trim());
            }
        }
        return sum;
    }

    // ------------------------------------------------------------ helpers

    /** Sleeps at least {@code ns} (the critical section). */
    static void hold(long ns) {
        long until = System.nanoTime() + ns;
        long left;
        while ((left = until - System.nanoTime()) > 0) {
            LockSupport.parkNanos(left);
        }
    }

    /** Waits until {@code n} processes reached the barrier {@code key} (an INCR'd counter). */
    static void barrier(RedissonClient client, String key, long n) throws InterruptedException {
        RAtomicLong counter = client.getAtomicLong(key);
        counter.incrementAndGet();
        counter.expire(600, TimeUnit.SECONDS);
        long giveUp = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
        while (counter.get() < n) {
            if (System.nanoTime() > giveUp) {
                throw new IllegalStateException("barrier " + key + ": not all " + n + " processes arrived");
            }
            LockSupport.parkNanos(500_000);
        }
    }

    static void mark(RedissonClient client, String runId, String what) {
        client.getBucket("bench:s4:" + runId + ":" + what, StringCodec.INSTANCE)
                .set("1", 600, TimeUnit.SECONDS);
    }

    static long cpuNs() {
        java.lang.management.OperatingSystemMXBean os = ManagementFactory.getOperatingSystemMXBean();
        if (os instanceof com.sun.management.OperatingSystemMXBean) {
            return ((com.sun.management.OperatingSystemMXBean) os).getProcessCpuTime();
        }
        return 0;
    }

    static long rssBytes() throws IOException {
        String[] statm = Files.readString(Path.of("/proc/self/statm")).trim().split("\\s+");
        return Long.parseLong(statm[1]) * 4096L;
    }

    static long percentile(long[] sorted, double q) {
        if (sorted.length == 0) {
            return 0;
        }
        int rank = (int) Math.ceil(q * sorted.length);
        return sorted[Math.min(Math.max(rank, 1), sorted.length) - 1];
    }

    static Map<String, String> parse(String[] argv) {
        Map<String, String> m = new HashMap<>();
        for (int i = 0; i + 1 < argv.length; i += 2) {
            if (!argv[i].startsWith("--")) {
                throw new IllegalArgumentException("expected --key value, got " + argv[i]);
            }
            m.put(argv[i].substring(2), argv[i + 1]);
        }
        return m;
    }

    static String req(Map<String, String> a, String key) {
        String v = a.get(key);
        if (v == null) {
            throw new IllegalArgumentException("missing --" + key);
        }
        return v;
    }

    static long num(Map<String, String> a, String key, long dflt) {
        String v = a.get(key);
        return v == null ? dflt : Long.parseLong(v);
    }

    /** A flat JSON object of numbers and strings, in insertion order. */
    static final class Json {
        private final StringBuilder sb = new StringBuilder("{");

        Json put(String key, Object value) {
            if (sb.length() > 1) {
                sb.append(',');
            }
            sb.append('"').append(key).append("\":");
            if (value instanceof Number) {
                double d = ((Number) value).doubleValue();
                sb.append(Double.isFinite(d) ? value.toString() : "null");
            } else {
                sb.append('"').append(value.toString().replace("\\", "\\\\").replace("\"", "\\\"")).append('"');
            }
            return this;
        }

        @Override
        public String toString() {
            return sb + "}";
        }
    }
}
