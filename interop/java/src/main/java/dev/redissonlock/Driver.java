package dev.redissonlock;

import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.CompletionException;
import java.util.concurrent.TimeUnit;

import org.redisson.Redisson;
import org.redisson.api.RAtomicLong;
import org.redisson.api.RBucket;
import org.redisson.api.RLock;
import org.redisson.api.RedissonClient;
import org.redisson.client.codec.StringCodec;
import org.redisson.config.Config;

/**
 * Line-protocol driver for real Redisson locks, spawned by the Rust interop tests.
 *
 * <pre>
 *   java -jar redisson-driver-&lt;v&gt;.jar redis://127.0.0.1:17001 30000
 *   java -jar redisson-driver-&lt;v&gt;.jar sentinel:mymaster:redis://127.0.0.1:26379,redis://127.0.0.1:26380 30000
 *   java -jar redisson-driver-&lt;v&gt;.jar rediss://127.0.0.1:17001 30000 truststore.p12 changeit
 * </pre>
 *
 * Prints {@code READY <redisson version> <client id>}, then reads commands
 * {@code <actor> <op> <args...>} from stdin, one per line. Every actor is a
 * dedicated platform thread with its own FIFO queue (Redisson locks are owned
 * per Java thread), so a blocking {@code t1 lock x} does not block {@code t2}.
 * Each command answers with exactly one line:
 * {@code <actor> <op> OK [value...]} or {@code <actor> <op> ERR <Exception> <message>}.
 * See README.md for the full contract.
 */
public final class Driver {

    /** Thrown for unknown ops / malformed arguments; reported as {@code ERR BadCommand ...}. */
    static final class BadCommand extends RuntimeException {
        BadCommand(String message) {
            super(message);
        }
    }

    /** The real stdout; System.out is redirected to stderr so only protocol lines reach it. */
    private static final PrintStream OUT =
            new PrintStream(new FileOutputStream(FileDescriptor.out), false, StandardCharsets.UTF_8);

    /** Set once we start shutting down; later result lines are dropped so BYE stays last. */
    private static boolean closed;

    private static RedissonClient client;
    private static final Map<String, Actor> ACTORS = new ConcurrentHashMap<>();

    /** Writes one whole line atomically and flushes it. */
    static void emit(String line) {
        synchronized (OUT) {
            if (closed) {
                return;
            }
            OUT.print(line);
            OUT.print('\n');
            OUT.flush();
        }
    }

