"""Word lists and the product catalogue the retail generator draws from (our own data, written for toolworld).

Everything here is a plain tuple in a fixed order: the generator indexes into these lists with its own
``Rng``, so the order of every list is part of the seed data. Append rather than reorder when editing.
Cities carry their real state, a realistic zip range and area code, so an address is always consistent.
"""

from __future__ import annotations

from dataclasses import dataclass

# -- people ------------------------------------------------------------------------------------------------

FIRST_NAMES: tuple[str, ...] = (
    "Olivia", "Liam", "Emma", "Noah", "Ava", "Elijah", "Sophia", "James", "Isabella", "Lucas",
    "Mia", "Mason", "Amelia", "Ethan", "Harper", "Logan", "Evelyn", "Aiden", "Abigail", "Jackson",
    "Emily", "Sebastian", "Ella", "Mateo", "Scarlett", "Jack", "Grace", "Owen", "Chloe", "Daniel",
    "Camila", "Henry", "Aria", "Samuel", "Luna", "Wyatt", "Sofia", "Carter", "Layla", "Julian",
    "Zoe", "Leo", "Nora", "Gabriel", "Hannah", "Isaac", "Lily", "Anthony", "Ellie", "Dylan",
    "Stella", "Levi", "Hazel", "Thomas", "Aurora", "Caleb", "Violet", "Christopher", "Natalie", "Joshua",
    "Penelope", "Andrew", "Riley", "Nathan", "Leah", "Ryan", "Audrey", "Adrian", "Savannah", "Miguel",
    "Brooklyn", "Jose", "Claire", "Luis", "Skylar", "Carlos", "Lucy", "Diego", "Paisley", "Alejandro",
    "Valentina", "Juan", "Gabriela", "Javier", "Ximena", "Rafael", "Lucia", "Santiago", "Mariana", "Andres",
    "Daniela", "Fernando", "Paula", "Ricardo", "Elena", "Marco", "Rosa", "Hector", "Carmen", "Wei",
    "Mei", "Jun", "Hiro", "Yuki", "Kenji", "Aiko", "Min", "Jiwoo", "Seoyeon", "Hyun",
    "Priya", "Arjun", "Ananya", "Rohan", "Divya", "Vikram", "Kavya", "Rahul", "Neha", "Sanjay",
    "Aisha", "Omar", "Fatima", "Yusuf", "Zainab", "Hassan", "Amira", "Karim", "Leila", "Tariq",
    "Nadia", "Kwame", "Amara", "Kofi", "Zuri", "Chidi", "Ngozi", "Tunde", "Imani", "Malik",
    "Jamal", "Keisha", "Darnell", "Aaliyah", "DeShawn", "Tamika", "Andre", "Jasmine", "Marcus", "Tiana",
    "Terrence", "Ebony", "Xavier", "Nia", "Dmitri", "Anya", "Ivan", "Katya", "Nikolai", "Olga",
    "Sven", "Ingrid", "Lars", "Freya", "Pierre", "Margot", "Luca", "Giulia", "Matteo", "Chiara",
    "Hans", "Greta", "Sean", "Siobhan", "Declan", "Aoife", "Connor", "Bridget", "Ahmed", "Yasmin",
    "Tomas", "Ana", "Joao", "Beatriz", "Kai", "Leilani", "Ezra", "Miriam", "Eli", "Rachel",
    "Noam", "Talia", "Quinn", "Rowan", "Sage", "Avery", "Jordan", "Morgan", "Casey", "Jamie",
    "Reese", "Dakota", "Peyton", "Emerson", "Finley", "Harold", "Dorothy", "Walter", "Evelina", "Frank",
)  # fmt: skip

