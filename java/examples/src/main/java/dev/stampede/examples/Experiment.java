package dev.stampede.examples;

import dev.stampede.Channel;
import dev.stampede.ChannelInput;
import dev.stampede.ChannelOutput;
import dev.stampede.ChannelStats;
import dev.stampede.Config;
import dev.stampede.Item;
import dev.stampede.Selector;
import dev.stampede.Space;
import dev.stampede.Stamped;
import dev.stampede.Stampede;
import dev.stampede.Task;
import java.io.DataInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.lang.foreign.ValueLayout;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.Arrays;
import java.util.Locale;

/**
 * D-Stampede's Experiment 3 for the Java face: one-way producer-to-consumer latency by
 * payload, with the producer on an end device (a client-mode address space connected to a
 * router over loopback TCP) and the consumer in one of the paper's three places, next to a
 * TCP producer and consumer in Java. bench/experiments_bench.py starts these roles as
 * processes on this host and collects the JSON lines they print; examples/c/experiment.c is
 * the same program in C (Experiment 2).
 *
 * <p>Stampede roles, in application {@code APP}; the router owns the channels
 * {@code exp/data} (the timed payloads) and {@code exp/ack} (the untimed acknowledgements):
 * <pre>
 * Experiment router --app APP [--consume] [schedule] [--shm]
 *     a Zenoh router on a free loopback port owning both channels; prints
 *     {"event":"ready","endpoint":...}; with --consume it also runs the consumer
 *     (configuration 1: the get is local); stays until its standard input closes, then
 *     prints the data channel's counters
 * Experiment cluster-consumer --app APP --connect EP [schedule] [--shm]
 *     configuration 2: the consumer in a second cluster address space (peer mode)
 * Experiment device-consumer --app APP --connect EP [schedule] [--shm]
 *     configuration 3: the consumer on another end device (client mode)
 * Experiment device-producer --app APP --connect EP --base TS [schedule] [--shm]
 *     the end device that puts the payloads (client mode)
 * </pre>
 * TCP roles (loopback, TCP_NODELAY on every socket):
 * <pre>
 * Experiment tcp-consumer [schedule]          listens; prints {"event":"ready","port":P}
 * Experiment tcp-relay --connect PORT         connects to PORT, listens, prints its port and
 *                                             forwards bytes both ways (configurations 2, 3)
 * Experiment tcp-producer --connect PORT [schedule]
 * </pre>
 * schedule: {@code --sizes 1,1000,10000,35000,55000 --items 1000 --repeats 3}.
 *
 * <p>Timing: the producer writes {@link System#nanoTime()} into the first 8 bytes of the
 * payload (little-endian) just before the put or send; the consumer reads the clock as the get
 * (or the read of the whole payload) returns and records the difference. On Linux,
 * {@code System.nanoTime()} is {@code clock_gettime(CLOCK_MONOTONIC)}, one clock for every
 * process of the host, so the two processes' readings compare (and match the C program's). A
 * payload is max(size, 8) bytes. The consumer then acknowledges (a 1-byte item on
 * {@code exp/ack}, or one byte back on the socket), untimed, and the producer puts the next
 * payload only once it has the acknowledgement, so puts and gets never overlap. Each size and
 * repeat starts with max(10, items / 10) unrecorded payloads; the consumer prints one line per
 * size and repeat. Shared memory between address spaces is off unless {@code --shm} is given,
 * so payloads cross loopback TCP links as they would cross a network between devices.
 */
public final class Experiment {
    private Experiment() {}

    static final String DATA = "exp/data";
    static final String ACK = "exp/ack";
    static final Duration IO = Duration.ofSeconds(30);
    static final Duration LOOKUP = Duration.ofSeconds(10);
    static final long SHM_POOL = 64L << 20;
    static final ValueLayout.OfLong LONG_LE =
            ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    /** The command line. */
    static final class Opts {
        String app;
        String connect;
        boolean consume;
        boolean shm;
        long base;
        int[] sizes = {1, 1000, 10_000, 35_000, 55_000};
        int items = 1000;
        int repeats = 3;