    public static void main(String[] args) throws Exception {
        // Anything a library might print to System.out goes to stderr instead.
        System.setOut(System.err);

        if (args.length != 2 && args.length != 4) {
            System.err.println("usage: java -jar redisson-driver.jar <redis-url>|cluster:<url>,<url>...|"
                    + "sentinel:<masterName>:<url>,<url>... <watchdogTimeoutMs>"
                    + " [<truststore file> <truststore password>]");
            System.exit(2);
        }
        Config config = new Config();
        Object servers; // the topology's settings (BaseConfig), for Compat.truststore
        if (args[0].startsWith("cluster:")) {
            // Redis Cluster, Redisson's defaults otherwise (sharded pub/sub
            // AUTO in 3.29+, probed on connect in 3.22+).
            servers = config.useClusterServers().addNodeAddress(addresses(args[0].substring("cluster:".length())));
        } else if (args[0].startsWith("sentinel:")) {
            // Redis Sentinel: the master name, then the sentinels' URLs.
            // Redisson's defaults otherwise (checkLockSyncedSlaves on, reads
            // from replicas, sentinel discovery on).
            String rest = args[0].substring("sentinel:".length());
            int colon = rest.indexOf(':');
            if (colon <= 0) {
                System.err.println("expected sentinel:<masterName>:<url>,<url>..., got " + args[0]);
                System.exit(2);
            }
            servers = config.useSentinelServers()
                    .setMasterName(rest.substring(0, colon))
                    .addSentinelAddress(addresses(rest.substring(colon + 1)));
        } else {
            servers = config.useSingleServer().setAddress(args[0]);
        }
        config.setLockWatchdogTimeout(Long.parseLong(args[1]));
        if (args.length == 4) {
            // TLS (rediss:// URLs): the server's certificate is checked
            // against the CA in this truststore (PKCS12 or JKS), host name
            // included (Redisson's default verification).
            Compat.truststore(config, servers, Path.of(args[2]).toUri().toURL(), args[3]);
        }
        Compat.configure(config, redissonVersion());
        client = Redisson.create(config);

        // The UUID Redisson puts in lock hash fields ("<id>:<threadId>").
        String clientId = Compat.clientId(client);
        emit("READY " + redissonVersion() + " " + clientId);

        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            String[] words = line.trim().split("\\s+");
            if (words[0].isEmpty()) {
                continue; // blank line
            }
            if (words[words.length > 1 ? 1 : 0].equals("quit")) {
                break; // "- quit" (actor ignored); a bare "quit" is accepted too
            }
            if (words.length < 2) {
                emit(words[0] + " - ERR BadCommand missing op");
                continue;
            }
            // Created on first use; commands of one actor run in order on its thread.
            ACTORS.computeIfAbsent(words[0], Actor::new).submit(words);
        }
        // "quit" or stdin EOF: pending/blocked actor commands are abandoned.
        shutdown();
    }

    /** Comma-separated node URLs, each without a trailing slash (Redisson rejects one). */
    private static String[] addresses(String list) {
        String[] urls = list.split(",");
        for (int i = 0; i < urls.length; i++) {
            urls[i] = urls[i].replaceAll("/+$", "");
        }
        return urls;
    }

    private static void shutdown() {
        synchronized (OUT) {
            closed = true; // actors failing because of the shutdown stay silent
        }
        try {
            client.shutdown(0, 2, TimeUnit.SECONDS);
        } catch (Throwable t) {
            System.err.println("shutdown: " + t);
        }
        OUT.print("BYE\n");
        OUT.flush();
        System.exit(0);
    }

    /** Version of the Redisson jar actually on the classpath (from its Maven metadata). */
    private static String redissonVersion() {
        try (InputStream is = Redisson.class.getResourceAsStream(
                "/META-INF/maven/org.redisson/redisson/pom.properties")) {
            if (is != null) {
                Properties p = new Properties();
                p.load(is);
                return p.getProperty("version", "unknown");
            }
        } catch (Exception ignored) {
            // fall through
        }
        return "unknown";
    }

    /** One named actor: a thread executing its own commands in FIFO order. */
    static final class Actor implements Runnable {
        private final String name;
        private final LinkedBlockingQueue<String[]> queue = new LinkedBlockingQueue<>();

        Actor(String name) {
            this.name = name;
            Thread t = new Thread(this, "actor-" + name);
            t.setDaemon(true); // never keeps the JVM alive
            t.start();
        }

        void submit(String[] words) {
            queue.add(words);
        }

        @Override
        public void run() {
            while (true) {
                String[] words;
                try {
                    words = queue.take();
                } catch (InterruptedException e) {
                    return;
                }
                String op = words[1];
                String[] a = Arrays.copyOfRange(words, 2, words.length);
                String result;
                try {
                    String value = execute(op, a);
                    result = value.isEmpty() ? "OK" : "OK " + value;
                } catch (Compat.NotApplicable na) {
                    // Not an error: this Redisson version lacks the feature.
                    result = "NA " + na.getMessage();
                } catch (Throwable t) {
                    result = error(t);
                }
                emit(name + " " + op + " " + result);
            }
        }

        /** Runs one op on this (the actor's) thread; returns the value after "OK". */
        private String execute(String op, String[] a) throws Exception {
            long start = System.nanoTime();
            switch (op) {
                case "lock": {
                    args(op, a, 1);
                    lock(a[0]).lock();
                    return String.valueOf(ms(start));
                }
                case "lockLease": {
                    args(op, a, 2);
                    long lease = num(a[1]);
                    lock(a[0]).lock(lease, TimeUnit.MILLISECONDS);
                    return String.valueOf(ms(start));
                }
                case "tryLock": {
                    args(op, a, 2);
                    long wait = num(a[1]);
                    // no lease argument: watchdog-renewed lease
                    boolean ok = lock(a[0]).tryLock(wait, TimeUnit.MILLISECONDS);
                    return ok + " " + ms(start);
                }
                case "tryLockNow":
                    args(op, a, 1);
                    return String.valueOf(lock(a[0]).tryLock());
                case "unlock":
                    args(op, a, 1);
                    lock(a[0]).unlock();
                    return "";
                case "forceUnlock":
                    args(op, a, 1);
                    return String.valueOf(lock(a[0]).forceUnlock());
                case "isLocked":
                    args(op, a, 1);
                    return String.valueOf(lock(a[0]).isLocked());
                case "isHeldByCurrentThread":
                    args(op, a, 1);
                    return String.valueOf(lock(a[0]).isHeldByCurrentThread());
                case "remainTimeToLive":
                    args(op, a, 1);
                    return String.valueOf(lock(a[0]).remainTimeToLive());
                case "holdCount":
                    args(op, a, 1);
                    return String.valueOf(lock(a[0]).getHoldCount());
                case "lockToken": {
                    // fenced/<name>: lockAndGetToken, the token after OK
                    args(op, a, 1);
                    return String.valueOf(Compat.call(lock(a[0]), "lockAndGetToken", new Class<?>[0]));
                }
                case "tryLockToken": {
                    // fenced/<name> <wait ms>: tryLockAndGetToken, the token or null
                    args(op, a, 2);
                    Object token = Compat.call(lock(a[0]), "tryLockAndGetToken",
                            new Class<?>[] {long.class, TimeUnit.class}, num(a[1]), TimeUnit.MILLISECONDS);
                    return String.valueOf(token);
                }
                case "token":
                    args(op, a, 1);
                    return String.valueOf(Compat.call(lock(a[0]), "getToken", new Class<?>[0]));
                case "multiLock": {
                    // a,b,c: getMultiLock over those locks (same client), lock()
                    args(op, a, 1);
                    multi(a[0]).lock();
                    return String.valueOf(ms(start));
                }
                case "multiTryLock": {
                    args(op, a, 2);
                    boolean ok = multi(a[0]).tryLock(num(a[1]), TimeUnit.MILLISECONDS);
                    return ok + " " + ms(start);
                }
                case "multiUnlock":
                    args(op, a, 1);
                    multi(a[0]).unlock();
                    return "";
                case "threadId":
                    args(op, a, 0);
                    return String.valueOf(Thread.currentThread().getId());
                case "sleep":
                    args(op, a, 1);
                    Thread.sleep(num(a[0]));
                    return "";
                case "mutex":
                    args(op, a, 5);
                    return mutex(a[0], a[1], a[2], num(a[3]), num(a[4]));
                default:
                    return extension(op, a);
            }
        }

        /**
         * An op {@code <family>.<verb>} (e.g. {@code sem.acquire}) is handled by
         * the class {@code dev.redissonlock.<Family>Ops} (e.g. {@code SemOps}),
         * whose {@code public static String run(RedissonClient, String verb,
         * String[] args)} returns the reply: each family of synchronizer ops lives
         * in its own file.
         */
        private static String extension(String op, String[] a) throws Exception {
            int dot = op.indexOf('.');
            if (dot <= 0) {
                throw new BadCommand("unknown op " + op);
            }
            String family = op.substring(0, dot);
            String name = "dev.redissonlock." + Character.toUpperCase(family.charAt(0))
                    + family.substring(1) + "Ops";
            java.lang.reflect.Method run;
            try {
                run = Class.forName(name).getMethod("run", RedissonClient.class, String.class, String[].class);
            } catch (ClassNotFoundException | NoSuchMethodException e) {
                throw new BadCommand("unknown op " + op);
            }
            try {
                return (String) run.invoke(null, client, op.substring(dot + 1), a);
            } catch (java.lang.reflect.InvocationTargetException e) {
                Throwable cause = e.getCause();
                if (cause instanceof Exception) {
                    throw (Exception) cause;
                }
                throw e;
            }
        }

        /**
         * Critical-section stress loop. Keys are plain Redis strings holding decimal
         * text, so another language can use GET/SET/INCR/DECR on the same keys:
         * RAtomicLong uses INCRBY on a plain integer, the bucket uses StringCodec.
         */
        private String mutex(String lockName, String counterKey, String occKey,
                             long iterations, long sleepMs) throws InterruptedException {
            RLock lock = lock(lockName);
            RAtomicLong occupancy = client.getAtomicLong(occKey);
            RBucket<String> counter = client.getBucket(counterKey, StringCodec.INSTANCE);
            long maxOcc = 0;
            long done = 0;
            for (; done < iterations; done++) {
                lock.lock();
                try {
                    long occ = occupancy.incrementAndGet(); // holders inside right now
                    maxOcc = Math.max(maxOcc, occ);
                    String v = counter.get();
                    long next = (v == null ? 0 : Long.parseLong(v)) + 1;
                    Thread.sleep(sleepMs); // 0 = no sleep; widens the race window
                    counter.set(Long.toString(next));
                    occupancy.decrementAndGet();
                } finally {
                    lock.unlock();
                }
            }
            return done + " " + maxOcc;
        }

        /**
         * The lock a command names. A plain name is {@code getLock(name)}; a
         * {@code <type>/<name>} picks another type of the family:
         * {@code fair/}, {@code fenced/}, {@code spin/}, {@code read/} and
         * {@code write/} (of {@code getReadWriteLock}), {@code nonreentrant/}
         * and {@code nonreentrantfair/} (4.4.0+, looked up by reflection so the
         * driver also builds against older Redisson).
         */
        private static RLock lock(String name) {
            int slash = name.indexOf('/');
            if (slash < 0) {
                return client.getLock(name);
            }
            String type = name.substring(0, slash);
            String raw = name.substring(slash + 1);
            switch (type) {
                case "fair":
                    return client.getFairLock(raw);
                case "fenced":
                    // 3.19.0+; the spin lock 3.15.0+ (by reflection: the
                    // driver builds against older versions too).
                    return Compat.lockByName(client, "getFencedLock", raw);
                case "spin":
                    return Compat.lockByName(client, "getSpinLock", raw);
                case "read":
                    return client.getReadWriteLock(raw).readLock();
                case "write":
                    return client.getReadWriteLock(raw).writeLock();
                case "nonreentrant":
                    return Compat.lockByName(client, "getNonReentrantLock", raw);
                case "nonreentrantfair":
                    return Compat.lockByName(client, "getNonReentrantFairLock", raw);
                default:
                    throw new BadCommand("unknown lock type " + type);
            }
        }

        /** {@code getMultiLock} over comma-separated lock names (each may carry a type). */
        private static RLock multi(String names) {
            String[] parts = names.split(",");
            RLock[] locks = new RLock[parts.length];
            for (int i = 0; i < parts.length; i++) {
                locks[i] = lock(parts[i]);
            }
            return client.getMultiLock(locks);
        }

    }

    private static void args(String op, String[] a, int n) {
        if (a.length != n) {
            throw new BadCommand(op + " expects " + n + " argument(s), got " + a.length);
        }
    }

    private static long num(String s) {
        try {
            return Long.parseLong(s);
        } catch (NumberFormatException e) {
            throw new BadCommand("not an integer: " + s);
        }
    }

    private static long ms(long startNanos) {
        return TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - startNanos);
    }

    /** {@code ERR <SimpleName> <message>}, unwrapping async wrappers, on one line. */
    private static String error(Throwable t) {
        while ((t instanceof CompletionException || t instanceof ExecutionException) && t.getCause() != null) {
            t = t.getCause();
        }
        String msg = t.getMessage() == null ? "" : t.getMessage().replaceAll("[\\r\\n]+", " ").trim();
        return "ERR " + t.getClass().getSimpleName() + (msg.isEmpty() ? "" : " " + msg);
    }
}
