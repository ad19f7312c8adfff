package dev.stampede.examples;

import dev.stampede.Channel;
import dev.stampede.ChannelInput;
import dev.stampede.ChannelOutput;
import dev.stampede.Config;
import dev.stampede.DType;
import dev.stampede.Item;
import dev.stampede.ItemKind;
import dev.stampede.Pacer;
import dev.stampede.Register;
import dev.stampede.RegisterInput;
import dev.stampede.RegisterValue;
import dev.stampede.Selector;
import dev.stampede.Space;
import dev.stampede.Stamped;
import dev.stampede.Stampede;
import dev.stampede.StampedeException;
import dev.stampede.Task;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A video-conference participant in Java (docs/conference.md).
 *
 * <p>Joins the conference application as a client of the mixer's address space and runs two
 * threads: a camera that puts synthetic frames on its own channel {@code conf/cam/<id>}, paced
 * to a target rate, and a display that gets composites from {@code conf/mix}, checks every
 * tile, and counts the frame rate. Prints a JSON line per report interval and a summary at
 * exit, as the Rust, C and Python participants do.
 *
 * <pre>
 *   ConferenceParticipant --connect tcp/127.0.0.1:7447 --id 3 [--fps 15] [--size-kb 74]
 *                         [--width 176] [--duration 10] [--report-ms 500] [--app conference]
 * </pre>
 */
public final class ConferenceParticipant {
    private static final Duration SLICE = Duration.ofMillis(200);
    private static final ValueLayout.OfInt U32 =
            ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfLong U64 =
            ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    /** The command line. */
    record Options(String connect, String app, long id, double fps, double sizeKb, int width,
                   double duration, long reportMs) {}

    /** What the display saw, shared with the reporting thread (guarded by itself). */
    private static final class DisplayStats {
        long composites;
        long bad;
        long lastTs;
        List<Long> members = List.of();
        long firstAt;
        long lastAt;
    }

    private final Options opt;
    private final Space space;
    private final int height;
    private final AtomicBoolean failed = new AtomicBoolean();
    private final AtomicLong framesPut = new AtomicLong();
    private final AtomicLong putTimeouts = new AtomicLong();
    private final DisplayStats display = new DisplayStats();
    private volatile boolean stop;
    /** Counted down to wake the main loop: a signal, or a thread that failed. */
    private final CountDownLatch wake = new CountDownLatch(1);

    private ConferenceParticipant(Options opt, Space space) {
        this.opt = opt;
        this.space = space;
        this.height = height(opt);
    }

    static int height(Options o) {
        return (int) Math.max(1, Math.round(o.sizeKb() * 1000.0 / (o.width() * 3.0)));
    }

    static int fillByte(long id, long ts) {
        return (int) ((id * 37 + ts) & 0xff);
    }

    private void fail(String what, Exception e) {
        String why = e instanceof StampedeException se
                ? se.status() + ": " + se.getMessage()
                : e.toString();
        System.err.println("participant " + opt.id() + ": " + what + ": " + why);
        failed.set(true);
        stop = true;
        wake.countDown();
    }

    /** Reads the mixer's clock: the next slot it will compose. */
    private long readClock(Task task) throws InterruptedException {
        Register reg = space.lookupRegister("conf/clock", Duration.ofSeconds(10));
        try (RegisterInput in = task.attachInput(reg);
             RegisterValue v = in.read(Duration.ofSeconds(5))) {
            byte[] data = v.item().bytes();
            if (data.length != 8) {
                throw new IllegalStateException("conf/clock holds " + data.length + " bytes, not 8");
            }
            return MemorySegment.ofArray(data).get(U64, 0);
        } finally {
            reg.close();
        }
    }

    private void camera() {
        String name = "conf/cam/" + opt.id();
        long[] shape = {height, opt.width(), 3};
        byte[] frame = new byte[height * opt.width() * 3];
        MemorySegment header = MemorySegment.ofArray(frame);
        Channel ch;
        try {
            ch = space.channel(name, 4);
        } catch (StampedeException e) {
            fail("creating the camera channel", e);
            return;
        }
        Pacer pacer = null;
        try (ch; Task task = space.task(Stampede.AT_FLOOR, "camera");
             ChannelOutput out = task.attachOutput(ch)) {
            long clock = readClock(task);
            // Start far enough ahead that the mixer reaches our first slot after it finds us;
            // a root task may not go below its zone's floor.
            long lead = opt.fps() > 0 ? Math.max(2, (long) Math.ceil(opt.fps() * 0.5)) : 2;
            long t = Math.max(clock + lead, task.virtualTime());
            task.setVirtualTime(t);
            if (opt.fps() > 0) {
                Duration period = Duration.ofNanos((long) (1e9 / opt.fps()));
                pacer = new Pacer(period, period, Pacer.LateAction.CONTINUE);
            }
            while (!stop) {
                if (pacer != null) {
                    pacer.sync(t);
                }
                Arrays.fill(frame, (byte) fillByte(opt.id(), t));
                header.set(U32, 0, (int) opt.id());
                header.set(U64, 4, t);
                try (Item item = Item.ofArray(shape, frame)) {
                    // A full channel means the mixer is behind: wait in slices so a stop is
                    // noticed.
                    boolean put = false;
                    while (!put && !stop) {
                        try {
                            out.put(t, item, SLICE);
                            put = true;
                        } catch (StampedeException.Full e) {
                            putTimeouts.incrementAndGet();
                        }
                    }
                    if (!put) {
                        break;
                    }
                }
                framesPut.incrementAndGet();
                t++;
                task.setVirtualTime(t);
            }
        } catch (InterruptedException e) {
            // Stopping.
        } catch (RuntimeException e) {
            fail("camera", e);
        } finally {
            if (pacer != null) {
                pacer.close();
            }
        }
    }

