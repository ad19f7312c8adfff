package dev.stampede.examples;

import dev.stampede.Channel;
import dev.stampede.ChannelInput;
import dev.stampede.ChannelOutput;
import dev.stampede.Config;
import dev.stampede.Item;
import dev.stampede.Selector;
import dev.stampede.Space;
import dev.stampede.Stamped;
import dev.stampede.Task;
import java.io.BufferedReader;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.foreign.MemorySegment;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.atomic.AtomicReference;

/**
 * D-Stampede's Experiment 3 for the Java face: one-way producer-consumer latency between two
 * JVMs (half the ping-pong round trip), over Stampede and over a plain TCP socket.
 *
 * <p>Stampede's topology is the Rust benchmark's: each process owns an unbounded channel, puts
 * into the other's and gets ({@code NEXT_UNSEEN}), consumes and advances its virtual time on
 * its own, so an item crosses the processes once as a remote put and is gotten locally. The
 * Zenoh settings are the Rust benchmark's too (explicit endpoints, no scouting, shared memory
 * with a 64 MiB pool).
 *
 * <pre>
 * PingPong stampede|sockets [--sizes 1,1000,55000] [--round-trips N] [--repeats R] [--virtual]
 * </pre>
 * prints one JSON line per size and repeat: {@code {"system", "size", "one_way_us": [...]}}.
 */
public final class PingPong {
    private PingPong() {}

    static final String PARENT = "pingpong/parent";
    static final String CHILD = "pingpong/child";
    static final Duration IO = Duration.ofSeconds(30);

    public static void main(String[] args) throws Exception {
        if (args.length == 0) {
            usage();
        }
        switch (args[0]) {
            case "child-stampede" -> childStampede(args[1], Integer.parseInt(args[2]),
                    Integer.parseInt(args[3]));
            case "child-sockets" -> childSockets(Integer.parseInt(args[1]),
                    Integer.parseInt(args[2]));
            case "stampede", "sockets" -> parent(args);
            default -> usage();
        }
    }

    private static void usage() {
        System.err.println("usage: PingPong stampede|sockets [--sizes a,b,..] [--round-trips N]"
                + " [--repeats R] [--virtual]");
        System.exit(2);
    }

    static void parent(String[] args) throws Exception {
        boolean stampede = args[0].equals("stampede");
        int[] sizes = {1, 1000, 10_000, 35_000, 55_000};
        int roundTrips = 2000;
        int repeats = 3;
        boolean virtual = false;
        for (int i = 1; i < args.length; i++) {
            switch (args[i]) {
                case "--sizes" -> sizes = Arrays.stream(args[++i].split(","))
                        .mapToInt(Integer::parseInt).toArray();
                case "--round-trips" -> roundTrips = Integer.parseInt(args[++i]);
                case "--repeats" -> repeats = Integer.parseInt(args[++i]);
                case "--virtual" -> virtual = true;
                default -> usage();
            }
        }
        String system = stampede ? (virtual ? "java_virtual" : "java") : "java_sockets";
        for (int size : sizes) {
            for (int r = 0; r < repeats; r++) {
                int rt = roundTrips;
                int sz = size;
                double[] oneWay = onThread(virtual, () -> stampede ? stampedeRun(sz, rt)
                        : socketRun(sz, rt));
                StringBuilder json = new StringBuilder();
                json.append("{\"system\":\"").append(system).append("\",\"size\":").append(size)
                        .append(",\"one_way_us\":[");
                for (int k = 0; k < oneWay.length; k++) {
                    json.append(k == 0 ? "" : ",").append(String.format(Locale.ROOT, "%.2f",
                            oneWay[k]));
                }
                json.append("]}");
                System.out.println(json);
                System.out.flush();
                double[] sorted = oneWay.clone();
                Arrays.sort(sorted);
                System.err.printf(Locale.ROOT, "%s %d B: p50 %.1f us%n", system, size,
                        sorted[sorted.length / 2]);
            }
        }
    }

    interface Run {
        double[] run() throws Exception;
    }

