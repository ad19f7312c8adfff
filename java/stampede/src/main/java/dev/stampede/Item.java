package dev.stampede;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/**
 * An item: the immutable value of a put or a get — bytes, text, an n-dimensional array, or a
 * marshalled value of a named type. Items are shared, not copied: a get returns the stored
 * bytes, which {@link #segment()} and {@link #buffer()} show without copying. Close an item
 * (or let the cleaner do it) to release it: {@link #segment()} views end with it, while a view
 * from {@link #segment(Arena)} holds the bytes until its arena closes.
 * {@link #bytes()}, {@link #text()} and the array accessors make one copy.
 */
public final class Item extends Handle {
    private static final ValueLayout.OfFloat F32 =
            ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfDouble F64 =
            ValueLayout.JAVA_DOUBLE_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfInt I32 =
            ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfLong I64 =
            ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfShort I16 =
            ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    /** The stored bytes, in global scope: read only between enter and leave. */
    private MemorySegment raw;
    private volatile Arena views;

    private Item(MemorySegment ptr) {
        super(ptr, Native.ITEM_FREE, "item", null, 0);
    }

    /** An item owning the native item {@code ptr}. */
    static Item adopt(MemorySegment ptr) {
        return new Item(ptr);
    }

    private static Item made(int status, MemorySegment out) {
        Status.check(status);
        return adopt(out.get(ADDRESS, 0));
    }

    /** A bytes item holding a copy of {@code data}. */
    public static Item of(byte[] data) {
        return ofBytes(MemorySegment.ofArray(data));
    }

    /** A bytes item holding a copy of {@code data} (native or heap memory). */
    public static Item ofBytes(MemorySegment data) {
        MemorySegment out = Scratch.out();
        try {
            return made((int) Native.ITEM_BYTES.invokeExact(data, data.byteSize(), out), out);
        } catch (Throwable t) {
            throw Native.fail(t);
        }
    }

    /** A text item holding {@code text} as UTF-8. */
    public static Item of(String text) {
        byte[] utf8 = text.getBytes(StandardCharsets.UTF_8);
        for (byte b : utf8) {
            if (b == 0) {
                throw new IllegalArgumentException("text items cannot hold NUL characters");
            }
        }
        byte[] z = Arrays.copyOf(utf8, utf8.length + 1);
        MemorySegment out = Scratch.out();
        try {
            return made((int) Native.ITEM_TEXT.invokeExact(MemorySegment.ofArray(z), out), out);
        } catch (Throwable t) {
            throw Native.fail(t);
        }
    }

    /**
     * An array item of {@code dtype} and {@code shape} holding a copy of {@code data}: row-major,
     * little-endian, exactly the product of the shape times the element size in bytes.
     */
    public static Item ofArray(DType dtype, long[] shape, MemorySegment data) {
        MemorySegment out = Scratch.out();
        try {
            return made((int) Native.ITEM_ARRAY.invokeExact(dtype.code(), (long) shape.length,
                    MemorySegment.ofArray(shape.clone()), data, data.byteSize(), out), out);
        } catch (Throwable t) {
            throw Native.fail(t);
        }
    }

    /** A {@link DType#F32} array item. */
    public static Item ofArray(long[] shape, float[] data) {
        return ofArray(DType.F32, shape, MemorySegment.ofArray(data));
    }

    /** A {@link DType#F64} array item. */
    public static Item ofArray(long[] shape, double[] data) {
        return ofArray(DType.F64, shape, MemorySegment.ofArray(data));
    }

    /** An {@link DType#I32} array item. */
    public static Item ofArray(long[] shape, int[] data) {
        return ofArray(DType.I32, shape, MemorySegment.ofArray(data));
    }

    /** An {@link DType#I64} array item. */
    public static Item ofArray(long[] shape, long[] data) {
        return ofArray(DType.I64, shape, MemorySegment.ofArray(data));
    }

    /** An {@link DType#I16} array item. */
    public static Item ofArray(long[] shape, short[] data) {
        return ofArray(DType.I16, shape, MemorySegment.ofArray(data));
    }

    /** A {@link DType#U8} array item (use {@link #ofArray(DType, long[], MemorySegment)} for
     * {@code I8}). */
    public static Item ofArray(long[] shape, byte[] data) {
        return ofArray(DType.U8, shape, MemorySegment.ofArray(data));
    }

