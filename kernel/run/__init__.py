"""The run core both loops stand on: the ledger of a run's calls and of its end.

`kernel/loop/` (the agent: Jev routes, Flash writes the arguments) and `kernel/harness/`
(jev-harness: Jev picks each tool and parameter from domains) decide their steps apart and never
import each other; every record of a call and of a run's end is written here
(`kernel/run/ledger.py`), so a call leaves the same records whoever chose it.
"""
