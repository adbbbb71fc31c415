package dev.redissonlock;

import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;

import org.redisson.api.RScript;
import org.redisson.api.RSemaphore;
import org.redisson.api.RedissonClient;
import org.redisson.client.codec.StringCodec;

/**
 * {@code sem.torture <instance>/<actor> <names,comma,separated> <permits>
 * <stopKey> <deadPrefix>}: the JVM side of {@code ./scripts/torture.sh --kind
 * semaphore} (examples/torture/semaphore.rs). Until {@code stopKey} exists:
 * take one permit of a random semaphore ({@code tryAcquire(1, 0.1-3 s)} 9
 * times in 10, {@code tryAcquire(1)} 1), run a section bracketed by the
 * occupancy set {@code torture:occ:<name>}, release, parking at the top of
 * the loop while the supervisor takes a census; then a final round with
 * {@code acquire(1)}. Keeps the same ledger as the
 * Rust workers ({@code torture:sem:<pending|held|releasing|ambiguous>:<name>};
 * an exception from an acquire or release makes it ambiguous: Redisson does
 * not say whether it was applied) and prints the same event lines
 * ({@code A}, {@code X}, {@code U}, {@code S}, {@code F}, {@code E}) on the
 * driver's stdout. Answers the number of sections done.
 */
final class SemTorture {
    private SemTorture() {
    }

    /** Moves ARGV[1] from set KEYS[1] to set KEYS[2] as ARGV[2]. */
    private static final String MOVE = "if redis.call('srem', KEYS[1], ARGV[1]) == 1 then\n"
            + "  redis.call('sadd', KEYS[2], ARGV[2])\nend\nreturn 0\n";

    /** The Rust workers' entry script (semaphore.rs's ENTER). */
    private static final String ENTER = "redis.call('sadd', KEYS[1], ARGV[1])\n"
            + "local live = {}\n"
            + "for _, member in ipairs(redis.call('smembers', KEYS[1])) do\n"
            + "  local instance = string.match(member, '^([^/]+)/')\n"
            + "  if instance and redis.call('exists', ARGV[2] .. instance) == 1 then\n"
            + "    redis.call('srem', KEYS[1], member)\n"
            + "  else\n"
            + "    table.insert(live, member)\n"
            + "  end\n"
            + "end\n"
            + "if #live > tonumber(ARGV[3]) then\n"
            + "  return live\n"
            + "end\n"
            + "return {}\n";


    /** {@code LIST} and {@code LONG} in 4.x, {@code MULTI} and {@code INTEGER} in 3.24. */
    private static final RScript.ReturnType LIST = returnType("LIST", "MULTI");
    private static final RScript.ReturnType LONG = returnType("LONG", "INTEGER");

    private static RScript.ReturnType returnType(String name, String older) {
        try {
            return RScript.ReturnType.valueOf(name);
        } catch (IllegalArgumentException e) {
            return RScript.ReturnType.valueOf(older);
        }
    }

    static String run(RedissonClient client, String[] a) throws Exception {
        if (a.length != 5) {
            throw new IllegalArgumentException("sem.torture takes 5 arguments, got " + a.length);
        }
        String prefix = a[0];
        String[] names = a[1].split(",");
        String permits = a[2];
        String stopKey = a[3];
        String deadPrefix = a[4];
        RScript script = client.getScript(StringCodec.INSTANCE);
        ThreadLocalRandom rng = ThreadLocalRandom.current();
        long seq = 0;
        long sections = 0;
        while (!book(() -> client.getBucket(stopKey, StringCodec.INSTANCE).isExists())) {
            parkIfCensus(client, prefix);
            String name = names[rng.nextInt(names.length)];
            sections += once(client, script, rng, name, prefix + "/" + (++seq), permits, deadPrefix, false) ? 1 : 0;
        }
        String name = names[rng.nextInt(names.length)];
        sections += once(client, script, rng, name, prefix + "/" + (++seq), permits, deadPrefix, true) ? 1 : 0;
        return String.valueOf(sections);
    }

    private static final String BARRIER = "torture:sem:barrier";

