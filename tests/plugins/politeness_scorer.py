"""A scorer component in one file: ``politeness`` fails a trajectory whose replies call the user names.

An installed package would declare it as ``[project.entry-points."toolworld.scorers"] politeness =
"politeness_scorer"``; it counts only where a scoring call names it (``extra=["politeness"]``).
"""

from __future__ import annotations

from toolworld.scoring import Evidence, Verdict, component

RUDE = ("stupid", "idiot")


@component("politeness", kinds={"action": 0.1, "info": 0.1})
def politeness(ev: Evidence) -> Verdict:
    rude = next((text for text in ev.replies if any(word in text.lower() for word in RUDE)), None)
    return Verdict(rude is None, "every reply was polite" if rude is None else f"a rude reply: {rude[:80]!r}")
