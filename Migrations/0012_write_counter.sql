-- CredentialVault schema version 12: the vault's write counter and row MAC format 2 (issue 31).
--
-- The header counts the vault's write transactions; every authenticated row's MAC carries the
-- count at which it was written, and the MAC now covers the per-column tags stored after it.
-- The migration's Swift half checks every row under its format-1 MAC and authenticates it
-- again in format 2 at counter 1, in this migration's transaction. NULL until then.
ALTER TABLE vault_meta ADD COLUMN write_counter INTEGER CHECK (write_counter IS NULL OR write_counter >= 0);
--
-- The manifest: for every account, the counter each row the session layer reads for it (the
-- account, its tokens, its newest session, its policy, its refresh state) was last written at
-- (format in Sources/VaultStore/Core/VaultManifest.swift). In the header, under its MAC: a row
-- deleted or put back from an older copy no longer matches it. NULL until the Swift half.
ALTER TABLE vault_meta ADD COLUMN manifest BLOB;
