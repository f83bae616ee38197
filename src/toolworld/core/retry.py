"""Retry delays: exponential backoff with jitter, honouring a server's ``Retry-After`` hint.

Jitter spreads the retries of many concurrent episodes so that they do not hit a recovering server together.
"""

from __future__ import annotations

import random

MAX_DELAY_S = 30.0
MAX_HINT_S = 60.0


def backoff_delay(base_s: float, attempt: int, *, hint_s: float | None = None, jitter: bool = True,
                  cap_s: float = MAX_DELAY_S) -> float:  # fmt: skip
    """Seconds to wait before retry number ``attempt`` (0 for the first retry): ``base_s * 2**attempt``, capped.

    A server's hint (``Retry-After``) wins when it is sane (0 to 60 s). With ``jitter`` the delay is drawn
    uniformly in [0.5, 1] times the backoff.
    """
    if hint_s is not None and 0 <= hint_s <= MAX_HINT_S:
        return float(hint_s)
    delay = min(cap_s, base_s * 2 ** max(attempt, 0))
    return delay * random.uniform(0.5, 1.0) if jitter else delay
