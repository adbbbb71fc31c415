package dev.redissonlock;

import java.lang.reflect.Method;
import java.time.Instant;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;

import org.redisson.api.RLock;
import org.redisson.api.RedissonClient;

/**
 * The JVM side of {@code ./scripts/torture.sh --kind fenced}
 * (examples/torture/fenced_jvm.rs): Redisson's fenced lock
 * ({@code getFencedLock}, 3.19.0+, reached by reflection so that the driver
 * still builds against older versions, where these ops answer {@code NA}).
 *
 * <ul>
 * <li>{@code fenced.torture <who> <names,comma,separated> <watchdogMs>
 * <leaseMinMs> [lease-only]}: until {@code fenced.stop}, takes a random lock (
 * {@code tryLockAndGetToken()} 1 time in 10, {@code tryLockAndGetToken(0.1-3 s)}
 * 5, {@code lockAndGetToken(lease)} with a lease of {@code leaseMinMs} to
 * {@code watchdogMs} 1, {@code lockAndGetToken()} 3), holds it 0.2-3 ms and
 * unlocks it ({@code lease-only}, in runs that freeze Redis past the lease:
 * every acquisition with an explicit lease, the only way a Redisson holder
 * can know when its lock may be gone), printing every step as a history line ({@code H <t ns> <who>
 * ...}, examples/torture/history.rs) and the torture's {@code A}/{@code S}
 * lines. Answers the number of holds.</li>
 * <li>{@code fenced.stop}: makes every {@code fenced.torture} finish its
 * iteration and answer.</li>
 * </ul>
 *
 * Valid-until ({@code vu}) is the acquire's invoke time plus its lease (the
 * watchdog timeout without an explicit lease): Redisson does not let a caller
 * see its renewals. Redisson has no lost signal either: past {@code vu}, a
 * hold with an explicit lease knows by its own clock that it is lost (its
 * signal then dates from {@code vu}); a watchdog hold asks
 * {@code isHeldByCurrentThread()}, and learns a loss only then.
 */
final class FencedOps {
    private FencedOps() {
    }

    private static volatile boolean stop;

    public static String run(RedissonClient client, String verb, String[] a) throws Exception {
        switch (verb) {
            case "torture":
                if (a.length != 4 && !(a.length == 5 && a[4].equals("lease-only"))) {
                    throw new Driver.BadCommand("fenced.torture takes 4 arguments and lease-only, got " + a.length);
                }
                return torture(client, a[0], a[1].split(","), Long.parseLong(a[2]), Long.parseLong(a[3]),
                        a.length == 5);
            case "stop":
                stop = true;
                return "";
            default:
                throw new Driver.BadCommand("unknown op fenced." + verb);
        }
    }

    /** The realtime clock in ns (the Rust workers' clock: CLOCK_REALTIME). */
    private static long now() {
        Instant now = Instant.now();
        return now.getEpochSecond() * 1_000_000_000L + now.getNano();
    }

    private static void hist(long t, String rest) {
        Driver.emit("H " + t + " " + rest);
    }

    private static Method method(RLock lock, String name, Class<?>... types) {
        try {
            return lock.getClass().getMethod(name, types);
        } catch (NoSuchMethodException e) {
            throw new Compat.NotApplicable(name + " is not in this Redisson version");
        }
    }

    private static Long call(Method m, RLock lock, Object... args) throws Throwable {
        try {
            return (Long) m.invoke(lock, args);
        } catch (java.lang.reflect.InvocationTargetException e) {
            throw e.getCause();
        }
    }