    /** Runs the measurement on a virtual thread or on this (platform) thread. */
    static double[] onThread(boolean virtual, Run r) throws Exception {
        if (!virtual) {
            return r.run();
        }
        AtomicReference<Object> out = new AtomicReference<>();
        Thread t = Thread.ofVirtual().start(() -> {
            try {
                out.set(r.run());
            } catch (Exception e) {
                out.set(e);
            }
        });
        t.join();
        if (out.get() instanceof Exception e) {
            throw e;
        }
        return (double[]) out.get();
    }

    /** Unrecorded round trips first: the Rust benchmark's tenth (at least 10), and at least
     * 1000 so that the JIT has compiled the loop (a JVM's steady state, as JMH's warm-up
     * iterations give it). */
    static int warmup(int roundTrips) {
        return Math.max(1000, roundTrips / 10);
    }

    /** The child JVM: the same java, class path and native settings as this one. */
    static Process spawn(String... args) throws IOException {
        List<String> cmd = new ArrayList<>();
        cmd.add(ProcessHandle.current().info().command().orElse("java"));
        cmd.add("--enable-native-access=ALL-UNNAMED");
        String lib = System.getProperty("stampede.library");
        if (lib != null) {
            cmd.add("-Dstampede.library=" + lib);
        }
        cmd.add("-cp");
        cmd.add(System.getProperty("java.class.path"));
        cmd.add(PingPong.class.getName());
        cmd.addAll(List.of(args));
        return new ProcessBuilder(cmd).redirectError(ProcessBuilder.Redirect.INHERIT).start();
    }

    static String expect(BufferedReader from, String word) throws IOException {
        String line = from.readLine();
        if (line == null || !line.startsWith(word)) {
            throw new IOException("the child said " + line + ", not " + word);
        }
        return line.substring(word.length()).strip();
    }

    /** The Rust benchmark's Zenoh settings, so the two faces differ only in the language. */
    static Config config(String listen, String connect) {
        Config c = Config.peer();
        if (listen != null) {
            c = c.listen(listen);
        }
        if (connect != null) {
            c = c.connect(connect);
        }
        return c.multicastScouting(false)
                .zenoh("scouting/multicast/enabled", "false")
                .zenoh("scouting/gossip/enabled", "false")
                .zenoh("listen/endpoints", endpoints(listen))
                .zenoh("connect/endpoints", endpoints(connect))
                .zenoh("connect/timeout_ms", "10000")
                .zenoh("connect/exit_on_failure", "true")
                .zenoh("transport/shared_memory/enabled", "true")
                .zenoh("transport/shared_memory/transport_optimization/pool_size",
                        Integer.toString(64 << 20))
                .shmPool(64 << 20);
    }

    static String endpoints(String e) {
        return e == null ? "[]" : "[\"" + e + "\"]";
    }

    /** One side of the ping-pong: gets from the channel it owns, puts into the other's. */
    record Side(Task task, ChannelInput input, ChannelOutput output) implements AutoCloseable {
        static Side open(Space space, String own, String other) throws InterruptedException {
            Channel mine = space.channel(own);
            Channel theirs = space.lookupChannel(other, IO);
            Task task = space.task(0);
            return new Side(task, task.attachInput(mine), task.attachOutput(theirs));
        }

        Stamped next(long ts, int size) throws InterruptedException {
            Stamped s = input.get(Selector.NEXT_UNSEEN, IO);
            if (s.ts() != ts || s.item().byteSize() != size) {
                throw new IllegalStateException("got " + s.ts() + " of " + s.item().byteSize()
                        + " bytes, not " + ts + " of " + size);
            }
            return s;
        }

        void doneWith(long ts) {
            input.consume(ts);
            task.setVirtualTime(ts + 1);
        }

        @Override
        public void close() {
            task.close();
        }
    }

