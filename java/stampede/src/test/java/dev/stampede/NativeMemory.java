package dev.stampede;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SegmentAllocator;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.lang.management.ManagementFactory;
import java.lang.management.MemoryPoolMXBean;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import javax.management.ObjectName;

/**
 * What this process holds outside the Java heap, as {@link LifeCycle} measures it. It needs
 * two settings of the process, which {@link Run} gives the JVM it starts:
 * <ul>
 *   <li>{@code -XX:NativeMemoryTracking=summary}: the JVM counts every byte it mallocs, so
 *       what malloc has handed out beyond that is the C library's. Without the subtraction
 *       the JIT compiler's arenas move the figure by megabytes either way.</li>
 *   <li>{@code GLIBC_TUNABLES=glibc.malloc.tcache_count=0}: no per-thread cache of freed
 *       chunks, which malloc counts as in use; with it, each long-lived thread that frees the
 *       library's objects (the cleaner's, the caller's) holds up to some 240 KiB of them.</li>
 * </ul>
 *
 * @param libraryBytes bytes malloc has handed out and not got back (glibc's {@code mallinfo2}:
 *     {@code uordblks} plus the mmapped {@code hblkhd}, summed over its arenas) less the JVM's
 *     own (tracked allocations and their tracking headers): the C library's runtimes,
 *     containers, items and handles
 * @param arenaBytes what the JVM has malloc'd for {@link Arena}s and other off-heap memory
 *     (Native Memory Tracking's "Other")
 * @param stubBytes the JVM's code heap of stubs ({@code CodeHeap 'non-nmethods'}), where an
 *     upcall stub takes about 800 bytes until its arena closes (the face makes one for arrival
 *     callbacks and one for garbage handlers, for good)
 * @param collectors the C library's collector threads ({@code stampede-gc} in
 *     {@code /proc/self/task}): one per runtime it has not released. (The JVM starts and ends
 *     threads of its own as it goes, so the process's thread count would say less.)
 * @param rssBytes resident memory ({@code VmRSS} of {@code /proc/self/status}) once malloc has
 *     given its free pages back ({@code malloc_trim}): with many threads' arenas it otherwise
 *     keeps tens of MiB of freed memory resident
 */
