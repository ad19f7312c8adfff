package dev.stampede;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import org.junit.jupiter.api.Test;

class ItemTest {
    @Test
    void bytes_text_and_typed_items_round_trip() {
        try (Item b = Item.of(new byte[] {1, 2, 3}); Item t = Item.of("héllo");
             Item o = Item.ofTyped("demo.Point", new byte[] {9, 8})) {
            assertEquals(ItemKind.BYTES, b.kind());
            assertArrayEquals(new byte[] {1, 2, 3}, b.bytes());
            assertEquals(ItemKind.TEXT, t.kind());
            assertEquals("héllo", t.text());
            assertEquals(6, t.byteSize());
            assertEquals(ItemKind.OTHER, o.kind());
            assertEquals(Item.typeTag("demo.Point"), o.tag());
            assertArrayEquals(new byte[] {9, 8}, o.bytes());
            assertThrows(StampedeException.WrongType.class, b::text);
            assertThrows(StampedeException.WrongType.class, t::floats);
            assertThrows(IllegalArgumentException.class, () -> Item.of("a\0b"));
        }
    }

    @Test
    void every_dtype_round_trips() {
        long[] shape = {2, 3};
        try (Item f = Item.ofArray(shape, new float[] {1, 2, 3, 4, 5, 6})) {
            assertEquals(DType.F32, f.dtype());
            assertArrayEquals(shape, f.shape());
            assertArrayEquals(new float[] {1, 2, 3, 4, 5, 6}, f.floats());
        }
        try (Item d = Item.ofArray(new long[] {2}, new double[] {0.5, -1})) {
            assertArrayEquals(new double[] {0.5, -1}, d.doubles());
        }
        try (Item i = Item.ofArray(new long[] {2}, new int[] {7, -7})) {
            assertArrayEquals(new int[] {7, -7}, i.ints());
        }
        try (Item l = Item.ofArray(new long[] {1}, new long[] {Long.MIN_VALUE})) {
            assertArrayEquals(new long[] {Long.MIN_VALUE}, l.longs());
        }
        try (Item s = Item.ofArray(new long[] {2}, new short[] {1, -1})) {
            assertArrayEquals(new short[] {1, -1}, s.shorts());
        }
        try (Item u = Item.ofArray(new long[] {2}, new byte[] {(byte) 255, 0})) {
            assertEquals(DType.U8, u.dtype());
            assertArrayEquals(new byte[] {(byte) 255, 0}, u.bytes());
        }
        try (Item z = Item.ofArray(new long[] {3}, new boolean[] {true, false, true})) {
            assertArrayEquals(new boolean[] {true, false, true}, z.booleans());
        }
        for (DType t : DType.values()) {
            MemorySegment data = MemorySegment.ofArray(new byte[4 * t.size()]);
            try (Item a = Item.ofArray(t, new long[] {2, 2}, data)) {
                assertEquals(t, a.dtype());
                assertEquals(4L * t.size(), a.byteSize());
            }
        }
        assertThrows(StampedeException.InvalidArgument.class,
                () -> Item.ofArray(DType.F32, new long[] {3}, MemorySegment.ofArray(new byte[4])));
    }

    @Test
    void views_share_the_stored_bytes_and_end_with_the_item_or_their_arena() throws Exception {
        try (Runtime rt = new Runtime()) {
            Channel ch = rt.channel();
            ChannelOutput out = rt.task(0).attachOutput(ch);
            ChannelInput a = rt.task(Stampede.INFINITY).attachInput(ch);
            ChannelInput b = rt.task(Stampede.INFINITY).attachInput(ch);
            out.put(0, Item.ofArray(new long[] {4}, new int[] {10, 20, 30, 40}));
            Stamped x = a.get(0);
            Stamped y = b.get(0);
            MemorySegment vx = x.item().segment();
            MemorySegment vy = y.item().segment();
            assertTrue(vx.isReadOnly());
            assertEquals(vx.address(), vy.address(), "both gets see the one stored copy");
            assertEquals(30, vx.getAtIndex(ValueLayout.JAVA_INT_UNALIGNED, 2));
            ByteBuffer buf = x.item().buffer();
            assertEquals(ByteOrder.LITTLE_ENDIAN, buf.order());
            assertEquals(40, buf.getInt(12));
            assertThrows(IllegalArgumentException.class,
                    () -> vx.set(ValueLayout.JAVA_INT_UNALIGNED, 0, 1));
            MemorySegment held;
            try (java.lang.foreign.Arena arena = java.lang.foreign.Arena.ofConfined()) {
                held = x.item().segment(arena);
                assertEquals(vx.address(), held.address());
                x.close();
                assertThrows(IllegalStateException.class,
                        () -> vx.get(ValueLayout.JAVA_INT_UNALIGNED, 0));
                assertThrows(IllegalStateException.class, () -> x.item().bytes());
                assertEquals(10, held.get(ValueLayout.JAVA_INT_UNALIGNED, 0),
                        "a view of an arena holds the bytes");
            }
            assertThrows(IllegalStateException.class,
                    () -> held.get(ValueLayout.JAVA_INT_UNALIGNED, 0));
            assertEquals(10, vy.get(ValueLayout.JAVA_INT_UNALIGNED, 0));
            y.close();
        }
    }

    @Test
    void shared_handles_outlive_the_first() {
        Item a = Item.of("shared");
        Item b = a.share();
        a.close();
        assertEquals("shared", b.text());
        b.close();
    }

    @Test
    void loans_are_filled_in_place_and_put() throws Exception {
        try (Runtime rt = new Runtime()) {
            Channel ch = rt.channel();
            ChannelOutput out = rt.task(0).attachOutput(ch);
            ChannelInput in = rt.task(Stampede.INFINITY).attachInput(ch);
            try (Loan loan = out.loanArray(DType.F64, new long[] {3})) {
                MemorySegment m = loan.segment();
                for (int i = 0; i < 3; i++) {
                    m.setAtIndex(ValueLayout.JAVA_DOUBLE_UNALIGNED, i, i * 1.5);
                }
                try (Item item = loan.finish()) {
                    out.put(7, item);
                }
                assertThrows(IllegalStateException.class,
                        () -> m.set(ValueLayout.JAVA_BYTE, 0, (byte) 1));
            }
            try (Stamped s = in.get(7)) {
                assertArrayEquals(new double[] {0, 1.5, 3}, s.item().doubles());
            }
            Loan unused = out.loan(16);
            unused.close();
            assertThrows(IllegalStateException.class, unused::finish);
        }
    }
}
