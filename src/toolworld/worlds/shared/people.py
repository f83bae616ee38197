"""People: names, e-mail addresses and phone numbers every world's customers, contacts and employees draw from.

Plain tuples in a fixed order: generators index into them with their own ``Rng``, so the order of every list is
part of every world's seed data. Append rather than reorder when editing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from toolworld.world.rng import Rng

from .draw import slug, weighted

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


def email(rng: Rng, first: str, last: str, domains: tuple[tuple[str, int], ...] = EMAIL_DOMAINS) -> str:
    """A personal e-mail address in one of six common styles (``olivia.martin42@example.com``)."""
    f, la = slug(first), slug(last)
    style = rng.below(6)
    n = str(rng.randint(1, 999))
    local = (f"{f}.{la}{n}", f"{f}{la}{n}", f"{f[0]}{la}{n}", f"{f}_{la}", f"{la}.{f}{n}", f"{f}{n}")[style]
    return f"{local}@{weighted(rng, domains)}"


def phone(rng: Rng, area_code: str) -> str:
    """A fictional number in the 555-01xx block reserved for fiction (``+1-808-555-0174``); only 100 per area
    code, so draw it through :func:`toolworld.worlds.shared.draw.fresh` with a fallback area code when unique
    numbers matter."""
    return f"+1-{area_code}-555-01{rng.randint(0, 99):02d}"


def full_name(rng: Rng) -> tuple[str, str]:
    """A first and a last name."""
    return rng.choice(FIRST_NAMES), rng.choice(LAST_NAMES)


def display_name(row: Mapping[str, Any]) -> str:
    """"First Last" from a row with ``first_name`` and ``last_name`` columns: how tools and requests name a person
    (one spelling everywhere, so a name the agent reads back matches the one the user says)."""
    return f"{row['first_name']} {row['last_name']}"
