"""Tasks on Python threads."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, TypeVar

if TYPE_CHECKING:
    from ._stampede import Task

R = TypeVar("R")


class TaskThread(threading.Thread, Generic[R]):
    """A thread that runs ``target(task, *args)`` and exits the task when it returns.

    ``result()`` joins and returns what the target returned, or raises what it raised.
    """

    def __init__(
        self,
        task: Task,
        target: Callable[..., R],
        args: tuple[Any, ...],
        daemon: bool,
    ) -> None:
        super().__init__(name=task.name, daemon=daemon)
        self.task = task
        self._target_fn = target
        self._args = args
        self._result: R | None = None
        self._error: BaseException | None = None

    def run(self) -> None:
        """Runs the target, keeps its outcome, and exits the task."""
        try:
            self._result = self._target_fn(self.task, *self._args)
        except BaseException as e:  # handed to result()
            self._error = e
        finally:
            self.task.exit()

    def result(self, timeout: float | None = None) -> R:
        """Joins the thread; returns the target's value or raises its exception."""
        self.join(timeout)
        if self.is_alive():
            raise TimeoutError(f"task {self.task.name} still running after {timeout} s")
        if self._error is not None:
            raise self._error
        return self._result  # type: ignore[return-value]