    /** Parks while the supervisor takes a census (semaphore.rs's park_if_census). */
    private static void parkIfCensus(RedissonClient client, String me) {
        String id = book(() -> client.<String>getBucket(BARRIER, StringCodec.INSTANCE).get());
        if (id == null) {
            return;
        }
        book(() -> client.getSet("torture:sem:parked:" + id, StringCodec.INSTANCE).add(me));
        while (book(() -> client.getBucket(BARRIER, StringCodec.INSTANCE).isExists())) {
            try {
                Thread.sleep(10);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            }
        }
    }

    private static boolean once(RedissonClient client, RScript script, ThreadLocalRandom rng, String name,
            String token, String permits, String deadPrefix, boolean finalRound) {
        String pending = "torture:sem:pending:" + name;
        String held = "torture:sem:held:" + name;
        String releasing = "torture:sem:releasing:" + name;
        String ambiguous = "torture:sem:ambiguous:" + name;
        RSemaphore sem = client.getSemaphore(name);
        book(() -> client.getSet(pending, StringCodec.INSTANCE).add(token));
        int mode = finalRound ? 9 : rng.nextInt(10);
        long started = System.currentTimeMillis();
        boolean got;
        try {
            if (finalRound) {
                sem.acquire(1);
                got = true;
            } else if (mode == 0) {
                got = sem.tryAcquire(1);
            } else {
                got = sem.tryAcquire(1, 100 + rng.nextInt(2901), TimeUnit.MILLISECONDS);
            }
        } catch (Throwable t) {
            long ended = System.currentTimeMillis();
            move(script, pending, ambiguous, token, "acq " + token);
            Driver.emit("U acquire " + name + " " + token);
            Driver.emit("E acquire:java_" + t.getClass().getSimpleName());
            System.err.println(ended + " " + token + " acquire: " + t);
            if (finalRound) {
                Driver.emit("F " + name + " " + token + " " + (ended - started) + " error");
            }
            return false;
        }
        long ended = System.currentTimeMillis();
        if (!got) {
            book(() -> client.getSet(pending, StringCodec.INSTANCE).remove(token));
            if (finalRound) {
                Driver.emit("F " + name + " " + token + " " + (ended - started) + " timeout");
            }
            return false;
        }
        move(script, pending, held, token, token);
        Driver.emit("A " + name + " " + token + " " + ended);
        String occupancy = "torture:occ:" + name;
        long entered = System.currentTimeMillis();
        List<Object> live = book(() -> script.eval(RScript.Mode.READ_WRITE, ENTER, LIST,
                Collections.singletonList(occupancy), token, deadPrefix, permits));
        if (live != null && !live.isEmpty()) {
            StringBuilder all = new StringBuilder();
            for (Object member : live) {
                all.append(all.length() == 0 ? "" : ",").append(member);
            }
            Driver.emit("X " + name + " " + token + " " + all + " " + entered);
        }
        try {
            TimeUnit.MICROSECONDS.sleep(200 + rng.nextInt(2800));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        book(() -> client.getSet(occupancy, StringCodec.INSTANCE).remove(token));
        move(script, held, releasing, token, token);
        String outcome = "ok";
        try {
            sem.release(1);
            book(() -> client.getSet(releasing, StringCodec.INSTANCE).remove(token));
        } catch (Throwable t) {
            outcome = "unknown";
            move(script, releasing, ambiguous, token, "rel " + token);
            Driver.emit("U release " + name + " " + token);
            Driver.emit("E release:java_" + t.getClass().getSimpleName());
            System.err.println(System.currentTimeMillis() + " " + token + " release: " + t);
        }
        Driver.emit("S " + name + " " + token + " - false " + outcome + " " + System.currentTimeMillis());
        if (finalRound) {
            Driver.emit("F " + name + " " + token + " " + (ended - started) + " ok");
        }
        return true;
    }

    private static void move(RScript script, String from, String to, String token, String as) {
        book(() -> script.eval(RScript.Mode.READ_WRITE, MOVE, LONG,
                Arrays.<Object>asList(from, to), token, as));
    }

    interface Op<T> {
        T call();
    }

    /** Bookkeeping: idempotent, so tried until it goes through. */
    private static <T> T book(Op<T> op) {
        for (int failures = 1;; failures++) {
            try {
                return op.call();
            } catch (RuntimeException e) {
                System.err.println(System.currentTimeMillis() + " bookkeeping: " + e);
                try {
                    Thread.sleep(Math.min(failures, 10) * 20L);
                } catch (InterruptedException ie) {
                    Thread.currentThread().interrupt();
                    throw e;
                }
            }
        }
    }
}
