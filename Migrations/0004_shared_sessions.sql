-- CredentialVault schema version 4: sessions that hold across processes, events every process
-- sees, and a session model scripts can live with.
--
-- Every column added here is NULL in existing rows, and a NULL column does not enter a row's
-- MAC (Sources/VaultStore/RowAuthentication.swift), so rows authenticated by schema 3 stay
-- authentic. The session_policies rebuild keeps every column's name and value, and with them
-- each row's MAC.

-- Every session transition (activity, warning, extension, lock, unlock, background, end) is a
-- compare-and-swap on `version` inside one immediate transaction: a write based on a stale
-- read changes nothing and is retried from the row as it is. NULL reads as 0.
ALTER TABLE sessions ADD COLUMN version INTEGER CHECK (version IS NULL OR version >= 0);
-- The extension request in flight at the server, in any process: who asked, and until when
-- the marker holds (a process that dies mid-request leaves a marker that lapses by itself).
ALTER TABLE sessions ADD COLUMN extension_holder TEXT;
ALTER TABLE sessions ADD COLUMN extension_deadline INTEGER;

-- A session policy may have no absolute lifetime (NULL: a daemon's session ends only when its
-- grant does), and says which uses of a token count as activity: 'any' (every token served,
-- the default, so a script that calls `vault token` keeps its session) or 'interactive' (only
-- what the tool reports as the user's own activity). NULL reads as 'any'.
CREATE TABLE session_policies_v4 (
    account_id              TEXT    PRIMARY KEY REFERENCES accounts(account_id) ON DELETE CASCADE,
    idle_timeout_ms         INTEGER CHECK (idle_timeout_ms IS NULL OR idle_timeout_ms > 0),
    warning_ms              INTEGER NOT NULL CHECK (warning_ms >= 0),
    max_extensions          INTEGER NOT NULL CHECK (max_extensions >= 0),
    absolute_lifetime_ms    INTEGER CHECK (absolute_lifetime_ms IS NULL OR absolute_lifetime_ms > 0),
    background_timeout_ms   INTEGER CHECK (background_timeout_ms IS NULL OR background_timeout_ms > 0),
    idle_action             TEXT    NOT NULL CHECK (idle_action IN ('lock', 'expire')),
    row_mac                 BLOB,
    activity                TEXT    CHECK (activity IS NULL OR activity IN ('any', 'interactive'))
);
INSERT INTO session_policies_v4 (account_id, idle_timeout_ms, warning_ms, max_extensions, absolute_lifetime_ms,
                                 background_timeout_ms, idle_action, row_mac)
    SELECT account_id, idle_timeout_ms, warning_ms, max_extensions, absolute_lifetime_ms,
           background_timeout_ms, idle_action, row_mac
    FROM session_policies;
DROP TABLE session_policies;
ALTER TABLE session_policies_v4 RENAME TO session_policies;

-- Consecutive refusals whose meaning the vault does not know (an unknown 4xx error code, a
-- 400/401 without a JSON body). After a bounded number the account gets the `refused`
-- verdict, as `invalid_grant` gives `revoked`, instead of backing off forever. NULL reads as 0.
ALTER TABLE refresh_state ADD COLUMN refusals INTEGER CHECK (refusals IS NULL OR refusals >= 0);

-- The session event log: what any process did to a session (refreshes, revocations, failures,
-- warnings, extensions, locks, unlocks, switches, sign-outs, device revocations), appended in
-- order and tailed by every session service through `PRAGMA data_version`, so a subscriber in
-- one process sees what another caused. Bounded by count and age (pruned as it is appended).
-- `data` is the event's plain description (kinds, reasons, times, generations: nothing
-- personal); `detail` the server's words, sealed with the account's data key (gone with the
-- account). Authenticated like every table the vault acts on.
CREATE TABLE events (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    at          INTEGER NOT NULL,
    account_id  TEXT,
    kind        TEXT    NOT NULL,
    data        TEXT    NOT NULL DEFAULT '{}',
    detail      BLOB,
    origin      TEXT    NOT NULL,
    row_mac     BLOB
);
CREATE INDEX events_by_account ON events(account_id, seq);