        static Opts parse(String[] args) {
            Opts o = new Opts();
            for (int i = 1; i < args.length; i++) {
                switch (args[i]) {
                    case "--consume" -> o.consume = true;
                    case "--shm" -> o.shm = true;
                    case "--app" -> o.app = args[++i];
                    case "--connect" -> o.connect = args[++i];
                    case "--base" -> o.base = Long.parseLong(args[++i]);
                    case "--items" -> o.items = Integer.parseInt(args[++i]);
                    case "--repeats" -> o.repeats = Integer.parseInt(args[++i]);
                    case "--sizes" -> o.sizes = Arrays.stream(args[++i].split(","))
                            .mapToInt(Integer::parseInt).toArray();
                    default -> usage();
                }
            }
            return o;
        }

        /** A tenth of the items (at least 10), and at least 1000 so that the JIT has compiled
         * the loop before anything is recorded (as PingPong does). */
        int warmup() {
            return Math.max(1000, items / 10);
        }

        String connect() {
            if (connect == null) {
                usage();
            }
            return connect;
        }

        Config withShm(Config c) {
            return c.shmPool(shm ? SHM_POOL : 0);
        }
    }

    public static void main(String[] args) throws Exception {
        if (args.length == 0) {
            usage();
        }
        Opts o = Opts.parse(args);
        if (!args[0].startsWith("tcp-") && o.app == null) {
            usage();
        }
        switch (args[0]) {
            case "router" -> router(o);
            case "cluster-consumer" -> remoteConsumer(o, o.withShm(Config.peer()
                    .listen("tcp/127.0.0.1:0").connect(o.connect())), args[0]);
            case "device-consumer" -> remoteConsumer(o, o.withShm(Config.client(o.connect())),
                    args[0]);
            case "device-producer" -> producer(o);
            case "tcp-consumer" -> tcpConsumer(o);
            case "tcp-producer" -> tcpProducer(o);
            case "tcp-relay" -> tcpRelay(o);
            default -> usage();
        }
    }

    static void usage() {
        System.err.println("usage: Experiment router|cluster-consumer|device-consumer|"
                + "device-producer|tcp-consumer|tcp-relay|tcp-producer [--app APP]"
                + " [--connect EP|PORT] [--consume] [--base TS] [--shm] [--sizes a,b,..]"
                + " [--items N] [--repeats R]");
        System.exit(2);
    }

    static int wire(int size) {
        return Math.max(size, 8);
    }

    static void emit(String line) {
        System.out.println(line);
        System.out.flush();
    }

    /** One line of results for a size and repeat; sorts {@code us}. */
    static void report(String system, String role, int size, int repeat, double[] us) {
        Arrays.sort(us);
        int n = us.length;
        double p50 = n % 2 == 1 ? us[n / 2] : (us[n / 2 - 1] + us[n / 2]) / 2;
        emit(String.format(Locale.ROOT, "{\"lang\":\"java\",\"system\":\"%s\",\"role\":\"%s\","
                + "\"size\":%d,\"wire_bytes\":%d,\"repeat\":%d,\"items\":%d,\"p50_us\":%.2f,"
                + "\"p10_us\":%.2f,\"p90_us\":%.2f,\"min_us\":%.2f,\"max_us\":%.2f,"
                + "\"mean_us\":%.2f}", system, role, size, wire(size), repeat, n, p50,
                us[(n - 1) / 10], us[(n - 1) * 9 / 10], us[0], us[n - 1],
                Arrays.stream(us).average().orElse(0)));
        System.err.printf(Locale.ROOT, "java %s %s %d B repeat %d: p50 %.1f us%n", system, role,
                size, repeat, p50);
    }

    static void check(boolean ok, String what) {
        if (!ok) {
            throw new IllegalStateException(what);
        }
    }

    // ---- Stampede -------------------------------------------------------------------------

