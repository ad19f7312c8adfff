"""stampede.snet from Python: checking, the builder, runs with Python boxes, records as dicts,
flow inheritance of Python objects, errors, policies, tracing."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import stampede as sp
from stampede import Closed, InvalidArgument, cnc, snet

APPS = Path(__file__).resolve().parents[2] / "apps"

PIPELINE = """
net pipeline ({x, <n>} -> {y, <n>} | {<n>, <odd>}) {
    box square ((x) -> (y));
    box parity ((<n>) -> (<n>) | (<n>, <odd>));
} connect parity .. (square | [{<n>, <odd>} -> {<n>, <odd>}]);
"""


def test_a_program_checks_and_reports_its_types() -> None:
    net = snet.Network.parse(PIPELINE, file="pipeline.snet")
    assert net.name == "pipeline"
    assert net.input_type == ["{x, <n>}"]
    assert sorted(net.output_type) == ["{x, <n>, <odd>}", "{y, <n>}"]
    assert net.boxes == [("square", "(x) -> (y)"), ("parity", "(<n>) -> (<n>) | (<n>, <odd>)")]
    assert net.dot().startswith('digraph "pipeline"')


def test_a_type_error_is_reported_like_a_compiler_before_anything_runs() -> None:
    src = "net broken {\n    box a ((p) -> (q));\n    box b ((r) -> (s));\n} connect a .. b;\n"
    with pytest.raises(snet.CheckFailed) as info:
        snet.Network.parse(src, file="broken.snet")
    text = str(info.value)
    assert "error[S0201]: box `b` cannot accept records of type {q}" in text
    assert "broken.snet:4:16" in text
    assert "^" in text
    (d,) = info.value.diagnostics
    assert (d["code"], d["line"], d["column"]) == ("S0201", 4, 16)


def test_the_builder_and_the_language_give_the_same_network() -> None:
    built = (
        snet.Net.box("parity", "(<n>) -> (<n>) | (<n>, <odd>)")
        .then(snet.Net.box("square", "(x) -> (y)") | snet.Net.filter("[{<n>, <odd>} -> {<n>, <odd>}]"))
        .check("pipeline", "{x, <n>} -> {y, <n>} | {<n>, <odd>}")
    )
    text = snet.Network.parse(PIPELINE)
    assert built.dot() == text.dot()
    assert built.input_type == text.input_type and built.output_type == text.output_type
    with pytest.raises(snet.CheckFailed, match="<builder:bad>"):
        snet.Net.box("a", "(p) -> (q)").then(snet.Net.box("b", "(r) -> (s)")).check("bad")


def square(ctx: snet.BoxContext, x: Any) -> None:
    ctx.emit(0, x * x)


def parity(ctx: snet.BoxContext, n: int) -> None:
    if n % 2:
        ctx.emit(1, n, 1)
    else:
        ctx.emit(0, n)


@pytest.mark.parametrize("policy", ["furthest-advanced", "most-queued"])
def test_records_flow_through_python_boxes(policy: str) -> None:
    net = snet.Network.parse(PIPELINE)
    run = net.run({"square": square, "parity": parity}, executor=cnc.Executor(2), policy=policy)
    for n in range(20):
        run.send({"x": np.full(3, n), "<n>": n})
    out = run.finish(timeout=30)
    assert len(out) == 20
    evens = {r["<n>"]: r["y"] for r in out if "y" in r}
    odds = {r["<n>"]: r["x"] for r in out if "<odd>" in r}
    assert sorted(evens) == list(range(0, 20, 2)) and sorted(odds) == list(range(1, 20, 2))
    for n, y in evens.items():
        assert (y == n * n).all()
    stats = run.stats
    assert stats["sent"] == 20 and stats["emitted"] == 20 and stats["box_calls"] == 30


def test_fields_a_box_does_not_name_reach_its_outputs_as_the_same_objects() -> None:
    net = snet.Network.parse("net id { box f ((<k>) -> (<k>) | (<k>)); } connect f;")
    marker = object()
    payload = {"any": ["python", "object"]}

    def twice(ctx: snet.BoxContext, k: int) -> None:
        ctx.emit(0, k)
        ctx.emit(1, k + 1)

    run = net.run({"f": twice})
    run.send({"<k>": 1, "ctx": marker, "data": payload})
    out = sorted(run.finish(timeout=30), key=lambda r: r["<k>"])
    assert [r["<k>"] for r in out] == [1, 2]
    assert all(r["ctx"] is marker and r["data"] is payload for r in out)


def test_a_box_that_raises_fails_the_run_with_its_record_and_the_rest_flows() -> None:
    net = snet.Network.parse("net f { box f ((<k>) -> (<k>)); } connect f;")

    def fragile(ctx: snet.BoxContext, k: int) -> None:
        if k == 3:
            raise ValueError("three")
        ctx.emit(0, k)

    run = net.run({"f": fragile})
    for k in range(6):
        run.send({"<k>": k})
    with pytest.raises(snet.BoxFailed) as info:
        run.wait(timeout=30)
    assert (info.value.box, info.value.record) == ("f", "{<k>=3}")
    assert isinstance(info.value.__cause__, ValueError)
    assert sorted(r["<k>"] for r in run.outputs()) == [0, 1, 2, 4, 5]
    assert run.stats["box_failures"] == 1


def test_emitting_against_the_signature_is_a_box_failure() -> None:
    net = snet.Network.parse("net f { box f ((<k>) -> (<k>)); } connect f;")
    run = net.run({"f": lambda ctx, k: ctx.emit(0, "not an int")})
    run.send({"<k>": 1})
    with pytest.raises(snet.BoxFailed, match="not an int"):
        run.wait(timeout=30)


def test_a_record_the_network_does_not_accept_comes_back() -> None:
    net = snet.Network.parse(PIPELINE)
    run = net.run({"square": square, "parity": parity})
    record = {"y": 1}
    with pytest.raises(snet.RecordRejected) as info:
        run.send(record)
    assert info.value.record == record
    assert info.value.accepts == ["{x, <n>}"]
    with pytest.raises(InvalidArgument, match="not an int"):
        run.send({"x": 1, "<n>": "seven"})
    run.close()
    with pytest.raises(Closed):
        run.send({"x": 1, "<n>": 1})


def test_an_unbound_box_or_unknown_policy_is_refused() -> None:
    net = snet.Network.parse(PIPELINE)
    with pytest.raises(snet.NetworkError, match="square"):
        net.run({"parity": parity})
    with pytest.raises(Exception, match="policy"):
        net.run({"square": square, "parity": parity}, policy="fastest")


def test_synchrocells_star_and_feedback_count_like_the_face_detector() -> None:
    net = snet.Network.parse("""
