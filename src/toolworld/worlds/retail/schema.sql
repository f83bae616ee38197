-- The retail world: an online store's customers, catalogue, orders, payments, returns and support tickets.
-- Money is stored in integer cents (exact); tools present it as decimal dollars.
-- Dates are ISO 8601 strings in UTC. The world's clock (now) is fixed: see WORLD_NOW in tools.py.

CREATE TABLE users (
    user_id     TEXT PRIMARY KEY,          -- internal id, e.g. 'olivia_martin_4821' (a customer does not know it)
    first_name  TEXT NOT NULL,
    last_name   TEXT NOT NULL,
    email       TEXT NOT NULL UNIQUE,
    phone       TEXT NOT NULL,
    tier        TEXT NOT NULL CHECK (tier IN ('regular', 'silver', 'gold')),
    created_at  TEXT NOT NULL
);

CREATE TABLE addresses (
    address_id  TEXT PRIMARY KEY,          -- e.g. 'addr_58301'
    user_id     TEXT NOT NULL REFERENCES users(user_id),
    line1       TEXT NOT NULL,
    line2       TEXT NOT NULL DEFAULT '',
    city        TEXT NOT NULL,
    state       TEXT NOT NULL,             -- two-letter US state code
    zip         TEXT NOT NULL,             -- five digits
    country     TEXT NOT NULL DEFAULT 'USA',
    is_default  INTEGER NOT NULL DEFAULT 0 CHECK (is_default IN (0, 1))
);
CREATE INDEX addresses_user ON addresses(user_id);
CREATE INDEX addresses_zip ON addresses(zip);

CREATE TABLE payment_methods (
    payment_method_id TEXT PRIMARY KEY,    -- 'credit_card_4821904', 'gift_card_1029384', 'paypal_5566778'
    user_id     TEXT NOT NULL REFERENCES users(user_id),
    kind        TEXT NOT NULL CHECK (kind IN ('credit_card', 'debit_card', 'gift_card', 'paypal')),
    brand       TEXT NOT NULL DEFAULT '',  -- 'visa', 'mastercard', 'amex', 'discover' for cards
    last_four   TEXT NOT NULL DEFAULT '',  -- cards only
    expires     TEXT NOT NULL DEFAULT '',  -- 'YYYY-MM' for cards
    balance_cents INTEGER,                 -- gift cards only
    status      TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'expired', 'closed'))
);
CREATE INDEX payment_methods_user ON payment_methods(user_id);

CREATE TABLE products (
    product_id  TEXT PRIMARY KEY,          -- e.g. 'p_8310295741'
    name        TEXT NOT NULL UNIQUE,      -- product type, e.g. 'Running Shoes'
    category    TEXT NOT NULL,
    brand       TEXT NOT NULL,
    description TEXT NOT NULL
);

CREATE TABLE variants (
    item_id     TEXT PRIMARY KEY,          -- ten digits, e.g. '4982017334'; what orders refer to
    product_id  TEXT NOT NULL REFERENCES products(product_id),
    options     TEXT NOT NULL,             -- JSON object, e.g. {"color": "black", "size": "10"}
    price_cents INTEGER NOT NULL CHECK (price_cents > 0),
    stock       INTEGER NOT NULL CHECK (stock >= 0),
    UNIQUE (product_id, options)
);
CREATE INDEX variants_product ON variants(product_id);

CREATE TABLE orders (
    order_id    TEXT PRIMARY KEY,          -- '#W' + seven digits; printed on the customer's receipt
    user_id     TEXT NOT NULL REFERENCES users(user_id),
    status      TEXT NOT NULL CHECK (status IN
                  ('pending', 'processed', 'shipped', 'delivered', 'cancelled', 'return requested',
                   'exchange requested', 'returned', 'exchanged')),
    placed_at   TEXT NOT NULL,
    ship_name   TEXT NOT NULL,
    ship_line1  TEXT NOT NULL,
    ship_line2  TEXT NOT NULL DEFAULT '',
    ship_city   TEXT NOT NULL,
    ship_state  TEXT NOT NULL,
    ship_zip    TEXT NOT NULL,
    ship_country TEXT NOT NULL DEFAULT 'USA',
    shipping_cents INTEGER NOT NULL DEFAULT 0,
    items_modified INTEGER NOT NULL DEFAULT 0 CHECK (items_modified IN (0, 1)),
    carrier     TEXT,                      -- set once processed
    tracking_number TEXT,                  -- set once processed
    delivered_at TEXT,                     -- set once delivered
    cancel_reason TEXT                     -- set when cancelled
);
CREATE INDEX orders_user ON orders(user_id);
CREATE INDEX orders_status ON orders(status);

CREATE TABLE order_items (
    order_id    TEXT NOT NULL REFERENCES orders(order_id),
    item_id     TEXT NOT NULL REFERENCES variants(item_id),
    product_id  TEXT NOT NULL REFERENCES products(product_id),
    quantity    INTEGER NOT NULL CHECK (quantity > 0),
    unit_price_cents INTEGER NOT NULL,     -- price paid, fixed at purchase
    status      TEXT NOT NULL DEFAULT 'ordered' CHECK (status IN
                  ('ordered', 'cancelled', 'return requested', 'returned', 'exchange requested', 'exchanged')),
    exchange_item_id TEXT REFERENCES variants(item_id),  -- the replacement variant for an exchange
    PRIMARY KEY (order_id, item_id)
);

CREATE TABLE payments (
    payment_id  INTEGER PRIMARY KEY,
    order_id    TEXT NOT NULL REFERENCES orders(order_id),
    payment_method_id TEXT NOT NULL REFERENCES payment_methods(payment_method_id),
    kind        TEXT NOT NULL CHECK (kind IN ('charge', 'refund')),
    amount_cents INTEGER NOT NULL CHECK (amount_cents > 0),
    created_at  TEXT NOT NULL,
    status      TEXT NOT NULL DEFAULT 'completed' CHECK (status IN ('completed', 'pending'))
);
CREATE INDEX payments_order ON payments(order_id);

CREATE TABLE tickets (
    ticket_id   INTEGER PRIMARY KEY,
    user_id     TEXT REFERENCES users(user_id),
    order_id    TEXT REFERENCES orders(order_id),
    summary     TEXT NOT NULL,
    status      TEXT NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'closed')),
    created_at  TEXT NOT NULL
);