    /** Checks every tile of a composite; returns the number of bad tiles and fills in the
     * members. */
    private long checkComposite(Item item, long ts, List<Long> members) {
        if (item.kind() != ItemKind.ARRAY || item.dtype() != DType.U8) {
            return 1;
        }
        long[] shape = item.shape();
        if (shape.length != 3 || shape[2] != 3) {
            return 1;
        }
        long h = height;
        long w = opt.width();
        if (shape[0] % h != 0 || shape[1] % w != 0) {
            return 1;
        }
        long rows = shape[0] / h;
        long cols = shape[1] / w;
        long stride = shape[1] * 3;
        // The stored composite itself, without a copy, released when this check ends.
        try (java.lang.foreign.Arena arena = java.lang.foreign.Arena.ofConfined()) {
            return countBad(item.segment(arena), ts, h, w, rows, cols, stride, members);
        }
    }

    private static long countBad(MemorySegment px, long ts, long h, long w, long rows, long cols,
                                 long stride, List<Long> members) {
        long bad = 0;
        for (long r = 0; r < rows; r++) {
            for (long c = 0; c < cols; c++) {
                long tile = r * h * stride + c * w * 3;
                long id = Integer.toUnsignedLong(px.get(U32, tile));
                if (id == 0) {
                    continue;
                }
                long last = tile + (h - 1) * stride + (w - 1) * 3 + 2;
                if (px.get(U64, tile + 4) != ts
                        || Byte.toUnsignedInt(px.get(ValueLayout.JAVA_BYTE, last))
                        != fillByte(id, ts)) {
                    bad++;
                }
                members.add(id);
            }
        }
        return bad;
    }

    private void display() {
        Channel mix;
        try {
            mix = space.lookupChannel("conf/mix", Duration.ofSeconds(10));
        } catch (InterruptedException e) {
            return;
        } catch (StampedeException e) {
            fail("looking up conf/mix", e);
            return;
        }
        try (mix; Task task = space.task(Stampede.INFINITY, "display");
             ChannelInput in = task.attachInput(mix)) {
            while (!stop) {
                Stamped got;
                try {
                    got = in.get(Selector.NEWEST_UNSEEN, SLICE);
                } catch (StampedeException.Timeout | StampedeException.Gone e) {
                    continue;
                }
                try (got) {
                    long ts = got.ts();
                    // Release this composite and everything older at once: until then it
                    // holds the mix channel's garbage collection.
                    in.consumeUntil(ts);
                    List<Long> members = new ArrayList<>();
                    long bad = checkComposite(got.item(), ts, members);
                    long at = System.nanoTime();
                    synchronized (display) {
                        if (display.composites == 0) {
                            display.firstAt = at;
                        }
                        display.composites++;
                        display.bad += bad;
                        display.lastTs = ts;
                        display.lastAt = at;
                        display.members = List.copyOf(members);
                    }
                }
            }
        } catch (InterruptedException e) {
            // Stopping.
        } catch (RuntimeException e) {
            fail("getting a composite", e);
        }
    }

    private void report(String event, double fps) {
        StringBuilder b = new StringBuilder(160);
        synchronized (display) {
            b.append("{\"event\":\"").append(event).append("\",\"id\":").append(opt.id())
                    .append(",\"composites\":").append(display.composites)
                    .append(",\"ts\":").append(display.composites == 0 ? "null"
                            : Long.toString(display.lastTs))
                    .append(",\"members\":[");
            for (int i = 0; i < display.members.size(); i++) {
                b.append(i == 0 ? "" : ",").append(display.members.get(i));
            }
            b.append("],\"fps\":").append(String.format(Locale.ROOT, "%.2f", fps))
                    .append(",\"bad\":").append(display.bad);
        }
        b.append(",\"frames_put\":").append(framesPut.get())
                .append(",\"put_timeouts\":").append(putTimeouts.get()).append('}');
        System.out.println(b);
        System.out.flush();
    }

    private long composites() {
        synchronized (display) {
            return display.composites;
        }
    }