    /** A {@link DType#BOOL} array item. */
    public static Item ofArray(long[] shape, boolean[] data) {
        byte[] b = new byte[data.length];
        for (int i = 0; i < data.length; i++) {
            b[i] = (byte) (data[i] ? 1 : 0);
        }
        return ofArray(DType.BOOL, shape, MemorySegment.ofArray(b));
    }

    /**
     * An item of the user type {@code typeName} holding its marshalled bytes: Python code that
     * registered the same name reads it as its own object, and Rust and C code by its tag.
     */
    public static Item ofTyped(String typeName, byte[] data) {
        byte[] name = (typeName + "\0").getBytes(StandardCharsets.UTF_8);
        MemorySegment out = Scratch.out();
        try {
            return made((int) Native.ITEM_TYPED.invokeExact(MemorySegment.ofArray(name),
                    MemorySegment.ofArray(data), (long) data.length, out), out);
        } catch (Throwable t) {
            throw Native.fail(t);
        }
    }

    /** The 64-bit tag of a type name, as every language computes it. */
    public static long typeTag(String typeName) {
        try (Arena a = Arena.ofConfined()) {
            return (long) Native.TYPE_TAG.invokeExact(a.allocateFrom(typeName));
        } catch (Throwable t) {
            throw Native.fail(t);
        }
    }

    /** What the item holds. */
    public ItemKind kind() {
        MemorySegment p = res.enter();
        try {
            return ItemKind.values()[(int) Native.ITEM_KIND.invokeExact(p)];
        } catch (Throwable t) {
            throw Native.fail(t);
        } finally {
            res.leave();
        }
    }

    /** The item's 64-bit type tag. */
    public long tag() {
        MemorySegment p = res.enter();
        try {
            return (long) Native.ITEM_TAG.invokeExact(p);
        } catch (Throwable t) {
            throw Native.fail(t);
        } finally {
            res.leave();
        }
    }

    /** The stored bytes in global scope; the caller is between enter and leave. */
    private MemorySegment raw(MemorySegment p) {
        MemorySegment r = raw;
        if (r == null) {
            MemorySegment len = Scratch.out();
            try {
                MemorySegment data = (MemorySegment) Native.ITEM_DATA.invokeExact(p, len);
                r = data.reinterpret(len.get(JAVA_LONG, 0));
            } catch (Throwable t) {
                throw Native.fail(t);
            }
            raw = r;
        }
        return r;
    }

    /** The number of stored bytes (an array's element data, text's UTF-8 bytes). */
    public long byteSize() {
        MemorySegment p = res.enter();
        try {
            return raw(p).byteSize();
        } finally {
            res.leave();
        }
    }

    /**
     * A read-only view of the stored bytes, without copying, valid until the item is closed
     * (or released unreachable); afterwards it fails with {@link IllegalStateException}
     * instead of reading freed memory. Closing an item that gave out such a view costs a
     * thread handshake (tens of microseconds); {@link #segment(Arena)} avoids it.
     */
    public MemorySegment segment() {
        MemorySegment p = res.enter();
        try {
            Arena a = views;
            if (a == null) {
                synchronized (this) {
                    a = views;
                    if (a == null) {
                        a = Arena.ofShared();
                        res.beforeFree(a::close);
                        views = a;
                    }
                }
            }
            return raw(p).reinterpret(a, null).asReadOnly();
        } finally {
            res.leave();
        }
    }

    /**
     * A read-only view of the stored bytes, without copying, that holds them itself for as
     * long as {@code arena} is open, whether or not the item is closed first. With a
     * confined arena this is the cheapest view to release.
     */
    public MemorySegment segment(Arena arena) {
        MemorySegment p = res.enter();
        try {
            MemorySegment hold = Native.cloneItem(p);
            return raw(p).reinterpret(arena, s -> Native.free(Native.ITEM_FREE, hold))
                    .asReadOnly();
        } finally {
            res.leave();
        }
    }

    /** A read-only little-endian buffer over the stored bytes, without copying. */
    public ByteBuffer buffer() {
        return segment().asByteBuffer().order(ByteOrder.LITTLE_ENDIAN);
    }

