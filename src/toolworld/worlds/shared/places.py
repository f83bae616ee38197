"""Places: real US cities with a zip range and area code of their own, streets and state codes.

A city carries its real state, a zip range that belongs to it and a local area code, so an address drawn from
here is always consistent. Lists are in a fixed order (part of every world's seed data): append, never reorder.
"""

from __future__ import annotations

from dataclasses import dataclass

from toolworld.world.rng import Rng

from .draw import weighted

US_STATES = (
    "AL", "AK", "AZ", "AR", "CA", "CO", "CT", "DE", "DC", "FL", "GA", "HI", "ID", "IL", "IN", "IA", "KS", "KY", "LA",
    "ME", "MD", "MA", "MI", "MN", "MS", "MO", "MT", "NE", "NV", "NH", "NJ", "NM", "NY", "NC", "ND", "OH", "OK", "OR",
    "PA", "RI", "SC", "SD", "TN", "TX", "UT", "VT", "VA", "WA", "WV", "WI", "WY",
)  # fmt: skip

STREET_NAMES: tuple[str, ...] = (
    "Maple", "Oak", "Pine", "Cedar", "Elm", "Willow", "Birch", "Spruce", "Chestnut", "Walnut",
    "Hickory", "Magnolia", "Sycamore", "Aspen", "Cypress", "Juniper", "Laurel", "Poplar", "Dogwood", "Redwood",
    "Main", "Park", "Lake", "Hill", "River", "Spring", "Meadow", "Sunset", "Highland", "Forest",
    "Ridge", "Valley", "Church", "Mill", "Market", "Washington", "Lincoln", "Jefferson", "Madison", "Franklin",
    "Monroe", "Hamilton", "Union", "Liberty", "Center", "Broad", "Water", "High", "Prospect", "Pleasant",
    "Orchard", "Garden", "Harbor", "Bay", "Shore", "Canyon", "Mesa", "Prairie", "Summit", "Fairview",
    "Greenwood", "Lakeview", "Riverside", "Hillcrest", "Woodland", "Brookside", "Oakwood", "Kingston", "Wellington",
    "Lexington", "College", "University", "Railroad", "Bridge", "Vine", "Heather", "Ivy", "Clover", "Second",
    "Third", "Fifth", "Seventh",
)  # fmt: skip

