"""One line for an exception, in every message aorta prints or records about one (a traceback
is not what a user acts on, and a message spread over lines breaks the one-line-per-fault rule),
naming the collector it is about once."""

from __future__ import annotations


def exception_line(exc: BaseException, limit: int | None = None) -> str:
    """``Type: message``, the message's whitespace (newlines too) collapsed to single spaces, cut
    at ``limit`` characters if given (never a fix a user must copy: a setup error's command);
    ``Type`` alone when the message is empty. A syntax error names its file's whole path
    (Python's message names the file alone: ``plugin.py``, of which a machine has many)."""
    shown = exc
    if isinstance(exc, SyntaxError) and exc.filename and exc.msg:
        shown = f"{exc.msg} ({exc.filename}, line {exc.lineno})"
    text = " ".join(str(shown).split())
    if limit is not None and len(text) > limit:
        text = text[:limit - 1] + "…"
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def named_once(name: str, text: str) -> str:
    """``<name>: <text>``, unless collector ``name`` already named itself (they often do)."""
    return text if text.startswith(f"{name}: ") else f"{name}: {text}"
