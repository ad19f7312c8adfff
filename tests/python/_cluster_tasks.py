"""Cluster tasks the tests name by import path (``"_cluster_tasks:square"``)."""

from __future__ import annotations

import time

from stampede.cluster import TaskContext


def square(ctx: TaskContext, args: bytes) -> bytes:
    return str(int(args) ** 2).encode()


def where(ctx: TaskContext, args: bytes) -> str:
    return ctx.space.id


def sleeper(ctx: TaskContext, args: bytes) -> None:
    while True:
        ctx.check()
        time.sleep(0.005)