    /** A copy of the stored bytes. */
    public byte[] bytes() {
        MemorySegment p = res.enter();
        try {
            return raw(p).toArray(JAVA_BYTE);
        } finally {
            res.leave();
        }
    }

    /** The text of a text item. */
    public String text() {
        expect(ItemKind.TEXT);
        return new String(bytes(), StandardCharsets.UTF_8);
    }

    /** The element type of an array item. */
    public DType dtype() {
        MemorySegment p = res.enter();
        try {
            MemorySegment out = Scratch.out();
            Status.check((int) Native.ITEM_DTYPE.invokeExact(p, out));
            return DType.of(out.get(JAVA_INT, 0));
        } catch (Throwable t) {
            throw Native.fail(t);
        } finally {
            res.leave();
        }
    }

    /** The shape of an array item. */
    public long[] shape() {
        MemorySegment p = res.enter();
        try {
            MemorySegment out = Scratch.out();
            MemorySegment ndim = out.asSlice(0, 8);
            MemorySegment shape = out.asSlice(8, 8);
            Status.check((int) Native.ITEM_SHAPE.invokeExact(p, ndim, shape));
            long n = ndim.get(JAVA_LONG, 0);
            return shape.get(ADDRESS, 0).reinterpret(n * 8).toArray(JAVA_LONG);
        } catch (Throwable t) {
            throw Native.fail(t);
        } finally {
            res.leave();
        }
    }

    private void expect(ItemKind k) {
        ItemKind is = kind();
        if (is != k) {
            throw StampedeException.make(Status.WRONG_TYPE,
                    "the item holds " + is.name().toLowerCase() + ", not "
                            + k.name().toLowerCase(), null, null, null, null);
        }
    }

    private void expect(DType... allowed) {
        expect(ItemKind.ARRAY);
        DType d = dtype();
        for (DType a : allowed) {
            if (a == d) {
                return;
            }
        }
        throw StampedeException.make(Status.WRONG_TYPE,
                "the array's dtype is " + d + ", not " + Arrays.toString(allowed), null, null,
                null, null);
    }

    /** A copy of an {@code F32} array's elements. */
    public float[] floats() {
        expect(DType.F32);
        MemorySegment p = res.enter();
        try {
            return raw(p).toArray(F32);
        } finally {
            res.leave();
        }
    }

    /** A copy of an {@code F64} array's elements. */
    public double[] doubles() {
        expect(DType.F64);
        MemorySegment p = res.enter();
        try {
            return raw(p).toArray(F64);
        } finally {
            res.leave();
        }
    }

    /** A copy of an {@code I32} or {@code U32} array's elements. */
    public int[] ints() {
        expect(DType.I32, DType.U32);
        MemorySegment p = res.enter();
        try {
            return raw(p).toArray(I32);
        } finally {
            res.leave();
        }
    }

    /** A copy of an {@code I64} or {@code U64} array's elements. */
    public long[] longs() {
        expect(DType.I64, DType.U64);
        MemorySegment p = res.enter();
        try {
            return raw(p).toArray(I64);
        } finally {
            res.leave();
        }
    }

    /** A copy of an {@code I16}, {@code U16} or {@code F16} array's elements (raw bits). */
    public short[] shorts() {
        expect(DType.I16, DType.U16, DType.F16);
        MemorySegment p = res.enter();
        try {
            return raw(p).toArray(I16);
        } finally {
            res.leave();
        }
    }

    /** A copy of a {@code BOOL} array's elements. */
    public boolean[] booleans() {
        expect(DType.BOOL);
        byte[] b = bytes();
        boolean[] out = new boolean[b.length];
        for (int i = 0; i < b.length; i++) {
            out[i] = b[i] != 0;
        }
        return out;
    }

    /** Another handle to the same stored item (nothing is copied). */
    public Item share() {
        MemorySegment p = res.enter();
        try {
            return adopt(Native.cloneItem(p));
        } finally {
            res.leave();
        }
    }

    @Override
    public String toString() {
        if (isClosed()) {
            return "Item(closed)";
        }
        ItemKind k = kind();
        return switch (k) {
            case TEXT -> "Item(text " + text() + ")";
            case ARRAY -> "Item(array " + dtype() + " " + Arrays.toString(shape()) + ")";
            default -> "Item(" + k.name().toLowerCase() + ", " + byteSize() + " bytes)";
        };
    }
}
