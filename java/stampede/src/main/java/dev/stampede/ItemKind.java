package dev.stampede;

/** What an item holds ({@code stp_item_kind}). */
public enum ItemKind {
    /** Raw bytes. */
    BYTES,
    /** UTF-8 text. */
    TEXT,
    /** An n-dimensional array with a {@link DType} and a shape. */
    ARRAY,
    /** Another type (a Python object, a typed record): {@link Item#segment()} gives its
     * marshalled bytes and {@link Item#tag()} its type. */
    OTHER
}