    /** Runs camera and display until the duration passes, a signal or a failure; prints the
     * summary. */
    private int run(AtomicBoolean signalled) throws InterruptedException {
        Thread cam = Thread.ofPlatform().name("camera").start(this::camera);
        Thread disp = Thread.ofPlatform().name("display").start(this::display);
        long start = System.nanoTime();
        long reportNs = opt.reportMs() * 1_000_000;
        long end = opt.duration() > 0 ? start + (long) (opt.duration() * 1e9) : Long.MAX_VALUE;
        long nextReport = start + reportNs;
        long reported = 0;
        long reportedAt = start;
        while (!signalled.get() && !stop) {
            long now = System.nanoTime();
            if (now - end >= 0) {
                break;
            }
            if (now - nextReport >= 0) {
                long n = composites();
                report("display", (n - reported) / ((now - reportedAt) / 1e9));
                reported = n;
                reportedAt = now;
                nextReport = now + reportNs;
            }
            long nap = Math.min(nextReport, end) - System.nanoTime();
            if (nap > 0) {
                wake.await(nap, TimeUnit.NANOSECONDS);
            }
        }
        stop = true;
        // Ends a pacer's sleep or a waiting get or put within a wait slice.
        cam.interrupt();
        disp.interrupt();
        cam.join();
        disp.join();
        double fps;
        synchronized (display) {
            double span = (display.lastAt - display.firstAt) / 1e9;
            fps = display.composites > 1 && span > 0 ? (display.composites - 1) / span : 0;
        }
        report("summary", fps);
        return failed.get() ? 1 : 0;
    }

    private static final String USAGE = "usage: ConferenceParticipant --connect ENDPOINT --id N "
            + "(N >= 1) [--fps F] [--size-kb S] [--width W] [--duration SECS] [--report-ms MS] "
            + "[--app NAME]";

    /** Parses {@code --flag value} and {@code --flag=value}; {@code null} when invalid. */
    static Options parse(String[] args) {
        String connect = null;
        String app = "conference";
        long id = 0;
        double fps = 15;
        double sizeKb = 74;
        long width = 176;
        double duration = 0;
        long reportMs = 500;
        try {
            for (int i = 0; i < args.length; i++) {
                String a = args[i];
                String value;
                int eq = a.indexOf('=');
                if (a.startsWith("--") && eq > 0) {
                    value = a.substring(eq + 1);
                    a = a.substring(0, eq);
                } else if (i + 1 < args.length) {
                    value = args[++i];
                } else {
                    return null;
                }
                switch (a) {
                    case "--connect" -> connect = value;
                    case "--app" -> app = value;
                    case "--id" -> id = Long.parseLong(value);
                    case "--fps" -> fps = Double.parseDouble(value);
                    case "--size-kb" -> sizeKb = Double.parseDouble(value);
                    case "--width" -> width = Long.parseLong(value);
                    case "--duration" -> duration = Double.parseDouble(value);
                    case "--report-ms" -> reportMs = Long.parseLong(value);
                    default -> {
                        return null;
                    }
                }
            }
        } catch (NumberFormatException e) {
            return null;
        }
        // The 12-byte header must fit in a frame's first row.
        if (connect == null || id < 1 || id > 0xffff_ffffL || width < 4 || width > 1 << 20
                || !(sizeKb > 0) || !(fps >= 0) || Double.isInfinite(fps) || reportMs <= 0
                || Double.isNaN(duration)) {
            return null;
        }
        Options o = new Options(connect, app, id, fps, sizeKb, (int) width, duration, reportMs);
        if ((long) height(o) * width * 3 > Integer.MAX_VALUE - 8) {
            return null;
        }
        return o;
    }

    public static void main(String[] args) throws InterruptedException {
        Options opt = parse(args);
        if (opt == null) {
            System.err.println(USAGE);
            System.exit(2);
            return;
        }
        Space space;
        try {
            Duration five = Duration.ofSeconds(5);
            space = Space.join(opt.app(), Config.client(opt.connect())
                    .timeouts(five, five, Duration.ofSeconds(10)));
        } catch (StampedeException e) {
            System.err.println("participant " + opt.id() + ": joining: " + e.status() + ": "
                    + e.getMessage());
            System.exit(1);
            return;
        }
        ConferenceParticipant p = new ConferenceParticipant(opt, space);

        // SIGINT and SIGTERM start the JVM's shutdown: the hook stops the participant, waits
        // for its summary and leaving, and exits with its status (not the signal's).
        AtomicBoolean signalled = new AtomicBoolean();
        CountDownLatch finished = new CountDownLatch(1);
        int[] status = {1};
        Thread hook = new Thread(() -> {
            signalled.set(true);
            p.wake.countDown();
            try {
                finished.await();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            System.out.flush();
            java.lang.Runtime.getRuntime().halt(status[0]);
        }, "stop");
        java.lang.Runtime.getRuntime().addShutdownHook(hook);

        int code = 1;
        try {
            code = p.run(signalled);
        } finally {
            // Leaving withdraws the camera's name at once, so the mixer drops this participant
            // from the next slot.
            space.close();
            status[0] = code;
            finished.countDown();
        }
        try {
            java.lang.Runtime.getRuntime().removeShutdownHook(hook);
        } catch (IllegalStateException shuttingDown) {
            return; // the hook exits with the status
        }
        System.exit(code);
    }
}
