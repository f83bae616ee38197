"""Companies: names, industries, sizes and web domains for B2B worlds (a helpdesk's organisations, a CRM's
accounts), all fictional and on reserved example domains.

Plain tuples in a fixed order (part of every world's seed data): append, never reorder.
"""

from __future__ import annotations

from toolworld.world.rng import Rng

from .draw import slug, weighted

NAME_STEMS: tuple[str, ...] = (
    "Acorn", "Alder", "Amber", "Anchor", "Apex", "Arbor", "Aspen", "Atlas", "Aurora", "Beacon", "Birch", "Blue Harbor",
    "Bolt", "Bramble", "Brightline", "Canyon", "Cascade", "Cedar", "Cinder", "Clearwater", "Cobalt", "Compass",
    "Copper", "Coral", "Crescent", "Crown", "Cypress", "Delta", "Driftwood", "Eastwind", "Ember", "Evergreen",
    "Falcon", "Fernhill", "Fieldstone", "Firefly", "Flint", "Foxglove", "Garnet", "Glacier", "Golden Gate",
    "Granite", "Greenleaf", "Harbor", "Hawthorn", "Heron", "Highland", "Horizon", "Indigo", "Ironwood", "Juniper",
    "Keystone", "Kestrel", "Lakeshore", "Lantern", "Laurel", "Lighthouse", "Linden", "Maple", "Marble", "Meadow",
    "Meridian", "Mesa", "Northstar", "Oakridge", "Obsidian", "Orchard", "Osprey", "Pacific", "Palisade", "Pinecrest",
    "Pioneer", "Prairie", "Quarry", "Quartz", "Rainier", "Redwood", "Ridgeline", "Riverbend", "Rockwell", "Saffron",
    "Sagebrush", "Sequoia", "Sierra", "Silverline", "Skyline", "Solstice", "Sparrow", "Spruce", "Summit", "Sunrise",
    "Tamarack", "Thistle", "Timber", "Trailhead", "Tidewater", "Vanguard", "Verdant", "Westbrook", "Willow", "Zenith",
)  # fmt: skip
NAME_SUFFIXES: tuple[tuple[str, int], ...] = (
    ("Labs", 10), ("Systems", 10), ("Logistics", 6), ("Health", 6), ("Analytics", 8), ("Foods", 5),
    ("Manufacturing", 5), ("Software", 10), ("Financial", 6), ("Energy", 5), ("Media", 5), ("Robotics", 4),
    ("Partners", 5), ("Group", 6), ("Networks", 5), ("Biotech", 4), ("Retail", 4), ("Consulting", 5),
)  # fmt: skip
LEGAL_FORMS: tuple[tuple[str, int], ...] = (("Inc.", 45), ("LLC", 30), ("Corp.", 15), ("Co.", 10))
INDUSTRIES: tuple[str, ...] = (
    "software", "healthcare", "logistics", "financial services", "manufacturing", "retail", "education", "energy",
    "media", "biotech", "hospitality", "real estate", "telecommunications", "government", "non-profit",
)  # fmt: skip
#: Employee-count bands as sales and support teams segment accounts.
SIZES: tuple[tuple[str, int], ...] = (("1-10", 15), ("11-50", 25), ("51-200", 25), ("201-1000", 20), ("1001-5000", 10),
                                      ("5000+", 5))  # fmt: skip
#: Reserved example top-level domains only (RFC 2606/6761), never a real company's site.
COMPANY_TLDS: tuple[tuple[str, int], ...] = (("example.com", 50), ("example.net", 25), ("example.org", 25))


def company_name(rng: Rng) -> tuple[str, str]:
    """A company's short name (``"Cedar Analytics"``) and its legal name (``"Cedar Analytics Inc."``)."""
    short = f"{rng.choice(NAME_STEMS)} {weighted(rng, NAME_SUFFIXES)}"
    return short, f"{short} {weighted(rng, LEGAL_FORMS)}"


def company_domain(short_name: str, rng: Rng) -> str:
    """The company's web and mail domain, e.g. ``cedaranalytics.example.com``."""
    return f"{slug(short_name)}.{weighted(rng, COMPANY_TLDS)}"


def work_email(first: str, last: str, domain: str, style: int = 0) -> str:
    """A work address at ``domain`` in one of three house styles (``first.last``, ``flast``, ``first``)."""
    f, la = slug(first), slug(last)
    local = (f"{f}.{la}", f"{f[0]}{la}", f)[style % 3]
    return f"{local}@{domain}"
