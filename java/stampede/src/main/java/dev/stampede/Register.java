package dev.stampede;

import java.lang.foreign.MemorySegment;

/** A register: one current value, here or in another address space. Tasks reach it through
 * {@link RegisterInput} and {@link RegisterOutput}. */
public final class Register extends Container {
    Register(MemorySegment ptr, Runtime rt, String name) {
        super(ptr, Kind.REGISTER, rt, name);
    }

    @Override
    public Kind kind() {
        return Kind.REGISTER;
    }

    @Override
    public String toString() {
        return "Register(" + (name() == null ? "unnamed" : name()) + (isLocal() ? "" : ", remote")
                + ")";
    }
}
