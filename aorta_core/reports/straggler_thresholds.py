"""The defaults of ``aorta diagnose``'s straggler test, apart from the diagnosis (numpy), so that
the command line can show them before the diagnosis's workers are started."""

#: A straggler is slower than the other ranks' median by this much per step ...
MIN_EXCESS_MS = 5.0
MIN_EXCESS_PCT = 10.0
#: ... in at least this share of the steps.
MOST_STEPS = 0.75
#: A part worth a finding of its own: this share of the mean step on every rank.
FINDING_SHARE = 0.2
