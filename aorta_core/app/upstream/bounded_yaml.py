"""YAML whose cost is bounded by its size: PyYAML's ``SafeLoader`` (no Python tags, so no code
runs), refusing also what makes a few bytes cost without bound.

- Aliases: each ``*a`` repeats all that its anchor holds, so nine anchors of nine aliases each
  (a "billion laughs") make 387 M values of 1 KB. Every value is counted as often as aliases
  repeat it, and past :data:`MAX_VALUES` the document is refused as it is composed, before
  anything is built. An alias inside its own anchor (a loop) is refused too.
- Nesting: PyYAML composes recursively, so 10,000 ``[`` end in a ``RecursionError``; past
  :data:`MAX_DEPTH` levels the document is refused.
- Scalars Python cannot make (an integer of more than 4,300 digits, ``!!bool maybe``, a
  timestamp of month 13 or of words) raise a ``ValueError``, ``KeyError`` or ``AttributeError``
  deep inside PyYAML: here a ``YAMLError`` at the scalar, as any other mistake.

Every refusal is a ``yaml.MarkedYAMLError`` with the line and column of the value.
"""

from __future__ import annotations

import reprlib
from typing import Any

import yaml
from yaml.constructor import ConstructorError

#: Levels of nesting (a recipe has three).
MAX_DEPTH = 64
#: Values of a document, aliases expanded (a recipe has a few dozen).
MAX_VALUES = 100_000


class TooCostly(yaml.MarkedYAMLError):
    """A document refused for what it would cost, not for its syntax."""


class BoundedLoader(yaml.SafeLoader):
    """``yaml.load(text, BoundedLoader)``: see the module's docstring."""

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self._depth = 0
        self._values = 0
        #: Values an anchored node holds, aliases expanded, once it is composed.
        self._sizes: dict[int, int] = {}

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            node = super().compose_node(parent, index)
            if id(node) not in self._sizes:
                raise TooCostly(None, None, f"the alias *{event.anchor} lies inside its own "
                                "anchor (a loop)", event.start_mark)
            self._count(self._sizes[id(node)], event)
            return node
        self._depth += 1
        if self._depth > MAX_DEPTH:
            raise TooCostly(None, None, f"nested deeper than {MAX_DEPTH} levels",
                            event.start_mark)
        before = self._values
        self._count(1, event)
        node = super().compose_node(parent, index)
        self._depth -= 1
        if event.anchor is not None:
            self._sizes[id(node)] = self._values - before
        return node

    def _count(self, values: int, event: Any) -> None:
        self._values += values
        if self._values > MAX_VALUES:
            raise TooCostly(None, None, f"more than {MAX_VALUES:,} values once its aliases are "
                            "expanded", event.start_mark)

    def construct_object(self, node: Any, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep)
        except yaml.YAMLError:
            raise
        except Exception as exc:  # ValueError, KeyError, AttributeError (!!timestamp x), ...
            why = "" if isinstance(exc, KeyError | AttributeError) else \
                f" ({str(exc).partition(';')[0]})"
            raise ConstructorError(None, None, f"{reprlib.repr(node.value)} is no "
                                   f"{node.tag.rpartition(':')[2]}{why}", node.start_mark
                                   ) from None
