-- CredentialVault schema version 13: access tokens per resource (issue 34).
--
-- An account keeps one refresh token (in tokens) and, beside its own access token, any number
-- of access tokens obtained from that refresh token for other targets: RFC 8707 resource
-- indicators and a scope set (RFC 6749 §6 down-scoping). One row per account and target, keyed
-- by `resources` (the indicators, sorted, one per line) and `scopes` (sorted, space-separated;
-- '' asks for the grant's scope). `generation` grows by one on every store of the row; the
-- access token is sealed with the account's data key and bound to the row's id and generation.
--
-- Every row carries a MAC (format 2) and the table is committed to per account like devices
-- and notifications (a count and a keyed multiset hash of the rows' MACs in vault_state), so a
-- row deleted or put back from an older copy is caught where the tokens are read, not only by
-- `vault verify`. The rows go with the account's grant: wiped with its tokens (a sign-in again,
-- a revocation, a move to another vault) and removed with the account.
CREATE TABLE resource_tokens (
    token_id           INTEGER PRIMARY KEY AUTOINCREMENT,
    account_id         TEXT    NOT NULL REFERENCES accounts(account_id) ON DELETE CASCADE,
    resources          TEXT    NOT NULL,
    scopes             TEXT    NOT NULL,
    generation         INTEGER NOT NULL CHECK (generation > 0),
    access_token       BLOB    NOT NULL,     -- sealed
    token_type         TEXT    NOT NULL,
    access_expires_at  INTEGER,
    granted_scopes     TEXT    NOT NULL DEFAULT '',
    updated_at         INTEGER NOT NULL,
    row_mac            BLOB,
    UNIQUE (account_id, resources, scopes)
);

-- The target the git and docker credential helpers hand the account's token for (`vault
-- accounts set-host ACCOUNT HOST --resource URI --scope S`): resource indicators one per line,
-- scopes space-separated, in the same stored form as resource_tokens'. NULL in existing rows and
-- where the account's own token is handed (a NULL column does not enter the row's MAC, so rows
-- authenticated by schema 12 stay authentic; the account row's MAC covers them once set).
ALTER TABLE accounts ADD COLUMN credential_resources TEXT;
ALTER TABLE accounts ADD COLUMN credential_scopes TEXT;
