"""Value checks that several collectors' ``check_options`` share, with one wording for all."""

from __future__ import annotations

import re

from aorta_core.api.contracts import OptionError


def check_text(key: str, value: str | None) -> None:
    """Raise ``OptionError`` when option ``key`` holds a NUL byte, which no argument, path or
    variable of a process can carry (it would fail the launch instead, naming an argv index)."""
    if value is not None and "\0" in value:
        raise OptionError(f"{key}={value!r} contains a NUL byte; remove it")


def check_regex(key: str, value: str | None) -> None:
    """Raise ``OptionError`` when option ``key`` holds a blank or non-compiling regular expression.

    ``None`` (the option unset) passes. Python's ``re`` is the judge: a profiler's own regex
    dialect may accept more, but a pattern Python cannot compile is almost always a typo.
    """
    check_text(key, value)
    if value is None:
        return
    if not value.strip():
        raise OptionError(f"{key} is blank; give a regular expression or null")
    try:
        re.compile(value)
    except re.error as exc:
        raise OptionError(
            f"{key}={value!r} does not compile ({exc}); fix the regular expression"
        ) from None
