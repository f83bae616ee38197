"""Pieces every world shares: people, companies, places, time and business calendars, money, the arithmetic
tool and deterministic draws. A world imports these and never another world (``toolworld.worlds.<name>``
holds only what is that world's own).

- :mod:`.people`: first and last names, e-mail and phone helpers
- :mod:`.companies`: company names, industries, domains
- :mod:`.places`: US cities with real zip ranges and area codes, streets, state codes
- :mod:`.clock`: ISO timestamps against a world's fixed clock, business days
- :mod:`.money`: integer cents in, decimal dollars out
- :mod:`.arith`: the ``calculate`` tool
- :mod:`.draw`: integer-only chances, weighted picks, fresh ids, slugs
- :mod:`.records`: the next id of a series and non-blank free text, for write tools
- :mod:`.kitparts`: task-kit pieces, such as a fact the user describes instead of quoting
"""