LAST_NAMES: tuple[str, ...] = (
    "Smith", "Johnson", "Williams", "Brown", "Jones", "Garcia", "Miller", "Davis", "Rodriguez", "Martinez",
    "Hernandez", "Lopez", "Gonzalez", "Wilson", "Anderson", "Thomas", "Taylor", "Moore", "Jackson", "Martin",
    "Lee", "Perez", "Thompson", "White", "Harris", "Sanchez", "Clark", "Ramirez", "Lewis", "Robinson",
    "Walker", "Young", "Allen", "King", "Wright", "Scott", "Torres", "Nguyen", "Hill", "Flores",
    "Green", "Adams", "Nelson", "Baker", "Hall", "Rivera", "Campbell", "Mitchell", "Carter", "Roberts",
    "Gomez", "Phillips", "Evans", "Turner", "Diaz", "Parker", "Cruz", "Edwards", "Collins", "Reyes",
    "Stewart", "Morris", "Morales", "Murphy", "Cook", "Rogers", "Gutierrez", "Ortiz", "Cooper", "Peterson",
    "Bailey", "Reed", "Kelly", "Howard", "Ramos", "Kim", "Cox", "Ward", "Richardson", "Watson",
    "Brooks", "Chavez", "Wood", "Bennett", "Gray", "Mendoza", "Ruiz", "Hughes", "Price", "Alvarez",
    "Castillo", "Sanders", "Patel", "Myers", "Long", "Ross", "Foster", "Jimenez", "Powell", "Jenkins",
    "Perry", "Russell", "Sullivan", "Bell", "Coleman", "Butler", "Henderson", "Barnes", "Fisher", "Vasquez",
    "Simmons", "Romero", "Patterson", "Hamilton", "Graham", "Reynolds", "Griffin", "Wallace", "Moreno", "West",
    "Hayes", "Bryant", "Herrera", "Gibson", "Ellis", "Tran", "Medina", "Aguilar", "Stevens", "Murray",
    "Castro", "Marshall", "Owens", "Harrison", "Fernandez", "McDonald", "Woods", "Washington", "Kennedy", "Wells",
    "Vargas", "Chen", "Freeman", "Webb", "Tucker", "Guzman", "Burns", "Crawford", "Olson", "Simpson",
    "Wang", "Zhang", "Liu", "Yang", "Huang", "Zhao", "Wu", "Zhou", "Xu", "Lin",
    "Tanaka", "Suzuki", "Sato", "Watanabe", "Yamamoto", "Nakamura", "Kobayashi", "Park", "Choi", "Kang",
    "Singh", "Kumar", "Sharma", "Gupta", "Shah", "Mehta", "Reddy", "Iyer", "Rao", "Das",
    "Khan", "Ali", "Hussein", "Rahman", "Haddad", "Nasser", "Okafor", "Adeyemi", "Mensah", "Owusu",
    "Diallo", "Abebe", "Mwangi", "Kamau", "Nkosi", "Ivanov", "Petrov", "Novak", "Kowalski", "Horvath",
    "Muller", "Schneider", "Becker", "Rossi", "Russo", "Bianchi", "Esposito", "Costa", "Ferreira", "Oliveira",
    "Dubois", "Laurent", "Moreau", "O'Brien", "O'Connor", "Byrne", "Walsh", "Johansson", "Larsen", "Nielsen",
    "Lindqvist", "Cohen", "Levy", "Friedman", "Goldberg", "Pham", "Hoang", "Kealoha", "Begay", "Yazzie",
)  # fmt: skip

# -- addresses ---------------------------------------------------------------------------------------------

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

#: Only reserved example domains (RFC 2606/6761), never a real mail provider; integer weights.
EMAIL_DOMAINS: tuple[tuple[str, int], ...] = (
    ("example.com", 40), ("example.org", 15), ("example.net", 15), ("mail.example.com", 10),
    ("mail.example.net", 8), ("inbox.example.org", 7), ("post.example.com", 5),
)  # fmt: skip

#: Area codes for phones of customers who moved away from their number's city (real US area codes).
AREA_CODES: tuple[str, ...] = (
    "201", "202", "206", "212", "213", "214", "215", "305", "312", "313", "347", "404", "415", "469", "503",
    "512", "602", "617", "646", "702", "713", "718", "720", "773", "786", "808", "818", "917", "919", "971",
)  # fmt: skip

# -- catalogue ---------------------------------------------------------------------------------------------

OptionDim = tuple[str, tuple[tuple[str, int], ...]]


@dataclass(frozen=True, slots=True)
class ProductType:
    """A product type: its variants are combinations of option values; each value adds a price delta."""

    name: str
    category: str
    brand: str
    description: str
    base_cents: int
    options: tuple[OptionDim, ...]


def _p(name: str, category: str, brand: str, description: str, base_cents: int,
       options: dict[str, dict[str, int]]) -> ProductType:  # fmt: skip
    dims = tuple((dim, tuple(values.items())) for dim, values in options.items())
    return ProductType(name, category, brand, description, base_cents, dims)


_SHOE_SIZES = {s: 0 for s in ("7", "8", "9", "10", "11", "12", "13")}
_APPAREL_SIZES = {"XS": 0, "S": 0, "M": 0, "L": 0, "XL": 0, "XXL": 300}

ELECTRONICS = "Electronics"
HOME = "Home & Kitchen"
OUTDOORS = "Outdoors"
APPAREL = "Apparel"
SPORTS = "Sports & Fitness"
OFFICE = "Office"
TOYS = "Toys & Games"
BEAUTY = "Beauty & Personal Care"
PETS = "Pets"
TOOLS = "Tools & Garden"

