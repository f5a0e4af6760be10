-- CredentialVault schema version 13: commitments to the collections of rows (issue 31).
--
-- For each of devices, notifications, events and session_transfers, and each account, the
-- header commits to the rows' count and a keyed multiset hash of their MACs (format in
-- Sources/VaultStore/Core/VaultManifest.swift, VaultCommitments), updated in the transaction
-- of every row added, changed or removed; `vault verify` recomputes them. The hash is keyed
-- by a subkey of its own root key, kept sealed by the vault key (re-sealed by a key rotation,
-- so the commitments stay valid through a resumable one). Both NULL until the migration's
-- Swift half checks every row and computes the commitments, in this migration's transaction.
ALTER TABLE vault_meta ADD COLUMN commitment_key BLOB;
ALTER TABLE vault_meta ADD COLUMN commitments BLOB;
