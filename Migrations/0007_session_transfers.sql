-- CredentialVault schema version 7: sealed session export and import (`vault sessions export`,
-- `vault sessions import`).
--
-- The recipient key pair is derived from the vault key and never stored. What is stored: every
-- transfer this vault made or took (so a blob is imported at most once), and where an imported
-- account came from.
--
-- `accounts.origin` is NULL in existing rows, and a NULL column does not enter a row's MAC, so
-- rows authenticated by schema 6 stay authentic. Both the new column and every transfer row are
-- covered by row MACs: an edited file cannot make an account look imported, or fake a transfer.

-- JSON: {"kind":"imported","transfer":ID,"at":MS,"mode":"move"|"access_only","host":H,"vault":FP};
-- NULL: the account was added or signed in here.
ALTER TABLE accounts ADD COLUMN origin TEXT;

-- One row per export written and per import stored. An import whose transfer id is here is
-- refused (a replayed blob). No foreign key: the row outlives its account (a removed account
-- must not reopen the door to a replay) and a cascade would change a row without its MAC.
-- Rows are never pruned (a few dozen bytes per transfer): deleting one is detected through
-- `vault_meta.session_transfers`, the number of rows, which the header row's MAC covers.
CREATE TABLE session_transfers (
    transfer_id  TEXT    PRIMARY KEY CHECK (length(transfer_id) = 32),
    direction    TEXT    NOT NULL CHECK (direction IN ('export', 'import')),
    mode         TEXT    NOT NULL CHECK (mode IN ('move', 'access_only')),
    account_id   TEXT    NOT NULL,
    at           INTEGER NOT NULL,
    expires_at   INTEGER NOT NULL,
    -- The other vault's recipient fingerprint (16 hex digits): the recipient of an export, the
    -- sender of an import as its blob claims it.
    peer         TEXT    NOT NULL,
    row_mac      BLOB
);

-- How many rows session_transfers holds (NULL: none). A row deleted from the file (to let a
-- captured blob be imported again) no longer matches it, and the import is refused.
ALTER TABLE vault_meta ADD COLUMN session_transfers INTEGER CHECK (session_transfers IS NULL OR session_transfers >= 0);
