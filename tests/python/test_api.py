"""The package's public surface: everything in ``__all__`` exists and is documented, and it
matches the type stub."""

from __future__ import annotations

import ast
import inspect
import pathlib

import pytest

import stampede
import stampede as sp
import stampede.cluster
import stampede.cnc
import stampede.errors
import stampede.snet
import stampede.tune

PACKAGE = pathlib.Path(stampede.__file__).parent


def stub_names() -> set[str]:
    """Public top-level names declared in ``_stampede.pyi``."""
    tree = ast.parse((PACKAGE / "_stampede.pyi").read_text())
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return {n for n in names if not n.startswith("_")}


def test_all_is_a_list_of_unique_names() -> None:
    assert isinstance(sp.__all__, (list, tuple))
    assert len(sp.__all__) == len(set(sp.__all__))
    assert all(isinstance(n, str) for n in sp.__all__)


@pytest.mark.parametrize("name", sorted(stampede.__all__))
def test_every_exported_name_exists_and_is_documented(name: str) -> None:
    assert hasattr(sp, name), f"stampede.{name} is in __all__ but missing"
    obj = getattr(sp, name)
    if inspect.isclass(obj):
        doc = vars(obj).get("__doc__")  # its own, not one inherited from a base
    elif inspect.isroutine(obj):
        doc = obj.__doc__
    else:
        return  # a constant: checked in test_constants
    assert isinstance(doc, str) and doc.strip(), f"stampede.{name} has no docstring"


def test_the_stub_and_the_helpers_are_fully_exported() -> None:
    exported = set(sp.__all__)
    # Concurrent Collections and S-Net have namespaces of their own.
    missing = (
        stub_names()
        - exported
        - set(stampede.cnc.__all__)
        - set(stampede.snet.__all__)
        - set(stampede.tune.__all__)
        - set(stampede.cluster.__all__)
    )
    assert not missing, f"declared in _stampede.pyi but not exported: {sorted(missing)}"
    assert set(stampede.errors.__all__) <= exported
    assert {"Arrivals", "TaskThread"} <= exported


@pytest.mark.parametrize(
    ("module", "name"),
    [("cnc", n) for n in sorted(stampede.cnc.__all__)]
    + [("snet", n) for n in sorted(stampede.snet.__all__)]
    + [("tune", n) for n in sorted(stampede.tune.__all__)]
    + [("cluster", n) for n in sorted(stampede.cluster.__all__)],
)
def test_every_coordination_name_exists_and_is_documented(module: str, name: str) -> None:
    obj = getattr(getattr(stampede, module), name)
    if inspect.isclass(obj):
        doc = vars(obj).get("__doc__")
        assert isinstance(doc, str) and doc.strip(), f"stampede.{module}.{name} has no docstring"


def test_constants() -> None:
    assert sp.INFINITY == 2**63 - 1
    assert isinstance(sp.INFINITY, int)
    assert sp.OLDEST is sp.Selector.OLDEST
    assert sp.NEWEST is sp.Selector.NEWEST
    assert sp.NEWEST_UNSEEN is sp.Selector.NEWEST_UNSEEN
    assert sp.NEXT_UNSEEN is sp.Selector.NEXT_UNSEEN
    assert len({sp.OLDEST, sp.NEWEST, sp.NEWEST_UNSEEN, sp.NEXT_UNSEEN}) == 4
    assert sp.CONTINUE is sp.LateAction.CONTINUE
    assert sp.SKIP is sp.LateAction.SKIP
    assert sp.RESYNC is sp.LateAction.RESYNC
    assert len({sp.CONTINUE, sp.SKIP, sp.RESYNC}) == 3
    assert [int(s) for s in (sp.OLDEST, sp.NEWEST, sp.NEWEST_UNSEEN, sp.NEXT_UNSEEN)] == [0, 1, 2, 3]
    assert [int(a) for a in (sp.CONTINUE, sp.SKIP, sp.RESYNC)] == [0, 1, 2]


@pytest.mark.parametrize(
    "cls",
    [
        sp.Runtime,
        sp.Space,
        sp.Tls,
        sp.Task,
        sp.Channel,
        sp.Queue,
        sp.Register,
        sp.ChannelInput,
        sp.ChannelOutput,
        sp.QueueInput,
        sp.QueueOutput,
        sp.RegisterInput,
        sp.RegisterOutput,
        sp.Pacer,
        sp.Correlator,
        sp.Arrivals,
        sp.TaskThread,
    ],
    ids=lambda c: c.__name__,
)
def test_public_methods_are_documented(cls: type) -> None:
    undocumented = []
    for attr, value in vars(cls).items():
        if attr.startswith("_"):
            continue
        if callable(value) or isinstance(value, property) or inspect.isdatadescriptor(value):
            doc = getattr(value, "__doc__", None)
            if not doc or not doc.strip():
                undocumented.append(attr)
    assert not undocumented, f"{cls.__name__}: no docstring on {undocumented}"


def test_runtime_is_a_context_manager() -> None:
    with sp.Runtime() as rt:
        assert isinstance(rt, sp.Runtime)
        ch = rt.channel()
        with rt.task(0) as t:
            t.attach_output(ch).put(0, "x")
        assert t.exited
    rt.close()  # closing twice is harmless


@pytest.mark.parametrize(
    "module", [stampede.cnc, stampede.snet, stampede.tune, stampede.cluster], ids=lambda m: m.__name__
)
def test_the_namespaces_examples_run(module: object) -> None:
    import doctest

    result = doctest.testmod(module)  # type: ignore[arg-type]
    assert result.attempted > 0 and result.failed == 0
