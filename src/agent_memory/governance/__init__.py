"""Who may remember what, and the record of it: the rules every tier obeys on write.

* `agent_types`: agent types (prompt, tools, memory configuration, workflows) — what each
  kind of agent may do and remember (ADR-043);
* `policy`: every write is a `WriteProposal` checked by a `WritePolicy` through a
  `WriteGate` before it commits; a refusal is `WriteDenied` (ADR-0051);
* `personal_data`: fields marked personal are sealed (AES-256-GCM) under per-subject data
  keys stored wrapped in D1; erasing a subject destroys its keys;
* `events`: the `memory_written` / `memory_retrieved` audit log (hashes and ids, never
  content).
Sits below the tiers: it imports nothing from `tiers`, `lifecycle` or `agent`.
"""