    private static void sleepMicros(long micros) {
        try {
            TimeUnit.MICROSECONDS.sleep(micros);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private static String torture(RedissonClient client, String who, String[] names, long watchdogMs,
            long leaseMinMs, boolean leaseOnly) {
        ThreadLocalRandom rng = ThreadLocalRandom.current();
        long h = 0;
        long holds = 0;
        while (!stop) {
            String name = names[rng.nextInt(names.length)];
            RLock lock = Compat.lockByName(client, "getFencedLock", name);
            int mode = rng.nextInt(10);
            h++;
            String id = "lock=" + name + " h=" + h;
            boolean explicit = leaseOnly || mode == 9;
            long lease = explicit ? leaseMinMs + rng.nextLong(watchdogMs - leaseMinMs + 1) : -1;
            long wait = 100 + rng.nextLong(2901);
            String call = (mode == 0 ? "try" : mode <= 5 ? "tryfor" : "lock") + (explicit ? "-lease" : "");
            long invoked = now();
            hist(invoked, who + " acquire invoke " + id + " mode=w call=" + call);
            Long token;
            try {
                if (explicit && mode <= 5) {
                    // tryLockAndGetToken(wait, lease, unit); no wait for mode 0.
                    token = call(method(lock, "tryLockAndGetToken", long.class, long.class, TimeUnit.class), lock,
                            mode == 0 ? 0L : wait, lease, TimeUnit.MILLISECONDS);
                } else if (explicit) {
                    token = call(method(lock, "lockAndGetToken", long.class, TimeUnit.class), lock, lease,
                            TimeUnit.MILLISECONDS);
                } else if (mode == 0) {
                    token = call(method(lock, "tryLockAndGetToken"), lock);
                } else if (mode <= 5) {
                    token = call(method(lock, "tryLockAndGetToken", long.class, TimeUnit.class), lock, wait,
                            TimeUnit.MILLISECONDS);
                } else {
                    token = call(method(lock, "lockAndGetToken"), lock);
                }
            } catch (Compat.NotApplicable na) {
                throw na;
            } catch (Throwable t) {
                hist(now(), who + " acquire info " + id + " err=java_" + t.getClass().getSimpleName());
                Driver.emit("E acquire:java_" + t.getClass().getSimpleName());
                System.err.println(System.currentTimeMillis() + " " + who + " acquire: " + t);
                sleepMicros(5_000 + rng.nextLong(45_000));
                continue;
            }
            long acquired = now();
            if (token == null) {
                hist(acquired, who + " acquire fail " + id);
                if (mode == 0) {
                    sleepMicros(1_000 + rng.nextLong(4_000));
                }
                continue;
            }
            id += " tok=" + token;
            long vu = invoked + (lease > 0 ? lease : watchdogMs) * 1_000_000L;
            hist(acquired, who + " acquire ok " + id + " vu=" + vu);
            String label = who + "/" + h + "/w";
            Driver.emit("A " + name + " " + label + " " + acquired / 1_000_000L);
            hist(now(), who + " hold invoke " + id);
            sleepMicros(200 + rng.nextLong(2800));
            String lost = "0";
            long t = now();
            if (t >= vu) {
                if (lease > 0) {
                    // Its own clock says the lease ran out.
                    lost = "lease_expired";
                    hist(t, who + " lost signal " + id + " reason=lease_expired since=" + vu);
                } else {
                    // The watchdog may have renewed it: ask Redis.
                    boolean held = true;
                    try {
                        held = lock.isHeldByCurrentThread();
                    } catch (RuntimeException e) {
                        System.err.println(System.currentTimeMillis() + " " + who + " isHeldByCurrentThread: " + e);
                    }
                    long answered = now();
                    if (held) {
                        vu = t;
                        hist(answered, who + " valid update " + id + " vu=" + vu);
                    } else {
                        lost = "key_gone";
                        hist(answered, who + " lost signal " + id + " reason=key_gone since=" + answered);
                    }
                }
            }
            hist(now(), who + " hold ok " + id + " vu=" + vu + " lost=" + lost);
            hist(now(), who + " release invoke " + id + " vu=" + vu + " lost=" + lost);
            String outcome = "ok";
            try {
                lock.unlock();
                hist(now(), who + " release ok " + id);
            } catch (IllegalMonitorStateException e) {
                outcome = "not_held";
                hist(now(), who + " release fail " + id + " err=not_held");
            } catch (RuntimeException e) {
                outcome = "error";
                hist(now(), who + " release info " + id + " err=java_" + e.getClass().getSimpleName());
                Driver.emit("E unlock:java_" + e.getClass().getSimpleName());
                System.err.println(System.currentTimeMillis() + " " + who + " unlock: " + e);
            }
            Driver.emit("S " + name + " " + label + " - " + !lost.equals("0") + " " + outcome + " "
                    + System.currentTimeMillis());
            holds++;
        }
        return String.valueOf(holds);
    }
}
