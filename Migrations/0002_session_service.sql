-- CredentialVault schema version 2: what the session service shares between processes.

-- Each account's timeout policy, so every process that opens the vault judges the same deadlines.
-- Durations in milliseconds; NULL idle or background timeout means "none".
CREATE TABLE session_policies (
    account_id              TEXT    PRIMARY KEY REFERENCES accounts(account_id) ON DELETE CASCADE,
    idle_timeout_ms         INTEGER CHECK (idle_timeout_ms IS NULL OR idle_timeout_ms > 0),
    warning_ms              INTEGER NOT NULL CHECK (warning_ms >= 0),
    max_extensions          INTEGER NOT NULL CHECK (max_extensions >= 0),
    absolute_lifetime_ms    INTEGER NOT NULL CHECK (absolute_lifetime_ms > 0),
    background_timeout_ms   INTEGER CHECK (background_timeout_ms IS NULL OR background_timeout_ms > 0),
    idle_action             TEXT    NOT NULL CHECK (idle_action IN ('lock', 'expire'))
);

-- One refresh at a time per account across every process: the lease, the shared back-off
-- after transient failures, and the record of refreshes interrupted by a crash.
CREATE TABLE refresh_state (
    account_id              TEXT    PRIMARY KEY REFERENCES accounts(account_id) ON DELETE CASCADE,
    lease_holder            TEXT,
    lease_generation        INTEGER,
    lease_acquired_at       INTEGER,
    lease_expires_at        INTEGER,
    failures                INTEGER NOT NULL DEFAULT 0,
    next_attempt_at         INTEGER,
    last_failure            TEXT,
    last_failure_at         INTEGER,
    interrupted_refreshes   INTEGER NOT NULL DEFAULT 0
);

-- Key rotation in progress (`vault rotate-key`): the next vault key, wrapped by the
-- key-encryption key, and each account's next data key, wrapped by the next vault key.
-- NULL when no rotation is under way. A rotation interrupted by a crash resumes from here.
ALTER TABLE vault_meta ADD COLUMN pending_vault_key_id      INTEGER;
ALTER TABLE vault_meta ADD COLUMN pending_wrapped_vault_key BLOB;
ALTER TABLE accounts   ADD COLUMN pending_data_key_id       INTEGER;
ALTER TABLE accounts   ADD COLUMN pending_wrapped_data_key  BLOB;