record NativeMemory(long libraryBytes, long arenaBytes, long stubBytes, long collectors,
                    long rssBytes) {
    private static final MethodHandle MALLINFO2 = Linker.nativeLinker().downcallHandle(
            Linker.nativeLinker().defaultLookup().find("mallinfo2").orElseThrow(),
            FunctionDescriptor.of(MemoryLayout.structLayout(
                    Stream.generate(() -> ValueLayout.JAVA_LONG).limit(10)
                            .toArray(MemoryLayout[]::new))));

    private static final MethodHandle MALLOC_TRIM = Linker.nativeLinker().downcallHandle(
            Linker.nativeLinker().defaultLookup().find("malloc_trim").orElseThrow(),
            FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_LONG));

    private static final MemoryPoolMXBean STUBS = ManagementFactory.getMemoryPoolMXBeans()
            .stream().filter(p -> p.getName().equals("CodeHeap 'non-nmethods'")).findFirst()
            .orElseThrow(() -> new IllegalStateException(
                    "no segmented code heap (a code cache of less than 240 MB?)"));

    private static final Pattern MALLOC = Pattern.compile("^Total: .*\\n\\s+malloc: (\\d+) #",
            Pattern.MULTILINE);
    private static final Pattern HEADERS = Pattern.compile("tracking overhead=(\\d+)");
    private static final Pattern OTHER = Pattern.compile("-\\s+Other \\(.*\\n\\s+\\(malloc=(\\d+)");

    static NativeMemory now() {
        // The JVM's threads (the JIT compiler's above all) malloc and free megabytes at a time:
        // a reading counts only if neither figure moved while the other was taken.
        long library = 0;
        long other = 0;
        for (int tries = 0; tries < 100; tries++) {
            long m0 = mallocedBytes();
            String nmt = nativeMemoryTracking();
            long m1 = mallocedBytes();
            String again = nativeMemoryTracking();
            long jvm = jvmMalloc(nmt);
            library = m1 - jvm;
            Matcher arenas = OTHER.matcher(nmt);
            other = arenas.find() ? Long.parseLong(arenas.group(1)) : 0; // none: not listed
            if (Math.abs(m1 - m0) < 16 * 1024 && Math.abs(jvmMalloc(again) - jvm) < 16 * 1024) {
                break;
            }
        }
        return new NativeMemory(library, other, STUBS.getUsage().getUsed(), collectorThreads(),
                residentBytes());
    }

    /** What the JVM has malloc'd, as Native Memory Tracking counts it, with its headers. */
    private static long jvmMalloc(String nmt) {
        return figure(MALLOC, nmt) + figure(HEADERS, nmt);
    }

    /** Fails unless the process has the two settings the figures need. */
    static void checkSettings() {
        nativeMemoryTracking();
        String tunables = System.getenv().getOrDefault("GLIBC_TUNABLES", "");
        if (!tunables.matches("(.*:)?glibc\\.malloc\\.tcache_count=0(:.*)?")) {
            throw new IllegalStateException(
                    "run with GLIBC_TUNABLES=glibc.malloc.tcache_count=0, not " + tunables);
        }
    }

    /** The JVM's Native Memory Tracking summary, in bytes. */
    static String nativeMemoryTracking() {
        try {
            String s = (String) ManagementFactory.getPlatformMBeanServer().invoke(
                    new ObjectName("com.sun.management:type=DiagnosticCommand"),
                    "vmNativeMemory", new Object[] {new String[] {"summary", "scale=b"}},
                    new String[] {String[].class.getName()});
            if (!s.contains("Total:")) {
                throw new IllegalStateException(
                        "run with the JVM option -XX:NativeMemoryTracking=summary: " + s);
            }
            return s;
        } catch (javax.management.JMException e) {
            throw new IllegalStateException(e);
        }
    }

    private static long figure(Pattern p, String nmt) {
        Matcher m = p.matcher(nmt);
        if (!m.find()) {
            throw new IllegalStateException("no " + p + " in Native Memory Tracking's " + nmt);
        }
        return Long.parseLong(m.group(1));
    }

    static long mallocedBytes() {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment m = (MemorySegment) MALLINFO2.invokeExact((SegmentAllocator) a);
            return m.getAtIndex(ValueLayout.JAVA_LONG, 7) + m.getAtIndex(ValueLayout.JAVA_LONG, 4);
        } catch (Throwable t) {
            throw Native.fail(t);
        }
    }

    static long collectorThreads() {
        try (Stream<Path> s = Files.list(Path.of("/proc/self/task"))) {
            return s.filter(t -> {
                try {
                    return Files.readString(t.resolve("comm")).strip().equals("stampede-gc");
                } catch (IOException e) {
                    return false; // the thread ended while listed
                }
            }).count();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    static long residentBytes() {
        try {
            // Free pages malloc keeps would otherwise count: give them back first.
            int gaveBack = (int) MALLOC_TRIM.invokeExact(0L);
        } catch (Throwable t) {
            throw Native.fail(t);
        }
        try (Stream<String> lines = Files.lines(Path.of("/proc/self/status"))) {
            return lines.filter(l -> l.startsWith("VmRSS:")).findFirst()
                    .map(l -> Long.parseLong(l.replaceAll("[^0-9]", "")) * 1024).orElseThrow();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** Collections, and time for the cleaner's thread to release what they found. */
    static void collect() throws InterruptedException {
        System.gc();
        Thread.sleep(50);
    }

    String minus(NativeMemory base) {
        return String.format("C library %+,d KiB, arenas %+,d KiB, upcall stubs %+,d KiB, "
                        + "collector threads %+d, RSS %+,d KiB",
                (libraryBytes - base.libraryBytes) / 1024, (arenaBytes - base.arenaBytes) / 1024,
                (stubBytes - base.stubBytes) / 1024, collectors - base.collectors,
                (rssBytes - base.rssBytes) / 1024);
    }

    @Override
    public String toString() {
        return String.format("C library %,d KiB, arenas %,d KiB, upcall stubs %,d KiB, "
                        + "%d collector threads, RSS %,d KiB", libraryBytes / 1024,
                arenaBytes / 1024, stubBytes / 1024, collectors, rssBytes / 1024);
    }

    /**
     * A class's {@code main} run in a JVM of its own with the two settings these figures need,
     * its output kept in a file. Runs started together proceed at once: each measures only
     * itself.
     */
    static final class Run implements AutoCloseable {
        private final Process process;
        private final Path output;

        private Run(Process process, Path output) {
            this.process = process;
            this.output = output;
        }

        static Run start(Class<?> main, String... args) throws IOException {
            Path out = Files.createTempFile("stampede-native-memory", ".txt");
            List<String> command = new ArrayList<>(List.of(
                    ProcessHandle.current().info().command().orElse("java"),
                    "--enable-native-access=ALL-UNNAMED", "-XX:NativeMemoryTracking=summary",
                    // A heap of fixed size, touched at the start, so that RSS shows the rest.
                    "-Xms128m", "-Xmx128m", "-XX:+AlwaysPreTouch",
                    "-Dstampede.library=" + System.getProperty("stampede.library"),
                    "-cp", System.getProperty("java.class.path"), main.getName()));
            command.addAll(List.of(args));
            ProcessBuilder pb = new ProcessBuilder(command).redirectErrorStream(true)
                    .redirectOutput(out.toFile());
            String tunables = pb.environment().get("GLIBC_TUNABLES");
            pb.environment().put("GLIBC_TUNABLES", (tunables == null ? "" : tunables + ":")
                    + "glibc.malloc.tcache_count=0");
            return new Run(pb.start(), out);
        }

        /** Waits up to 10 minutes for the run, prints its output, and fails unless it passed. */
        void passes() throws Exception {
            boolean ended = process.waitFor(10, TimeUnit.MINUTES);
            String got = Files.readString(output);
            System.out.print(got);
            assertTrue(ended, "the run did not end within 10 minutes:\n" + got);
            assertEquals(0, process.exitValue(), got);
        }

        @Override
        public void close() throws IOException {
            process.destroyForcibly();
            Files.deleteIfExists(output);
        }
    }
}
