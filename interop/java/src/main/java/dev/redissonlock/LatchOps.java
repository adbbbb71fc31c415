package dev.redissonlock;

import java.util.concurrent.TimeUnit;

import org.redisson.api.RCountDownLatch;
import org.redisson.api.RedissonClient;

/**
 * The {@code latch.<verb>} ops of the interop driver: Redisson's
 * {@code RCountDownLatch}, with only API present in both 3.24.3 and 4.x.
 *
 * <pre>
 *   latch.trySetCount &lt;name&gt; &lt;n&gt;   -&gt; true|false
 *   latch.countDown &lt;name&gt;           -&gt; (nothing)
 *   latch.getCount &lt;name&gt;            -&gt; &lt;count&gt;
 *   latch.await &lt;name&gt;               -&gt; (nothing; blocks, no timeout)
 *   latch.awaitMs &lt;name&gt; &lt;ms&gt;       -&gt; true|false
 *   latch.delete &lt;name&gt;              -&gt; true|false
 * </pre>
 */
public final class LatchOps {
    private LatchOps() {
    }

    public static String run(RedissonClient client, String verb, String[] a) throws Exception {
        if (a.length < 1) {
            throw new IllegalArgumentException("latch." + verb + " needs a latch name");
        }
        RCountDownLatch latch = client.getCountDownLatch(a[0]);
        switch (verb) {
            case "trySetCount":
                return String.valueOf(latch.trySetCount(Long.parseLong(arg(a, 1, verb))));
            case "countDown":
                latch.countDown();
                return "";
            case "getCount":
                return String.valueOf(latch.getCount());
            case "await":
                latch.await();
                return "";
            case "awaitMs":
                return String.valueOf(latch.await(Long.parseLong(arg(a, 1, verb)), TimeUnit.MILLISECONDS));
            case "delete":
                return String.valueOf(latch.delete());
            default:
                throw new IllegalArgumentException("unknown op latch." + verb);
        }
    }

    private static String arg(String[] a, int i, String verb) {
        if (a.length <= i) {
            throw new IllegalArgumentException("latch." + verb + " needs argument " + i);
        }
        return a[i];
    }
}
