-- CredentialVault schema version 8: how much notification history each account keeps, applied
-- on every sync (`vault notifications sync --keep 90d --keep-count 1000`).
--
-- NULL in existing rows (keep everything, as before), and a NULL column does not enter a row's
-- MAC, so rows authenticated by schema 7 stay authentic. The account row's MAC covers it: an
-- edited file cannot make a sync delete history the user chose to keep.

-- JSON: {"days": N?, "count": N?}; NULL: no policy.
ALTER TABLE accounts ADD COLUMN notification_retention TEXT;
