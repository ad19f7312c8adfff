package dev.stampede;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/**
 * How an address space joins an application ({@link Space#join}): its mode, endpoints,
 * credentials, TLS files, timings and transport settings. Immutable; each setter returns a
 * new configuration.
 */
public final class Config {
    /** How an address space joins. */
    public enum Mode {
        /** Meshes with other peers (listens on an ephemeral port unless told otherwise). */
        PEER,
        /** Connects to a router; the usual mode of end devices. */
        CLIENT,
        /** Listens for clients and peers and routes between them. */
        ROUTER
    }

    final Mode mode;
    final List<String> listen = new ArrayList<>();
    final List<String> connect = new ArrayList<>();
    String user;
    String password;
    String credentialsFile;
    String accessFile;
    String rootCa;
    String certificate;
    String privateKey;
    Duration lease;
    Duration opTimeout;
    Duration connectTimeout;
    Long shmPool;
    long[] quotas;
    Boolean multicastScouting;
    Integer queuePrefetch;
    Long spinRounds;
    final List<String[]> zenoh = new ArrayList<>();

    private Config(Mode mode) {
        this.mode = mode;
    }

    private Config copy() {
        Config c = new Config(mode);
        c.listen.addAll(listen);
        c.connect.addAll(connect);
        c.user = user;
        c.password = password;
        c.credentialsFile = credentialsFile;
        c.accessFile = accessFile;
        c.rootCa = rootCa;
        c.certificate = certificate;
        c.privateKey = privateKey;
        c.lease = lease;
        c.opTimeout = opTimeout;
        c.connectTimeout = connectTimeout;
        c.shmPool = shmPool;
        c.quotas = quotas;
        c.multicastScouting = multicastScouting;
        c.queuePrefetch = queuePrefetch;
        c.spinRounds = spinRounds;
        c.zenoh.addAll(zenoh);
        return c;
    }

    /** A peer: meshes with other peers on this host by scouting, or with those it connects
     * to. */
    public static Config peer() {
        return new Config(Mode.PEER);
    }

    /** A client of the router at {@code endpoint} (e.g. {@code "tcp/127.0.0.1:7447"}). */
    public static Config client(String endpoint) {
        return new Config(Mode.CLIENT).connect(endpoint);
    }

    /** A router listening on {@code endpoint}. */
    public static Config router(String endpoint) {
        return new Config(Mode.ROUTER).listen(endpoint);
    }

    /** Also listens on {@code endpoint}. */
    public Config listen(String endpoint) {
        Config c = copy();
        c.listen.add(endpoint);
        return c;
    }

    /** Also connects to {@code endpoint}. */
    public Config connect(String endpoint) {
        Config c = copy();
        c.connect.add(endpoint);
        return c;
    }

    /** Authenticates with a user name and password. */
    public Config credentials(String user, String password) {
        Config c = copy();
        c.user = user;
        c.password = password;
        return c;
    }

    /** Accepts the credentials of a file of {@code user:password} lines (routers and
     * listening peers). */
    public Config credentialsFile(String path) {
        Config c = copy();
        c.credentialsFile = path;
        return c;
    }

    /** Enforces the access rules of a file (lines {@code user permissions pattern}) on the
     * containers this space owns; a denied request throws {@code Denied} in the requesting
     * space. */
    public Config accessFile(String path) {
        Config c = copy();
        c.accessFile = path;
        return c;
    }

    /** TLS: the root certificate to trust, and this space's certificate and key (each may be
     * {@code null}). */
    public Config tls(String rootCa, String certificate, String privateKey) {
        Config c = copy();
        c.rootCa = rootCa;
        c.certificate = certificate;
        c.privateKey = privateKey;
        return c;
    }

    /** The lease after which a silent space counts as gone, the timeout of an operation on
     * another space, and the time allowed to connect. */
    public Config timeouts(Duration lease, Duration operation, Duration connect) {
        Config c = copy();
        c.lease = lease;
        c.opTimeout = operation;
        c.connectTimeout = connect;
        return c;
    }

    /** Bytes of shared memory for large messages to processes on this host (0: off). */
    public Config shmPool(long bytes) {
        Config c = copy();
        c.shmPool = bytes;
        return c;
    }

    /** This space's quotas for each other address space, as owner: the largest item it
     * accepts (bytes; a larger put throws {@code TooLarge}), the most connections one space
     * may hold, and the most puts one connection may have waiting for room; 0 keeps a
     * default. */
    public Config quotas(long maxItemBytes, long maxConnections, long maxWaitingPuts) {
        Config c = copy();
        c.quotas = new long[] {maxItemBytes, maxConnections, maxWaitingPuts};
        return c;
    }

    /** Whether to find peers by UDP multicast on the local network. */
    public Config multicastScouting(boolean enabled) {
        Config c = copy();
        c.multicastScouting = enabled;
        return c;
    }

    /** How many further waiting items a get on another space's queue takes with it, held
     * as a lease (0, the default: none). */
    public Config queuePrefetch(int items) {
        Config c = copy();
        c.queuePrefetch = items;
        return c;
    }

    /** Busy-wait rounds of a blocking get before it parks (negative: the default). */
    public Config spinRounds(long rounds) {
        Config c = copy();
        c.spinRounds = rounds;
        return c;
    }

    /** A further Zenoh setting, {@code path} = a JSON5 {@code value}, applied last. */
    public Config zenoh(String path, String value) {
        Config c = copy();
        c.zenoh.add(new String[] {path, value});
        return c;
    }
}
