package dev.stampede.examples;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.stampede.Channel;
import dev.stampede.ChannelInput;
import dev.stampede.ChannelOutput;
import dev.stampede.Config;
import dev.stampede.DType;
import dev.stampede.Item;
import dev.stampede.ItemKind;
import dev.stampede.Space;
import dev.stampede.Stamped;
import dev.stampede.Task;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.lang.foreign.MemorySegment;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * Arrays of every dtype cross languages and processes both ways: put from Java and read in
 * Python as numpy arrays and in C as arrays, and put from Python and C and read here, all
 * checked element by element.
 */
class InteropTest {
    static final Path ROOT = Path.of(System.getProperty("stampede.library")).toAbsolutePath()
            .getParent().getParent().getParent();
    static final long[] SHAPE = {2, 3};

    /** Element i is (37 i + 5) mod 100; booleans take it mod 2, floats divide it by 4. */
    static byte[] expected(DType d) {
        ByteBuffer b = ByteBuffer.allocate(6 * d.size()).order(ByteOrder.LITTLE_ENDIAN);
        for (int i = 0; i < 6; i++) {
            long v = (i * 37L + 5) % 100;
            switch (d) {
                case BOOL -> b.put((byte) (v % 2));
                case U8, I8 -> b.put((byte) v);
                case U16, I16 -> b.putShort((short) v);
                case U32, I32 -> b.putInt((int) v);
                case U64, I64 -> b.putLong(v);
                case F16 -> b.putShort(Float.floatToFloat16(v / 4f));
                case F32 -> b.putFloat(v / 4f);
                case F64 -> b.putDouble(v / 4.0);
            }
        }
        return b.array();
    }

    static int freePort() throws IOException {
        try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            return s.getLocalPort();
        }
    }

    static Process start(Path exe, List<String> argv) throws IOException {
        assertTrue(Files.exists(exe), exe + " is missing: `make test` builds it");
        return new ProcessBuilder(argv).directory(ROOT.toFile())
                .redirectError(ProcessBuilder.Redirect.INHERIT).start();
    }

    static void expectOk(Process p, String who) throws IOException {
        BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream(),
                StandardCharsets.UTF_8));
        String line = r.readLine();
        assertEquals("OK", line, who + " said " + line);
    }

    static void check(Space space, String channel, String who) throws Exception {
        Channel ch = space.lookupChannel(channel, Duration.ofSeconds(10));
        try (Task t = space.task(0)) {
            ChannelInput in = t.attachInput(ch);
            for (DType d : DType.values()) {
                try (Stamped s = in.get(dev.stampede.Selector.exact(d.code()),
                        Duration.ofSeconds(10))) {
                    Item item = s.item();
                    assertEquals(ItemKind.ARRAY, item.kind(), who + " " + d);
                    assertEquals(d, item.dtype(), who);
                    assertArrayEquals(SHAPE, item.shape(), who + " " + d);
                    assertArrayEquals(expected(d), item.bytes(), who + " " + d);
                }
            }
        }
    }

    @Test
    void arrays_of_every_dtype_cross_java_python_and_c_both_ways() throws Exception {
        String endpoint = "tcp/127.0.0.1:" + freePort();
        String app = "interop" + ProcessHandle.current().pid();
        Duration t = Duration.ofSeconds(5);
        try (Space space = Space.join(app, Config.router(endpoint).timeouts(t, t, t))) {
            Channel ch = space.channel("interop/java");
            try (Task p = space.task(0)) {
                ChannelOutput out = p.attachOutput(ch);
                for (DType d : DType.values()) {
                    try (Item item = Item.ofArray(d, SHAPE, MemorySegment.ofArray(expected(d)))) {
                        out.put(d.code(), item);
                    }
                }
                Path python = ROOT.resolve(".venv/bin/python");
                Path c = ROOT.resolve("target/c/interop_peer");
                Process py = start(python, List.of(python.toString(),
                        "tests/interop/peer.py", "--app", app, "--connect", endpoint));
                Process cp = start(c, List.of(c.toString(), app, endpoint));
                try {
                    expectOk(py, "python");
                    expectOk(cp, "c");
                    check(space, "interop/python", "python");
                    check(space, "interop/c", "c");
                } finally {
                    py.getOutputStream().close();
                    cp.getOutputStream().close();
                    assertEquals(0, py.waitFor(), "the python peer's exit code");
                    assertEquals(0, cp.waitFor(), "the c peer's exit code");
                }
            }
        }
    }
}