net total ({<v>} | {<sum>, <left>} -> {<sum>}) {
    box add ((<v>, <sum>, <left>) -> (<sum>, <left>) | (<sum>));
} connect ([| {<sum>, <left>}, {<v>} |] * {<v>, <sum>, <left>} .. add) \\ {<sum>, <left>};
""")

    def add(ctx: snet.BoxContext, v: int, total: int, left: int) -> None:
        if left > 1:
            ctx.emit(0, total + v, left - 1)
        else:
            ctx.emit(1, total + v)

    run = net.run({"add": add}, executor=cnc.Executor(2))
    values = list(range(1, 51))
    run.send({"<sum>": 0, "<left>": len(values)})

    def send_all() -> None:
        for v in values:
            run.send({"<v>": v})

    sender = threading.Thread(target=send_all)
    sender.start()
    sender.join()
    assert run.finish(timeout=30) == [{"<sum>": sum(values)}]
    assert run.stats["synchronised"] == len(values)
    assert run.stats["held_in_synchrocells"] == 0


def test_box_runs_are_traced_on_the_executor_timeline() -> None:
    ex = cnc.Executor(2)
    ex.tracing = True
    net = snet.Network.parse(PIPELINE)
    run = net.run({"square": square, "parity": parity}, executor=ex)
    for n in range(4):
        run.send({"x": n, "<n>": n})
    run.finish(timeout=30)
    names = sorted(e.step for e in ex.take_trace())
    assert names == ["parity"] * 4 + ["square"] * 2


@pytest.mark.parametrize("path", sorted(APPS.glob("*.snet")), ids=lambda p: p.name)
def test_the_applications_networks_check_and_their_pictures_are_current(path: Path) -> None:
    net = snet.Network.load(path)
    assert net.input_type and net.output_type
    picture = APPS.parent / "docs" / "snet" / f"{path.stem}.dot"
    assert picture.read_text() == net.dot(), f"run `make snet-pictures` to redraw {picture}"


def test_a_network_is_a_stage_between_a_channel_and_a_queue(rt: sp.Runtime) -> None:
    frames, sizes = rt.channel(), rt.queue()
    camera = rt.task(0, name="camera").attach_output(frames)
    stage = rt.task(0, name="stage")
    inp, out = stage.attach_input(frames), stage.attach_output(sizes)
    display = rt.task(sp.INFINITY, name="display").attach_input(sizes)
    net = snet.Network.parse(
        "net measure { box size ((frame, <ts>) -> (size, <ts>)); } connect size;"
    )
    run = net.run({"size": lambda ctx, frame, ts: ctx.emit(0, int(frame.sum()), ts)})
    for ts in range(12):
        camera.put(ts, np.full(4, ts, dtype=np.int64))
    frames.close()
    assert run.feed(inp, "frame") == 12
    run.close()
    assert run.drain(out, "size") == 12
    got = sorted((item.ts, item.value) for item in (display.get(timeout=5) for _ in range(12)))
    assert got == [(ts, 4 * ts) for ts in range(12)]
    with pytest.raises(InvalidArgument):
        run.feed(out, "frame")  # type: ignore[arg-type]  # the wrong kind, on purpose
