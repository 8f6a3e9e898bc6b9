"""FIFO groups: which tasks of a controlled run keep their order among themselves, by where their code lives.

A task joins a group by the file its coroutine is defined in, once, when it is created: the code under
test (the user's code, and the modules of this package named in `CODE_UNDER_TEST`) is explored freely;
installed libraries form one group and the fake another, each run in FIFO order among itself (exploring
the order of the fake's own tasks would find races in the fake, not in the client).
"""

from __future__ import annotations

import functools
import importlib.util
import os
import sysconfig
from typing import Any, Final

__all__ = ["CODE_UNDER_TEST", "FAKE", "LIBRARY", "USER", "code_under_test_files", "group_of_coro", "group_of_file"]

USER: Final = 0
LIBRARY: Final = 1
FAKE: Final = 2
_PACKAGE_DIR: Final = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
"""This package's directory (``pytest_fake_mcp/``): its files are the fake's, unless named in `CODE_UNDER_TEST`."""
CODE_UNDER_TEST: Final = (
    "pytest_fake_mcp._client._reusing",  # the reference client (`ReusingSessionClient`)
    "pytest_fake_mcp._client._cache",  # the reference session cache (`SessionCache`)
    "pytest_fake_mcp._race._example_run",  # the main task of an example (it awaits the scenario)
    "pytest_fake_mcp._race._suite",  # the scenarios of `RaceSuite` and the tasks they spawn
)
"""The registry of this package's modules whose code is the code under test of a race, not the fake: their tasks
join the user's FIFO group. Named, not matched by file name: a module renamed or moved without this list fails at
the first run (`code_under_test_files`). A module that defines a coroutine a race runs as a task, on the client's
side of the wire, belongs here."""
_LIBRARY_DIRS: Final = tuple(
    {os.path.abspath(p) + os.sep for k, p in sysconfig.get_paths().items() if k in ("stdlib", "purelib", "platlib")}
)


@functools.cache
def code_under_test_files() -> frozenset[str]:
    """The files of the modules in `CODE_UNDER_TEST` (found without importing them)."""
    files = set()
    for name in CODE_UNDER_TEST:
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            raise ModuleNotFoundError(
                f"the race engine's code under test names {name}, which is gone: update _fifo_groups"
            )
        files.add(os.path.abspath(spec.origin))
    return frozenset(files)


def group_of_file(path: str) -> int:
    """The FIFO group of a task whose coroutine is defined in ``path``: the code under test, a library, the fake."""
    if path.startswith(_PACKAGE_DIR):
        return USER if path in code_under_test_files() else FAKE
    if path.startswith(_LIBRARY_DIRS) or not path:
        return LIBRARY
    return USER


_GROUP_OF_FILE: dict[str, int] = {}


def group_of_coro(coro: Any) -> int:
    """The FIFO group of a task running ``coro`` (by the file its code is defined in; cached per file)."""
    code = getattr(coro, "cr_code", None)
    path = code.co_filename if code is not None else ""
    group = _GROUP_OF_FILE.get(path)
    if group is None:
        group = _GROUP_OF_FILE[path] = group_of_file(path)
    return group
