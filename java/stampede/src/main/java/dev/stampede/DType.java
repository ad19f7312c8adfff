package dev.stampede;

/** Element types of array items; the codes and sizes are those of the shared layout, so an
 * array put from Java reads as the same numpy dtype in Python and the same type in C and Rust. */
public enum DType {
    /** {@code bool}, one byte. */
    BOOL(0, 1),
    /** Unsigned 8-bit. */
    U8(1, 1),
    /** Signed 8-bit. */
    I8(2, 1),
    /** Unsigned 16-bit. */
    U16(3, 2),
    /** Signed 16-bit. */
    I16(4, 2),
    /** Unsigned 32-bit. */
    U32(5, 4),
    /** Signed 32-bit. */
    I32(6, 4),
    /** Unsigned 64-bit. */
    U64(7, 8),
    /** Signed 64-bit. */
    I64(8, 8),
    /** IEEE half precision. */
    F16(9, 2),
    /** IEEE single precision. */
    F32(10, 4),
    /** IEEE double precision. */
    F64(11, 8);

    private final int code;
    private final int size;

    DType(int code, int size) {
        this.code = code;
        this.size = size;
    }

    /** The shared code ({@code stp_dtype}). */
    public int code() {
        return code;
    }

    /** Bytes per element. */
    public int size() {
        return size;
    }

    /** The dtype of a shared code. */
    public static DType of(int code) {
        for (DType d : values()) {
            if (d.code == code) {
                return d;
            }
        }
        throw new IllegalArgumentException(code + " is not a dtype code");
    }
}
