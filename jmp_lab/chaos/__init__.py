"""The chaos runner: random SIGKILLs and faults against jmp, with its invariants checked.

`python -m jmp_lab.chaos --iterations N --seed S [--jmp 'CMD']`, or `make chaos`. See
docs/RESILIENCE.md: plan.py (what an iteration does, from the seed alone), targets.py (what can be
killed), world.py (loopback models that follow the log), invoke.py (one CLI run and its kill),
drive.py (the user's moves), check.py (the invariants).
"""
