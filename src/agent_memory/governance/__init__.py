"""Who may remember what, and the record of it: agent types, the write policy, personal
data sealing and the memory event log. Imports nothing from `tiers`, `lifecycle` or `agent`."""
