"""Collectors that cannot measure together, found from what each claims (``resource_claims``):
the core refuses such a cell without knowing any collector by name."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from aorta_core.api.contracts import Claim


def claims_of(returned: object) -> list[Claim]:
    """A ``resource_claims`` result as a list of plain claims (text, a bool: read here, in the
    hook's process), or ``TypeError`` naming what is wrong with it."""
    if returned is None:
        return []
    if isinstance(returned, Claim) or not isinstance(returned, Iterable) \
            or isinstance(returned, str | bytes | Mapping):
        raise TypeError(f"returned {type(returned).__name__}, not a list of Claim")
    claims = list(returned)
    wrong = next((c for c in claims if not isinstance(c, Claim)
                  or not isinstance(c.resource, str) or not c.resource), None)
    if wrong is not None:
        raise TypeError(f"returned {type(wrong).__name__} {str(wrong)[:60]!r} among its claims "
                        "(each must be a Claim with a resource name)")
    return [Claim(str.__str__(c.resource), bool(c.exclusive), str.__str__(str(c.why)))
            for c in claims]


def conflict(claims: Mapping[str, Iterable[Claim]]) -> str | None:
    """The refusal, in one line, of the first two collectors whose claims collide (one holds a
    resource exclusively that the other holds too), or ``None`` when they can share a trial."""
    holders: dict[str, dict[str, Claim]] = {}
    for name in sorted(claims):
        for claim in claims[name]:  # a collector's strongest claim on each resource counts
            held = holders.setdefault(claim.resource, {})
            if name not in held or claim.exclusive:
                held[name] = claim
    for resource in sorted(holders):
        ranked = sorted(holders[resource].items(), key=lambda h: (not h[1].exclusive, h[0]))
        if len(ranked) > 1 and ranked[0][1].exclusive:
            (first, mine), (other, theirs) = ranked[:2]
            return (f"collector {first} cannot share a trial with {other}: "
                    f"{_reason(first, mine)}; {_reason(other, theirs)} (both claim {resource}); "
                    f"put them in separate cells, e.g. -m collector={first},{other}")
    return None


def _reason(name: str, claim: Claim) -> str:
    why = " ".join(str(claim.why).split())
    held = "exclusively" if claim.exclusive else "too"
    return f"{name}: {why}" if why else f"{name} claims {claim.resource} {held}"
