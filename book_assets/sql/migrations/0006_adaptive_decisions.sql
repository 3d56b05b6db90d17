-- Adaptive fetching (issue 14): per (domain, page type), whether plain HTTP gives the same records as the
-- browser. Every worker on every host reads and updates the same row, so one disagreement found anywhere
-- switches that page type to the browser for every worker. Modes only move forward: probe -> http on
-- enough agreements, probe or http -> browser on any disagreement, and browser stays browser.

CREATE TABLE adaptive_decisions (
    domain         TEXT NOT NULL,
    page_type      TEXT NOT NULL,
    mode           TEXT NOT NULL DEFAULT 'probe' CHECK (mode IN ('probe', 'http', 'browser')),
    agreements     INTEGER NOT NULL DEFAULT 0,  -- pages fetched both ways whose parsed records matched
    disagreements  INTEGER NOT NULL DEFAULT 0,  -- ... whose records differed (or only the render parsed)
    rendered       INTEGER NOT NULL DEFAULT 0,  -- pages fetched in the browser
    plain          INTEGER NOT NULL DEFAULT 0,  -- pages fetched over plain HTTP
    decided_at     TIMESTAMPTZ,                 -- when the mode last changed
    updated_at     TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (domain, page_type)
);
