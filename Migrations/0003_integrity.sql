-- CredentialVault schema version 3: every stored value the vault acts on is authenticated.
--
-- `row_mac` holds a keyed BLAKE2b over the whole row (every other column, by name, with its
-- type), under a key derived from the vault key, bound to the vault id and the table (see
-- Sources/VaultStore/RowAuthentication.swift). A row whose MAC does not match was changed
-- without the key: it is reported as damaged and never used to send a request or to judge a
-- session. Plain columns stay readable without the key (`vault status`) but are not trusted.
-- Rows of a vault migrated from schema 1 or 2 are authenticated by the first open with the
-- credential, in the same transaction as this migration, after the server's words kept in
-- plain columns (a device's status reason, a failure description) are sealed.

ALTER TABLE vault_meta       ADD COLUMN row_mac BLOB;

-- SPKI SHA-256 pins of the identity service's TLS key ('sha256/BASE64', space-separated);
-- NULL: no pinning.
ALTER TABLE accounts         ADD COLUMN pins TEXT;
ALTER TABLE accounts         ADD COLUMN row_mac BLOB;

ALTER TABLE tokens           ADD COLUMN row_mac BLOB;
ALTER TABLE sessions         ADD COLUMN row_mac BLOB;
ALTER TABLE session_policies ADD COLUMN row_mac BLOB;

-- The process holding the refresh lease ('BOOT_ID PID START_TIME' from /proc), so another
-- process takes the lease over only when the holder is gone, not merely slow.
ALTER TABLE refresh_state    ADD COLUMN lease_process TEXT;
-- The server's own words about the last failure, sealed: `last_failure` holds only the
-- vault's classification of it.
ALTER TABLE refresh_state    ADD COLUMN last_failure_detail BLOB;
ALTER TABLE refresh_state    ADD COLUMN row_mac BLOB;

-- Why a device has its status, sealed: the server chooses the words. `status_reason` is no
-- longer written (its values move here, sealed, as the vault is first opened with the key).
ALTER TABLE devices          ADD COLUMN status_detail BLOB;
ALTER TABLE devices          ADD COLUMN row_mac BLOB;
ALTER TABLE notifications    ADD COLUMN row_mac BLOB;