    /**
     * The consumer: a task that gets every payload in order ({@code NEXT_UNSEEN}), reads the
     * clock, consumes the payload and acknowledges it with a 1-byte item at the same
     * timestamp, then moves its virtual time past it. The task starts at the zone's floor
     * ({@link Stampede#AT_FLOOR}), which it reports as the producer's base: nothing the
     * producer puts can fall below it. {@code ready} holds the fields before "base" in the
     * ready line.
     */
    static void consume(Space space, Channel data, Channel ack, Opts o, String role,
            String ready) throws InterruptedException {
        int warm = o.warmup();
        try (Task task = space.task(Stampede.AT_FLOOR, role);
                ChannelInput in = task.attachInput(data);
                ChannelOutput out = task.attachOutput(ack);
                Item token = Item.of(new byte[] {'!'})) {
            emit("{\"event\":\"ready\"," + ready + "\"base\":" + task.virtualTime() + "}");
            long last = Long.MIN_VALUE;
            for (int size : o.sizes) {
                for (int r = 0; r < o.repeats; r++) {
                    double[] us = new double[o.items];
                    for (int i = 0; i < warm + o.items; i++) {
                        long ts;
                        long got;
                        long sent;
                        try (Stamped s = in.get(Selector.NEXT_UNSEEN, IO)) {
                            got = System.nanoTime();
                            ts = s.ts();
                            long len = s.item().byteSize();
                            check(len == wire(size) && ts > last, "got " + len + " bytes at "
                                    + ts + ", not " + wire(size) + " after " + last);
                            sent = s.item().segment().get(LONG_LE, 0);
                        }
                        last = ts;
                        if (i >= warm) {
                            us[i - warm] = (got - sent) / 1e3;
                        }
                        in.consume(ts);
                        out.put(ts, token);
                        task.setVirtualTime(ts + 1);
                    }
                    report("stampede", role, size, r, us);
                }
            }
            // The last acknowledgement is stored before this space may leave.
            out.flush();
        }
    }