# fmt: off
PRODUCTS: tuple[ProductType, ...] = (
    # -- electronics
    _p("Wireless Earbuds", ELECTRONICS, "Sonavia", "True wireless earbuds with a pocket charging case and up to 28 hours of battery.",
       7999, {"color": {"black": 0, "white": 0, "navy": 0, "sage": 500},
              "case": {"standard": 0, "wireless charging": 1500},
              "noise cancelling": {"no": 0, "yes": 3000}}),
    _p("Bluetooth Speaker", ELECTRONICS, "Boomtide", "A rugged waterproof speaker with deep bass for the beach, the trail or the kitchen.",
       5999, {"color": {"black": 0, "blue": 0, "red": 0, "sand": 0, "forest green": 300},
              "size": {"mini": -2000, "standard": 0, "max": 4000}}),
    _p("Tablet", ELECTRONICS, "Slatebook", "A thin and light tablet with an all-day battery for reading, drawing and streaming.",
       32999, {"storage": {"64GB": 0, "128GB": 5000, "256GB": 12000, "512GB": 22000},
               "color": {"graphite": 0, "silver": 0, "rose gold": 0},
               "screen size": {"10.9-inch": 0, "12.9-inch": 20000}}),
    _p("Smartwatch", ELECTRONICS, "Pulsewise", "A smartwatch with heart-rate tracking, notifications and a seven-day battery.",
       24999, {"case size": {"40mm": 0, "44mm": 3000},
               "color": {"black": 0, "silver": 0, "gold": 2000},
               "band": {"silicone": 0, "leather": 4000, "stainless steel": 6000}}),
    _p("Laptop", ELECTRONICS, "Corevo", "A 14-inch aluminium laptop with a backlit keyboard for work and study.",
       89999, {"processor": {"i5": 0, "i7": 20000, "i9": 45000},
               "ram": {"8GB": 0, "16GB": 10000, "32GB": 25000},
               "storage": {"256GB SSD": 0, "512GB SSD": 8000, "1TB SSD": 18000}}),
    _p("Mechanical Keyboard", ELECTRONICS, "Keyloom", "A hot-swappable mechanical keyboard with PBT keycaps and a solid aluminium frame.",
       11999, {"switch type": {"linear": 0, "tactile": 0, "clicky": 0, "silent": 1000},
               "layout": {"full size": 0, "tenkeyless": -1500, "75%": -1000},
               "backlight": {"RGB": 0, "white": -800}}),
    _p("Wireless Mouse", ELECTRONICS, "Glidelane", "An ergonomic wireless mouse with silent clicks and a rechargeable battery.",
       3999, {"color": {"black": 0, "white": 0, "gray": 0, "pink": 0},
              "connectivity": {"bluetooth": 0, "USB receiver": -500, "dual mode": 1000}}),
    _p("E-Reader", ELECTRONICS, "Pagelight", "A glare-free e-ink reader with an adjustable warm light and weeks of battery.",
       12999, {"storage": {"8GB": 0, "16GB": 2000, "32GB": 4000},
               "color": {"black": 0, "sage": 0, "denim": 0},
               "ads": {"with ads": 0, "ad-free": 2000}}),
    _p("Action Camera", ELECTRONICS, "Vistrel", "A waterproof action camera with image stabilisation for sports and travel.",
       29999, {"resolution": {"4K": 0, "5.3K": 8000},
               "bundle": {"camera only": 0, "adventure kit": 7000, "creator kit": 12000},
               "color": {"black": 0, "white": 0}}),
    _p("Portable Charger", ELECTRONICS, "Voltpack", "A pocket power bank with USB-C fast charging for phones and tablets.",
       2999, {"capacity": {"5000mAh": -1000, "10000mAh": 0, "20000mAh": 1500, "26800mAh": 3000},
              "color": {"black": 0, "white": 0, "blue": 0}}),
    _p("Headphones", ELECTRONICS, "Sonavia", "Wireless over-the-head headphones with memory-foam cushions and a 40-hour battery.",
       19999, {"color": {"black": 0, "silver": 0, "midnight blue": 0, "cream": 0},
               "type": {"over-ear": 0, "on-ear": -3000},
               "noise cancelling": {"no": -5000, "yes": 0}}),
    # -- home & kitchen
    _p("Coffee Maker", HOME, "Brewhollow", "A drip coffee maker with a brew-strength setting and a keep-warm plate.",
       8999, {"capacity": {"8 cups": 0, "12 cups": 2000, "14 cups": 3000},
              "type": {"drip": 0, "programmable drip": 2500, "thermal carafe": 4500},
              "color": {"black": 0, "stainless steel": 1000, "white": 0}}),
    _p("Espresso Machine", HOME, "Crema Nova", "A compact espresso machine with a steam wand for lattes and cappuccinos at home.",
       34999, {"pressure": {"9 bar": 0, "15 bar": 5000, "19 bar": 9000},
               "milk frother": {"manual wand": 0, "automatic": 12000},
               "color": {"black": 0, "silver": 0, "red": 2000}}),
    _p("Electric Kettle", HOME, "Steamly", "A fast-boiling electric kettle with auto shut-off and a cool-touch handle.",
       3999, {"capacity": {"1L": -500, "1.7L": 0},
              "material": {"stainless steel": 0, "glass": 500, "plastic": -1000},
              "temperature control": {"fixed": 0, "variable": 2000}}),
    _p("Blender", HOME, "Whirlcraft", "A countertop blender that crushes ice and blends smoothies in seconds.",
       7999, {"capacity": {"48 oz": 0, "64 oz": 2000},
              "power": {"700W": -1000, "1000W": 0, "1500W": 4000},
              "color": {"black": 0, "white": 0, "red": 0}}),
    _p("Air Fryer", HOME, "Crispwell", "An air fryer that crisps food with little or no oil and a dishwasher-safe basket.",
       9999, {"capacity": {"3.5 qt": -2000, "5.8 qt": 0, "8 qt": 3000},
              "color": {"black": 0, "white": 0, "sage": 500},
              "controls": {"dial": 0, "digital": 1500}}),
    _p("Cookware Set", HOME, "Ironhearth", "A set of pots and pans that works on gas, electric and induction hobs.",
       14999, {"material": {"stainless steel": 0, "nonstick": -3000, "cast iron": 2000, "copper core": 12000},
               "pieces": {"5-piece": -5000, "10-piece": 0, "12-piece": 3000}}),
    _p("Chef's Knife", HOME, "Keenridge", "A balanced, full-tang chef's knife that holds a sharp edge.",
       6999, {"blade length": {"6-inch": -1000, "8-inch": 0, "10-inch": 1500},
              "steel": {"German steel": 0, "Japanese steel": 3000, "Damascus": 8000},
              "handle": {"wood": 0, "black polymer": -500}}),
    _p("Area Rug", HOME, "Hearth & Loom", "A soft, low-pile area rug that anchors a living room or bedroom.",
       12999, {"material": {"wool": 4000, "cotton": 0, "jute": -1000, "polypropylene": -2000},
               "size": {"3x5 ft": -6000, "5x8 ft": 0, "8x10 ft": 12000, "9x12 ft": 20000},
               "color": {"ivory": 0, "navy": 0, "rust": 0, "gray": 0}}),
    _p("Bed Sheets", HOME, "Slumberline", "A breathable sheet set with a fitted sheet, flat sheet and two pillowcases.",
       5999, {"size": {"twin": -1500, "full": -500, "queen": 0, "king": 1500, "california king": 1500},
              "material": {"cotton percale": 0, "sateen": 1000, "linen": 4000, "bamboo": 2000},
              "color": {"white": 0, "gray": 0, "sage": 0, "navy": 0}}),
    _p("Pillow", HOME, "Slumberline", "A supportive bed pillow with a removable, washable cover.",
       3999, {"size": {"standard": 0, "queen": 500, "king": 1000},
              "fill": {"memory foam": 1000, "down alternative": 0, "down": 3000},
              "firmness": {"soft": 0, "medium": 0, "firm": 0}}),
    _p("Vacuum Cleaner", HOME, "Tidewell", "A vacuum with strong suction and a HEPA filter for carpets and hard floors.",
       19999, {"type": {"cordless stick": 0, "upright": -4000, "robot": 10000},
               "color": {"gray": 0, "white": 0, "red": 0},
               "filter": {"standard": -1000, "HEPA": 0}}),
    _p("Dinnerware Set", HOME, "Hearth & Loom", "A chip-resistant stoneware set of plates, bowls and mugs.",
       7999, {"pieces": {"12-piece": 0, "16-piece": 2000, "24-piece": 5000},
              "color": {"white": 0, "speckled cream": 500, "slate blue": 500, "matte black": 500}}),
    # -- outdoors
    _p("Camping Tent", OUTDOORS, "Alpenwick", "A freestanding tent with a full rain fly that pitches in minutes.",
       14999, {"capacity": {"1-person": -5000, "2-person": 0, "4-person": 6000, "6-person": 12000},
               "season": {"3-season": 0, "4-season": 8000},
               "color": {"green": 0, "orange": 0, "gray": 0}}),
    _p("Sleeping Bag", OUTDOORS, "Alpenwick", "A mummy sleeping bag with a draft collar and a compression sack.",
       8999, {"temperature rating": {"40F": -1500, "20F": 0, "0F": 4000},
              "fill": {"synthetic": 0, "down": 7000},
              "length": {"regular": 0, "long": 1000}}),
    _p("Hiking Backpack", OUTDOORS, "Summitry", "A ventilated trekking pack with an adjustable hip belt and rain cover.",
       11999, {"capacity": {"30L": -2000, "45L": 0, "65L": 3000},
               "color": {"black": 0, "green": 0, "blue": 0, "red": 0},
               "fit": {"men's": 0, "women's": 0}}),
    _p("Water Bottle", OUTDOORS, "Hydroloop", "A double-wall insulated bottle that keeps drinks cold for 24 hours.",
       2999, {"capacity": {"18 oz": -500, "24 oz": 0, "32 oz": 500, "40 oz": 1000},
              "color": {"black": 0, "white": 0, "teal": 0, "coral": 0, "lavender": 0, "sage": 0},
              "lid": {"straw": 0, "chug": 0, "flip": 200}}),
    _p("Camping Stove", OUTDOORS, "Emberline", "A portable camp stove with a wind shield and push-button ignition.",
       5999, {"burners": {"single": 0, "double": 4000},
              "fuel": {"propane": 0, "butane": -500, "multi-fuel": 3000},
              "color": {"orange": 0, "gray": 0}}),
    _p("Hammock", OUTDOORS, "Canopy Trail", "A parachute-nylon hammock that packs into its own pouch.",
       4999, {"size": {"single": -1000, "double": 0},
              "color": {"forest green": 0, "sky blue": 0, "charcoal": 0, "sunset orange": 0},
              "straps": {"no straps": 0, "tree straps": 1500}}),
    _p("Headlamp", OUTDOORS, "Lumitrail", "A lightweight headlamp with a red night mode and a tilting beam.",
       2499, {"brightness": {"300 lumens": -500, "600 lumens": 0, "1000 lumens": 1500},
              "power": {"AAA batteries": -300, "rechargeable": 0},
              "color": {"black": 0, "orange": 0, "blue": 0}}),
    _p("Cooler", OUTDOORS, "Frostkeep", "A thick-walled cooler that keeps ice for days on camping trips.",
       19999, {"capacity": {"25 qt": -6000, "45 qt": 0, "65 qt": 6000},
               "type": {"hard shell": 0, "soft sided": -5000},
               "color": {"white": 0, "tan": 0, "navy": 0}}),
    _p("Camping Chair", OUTDOORS, "Canopy Trail", "A folding camp chair with a cup holder and a carry bag.",
       3999, {"style": {"standard": 0, "low beach": -500, "rocking": 2500},
              "color": {"green": 0, "blue": 0, "red": 0, "gray": 0}}),
    # -- apparel
    _p("Running Shoes", APPAREL, "Stridewell", "Cushioned road-running shoes with a breathable knit upper.",
       11999, {"size": _SHOE_SIZES,
               "color": {"black": 0, "white": 0, "gray": 0, "blue": 0, "red": 0},
               "width": {"regular": 0, "wide": 500}}),
    _p("Hiking Boots", APPAREL, "Trailforge", "Waterproof ankle boots with a grippy lug sole for rough trails.",
       15999, {"size": _SHOE_SIZES,
               "color": {"brown": 0, "black": 0, "olive": 0},
               "material": {"leather": 0, "synthetic": -2000}}),
    _p("Rain Jacket", APPAREL, "Northwake", "A packable, seam-sealed rain jacket with an adjustable hood.",
       12999, {"size": _APPAREL_SIZES,
               "color": {"black": 0, "navy": 0, "red": 0, "olive": 0, "yellow": 0}}),
    _p("T-Shirt", APPAREL, "Everyday Thread", "A soft everyday crew-neck T-shirt in combed cotton.",
       1999, {"size": _APPAREL_SIZES,
              "color": {"white": 0, "black": 0, "heather gray": 0, "navy": 0, "forest green": 0},
              "fit": {"regular": 0, "slim": 0}}),
    _p("Hoodie", APPAREL, "Northwake", "A midweight pullover hoodie with a kangaroo pocket.",
       4999, {"size": _APPAREL_SIZES,
              "color": {"black": 0, "heather gray": 0, "navy": 0, "burgundy": 0},
              "material": {"cotton": 0, "fleece": 500}}),
    _p("Jeans", APPAREL, "Denimworks", "Five-pocket jeans in a comfortable stretch denim.",
       6999, {"waist": {"28": 0, "30": 0, "32": 0, "34": 0, "36": 0, "38": 300},
              "length": {"30": 0, "32": 0, "34": 0},
              "fit": {"slim": 0, "straight": 0, "relaxed": 0}}),
    _p("Winter Gloves", APPAREL, "Northwake", "Insulated winter gloves with touchscreen fingertips.",
       2999, {"size": {"S": 0, "M": 0, "L": 0, "XL": 0},
              "material": {"fleece": -500, "wool": 0, "leather": 2000},
              "color": {"black": 0, "gray": 0, "brown": 0}}),
    _p("Sunglasses", APPAREL, "Sunmere Optics", "Lightweight sunglasses with full UV400 protection and a hard case.",
       8999, {"frame": {"black": 0, "tortoise": 0, "gold": 1000, "silver": 1000},
              "lens": {"polarized": 0, "non-polarized": -3000, "mirrored": 1000}}),
    _p("Wool Socks", APPAREL, "Trailforge", "Cushioned merino wool socks that stay warm and dry on long days.",
       1999, {"size": {"S": 0, "M": 0, "L": 0, "XL": 0},
              "pack": {"1 pair": -1200, "3 pairs": 0, "6 pairs": 1500},
              "color": {"gray": 0, "black": 0, "charcoal": 0, "oatmeal": 0}}),
    # -- sports & fitness
    _p("Yoga Mat", SPORTS, "Zenflow", "A non-slip yoga mat with alignment lines and a carry strap.",
       3999, {"thickness": {"4mm": -500, "6mm": 0, "8mm": 700},
              "material": {"TPE": -1000, "natural rubber": 0, "cork": 2000},
              "color": {"purple": 0, "black": 0, "teal": 0, "pink": 0, "gray": 0}}),
    _p("Adjustable Dumbbells", SPORTS, "Ironform", "Space-saving dumbbells that change weight with a turn of the dial.",
       24999, {"max weight": {"25 lb": -8000, "52.5 lb": 0, "90 lb": 15000},
               "set": {"single": -10000, "pair": 0},
               "handle": {"standard": 0, "ergonomic": 1500}}),
    _p("Resistance Bands", SPORTS, "Ironform", "Latex resistance bands with handles and a door anchor for home workouts.",
       1999, {"set": {"3 bands": -500, "5 bands": 0, "11-piece kit": 1500},
              "resistance": {"light": 0, "medium": 0, "heavy": 500},
              "color": {"multicolor": 0, "black": 0}}),
    _p("Bicycle Helmet", SPORTS, "Cadenza", "A ventilated bike helmet with a dial-fit system and a rear light.",
       5999, {"size": {"S": 0, "M": 0, "L": 0},
              "color": {"black": 0, "white": 0, "red": 0, "blue": 0, "neon yellow": 0},
              "protection": {"standard": 0, "MIPS": 3000}}),
    _p("Tennis Racket", SPORTS, "Courtline", "A graphite tennis racket with a forgiving sweet spot.",
       13999, {"weight": {"260g": 0, "280g": 0, "300g": 1000},
               "grip size": {"4 1/8": 0, "4 1/4": 0, "4 3/8": 0},
               "strings": {"strung": 0, "unstrung": -1500}}),
    _p("Basketball", SPORTS, "Courtline", "A composite-leather basketball with deep channels for grip.",
       2999, {"size": {"5 (youth)": -800, "6 (women's)": -300, "7 (official)": 0},
              "surface": {"indoor": 1000, "outdoor": 0, "indoor/outdoor": 500}}),
    _p("Fitness Tracker", SPORTS, "Pulsewise", "A slim fitness band that tracks steps, sleep and workouts.",
       9999, {"color": {"black": 0, "pink": 0, "blue": 0, "olive": 0},
              "band size": {"small": 0, "large": 0},
              "GPS": {"no": 0, "built-in": 3000}}),
    _p("Foam Roller", SPORTS, "Zenflow", "A foam roller for warm-ups and muscle recovery.",
       2499, {"length": {"12-inch": -500, "18-inch": 0, "36-inch": 1000},
              "density": {"soft": 0, "medium": 0, "firm": 300},
              "texture": {"smooth": 0, "textured": 500}}),
    _p("Jump Rope", SPORTS, "Ironform", "A tangle-free speed rope with ball-bearing handles.",
       1499, {"type": {"speed": 0, "weighted": 1000, "beaded": -200},
              "length": {"9 ft": 0, "10 ft": 0, "adjustable": 300},
              "color": {"black": 0, "red": 0, "blue": 0}}),
    # -- office
    _p("Desk Lamp", OFFICE, "Lumenary", "An LED desk lamp with dimming, colour temperature and a USB charging port.",
       4999, {"color": {"black": 0, "white": 0, "brass": 1500},
              "style": {"swing arm": 0, "architect": 1000, "minimal": -500},
              "bulb": {"LED": 0, "smart LED": 2000}}),
    _p("Office Chair", OFFICE, "Postura", "An ergonomic office chair with lumbar support and a breathable back.",
       29999, {"color": {"black": 0, "gray": 0, "blue": 0},
               "material": {"mesh": 0, "leather": 10000, "fabric": 0},
               "armrests": {"fixed": -2000, "adjustable": 0, "4D": 5000}}),
    _p("Standing Desk", OFFICE, "Elevant", "A motorised sit-stand desk with memory presets.",
       39999, {"size": {"48x24 in": -5000, "60x30 in": 0, "72x30 in": 8000},
               "top": {"white laminate": 0, "black laminate": 0, "bamboo": 5000, "walnut": 8000},
               "frame": {"black": 0, "white": 0}}),
    _p("Notebook", OFFICE, "Inkhaven", "A lay-flat notebook with thick, fountain-pen-friendly paper.",
       1499, {"size": {"pocket": -400, "A5": 0, "A4": 500},
              "ruling": {"lined": 0, "dot grid": 0, "blank": 0, "graph": 0},
              "cover": {"hardcover": 0, "softcover": -300}}),
    _p("Fountain Pen", OFFICE, "Inkhaven", "A smooth-writing fountain pen with a converter and ink cartridges.",
       3499, {"nib": {"extra fine": 0, "fine": 0, "medium": 0, "broad": 0},
              "color": {"black": 0, "burgundy": 0, "navy": 0, "green": 0},
              "finish": {"matte": 0, "lacquer": 1500}}),
    _p("Monitor", OFFICE, "Lumaview", "A thin-bezel computer monitor with a height-adjustable stand.",
       27999, {"screen size": {"24-inch": -8000, "27-inch": 0, "32-inch": 12000},
               "resolution": {"1080p": -6000, "1440p": 0, "4K": 10000},
               "refresh rate": {"60Hz": 0, "144Hz": 6000}}),
    _p("Laptop Backpack", OFFICE, "Commuter Co.", "A water-resistant backpack with a padded laptop sleeve.",
       6999, {"laptop size": {"15-inch": 0, "17-inch": 1000},
              "color": {"black": 0, "gray": 0, "navy": 0, "olive": 0},
              "material": {"nylon": 0, "canvas": 500, "leather": 8000}}),
    _p("Webcam", OFFICE, "Lumaview", "A webcam with autofocus and dual microphones for clear video calls.",
       6999, {"resolution": {"1080p": 0, "4K": 7000},
              "privacy cover": {"no": 0, "yes": 300},
              "color": {"black": 0, "white": 0}}),
    # -- toys & games
    _p("Building Blocks Set", TOYS, "Brickly", "A set of interlocking building bricks with step-by-step instructions.",
       3999, {"pieces": {"250": -2000, "500": 0, "1000": 4000},
              "theme": {"city": 0, "space": 0, "castle": 0, "ocean": 0}}),
    _p("Jigsaw Puzzle", TOYS, "Puzzlecraft", "A jigsaw puzzle of precision-cut, glare-free pieces.",
       1999, {"pieces": {"300": -500, "500": 0, "1000": 500, "2000": 1500},
              "theme": {"landscape": 0, "animals": 0, "fine art": 0, "world map": 0, "food": 0}}),
    _p("Strategy Board Game", TOYS, "Tabletop Union", "A strategy board game of trading and building for family game nights.",
       3999, {"edition": {"standard": 0, "deluxe": 3000},
              "players": {"2-4": 0, "2-6": 1000},
              "language": {"English": 0, "Spanish": 0, "French": 0}}),
    _p("Remote Control Car", TOYS, "Turbotrax", "A fast off-road RC car with a rechargeable battery and all-terrain tyres.",
       4999, {"scale": {"1:18": -1500, "1:16": 0, "1:10": 3000},
              "color": {"red": 0, "blue": 0, "green": 0, "yellow": 0},
              "battery": {"standard": 0, "extended": 1000}}),
    _p("Plush Toy", TOYS, "Snugglebun", "A huggable plush toy made of soft, machine-washable fabric.",
       1999, {"animal": {"bear": 0, "bunny": 0, "elephant": 0, "dinosaur": 0, "penguin": 0},
              "size": {"small": -800, "medium": 0, "large": 1200}}),
    _p("Drone", TOYS, "Skyhopper", "A foldable camera drone with GPS return-to-home and obstacle sensors.",
       9999, {"camera": {"no camera": -3000, "1080p": 0, "4K": 6000},
              "color": {"white": 0, "black": 0, "gray": 0},
              "batteries": {"1 battery": 0, "3-battery combo": 4000}}),
    # -- beauty & personal care
    _p("Electric Toothbrush", BEAUTY, "Brightly", "A rechargeable sonic toothbrush with a two-minute timer.",
       7999, {"color": {"white": 0, "black": 0, "pink": 0, "blue": 0},
              "modes": {"2 modes": -2000, "5 modes": 0},
              "travel case": {"no": 0, "yes": 1500}}),
    _p("Hair Dryer", BEAUTY, "Silkwave", "An ionic hair dryer that dries fast with less frizz.",
       8999, {"power": {"1600W": -1000, "1875W": 0, "2000W": 1500},
              "color": {"black": 0, "rose gold": 500, "white": 0},
              "attachments": {"none": 0, "diffuser": 1000, "full kit": 2500}}),
    _p("Eau de Parfum", BEAUTY, "Maison Alder", "A long-lasting eau de parfum in a refillable glass bottle.",
       6999, {"scent": {"citrus": 0, "woody": 0, "floral": 0, "fresh": 0, "amber": 0},
              "size": {"30 ml": -2500, "50 ml": 0, "100 ml": 4000}}),
    _p("Face Moisturizer", BEAUTY, "Dewlab", "A fragrance-free daily moisturizer with hyaluronic acid.",
       2899, {"skin type": {"dry": 0, "oily": 0, "combination": 0, "sensitive": 0},
              "size": {"1.7 oz": 0, "3.4 oz": 1500},
              "SPF": {"none": 0, "SPF 30": 500}}),
    _p("Electric Shaver", BEAUTY, "Keenblade", "A wet-and-dry electric shaver with a pop-up trimmer.",
       11999, {"type": {"foil": 0, "rotary": 0},
               "color": {"black": 0, "silver": 0, "blue": 0},
               "cleaning station": {"no": 0, "yes": 4000}}),
    _p("Makeup Brush Set", BEAUTY, "Dewlab", "A set of soft makeup brushes in a zip travel case.",
       2499, {"pieces": {"5-piece": -800, "10-piece": 0, "15-piece": 1200},
              "bristles": {"synthetic": 0, "natural": 1500},
              "handle color": {"black": 0, "rose gold": 0, "white": 0}}),
    # -- pets
    _p("Dog Bed", PETS, "Pawsome", "A bolstered dog bed with a removable, machine-washable cover.",
       5999, {"size": {"S": -2000, "M": 0, "L": 2000, "XL": 4000},
              "color": {"gray": 0, "brown": 0, "navy": 0, "beige": 0},
              "filling": {"memory foam": 2000, "polyester fill": 0}}),
    _p("Cat Tree", PETS, "Whiskerly", "A multi-level cat tree with sisal scratching posts and a cosy condo.",
       8999, {"height": {"36-inch": -3000, "52-inch": 0, "72-inch": 5000},
              "color": {"beige": 0, "gray": 0, "dark brown": 0}}),
    _p("Dog Leash", PETS, "Pawsome", "A reflective dog leash with a padded handle.",
       1999, {"length": {"4 ft": -200, "6 ft": 0, "16 ft retractable": 1500},
              "color": {"red": 0, "black": 0, "blue": 0, "pink": 0, "orange": 0}}),
    _p("Automatic Pet Feeder", PETS, "Whiskerly", "A programmable feeder that serves dry food on schedule.",
       7999, {"capacity": {"3L": -1000, "4L": 0, "6L": 1500},
              "connectivity": {"timer": 0, "wi-fi": 3000},
              "bowls": {"single": 0, "dual": 1000}}),
    _p("Pet Carrier", PETS, "Pawsome", "A ventilated pet carrier that fits under most airline seats.",
       4499, {"size": {"S": 0, "M": 500, "L": 1000},
              "type": {"soft-sided": 0, "hard-sided": 1000, "backpack": 1500},
              "color": {"black": 0, "gray": 0, "pink": 0}}),
    _p("Dog Harness", PETS, "Trailhound", "A no-pull dog harness with front and back leash clips.",
       2999, {"size": {"XS": -300, "S": 0, "M": 0, "L": 300, "XL": 500},
              "color": {"black": 0, "red": 0, "blue": 0, "orange": 0}}),
    # -- tools & garden
    _p("Cordless Drill", TOOLS, "Torqline", "A compact cordless drill-driver with a two-speed gearbox and LED light.",
       9999, {"voltage": {"12V": -2000, "18V": 0, "20V max": 2000},
              "battery": {"1 battery": 0, "2 batteries": 4000},
              "kit": {"drill only": 0, "with bit set": 2000}}),
    _p("Tool Set", TOOLS, "Torqline", "A mechanic's tool set with sockets, wrenches and screwdrivers in a case.",
       6999, {"pieces": {"65-piece": -2000, "120-piece": 0, "230-piece": 5000},
              "case": {"plastic": 0, "metal": 3000},
              "sizes": {"metric": 0, "SAE": 0, "metric and SAE": 1000}}),
    _p("Garden Hose", TOOLS, "Greenreach", "A kink-resistant garden hose with brass fittings.",
       3499, {"length": {"25 ft": -1000, "50 ft": 0, "75 ft": 1500, "100 ft": 2500},
              "material": {"rubber": 1500, "vinyl": 0, "expandable": -500}}),
    _p("Lawn Mower", TOOLS, "Greenreach", "A walk-behind lawn mower with mulching and a rear bag.",
       29999, {"power": {"gas": 0, "corded electric": -8000, "battery": 5000},
               "deck width": {"20-inch": -2000, "21-inch": 0},
               "drive": {"push": 0, "self-propelled": 8000}}),
    _p("Pruning Shears", TOOLS, "Greenreach", "Sharp hand pruners for flowers, shrubs and small branches.",
       2499, {"blade": {"bypass": 0, "anvil": 0, "ratchet": 800},
              "handle": {"steel": 0, "aluminum": 500, "fiberglass": 300}}),
    _p("Step Ladder", TOOLS, "Steprite", "A sturdy folding ladder with a tool tray and slip-resistant feet.",
       12999, {"height": {"4 ft": -6000, "6 ft": 0, "8 ft": 5000},
               "material": {"aluminum": 0, "fiberglass": 4000},
               "type": {"step": 0, "multi-position": 6000}}),
    _p("Work Light", TOOLS, "Torqline", "A bright, rechargeable LED work light with a folding stand.",
       3999, {"brightness": {"2000 lumens": -1000, "5000 lumens": 0, "10000 lumens": 3000},
              "mount": {"stand": 0, "magnetic base": 500, "tripod": 2000}}),
)
# fmt: on
