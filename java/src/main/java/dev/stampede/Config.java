package dev.stampede;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/**
 * How an address space joins an application ({@link Space#join}): its mode, endpoints,
 * credentials, TLS files and timings. Immutable; each setter returns a new configuration.
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
    final List<String> listen;
    final List<String> connect;
    final String user;
    final String password;
    final String credentialsFile;
    final String rootCa;
    final String certificate;
    final String privateKey;
    final Duration lease;
    final Duration opTimeout;
    final Duration connectTimeout;

    private Config(Mode mode, List<String> listen, List<String> connect, String user,
                   String password, String credentialsFile, String rootCa, String certificate,
                   String privateKey, Duration lease, Duration opTimeout,
                   Duration connectTimeout) {
        this.mode = mode;
        this.listen = List.copyOf(listen);
        this.connect = List.copyOf(connect);
        this.user = user;
        this.password = password;
        this.credentialsFile = credentialsFile;
        this.rootCa = rootCa;
        this.certificate = certificate;
        this.privateKey = privateKey;
        this.lease = lease;
        this.opTimeout = opTimeout;
        this.connectTimeout = connectTimeout;
    }

    private static Config of(Mode mode) {
        return new Config(mode, List.of(), List.of(), null, null, null, null, null, null, null,
                null, null);
    }

    /** A peer: meshes with other peers on this host by scouting, or with those it connects
     * to. */
    public static Config peer() {
        return of(Mode.PEER);
    }

    /** A client of the router at {@code endpoint} (e.g. {@code "tcp/127.0.0.1:7447"}). */
    public static Config client(String endpoint) {
        return of(Mode.CLIENT).connect(endpoint);
    }

    /** A router listening on {@code endpoint}. */
    public static Config router(String endpoint) {
        return of(Mode.ROUTER).listen(endpoint);
    }

    private Config with(List<String> listen, List<String> connect, String user, String password,
                        String file, String ca, String cert, String key, Duration lease,
                        Duration op, Duration conn) {
        return new Config(mode, listen, connect, user, password, file, ca, cert, key, lease, op,
                conn);
    }

    /** Also listens on {@code endpoint}. */
    public Config listen(String endpoint) {
        List<String> l = new ArrayList<>(listen);
        l.add(endpoint);
        return with(l, connect, user, password, credentialsFile, rootCa, certificate, privateKey,
                lease, opTimeout, connectTimeout);
    }

    /** Also connects to {@code endpoint}. */
    public Config connect(String endpoint) {
        List<String> c = new ArrayList<>(connect);
        c.add(endpoint);
        return with(listen, c, user, password, credentialsFile, rootCa, certificate, privateKey,
                lease, opTimeout, connectTimeout);
    }

    /** Authenticates with a user name and password. */
    public Config credentials(String user, String password) {
        return with(listen, connect, user, password, credentialsFile, rootCa, certificate,
                privateKey, lease, opTimeout, connectTimeout);
    }

    /** Reads the credentials from a file of {@code user:password} lines (a router's
     * dictionary). */
    public Config credentialsFile(String path) {
        return with(listen, connect, user, password, path, rootCa, certificate, privateKey, lease,
                opTimeout, connectTimeout);
    }

    /** TLS: the root certificate to trust, and this space's certificate and key (each may be
     * {@code null}). */
    public Config tls(String rootCa, String certificate, String privateKey) {
        return with(listen, connect, user, password, credentialsFile, rootCa, certificate,
                privateKey, lease, opTimeout, connectTimeout);
    }

    /** The lease after which a silent space counts as gone, the timeout of an operation on
     * another space, and the time allowed to connect. */
    public Config timeouts(Duration lease, Duration operation, Duration connect) {
        return with(listen, this.connect, user, password, credentialsFile, rootCa, certificate,
                privateKey, lease, operation, connect);
    }
}