    static void router(Opts o) throws Exception {
        Space space = null;
        String endpoint = null;
        for (int attempt = 1; space == null; attempt++) {
            int port;
            try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
                port = s.getLocalPort();
            }
            endpoint = "tcp/127.0.0.1:" + port;
            try {
                space = Space.join(o.app, o.withShm(Config.router(endpoint)));
            } catch (RuntimeException e) {
                // Another process took the port between its release and Zenoh's bind.
                if (attempt >= 5) {
                    throw e;
                }
            }
        }
        try (Space s = space; Channel data = s.channel(DATA); Channel ack = s.channel(ACK)) {
            String fields = "\"endpoint\":\"" + endpoint + "\",";
            if (o.consume) {
                consume(s, data, ack, o, "router-consumer", fields);
            } else {
                emit("{\"event\":\"ready\"," + fields.substring(0, fields.length() - 1) + "}");
            }
            // The channels must outlive the other processes' last operations.
            while (System.in.read() != -1) {
                // Wait for the orchestrator to close standard input.
            }
            ChannelStats st = data.stats();
            emit("{\"event\":\"stats\",\"puts\":" + st.puts() + ",\"gets\":" + st.gets()
                    + ",\"reclaimed\":" + st.reclaimed() + ",\"items\":" + st.items() + "}");
        }
    }

    /** A consumer in its own address space: peer (configuration 2) or client (3). */
    static void remoteConsumer(Opts o, Config config, String role) throws InterruptedException {
        try (Space space = Space.join(o.app, config);
                Channel data = space.lookupChannel(DATA, LOOKUP);
                Channel ack = space.lookupChannel(ACK, LOOKUP)) {
            consume(space, data, ack, o, role, "");
        }
    }

    /**
     * The end device that produces: puts each payload at the next timestamp, waits for its
     * acknowledgement, consumes it, and only then moves its virtual time past the payload and
     * puts the next one. Its task starts at the zone's floor, raised to the consumer's base.
     */
    static void producer(Opts o) throws InterruptedException {
        int warm = o.warmup();
        long sent = 0;
        try (Space space = Space.join(o.app, o.withShm(Config.client(o.connect())));
                Channel data = space.lookupChannel(DATA, LOOKUP);
                Channel ack = space.lookupChannel(ACK, LOOKUP);
                Task task = space.task(Stampede.AT_FLOOR, "device-producer")) {
            long ts = task.virtualTime();
            if (ts < o.base) {
                ts = o.base;
                task.setVirtualTime(ts);
            }
            try (ChannelOutput out = task.attachOutput(data);
                    ChannelInput in = task.attachInput(ack)) {
                for (int size : o.sizes) {
                    byte[] payload = pattern(wire(size));
                    ByteBuffer stamp = ByteBuffer.wrap(payload).order(ByteOrder.LITTLE_ENDIAN);
                    for (int r = 0; r < o.repeats; r++) {
                        for (int i = 0; i < warm + o.items; i++, ts++) {
                            stamp.putLong(0, System.nanoTime());
                            try (Item item = Item.of(payload)) {
                                out.put(ts, item);
                            }
                            try (Stamped a = in.get(Selector.NEXT_UNSEEN, IO)) {
                                check(a.ts() == ts, "acknowledged " + a.ts() + ", not " + ts);
                            }
                            in.consume(ts);
                            task.setVirtualTime(ts + 1);
                            sent++;
                        }
                    }
                }
            }
        }
        emit("{\"event\":\"done\",\"sent\":" + sent + "}");
    }

    static byte[] pattern(int size) {
        byte[] b = new byte[size];
        for (int i = 0; i < size; i++) {
            b[i] = (byte) i;
        }
        return b;
    }

    // ---- TCP ------------------------------------------------------------------------------

    static ServerSocket listen() throws IOException {
        return new ServerSocket(0, 1, InetAddress.getLoopbackAddress());
    }

    static Socket accept(ServerSocket server) throws IOException {
        Socket s = server.accept();
        s.setTcpNoDelay(true);
        return s;
    }

    static Socket connect(String port) throws IOException {
        Socket s = new Socket(InetAddress.getLoopbackAddress(), Integer.parseInt(port));
        s.setTcpNoDelay(true);
        return s;
    }

    static void tcpConsumer(Opts o) throws IOException {
        int warm = o.warmup();
        int max = Arrays.stream(o.sizes).map(Experiment::wire).max().orElse(8);
        byte[] buf = new byte[max];
        ByteBuffer stamp = ByteBuffer.wrap(buf).order(ByteOrder.LITTLE_ENDIAN);
        try (ServerSocket server = listen()) {
            emit("{\"event\":\"ready\",\"port\":" + server.getLocalPort() + "}");
            try (Socket s = accept(server)) {
                DataInputStream in = new DataInputStream(s.getInputStream());
                OutputStream out = s.getOutputStream();
                for (int size : o.sizes) {
                    for (int r = 0; r < o.repeats; r++) {
                        double[] us = new double[o.items];
                        for (int i = 0; i < warm + o.items; i++) {
                            in.readFully(buf, 0, wire(size));
                            long got = System.nanoTime();
                            if (i >= warm) {
                                us[i - warm] = (got - stamp.getLong(0)) / 1e3;
                            }
                            out.write('!');
                        }
                        report("tcp", "tcp-consumer", size, r, us);
                    }
                }
            }
        }
    }

    static void tcpProducer(Opts o) throws IOException {
        int warm = o.warmup();
        long sent = 0;
        try (Socket s = connect(o.connect())) {
            InputStream in = s.getInputStream();
            OutputStream out = s.getOutputStream();
            for (int size : o.sizes) {
                byte[] payload = pattern(wire(size));
                ByteBuffer stamp = ByteBuffer.wrap(payload).order(ByteOrder.LITTLE_ENDIAN);
                for (int r = 0; r < o.repeats; r++) {
                    for (int i = 0; i < warm + o.items; i++) {
                        stamp.putLong(0, System.nanoTime());
                        out.write(payload);
                        if (in.read() < 0) {
                            throw new IOException("the consumer closed before acknowledging");
                        }
                        sent++;
                    }
                }
            }
        }
        emit("{\"event\":\"done\",\"sent\":" + sent + "}");
    }

    /** Forwards whatever arrives on either connection to the other, as it arrives (64 KiB
     * reads, a thread per direction), until one of them closes. */
    static void tcpRelay(Opts o) throws Exception {
        try (Socket down = connect(o.connect()); ServerSocket server = listen()) {
            emit("{\"event\":\"ready\",\"port\":" + server.getLocalPort() + "}");
            try (Socket up = accept(server)) {
                Object done = new Object();
                boolean[] over = {false};
                Thread[] pumps = {pump(up, down, done, over), pump(down, up, done, over)};
                synchronized (done) {
                    while (!over[0]) {
                        done.wait();
                    }
                }
                up.close();
                down.close();
                for (Thread t : pumps) {
                    t.join();
                }
            }
        }
    }

    static Thread pump(Socket from, Socket to, Object done, boolean[] over) {
        return Thread.ofPlatform().daemon().start(() -> {
            byte[] buf = new byte[64 << 10];
            try {
                InputStream in = from.getInputStream();
                OutputStream out = to.getOutputStream();
                for (int n; (n = in.read(buf)) > 0;) {
                    out.write(buf, 0, n);
                }
            } catch (IOException closed) {
                // The other pump closed the sockets, or a side went away: the run is over.
            }
            synchronized (done) {
                over[0] = true;
                done.notifyAll();
            }
        });
    }
}
