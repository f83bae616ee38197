"""The one JSON spelling used wherever bytes are hashed or compared."""

from __future__ import annotations

import json
from typing import Any


def canonical_json(value: Any) -> str:
    """Sorted keys, no spaces, UTF-8 kept as is: equal values give equal text, so equal hashes."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
