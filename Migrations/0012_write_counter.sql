-- CredentialVault schema version 12: the vault commits to its whole state (issue 31).
--
-- vault_state, one row rewritten by every write transaction, under its own MAC: the vault's
-- write counter; the counter at which the header (vault_meta) was last written; per account,
-- the counter at which each row the session layer reads (the account, its tokens, its newest
-- session, its policy, its refresh state) was last written (the manifest); and per table and
-- account, the count and a keyed multiset hash of the rows of devices, notifications, events
-- and session_transfers (the commitments). Formats in Sources/VaultStore/Core/VaultManifest.swift.
-- Every authenticated row's MAC (format 2) now carries the counter at which it was written and
-- covers its per-column tags. A row deleted, put back from an older copy, or newer than the
-- state is refused where it is used, and named by `vault verify`.
--
-- The multiset hash is keyed by a subkey of a root key of its own, sealed by the vault key in
-- vault_meta.commitment_key (re-sealed when a key rotation finishes, so a resumable rotation
-- keeps the commitments valid). NULL, and the state row absent, until the migration's Swift
-- half has checked every row under its format-1 MAC and authenticated it again, in this
-- migration's transaction.
CREATE TABLE vault_state (
    singleton      INTEGER PRIMARY KEY CHECK (singleton = 1),
    write_counter  INTEGER NOT NULL CHECK (write_counter >= 0),
    meta_counter   INTEGER NOT NULL CHECK (meta_counter >= 0),
    manifest       BLOB    NOT NULL,
    commitments    BLOB    NOT NULL,
    row_mac        BLOB
);
ALTER TABLE vault_meta ADD COLUMN commitment_key BLOB;