    static double[] stampedeRun(int size, int roundTrips) throws Exception {
        int warm = warmup(roundTrips);
        int total = warm + roundTrips;
        String app = "java-pingpong-" + ProcessHandle.current().pid() + "-" + System.nanoTime();
        Process child = spawn("child-stampede", app, Integer.toString(size),
                Integer.toString(total));
        BufferedReader from = new BufferedReader(new InputStreamReader(child.getInputStream(),
                StandardCharsets.UTF_8));
        String endpoint = expect(from, "READY");
        double[] oneWay = new double[roundTrips];
        try (Space space = Space.join(app, config(null, endpoint))) {
            try (Side side = Side.open(space, PARENT, CHILD)) {
                expect(from, "LINKED");
                try (Item ping = Item.ofBytes(MemorySegment.ofArray(payload(size)))) {
                    for (int ts = 0; ts < total; ts++) {
                        long start = System.nanoTime();
                        side.output.put(ts, ping);
                        side.next(ts, size).close();
                        side.doneWith(ts);
                        long rt = System.nanoTime() - start;
                        if (ts >= warm) {
                            oneWay[ts - warm] = rt / 2000.0;
                        }
                    }
                }
                expect(from, "DONE");
            }
        } finally {
            child.getOutputStream().close();
            child.waitFor();
        }
        return oneWay;
    }

    static void childStampede(String app, int size, int count) throws Exception {
        PrintStream out = System.out;
        Space space = null;
        String endpoint = null;
        for (int attempt = 1; space == null; attempt++) {
            int port;
            try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
                port = s.getLocalPort();
            }
            endpoint = "tcp/127.0.0.1:" + port;
            try {
                space = Space.join(app, config(endpoint, null));
            } catch (RuntimeException e) {
                if (attempt >= 5) {
                    throw e;
                }
            }
        }
        try (Space s = space) {
            out.println("READY " + endpoint);
            out.flush();
            try (Side side = Side.open(s, CHILD, PARENT)) {
                out.println("LINKED");
                out.flush();
                for (int ts = 0; ts < count; ts++) {
                    try (Stamped ping = side.next(ts, size)) {
                        // Sends the received item back as it is, as the Rust echo does.
                        side.output.put(ts, ping.item());
                    }
                    side.doneWith(ts);
                }
                side.output.flush();
                out.println("DONE");
                out.flush();
                // The parent says when it is done with this space.
                System.in.read();
            }
        }
    }

    static byte[] payload(int size) {
        byte[] b = new byte[size];
        for (int i = 0; i < size; i++) {
            b[i] = (byte) i;
        }
        return b;
    }

    static double[] socketRun(int size, int roundTrips) throws Exception {
        int warm = warmup(roundTrips);
        int total = warm + roundTrips;
        try (ServerSocket server = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            Process child = spawn("child-sockets", Integer.toString(server.getLocalPort()),
                    Integer.toString(size));
            double[] oneWay = new double[roundTrips];
            try (Socket s = server.accept()) {
                s.setTcpNoDelay(true);
                DataOutputStream out = new DataOutputStream(s.getOutputStream());
                DataInputStream in = new DataInputStream(s.getInputStream());
                byte[] ping = payload(size);
                byte[] pong = new byte[size];
                for (int i = 0; i < total; i++) {
                    long start = System.nanoTime();
                    out.write(ping);
                    out.flush();
                    in.readFully(pong);
                    long rt = System.nanoTime() - start;
                    if (i >= warm) {
                        oneWay[i - warm] = rt / 2000.0;
                    }
                }
            } finally {
                child.waitFor();
            }
            return oneWay;
        }
    }

    static void childSockets(int port, int size) throws IOException {
        try (Socket s = new Socket(InetAddress.getLoopbackAddress(), port)) {
            s.setTcpNoDelay(true);
            DataInputStream in = new DataInputStream(s.getInputStream());
            DataOutputStream out = new DataOutputStream(s.getOutputStream());
            byte[] buf = new byte[size];
            while (true) {
                try {
                    in.readFully(buf);
                } catch (java.io.EOFException end) {
                    return;
                }
                out.write(buf);
                out.flush();
            }
        }
    }
}
