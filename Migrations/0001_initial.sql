-- CredentialVault schema version 1.
--
-- Conventions: times are INTEGER milliseconds since the Unix epoch (UTC); ids are
-- lowercase UUID strings; every column holding a secret or personal value is a BLOB
-- holding a sealed value (see VaultCrypto/SealedBlob.swift), never plaintext.

-- Marks the file as a CredentialVault vault ('CVLT').
PRAGMA application_id = 1129729108;

-- One row: what is needed to unlock the vault, and vault-wide settings.
CREATE TABLE vault_meta (
    singleton                 INTEGER PRIMARY KEY CHECK (singleton = 1),
    vault_id                  BLOB    NOT NULL CHECK (length(vault_id) = 16),
    device_id                 TEXT    NOT NULL,
    created_at                INTEGER NOT NULL,
    kek_kind                  TEXT    NOT NULL CHECK (kek_kind IN ('argon2id13', 'keyfile')),
    kdf_salt                  BLOB,
    kdf_opslimit              INTEGER,
    kdf_memlimit              INTEGER,
    key_check                 BLOB    NOT NULL,
    vault_key_id              INTEGER NOT NULL,
    wrapped_vault_key         BLOB    NOT NULL,
    next_key_id               INTEGER NOT NULL,
    active_account_id         TEXT    REFERENCES accounts(account_id) ON DELETE SET NULL,
    last_integrity_check_at   INTEGER,
    last_integrity_check_ok   INTEGER,
    CHECK ((kek_kind = 'keyfile') OR (kdf_salt IS NOT NULL AND kdf_opslimit IS NOT NULL AND kdf_memlimit IS NOT NULL))
);

CREATE TABLE accounts (
    account_id            TEXT    PRIMARY KEY,
    issuer                TEXT    NOT NULL,
    subject               TEXT    NOT NULL,
    label                 BLOB,                 -- sealed
    email                 BLOB,                 -- sealed
    token_endpoint        TEXT    NOT NULL,
    revocation_endpoint   TEXT,
    client_id             TEXT    NOT NULL,
    client_auth           TEXT    NOT NULL CHECK (client_auth IN ('none', 'client_secret_basic')),
    client_secret         BLOB,                 -- sealed
    scopes                TEXT    NOT NULL DEFAULT '',
    data_key_id           INTEGER NOT NULL UNIQUE,
    wrapped_data_key      BLOB    NOT NULL,     -- the account's data key, sealed by the vault key
    created_at            INTEGER NOT NULL,
    UNIQUE (issuer, subject)
);

-- The current token set of each account. `generation` grows by one on every store,
-- and a store names the generation it replaces (compare-and-swap).
CREATE TABLE tokens (
    account_id            TEXT    PRIMARY KEY REFERENCES accounts(account_id) ON DELETE CASCADE,
    generation            INTEGER NOT NULL,
    access_token          BLOB    NOT NULL,     -- sealed
    refresh_token         BLOB,                 -- sealed
    id_token              BLOB,                 -- sealed
    token_type            TEXT    NOT NULL,
    access_expires_at     INTEGER,
    scopes                TEXT    NOT NULL DEFAULT '',
    updated_at            INTEGER NOT NULL
);

CREATE TABLE sessions (
    session_id             INTEGER PRIMARY KEY AUTOINCREMENT,
    account_id             TEXT    NOT NULL REFERENCES accounts(account_id) ON DELETE CASCADE,
    state                  TEXT    NOT NULL CHECK (state IN ('active', 'locked', 'expired', 'signed_out')),
    end_reason             TEXT,
    started_at             INTEGER NOT NULL,
    last_activity_at       INTEGER NOT NULL,
    idle_deadline          INTEGER,
    absolute_deadline      INTEGER,
    extensions_used        INTEGER NOT NULL DEFAULT 0,
    background_entered_at  INTEGER,
    ended_at               INTEGER
);
CREATE INDEX sessions_by_account ON sessions(account_id, session_id DESC);

CREATE TABLE devices (
    registration_id     TEXT    PRIMARY KEY,
    account_id          TEXT    NOT NULL REFERENCES accounts(account_id) ON DELETE CASCADE,
    device_id           TEXT    NOT NULL,
    name                BLOB    NOT NULL,       -- sealed
    platform            TEXT    NOT NULL,
    status              TEXT    NOT NULL CHECK (status IN ('pending', 'active', 'rejected', 'revoked', 'expired')),
    activation_method   TEXT    CHECK (activation_method IN ('primary', 'verify', 'fallback')),
    status_reason       TEXT,
    created_at          INTEGER NOT NULL,
    updated_at          INTEGER NOT NULL,
    last_activity_at    INTEGER,
    UNIQUE (account_id, device_id)
);

CREATE TABLE notifications (
    seq                  INTEGER PRIMARY KEY,
    account_id           TEXT    NOT NULL REFERENCES accounts(account_id) ON DELETE CASCADE,
    uuid                 TEXT    NOT NULL,
    subject              BLOB    NOT NULL,      -- sealed
    message              BLOB    NOT NULL,      -- sealed
    actions              BLOB    NOT NULL,      -- sealed JSON array of offered actions
    created_at           INTEGER NOT NULL,
    expires_at           INTEGER,
    status               TEXT    NOT NULL CHECK (status IN ('pending', 'answered', 'expired', 'dismissed')),
    action_taken         BLOB,                  -- sealed
    answered_at          INTEGER,
    answered_by_device   TEXT,
    updated_at           INTEGER NOT NULL,
    UNIQUE (account_id, uuid)
);
-- Newest-first keyset pagination: (created_at, seq) is the cursor.
CREATE INDEX notifications_newest         ON notifications(created_at DESC, seq DESC);
CREATE INDEX notifications_account_newest ON notifications(account_id, created_at DESC, seq DESC);
CREATE INDEX notifications_status_newest  ON notifications(status, created_at DESC, seq DESC);
CREATE INDEX notifications_account_status ON notifications(account_id, status, created_at DESC, seq DESC);
