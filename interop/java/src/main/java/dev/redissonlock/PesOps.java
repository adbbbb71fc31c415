package dev.redissonlock;

import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.util.concurrent.TimeUnit;

import org.redisson.api.RPermitExpirableSemaphore;
import org.redisson.api.RedissonClient;

/**
 * The {@code pes.<verb>} ops of the driver: Redisson's
 * {@code RPermitExpirableSemaphore} ({@code getPermitExpirableSemaphore}).
 * The first argument is always the semaphore's name; a lease or wait of
 * {@code -1} means none (a permanent permit). Builds against 3.24.3 and 4.x:
 * {@code getLeaseTime} (3.41.0+) is called by reflection.
 *
 * <pre>
 *   pes.trySetPermits name n            -> true|false
 *   pes.acquire name leaseMs            -> id (blocks; -1: permanent)
 *   pes.tryAcquire name waitMs leaseMs  -> id | null
 *   pes.release name id                 -> (throws if not released)
 *   pes.tryRelease name id              -> true|false
 *   pes.updateLeaseTime name id leaseMs -> true|false
 *   pes.getLeaseTime name id            -> ms left, -1 permanent
 *   pes.availablePermits name           -> n
 * </pre>
 */
public final class PesOps {

    private PesOps() {
    }

    public static String run(RedissonClient client, String verb, String[] a) throws Exception {
        if (a.length < 1) {
            throw new Driver.BadCommand("pes." + verb + " needs a semaphore name");
        }
        RPermitExpirableSemaphore s = client.getPermitExpirableSemaphore(a[0]);
        switch (verb) {
            case "trySetPermits":
                need(verb, a, 2);
                return String.valueOf(s.trySetPermits(Integer.parseInt(a[1])));
            case "acquire": {
                need(verb, a, 2);
                long lease = Long.parseLong(a[1]);
                return lease < 0 ? s.acquire() : s.acquire(lease, TimeUnit.MILLISECONDS);
            }
            case "tryAcquire": {
                need(verb, a, 3);
                long wait = Long.parseLong(a[1]);
                long lease = Long.parseLong(a[2]);
                return String.valueOf(s.tryAcquire(wait, lease, TimeUnit.MILLISECONDS));
            }
            case "release":
                need(verb, a, 2);
                s.release(a[1]);
                return "";
            case "tryRelease":
                need(verb, a, 2);
                return String.valueOf(s.tryRelease(a[1]));
            case "updateLeaseTime":
                need(verb, a, 3);
                return String.valueOf(s.updateLeaseTime(a[1], Long.parseLong(a[2]), TimeUnit.MILLISECONDS));
            case "getLeaseTime": {
                need(verb, a, 2);
                Method m;
                try {
                    m = s.getClass().getMethod("getLeaseTime", String.class);
                } catch (NoSuchMethodException e) {
                    throw new Compat.NotApplicable("getLeaseTime is not in this Redisson version");
                }
                try {
                    return String.valueOf(m.invoke(s, a[1]));
                } catch (InvocationTargetException e) {
                    Throwable cause = e.getCause();
                    if (cause instanceof Exception) {
                        throw (Exception) cause;
                    }
                    throw e;
                }
            }
            case "availablePermits":
                need(verb, a, 1);
                return String.valueOf(s.availablePermits());
            default:
                throw new Driver.BadCommand("unknown op pes." + verb);
        }
    }

    private static void need(String verb, String[] a, int n) {
        if (a.length != n) {
            throw new Driver.BadCommand("pes." + verb + " expects " + n + " argument(s), got " + a.length);
        }
    }
}
