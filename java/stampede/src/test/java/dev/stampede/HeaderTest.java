package dev.stampede;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.StructLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/** The Java layouts and tables against stampede.h, as the C compiler sees it. */
class HeaderTest {
    static Path header() {
        return Path.of(System.getProperty("stampede.header"));
    }

    /** Compiles the probe against the header and reads what it prints. */
    static Map<String, Long> probe() throws IOException, InterruptedException {
        Path src = Path.of("src/test/c/layout_probe.c").toAbsolutePath();
        Path exe = Files.createTempDirectory("stampede-probe").resolve("layout_probe");
        Process cc = new ProcessBuilder(System.getenv().getOrDefault("CC", "cc"), "-std=c11",
                "-Wall", "-Werror", "-I" + header().getParent(), src.toString(), "-o",
                exe.toString()).inheritIO().start();
        assertEquals(0, cc.waitFor(), "the layout probe did not compile against the header");
        Process run = new ProcessBuilder(exe.toString()).start();
        String out = new String(run.getInputStream().readAllBytes());
        assertEquals(0, run.waitFor());
        Map<String, Long> m = new HashMap<>();
        for (String line : out.strip().split("\n")) {
            String[] kv = line.split(" ");
            m.put(kv[0], Long.parseLong(kv[1]));
        }
        return m;
    }

    @Test
    void every_struct_layout_matches_the_compiled_header() throws Exception {
        Map<String, Long> c = probe();
        for (Map.Entry<String, StructLayout> e : Layouts.ALL.entrySet()) {
            String name = e.getKey();
            StructLayout s = e.getValue();
            assertEquals(c.get(name), s.byteSize(), "sizeof(" + name + ")");
            for (MemoryLayout m : s.memberLayouts()) {
                if (m.name().isEmpty()) {
                    continue; // padding
                }
                String f = name + "." + m.name().get();
                assertTrue(c.containsKey(f), f + " is not in the probe");
                assertEquals(c.get(f), Layouts.off(s, m.name().get()), "offsetof(" + f + ")");
            }
        }
        assertEquals(4L, c.get("sizeof.stp_status"));
        assertEquals(4L, c.get("sizeof.stp_dtype"));
        assertEquals(8L, c.get("sizeof.size_t"));
        assertEquals(1L, c.get("sizeof.bool"));
    }

    @Test
    void every_struct_of_the_header_is_laid_out() throws Exception {
        String h = Files.readString(header());
        TreeSet<String> structs = new TreeSet<>();
        Matcher m = Pattern.compile("typedef struct \\{[^}]*\\} (stp_\\w+);").matcher(h);
        while (m.find()) {
            // The pthreads face's mutex, condition and barrier are storage in C programs,
            // never handed to Java.
            if (!m.group(1).startsWith("stp_pthread_")) {
                structs.add(m.group(1));
            }
        }
        assertTrue(structs.size() >= 8, structs.toString());
        assertEquals(structs, new TreeSet<>(Layouts.ALL.keySet()));
    }

    private static Map<String, Integer> enumValues(String h, String type) {
        Matcher body = Pattern.compile("typedef enum \\{([^}]*)\\} " + type + ";").matcher(h);
        assertTrue(body.find(), type);
        Map<String, Integer> v = new HashMap<>();
        Matcher m = Pattern.compile("(STP_\\w+) = (-?\\d+)").matcher(body.group(1));
        while (m.find()) {
            v.put(m.group(1), Integer.parseInt(m.group(2)));
        }
        return v;
    }

    @Test
    void the_status_table_is_the_header_s() throws Exception {
        Map<String, Integer> c = enumValues(Files.readString(header()), "stp_status");
        Map<String, Integer> java = new HashMap<>();
        for (Status s : Status.values()) {
            java.put("STP_" + s.name(), s.code());
            assertEquals("STP_" + s.name(), Native.statusName(s.code()));
        }
        assertEquals(c, java);
    }

    @Test
    void dtypes_item_kinds_and_causes_are_the_header_s() throws Exception {
        String h = Files.readString(header());
        Map<String, Integer> d = enumValues(h, "stp_dtype");
        assertEquals(DType.values().length, d.size());
        for (DType t : DType.values()) {
            assertEquals(d.get("STP_" + t.name()), t.code());
        }
        Map<String, Integer> k = enumValues(h, "stp_item_kind");
        for (ItemKind t : ItemKind.values()) {
            assertEquals(k.get("STP_ITEM_" + t.name()), t.ordinal());
        }
        Map<String, Integer> c = enumValues(h, "stp_hold_cause");
        assertEquals(Hold.Cause.values().length, c.size());
        for (Hold.Cause t : Hold.Cause.values()) {
            assertEquals(c.get("STP_HOLD_" + t.name()), t.ordinal());
        }
        Map<String, Integer> sel = enumValues(h, "stp_selector");
        assertEquals(sel.get("STP_OLDEST"), Selector.OLDEST.kind());
        assertEquals(sel.get("STP_NEWEST"), Selector.NEWEST.kind());
        assertEquals(sel.get("STP_NEWEST_UNSEEN"), Selector.NEWEST_UNSEEN.kind());
        assertEquals(sel.get("STP_NEXT_UNSEEN"), Selector.NEXT_UNSEEN.kind());
        assertEquals(sel.get("STP_EXACT"), Selector.exact(5).kind());
        Map<String, Integer> mode = enumValues(h, "stp_mode");
        for (Config.Mode t : Config.Mode.values()) {
            assertEquals(mode.get("STP_" + t.name()), t.ordinal());
        }
        Map<String, Integer> late = enumValues(h, "stp_late_action");
        for (Pacer.LateAction t : Pacer.LateAction.values()) {
            assertEquals(late.get("STP_LATE_" + t.name()), t.ordinal());
        }
        Map<String, Integer> tick = enumValues(h, "stp_tick");
        for (Pacer.Tick.Kind t : Pacer.Tick.Kind.values()) {
            assertEquals(tick.get("STP_TICK_" + t.name()), t.ordinal());
        }
        Map<String, Integer> match = enumValues(h, "stp_match");
        for (Correlator.Match t : Correlator.Match.values()) {
            assertEquals(match.get("STP_MATCH_" + t.name()), t.ordinal());
        }
    }

    @Test
    void the_library_reports_its_version() {
        assertTrue(Stampede.version().matches("\\d+\\.\\d+\\.\\d+.*"), Stampede.version());
    }
}
