package dev.redissonlock;

import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.net.URL;

import org.redisson.Redisson;
import org.redisson.api.RLock;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;

/**
 * What differs between the Redisson versions the driver is built for
 * (3.12.4 to 4.x): APIs that appeared later are reached by reflection, so
 * one source compiles against every version. A feature the loaded version
 * does not have throws {@link NotApplicable}, which the driver answers as
 * {@code <actor> <op> NA <why>}: the Rust tests count such a scenario as not
 * applicable, never as passed.
 */
final class Compat {
    private Compat() {
    }

    /** The loaded Redisson version lacks what a command needs. */
    static final class NotApplicable extends RuntimeException {
        NotApplicable(String message) {
            super(message);
        }
    }

    /** The loaded version as {major, minor, patch} (0s when unknown). */
    static int[] version(String text) {
        int[] v = new int[3];
        String[] parts = text.split("[.-]");
        for (int i = 0; i < 3 && i < parts.length; i++) {
            try {
                v[i] = Integer.parseInt(parts[i]);
            } catch (NumberFormatException e) {
                break;
            }
        }
        return v;
    }

    /** Whether {@code text} is below {@code major.minor.patch}. */
    static boolean below(String text, int major, int minor, int patch) {
        int[] v = version(text);
        int[] w = {major, minor, patch};
        for (int i = 0; i < 3; i++) {
            if (v[i] != w[i]) {
                return v[i] < w[i];
            }
        }
        return false;
    }

    /**
     * Settings every version needs on Java 17: below 3.13.0 Redisson's
     * default codec is FstCodec, which fails inside {@code Redisson.create}
     * on Java 17 (module access), so those versions get JsonJacksonCodec.
     * Locks and synchronizers pick their own codecs, so the wire of the
     * objects under test does not change.
     */
    static void configure(Config config, String version) {
        if (below(version, 3, 13, 0)) {
            config.setCodec(new org.redisson.codec.JsonJacksonCodec());
        }
    }

    /**
     * TLS: the truststore (a file URL) and its password that the server's
     * certificate is checked against. On {@code Config} where it has them
     * (Redisson's issue 6353, in 4.7.0: the topology's own setters are
     * deprecated there and log a warning), else on the topology's settings
     * ({@code servers}, a {@code BaseConfig}). Only 4.7.0 is run over TLS
     * by the tests.
     */
    static void truststore(Config config, Object servers, URL truststore, String password) {
        Object target = config;
        try {
            Config.class.getMethod("setSslTruststore", URL.class);
        } catch (NoSuchMethodException e) {
            target = servers;
        }
        call(target, "setSslTruststore", new Class<?>[] {URL.class}, truststore);
        call(target, "setSslTruststorePassword", new Class<?>[] {String.class}, password);
    }

    /**
     * The UUID Redisson puts in lock hash fields: {@code getServiceManager().getId()}
     * from 3.22 on, {@code getConnectionManager().getId()} before.
     */
    static String clientId(RedissonClient client) {
        for (String[] path : new String[][] {{"getServiceManager", "getId"}, {"getConnectionManager", "getId"}}) {
            try {
                Object manager = Redisson.class.getMethod(path[0]).invoke(client);
                return String.valueOf(manager.getClass().getMethod(path[1]).invoke(manager));
            } catch (NoSuchMethodException e) {
                // try the older path
            } catch (ReflectiveOperationException e) {
                throw new RuntimeException(e.getCause() == null ? e : e.getCause());
            }
        }
        throw new IllegalStateException("no way to read the client id in this Redisson version");
    }

    /** {@code client.<method>(name)} returning a lock, or NotApplicable when the version has no such method. */
    static RLock lockByName(RedissonClient client, String method, String name) {
        Method m;
        try {
            m = client.getClass().getMethod(method, String.class);
        } catch (NoSuchMethodException e) {
            throw new NotApplicable(method + " is not in this Redisson version");
        }
        return (RLock) invoke(m, client, name);
    }

    /** {@code target.<method>(args)} with the given parameter types, or NotApplicable when absent. */
    static Object call(Object target, String method, Class<?>[] types, Object... args) {
        Method m;
        try {
            m = target.getClass().getMethod(method, types);
        } catch (NoSuchMethodException e) {
            throw new NotApplicable(method + " is not in this Redisson version");
        }
        return invoke(m, target, args);
    }

    private static Object invoke(Method m, Object target, Object... args) {
        try {
            m.setAccessible(true);
            return m.invoke(target, args);
        } catch (InvocationTargetException e) {
            Throwable cause = e.getCause();
            if (cause instanceof RuntimeException) {
                throw (RuntimeException) cause;
            }
            if (cause instanceof Error) {
                throw (Error) cause;
            }
            throw new RuntimeException(cause);
        } catch (IllegalAccessException e) {
            throw new RuntimeException(e);
        }
    }
}
