"""S-Net: networks of stateless boxes over typed records, composed by combinators and
checked before they run.

A box is an ordinary function ``f(ctx, *inputs)`` that sees only the labels its signature
names and emits records of its output types with ``ctx.emit(variant, *values)``; the
network, written in the S-Net language (:meth:`Network.parse`, :meth:`Network.load`) or
built with :class:`Net`, routes records between boxes by their types. Records are dicts: a
field is a plain key, a tag is written ``"<k>"`` and holds an int, a binding tag ``"<#b>"``.
Labels a box does not name flow around it onto every record it emits (flow inheritance).
Boxes run on a work-stealing executor's workers, holding the GIL while their Python runs.

>>> from stampede import snet
>>> net = snet.Network.parse('''
... net double {
...     box twice ((<x>) -> (<x>));
... } connect twice .. twice;
... ''')
>>> def twice(ctx: snet.BoxContext, x: int) -> None:
...     ctx.emit(0, 2 * x)
>>> run = net.run({"twice": twice})
>>> for x in range(3):
...     run.send({"<x>": x, "note": "kept"})
>>> sorted(r["<x>"] for r in run.finish())
[0, 4, 8]
"""

from __future__ import annotations

import argparse
import sys

from ._stampede import BoxContext, Executor, Net, Network, NetworkRun, TraceEvent
from .errors import BoxFailed, CheckFailed, NetworkError, RecordRejected

__all__ = [
    "BoxContext",
    "BoxFailed",
    "CheckFailed",
    "Executor",
    "Net",
    "Network",
    "NetworkError",
    "NetworkRun",
    "RecordRejected",
    "TraceEvent",
]


def main(argv: list[str] | None = None) -> int:
    """``python -m stampede.snet FILE...``: checks each program and prints its inferred
    types, or its diagnostics; ``--dot`` prints the (first) network as Graphviz DOT."""
    p = argparse.ArgumentParser(prog="python -m stampede.snet", description=main.__doc__)
    p.add_argument("files", nargs="+", help=".snet programs")
    p.add_argument("--dot", action="store_true", help="print the network as Graphviz DOT")
    args = p.parse_args(argv)
    failed = False
    for path in args.files:
        try:
            net = Network.load(path)
        except CheckFailed as e:
            print(e, file=sys.stderr)
            failed = True
            continue
        if args.dot:
            print(net.dot(), end="")
            return 0
        print(f"{path}: net {net.name}")
        print(f"  accepts {' | '.join(net.input_type)}")
        print(f"  emits   {' | '.join(net.output_type)}")
        for name, signature in net.boxes:
            print(f"  box {name} {signature}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
