-- CredentialVault schema version 9: the approval request a pending device waits on, so a
-- restarted `vault devices activate --resume` (or the library's flow) continues the same wait
-- until the same deadline instead of sending a new request.
--
-- NULL in existing rows (no request waiting), and a NULL column does not enter a row's MAC, so
-- rows authenticated by schema 8 stay authentic. The device row's MAC covers it: an edited file
-- cannot move the deadline or point the wait at another request.

-- JSON: {"notification": "UUID", "requested_at": ms, "deadline": ms}; NULL: none waiting.
ALTER TABLE devices ADD COLUMN approval_request TEXT;
