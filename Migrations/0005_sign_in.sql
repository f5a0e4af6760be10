-- CredentialVault schema version 5: accounts that sign themselves in (issue 14).
--
-- Every column added here is NULL in existing rows, and a NULL column does not enter a row's
-- MAC (Sources/VaultStore/RowAuthentication.swift), so rows authenticated by schema 4 stay
-- authentic. The values added are plain (no secret in them) and authenticated with their row:
-- a file edited without the key cannot point an account's sign-in at another provider, mark a
-- guessed subject verified, or make an old authentication look fresh.

-- The provider metadata a sign-in used (OpenID Connect Discovery / RFC 8414 member names, as
-- JSON): where `vault login --account` signs in again, where the ID token's keys are.
ALTER TABLE accounts ADD COLUMN provider_metadata TEXT;
-- How the account's subject is known: 'verified' (a verified ID token's sub), 'unverified'
-- (an ID token read without its signature checked), 'given' (--subject), 'generated'
-- (unnamed-…). NULL: added before schema 5, not known.
ALTER TABLE accounts ADD COLUMN subject_source TEXT
    CHECK (subject_source IS NULL OR subject_source IN ('verified', 'unverified', 'given', 'generated'));
-- 'guest' for an account from the provider's guest endpoint; NULL reads as 'registered'.
ALTER TABLE accounts ADD COLUMN kind TEXT CHECK (kind IS NULL OR kind IN ('registered', 'guest'));
-- A guest that was upgraded: the registered account that took over its devices, notifications
-- and history. The guest keeps no tokens.
ALTER TABLE accounts ADD COLUMN upgraded_to TEXT;

-- When the user last authenticated for this session (the verified ID token's auth_time, else
-- the sign-in time), for step-up checks. NULL (sessions before schema 5): started_at.
ALTER TABLE sessions ADD COLUMN auth_time INTEGER;