#: Street suffixes with integer weights (common ones more often).
STREET_SUFFIXES: tuple[tuple[str, int], ...] = (
    ("St", 30), ("Ave", 22), ("Rd", 12), ("Dr", 10), ("Ln", 8), ("Blvd", 5), ("Ct", 5), ("Way", 4),
    ("Pl", 3), ("Ter", 2), ("Cir", 2), ("Pkwy", 1),
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class City:
    """A real US city with its state, a zip range that belongs to it and a local area code."""

    name: str
    state: str
    zip_lo: int
    zip_hi: int
    area_code: str


def _cities(rows: str) -> tuple[City, ...]:
    out = []
    for line in rows.strip().splitlines():
        name, state, lo, hi, area = (part.strip() for part in line.split("|"))
        out.append(City(name, state, int(lo), int(hi), area))
    return tuple(out)


CITIES: tuple[City, ...] = _cities("""
New York|NY|10001|10282|212
Brooklyn|NY|11201|11239|718
Buffalo|NY|14201|14227|716
Rochester|NY|14604|14627|585
Albany|NY|12202|12211|518
Syracuse|NY|13202|13224|315
Los Angeles|CA|90001|90089|213
San Francisco|CA|94102|94134|415
San Diego|CA|92101|92139|619
San Jose|CA|95110|95139|408
Sacramento|CA|95811|95838|916
Oakland|CA|94601|94621|510
Fresno|CA|93701|93728|559
Long Beach|CA|90802|90815|562
Pasadena|CA|91101|91107|626
Irvine|CA|92602|92620|949
Santa Barbara|CA|93101|93111|805
Chicago|IL|60601|60661|312
Springfield|IL|62701|62712|217
Naperville|IL|60563|60565|630
Peoria|IL|61602|61615|309
Houston|TX|77002|77099|713
Austin|TX|78701|78759|512
Dallas|TX|75201|75254|214
San Antonio|TX|78201|78260|210
Fort Worth|TX|76102|76140|817
El Paso|TX|79901|79938|915
Plano|TX|75023|75026|972
Lubbock|TX|79401|79424|806
Phoenix|AZ|85003|85054|602
Tucson|AZ|85701|85750|520
Tempe|AZ|85281|85288|480
Flagstaff|AZ|86001|86005|928
Philadelphia|PA|19102|19154|215
Pittsburgh|PA|15201|15243|412
Harrisburg|PA|17101|17113|717
Allentown|PA|18101|18109|610
Columbus|OH|43201|43235|614
Cleveland|OH|44102|44135|216
Cincinnati|OH|45202|45248|513
Toledo|OH|43604|43623|419
Dayton|OH|45402|45440|937
Indianapolis|IN|46201|46260|317
Fort Wayne|IN|46802|46825|260
Bloomington|IN|47401|47408|812
Detroit|MI|48201|48235|313
Grand Rapids|MI|49503|49548|616
Ann Arbor|MI|48103|48109|734
Lansing|MI|48906|48933|517
Milwaukee|WI|53202|53233|414
Madison|WI|53703|53726|608
Green Bay|WI|54301|54313|920
Minneapolis|MN|55401|55455|612
Saint Paul|MN|55101|55130|651
Duluth|MN|55802|55812|218
Des Moines|IA|50309|50322|515
Cedar Rapids|IA|52401|52411|319
Kansas City|MO|64105|64157|816
St. Louis|MO|63101|63147|314
Springfield|MO|65802|65810|417
Omaha|NE|68102|68164|402
Lincoln|NE|68502|68528|402
Wichita|KS|67202|67235|316
Topeka|KS|66603|66618|785
Denver|CO|80202|80249|303
Colorado Springs|CO|80903|80951|719
Boulder|CO|80301|80310|303
Fort Collins|CO|80521|80528|970
Salt Lake City|UT|84101|84124|801
Provo|UT|84601|84606|801
Las Vegas|NV|89101|89149|702
Reno|NV|89501|89523|775
Albuquerque|NM|87102|87123|505
Santa Fe|NM|87501|87508|505
Seattle|WA|98101|98199|206
Spokane|WA|99201|99224|509
Tacoma|WA|98402|98422|253
Bellevue|WA|98004|98008|425
Portland|OR|97201|97239|503
Eugene|OR|97401|97405|541
Salem|OR|97301|97317|503
Boise|ID|83702|83716|208
Billings|MT|59101|59106|406
Missoula|MT|59801|59808|406
Cheyenne|WY|82001|82009|307
Fargo|ND|58102|58104|701
Sioux Falls|SD|57103|57110|605
Anchorage|AK|99501|99518|907
Honolulu|HI|96813|96826|808
Atlanta|GA|30303|30350|404
Savannah|GA|31401|31419|912
Athens|GA|30601|30606|706
Miami|FL|33125|33190|305
Orlando|FL|32801|32839|407
Tampa|FL|33602|33647|813
Jacksonville|FL|32202|32258|904
Tallahassee|FL|32301|32312|850
Gainesville|FL|32601|32611|352
Charlotte|NC|28202|28277|704
Raleigh|NC|27601|27617|919
Durham|NC|27701|27713|919
Asheville|NC|28801|28806|828
Charleston|SC|29401|29414|843
Columbia|SC|29201|29229|803
Nashville|TN|37201|37221|615
Memphis|TN|38103|38141|901
Knoxville|TN|37902|37938|865
Chattanooga|TN|37402|37421|423
Louisville|KY|40202|40299|502
Lexington|KY|40502|40517|859
Birmingham|AL|35203|35244|205
Huntsville|AL|35801|35824|256
Montgomery|AL|36104|36117|334
Jackson|MS|39201|39216|601
New Orleans|LA|70112|70131|504
Baton Rouge|LA|70801|70820|225
Little Rock|AR|72201|72227|501
Oklahoma City|OK|73102|73170|405
Tulsa|OK|74103|74137|918
Boston|MA|02108|02137|617
Cambridge|MA|02138|02142|617
Worcester|MA|01602|01610|508
Providence|RI|02903|02909|401
Hartford|CT|06103|06120|860
New Haven|CT|06510|06519|203
Burlington|VT|05401|05408|802
Portland|ME|04101|04103|207
Manchester|NH|03101|03104|603
Newark|NJ|07102|07114|973
Jersey City|NJ|07302|07311|201
Trenton|NJ|08608|08629|609
Wilmington|DE|19801|19810|302
Baltimore|MD|21201|21239|410
Annapolis|MD|21401|21409|410
Washington|DC|20001|20020|202
Richmond|VA|23219|23235|804
Virginia Beach|VA|23451|23464|757
Arlington|VA|22201|22209|703
Charleston|WV|25301|25315|304
Morgantown|WV|26501|26508|304
""")


def street(rng: Rng) -> tuple[str, str]:
    """A street line and an optional second line (apartment, suite or unit; empty for most)."""
    line1 = f"{rng.randint(1, 9999)} {rng.choice(STREET_NAMES)} {weighted(rng, STREET_SUFFIXES)}"
    roll = rng.below(100)
    if roll < 14:
        line2 = f"Apt {rng.randint(1, 24)}{rng.choice('ABCDEF')}"
    elif roll < 20:
        line2 = f"Suite {rng.randint(1, 9)}00"
    elif roll < 26:
        line2 = f"Unit {rng.randint(1, 300)}"
    else:
        line2 = ""
    return line1, line2
