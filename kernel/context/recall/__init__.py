"""The recall index over a session's own history: `index` (the SQLite FTS5 file and its sync
with the log, `RecallIndex`), `pages` (which records are indexed and how each becomes pages),
`search` (search by words, page by seq, the intent's relevant pages) and `tool` (the
read-only `recall` tool's arguments and answer)."""
