package dev.redissonlock;

import java.util.concurrent.TimeUnit;

import org.redisson.api.RSemaphore;
import org.redisson.api.RedissonClient;

/**
 * The driver's {@code sem.<verb>} ops on {@code RSemaphore}
 * ({@code getSemaphore(name)}). Only API present in both Redisson 3.24.3 and
 * 4.x is called directly; {@code releaseIfExists} (4.0.0+) and
 * {@code trySetPermits(n, Duration)} (3.29.0+) go through reflection.
 *
 * <ul>
 * <li>{@code sem.trySetPermits name n [ttlMs]} → true/false</li>
 * <li>{@code sem.availablePermits name} → the count</li>
 * <li>{@code sem.acquire name n} → blocks with no timeout; the ms waited</li>
 * <li>{@code sem.tryAcquire name n waitMs} → true/false and the ms waited</li>
 * <li>{@code sem.release name n}</li>
 * <li>{@code sem.releaseIfExists name n} → true/false (4.0.0+)</li>
 * <li>{@code sem.addPermits name delta}</li>
 * <li>{@code sem.drainPermits name} → the old count</li>
 * <li>{@code sem.hammer name occ iterations sleepMs} → iterations
 * done and the most holders seen: acquire(1), INCR occ, sleep, DECR occ,
 * release(1)</li>
 * <li>{@code sem.torture prefix names permits stopKey deadPrefix} → the
 * JVM worker of the semaphore torture run, see {@link SemTorture}</li>
 * </ul>
 */
public final class SemOps {
    private SemOps() {
    }

    public static String run(RedissonClient client, String verb, String[] a) throws Exception {
        long start = System.nanoTime();
        switch (verb) {
            case "trySetPermits": {
                if (a.length == 3) {
                    Object ok = Compat.call(sem(client, a), "trySetPermits",
                            new Class<?>[] {int.class, java.time.Duration.class},
                            num(a[1]), java.time.Duration.ofMillis(Long.parseLong(a[2])));
                    return String.valueOf(ok);
                }
                need(verb, a, 2);
                return String.valueOf(sem(client, a).trySetPermits(num(a[1])));
            }
            case "availablePermits":
                need(verb, a, 1);
                return String.valueOf(sem(client, a).availablePermits());
            case "acquire":
                need(verb, a, 2);
                sem(client, a).acquire(num(a[1]));
                return String.valueOf(ms(start));
            case "tryAcquire": {
                need(verb, a, 3);
                boolean ok = sem(client, a).tryAcquire(num(a[1]), Long.parseLong(a[2]), TimeUnit.MILLISECONDS);
                return ok + " " + ms(start);
            }
            case "release":
                need(verb, a, 2);
                sem(client, a).release(num(a[1]));
                return "";
            case "releaseIfExists": {
                need(verb, a, 2);
                Object ok = Compat.call(sem(client, a), "releaseIfExists",
                        new Class<?>[] {int.class}, num(a[1]));
                return String.valueOf(ok);
            }
            case "addPermits":
                need(verb, a, 2);
                sem(client, a).addPermits(num(a[1]));
                return "";
            case "drainPermits":
                need(verb, a, 1);
                return String.valueOf(sem(client, a).drainPermits());
            case "hammer": {
                need(verb, a, 4);
                RSemaphore sem = sem(client, a);
                org.redisson.api.RAtomicLong occ = client.getAtomicLong(a[1]);
                long iterations = Long.parseLong(a[2]);
                long sleepMs = Long.parseLong(a[3]);
                long max = 0;
                long done = 0;
                for (; done < iterations; done++) {
                    sem.acquire(1);
                    try {
                        max = Math.max(max, occ.incrementAndGet());
                        if (sleepMs > 0) {
                            Thread.sleep(sleepMs);
                        }
                        occ.decrementAndGet();
                    } finally {
                        sem.release(1);
                    }
                }
                return done + " " + max;
            }
            case "torture":
                return SemTorture.run(client, a);
            default:
                throw new IllegalArgumentException("unknown op sem." + verb);
        }
    }

    private static RSemaphore sem(RedissonClient client, String[] a) {
        return client.getSemaphore(a[0]);
    }

    private static int num(String s) {
        return Integer.parseInt(s);
    }

    private static long ms(long start) {
        return (System.nanoTime() - start) / 1_000_000L;
    }

    private static void need(String verb, String[] a, int n) {
        if (a.length != n) {
            throw new IllegalArgumentException("sem." + verb + " takes " + n + " argument(s), got " + a.length);
        }
    }
}
