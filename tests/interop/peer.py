"""The Python side of the cross-language item test (java/examples InteropTest).

Joins the application as a client of ``--connect``, reads the array of every dtype that the
Java side put on ``interop/java`` (timestamp = the dtype's code) and checks it as a numpy
array, then puts its own arrays of every dtype on ``interop/python``, which it owns. Prints
``OK`` and stays until its standard input closes, so that its channel outlives the reads.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

import stampede as sp

# The shared dtype codes, in order (stp_dtype).
DTYPES = ["bool", "uint8", "int8", "uint16", "int16", "uint32", "int32", "uint64", "int64",
          "float16", "float32", "float64"]
SHAPE = (2, 3)


def expected(code: int) -> np.ndarray:
    """Element i is (37 i + 5) mod 100; booleans take it mod 2, floats divide it by 4."""
    v = np.array([(i * 37 + 5) % 100 for i in range(6)]).reshape(SHAPE)
    name = DTYPES[code]
    if name == "bool":
        return (v % 2).astype(bool)
    if name.startswith("float"):
        return (v / 4).astype(name)
    return v.astype(name)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--connect", required=True)
    ap.add_argument("--app", required=True)
    args = ap.parse_args()
    with sp.Space.join(args.app, mode="client", connect=[args.connect]) as space:
        theirs = space.lookup_channel("interop/java", timeout=10)
        mine = space.channel("interop/python")
        with space.task(0) as task:
            inp = task.attach_input(theirs)
            out = task.attach_output(mine)
            for code, name in enumerate(DTYPES):
                ts, value = inp.get(code, timeout=10)
                want = expected(code)
                if not isinstance(value, np.ndarray) or value.dtype != want.dtype:
                    print(f"FAIL {name}: got {type(value).__name__} {getattr(value, 'dtype', '')}")
                    return 1
                if value.shape != SHAPE or not np.array_equal(value, want):
                    print(f"FAIL {name}: got {value!r}, not {want!r}")
                    return 1
            for code in range(len(DTYPES)):
                out.put(code, expected(code))
            out.flush()
            print("OK", flush=True)
            sys.stdin.read()
    return 0


if __name__ == "__main__":
    sys.exit(main())
