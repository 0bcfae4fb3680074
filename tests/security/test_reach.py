"""What the untrusted code reaches (issue 9 items 3-5; issue 20 items 1, 4), on every path and
front end: the model's shell (agent family) or the task script (harness family).

The probe run starts the front end as an ordinary user would run it: `setpriv --no-new-privs`
and, as root (which ignores the non-dumpable flag), no capability in the bounding or
inheritable set. The untrusted code then runs tests/security/probe.py, which reports its own
environment and credentials, its ancestors, and every /proc/PID/environ it could read.
"""

from __future__ import annotations

import json
import os

import pytest

from tests.security.frontends import MCP_CONFIG, SHELL, TASK_SCRIPT, needs
from tests.security.scenarios import RUN_TIMEOUT_S, Run
from tests.security.world import KERNEL_ONLY, KEY_NAMES

pytestmark = pytest.mark.timeout(RUN_TIMEOUT_S + 120)

MODEL_KEYS = ("TYPESAFE_API_KEY", "FLASH_API_KEY", "DEEPSEEK_API_KEY")
NO_CAPS = "0000000000000000"


def test_the_probe_ran_and_can_read_what_is_readable(probe: Run) -> None:
    """The other rows of this file mean something: the probe ran as the untrusted code, and
    reads what an ordinary user may (the environment of a child of its own)."""
    report = probe.world.probe_report()
    assert report["chain"], "the probe found no ancestor"
    assert report["control_readable"], "the probe cannot read even its own child's environ"
    if MCP_CONFIG in probe.cell.fe.surfaces:  # the MCP server is dumpable: its env is readable
        assert probe.world.mcp_secrets["env"].encode() in probe.world.environ_dump()


def test_its_environment_holds_no_model_key_and_no_kernel_variable(probe: Run) -> None:
    env = probe.world.probe_report()["env"]
    for name in (*MODEL_KEYS, *KERNEL_ONLY):
        assert name not in env, f"{name} is in the untrusted code's environment"
    values = "\0".join(env.values())
    assert not [n for n, v in probe.world.keys.items() if v in values and n in MODEL_KEYS]


@needs(SHELL)
def test_the_shells_environment_holds_no_key_and_no_mcp_secret(probe: Run) -> None:
    """No key variable at all, and no value of the MCP config (it reaches the tool worker on
    stdin, never through an environment a shell inherits)."""
    env = probe.world.probe_report()["env"]
    for name in KEY_NAMES:
        assert name not in env, f"{name} is in the shell's environment"
    values = "\0".join(env.values())
    for name, secret in probe.world.secrets().items():
        assert secret not in values, f"{name} is in the shell's environment"


def test_no_key_in_any_environment_it_can_read(probe: Run) -> None:
    """Every /proc/PID/environ on the machine it could read (the kernel's and the model
    workers' included, cold or forked by the pool)."""
    dump = probe.world.environ_dump()
    for name, key in probe.world.keys.items():
        assert key.encode() not in dump, f"the untrusted code read {name}"


def test_the_kernels_and_workers_environments_are_unreadable(probe: Run) -> None:
    report = probe.world.probe_report()
    assert probe.kernel_pid not in report["environ_readable_pids"], "it read the kernel's env"
    for ancestor in report["chain"]:
        cmd = " ".join(ancestor["cmdline"])
        if "-m workers." in cmd or ancestor["pid"] == probe.kernel_pid:
            assert not ancestor["environ_readable"], f"it read the environ of {cmd[:120]}"


def test_it_runs_as_confined_as_its_kernel(probe: Run) -> None:
    """The kernel ran with no_new_privs and (as root) no capability: so does the untrusted
    code, whichever process forked its worker."""
    status = probe.world.probe_report()["status"]
    assert status["NoNewPrivs"] == "1", status
    if os.geteuid() == 0:
        for field in ("CapBnd", "CapEff", "CapPrm", "CapInh", "CapAmb"):
            assert status[field] == NO_CAPS, f"{field} {status[field]}"


def test_the_run_took_its_spawn_path(probe: Run) -> None:
    """A warm cell whose worker the pool did not fork would prove nothing about the warm path:
    its worker's parent is the pool, or the kernel said on stderr why it spawned cold."""
    chain = probe.world.probe_report()["chain"]
    pids = [a["pid"] for a in chain]
    forked = any(a["cmdline"][:1] == ["jmp-warm-pool"] for a in chain)
    if probe.cell.path == "cold":
        assert probe.kernel_pid in pids and not forked, chain
    else:
        assert forked or "warm pool:" in probe.outcome.stderr, chain


@needs(MCP_CONFIG)
def test_the_mcp_servers_arguments_come_out_redacted(probe: Run) -> None:
    """An MCP server's command line is readable by anyone (by design): what the shell prints
    of it, and what the server logs of it, passes the session's redactor."""
    shown = [line for line in probe.outcome.output.split("\\n") if "CMDLINE" in line]
    shown += [line for line in probe.outcome.output.splitlines() if "CMDLINE" in line]
    assert shown, "the probe found no MCP server command line"
    assert any("--api-key=[REDACTED]" in line and "--note [REDACTED]" in line for line in shown)
    assert "fake mcp server: argv=" in probe.outcome.stderr


@needs(TASK_SCRIPT)
def test_the_task_script_is_given_no_key(probe: Run) -> None:
    """A script overriding `Task.configure` keeps whatever the kernel hands it (item 4)."""
    given = json.loads((probe.world.out / "configure.json").read_text())
    text = json.dumps(given)
    leaked = [name for name, key in probe.world.keys.items() if key in text]
    assert not leaked, f"the task script was given {leaked}"


@needs(TASK_SCRIPT)
def test_the_task_scripts_process_holds_no_key(probe: Run) -> None:
    """All the script's process holds (item 4): its inputs and goal (keys were in both, and in
    the context), its environment both ways, and every protocol message alive in the worker
    (a key the kernel sent for redaction, or one left in a message, would be there)."""
    held = json.loads((probe.world.out / "script.json").read_text())
    assert held["messages"], "no protocol message found: the row proves nothing"
    text = json.dumps(held)
    leaked = [name for name, key in probe.world.keys.items() if key in text]
    assert not leaked, f"the task script's process holds {leaked}"
    assert "[REDACTED]" in held["goal"] and "[REDACTED]" in held["inputs"]["note"]
