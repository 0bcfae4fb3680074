"""The task model's driver API: offers, domains, resolution, operation outcomes, observation."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import jev_harness as jev
from jev_harness.model import OfferError, Outcome
from jev_harness.observation import MAX_OBSERVATION_BYTES, canonical


def _counter_task() -> jev.Task:
    """A task whose `pick` tool offers the numbers not yet picked, then a dependent `half`."""
    picked: list[int] = []

    def numbers(task, parents):
        return [jev.Option(str(n), f"number {n}", n) for n in (1, 2, 3) if n not in picked]

    def halves(task, parents):
        n = parents["number"].value
        return [jev.Option("low", f"{n} low", n), jev.Option("high", f"{n} high", n * 10)]

    def run(task, chosen):
        picked.append(chosen["number"].value)
        return Outcome("ok", f"picked {chosen['number'].value}/{chosen['half'].id}")

    tool = jev.Tool(
        "pick",
        "pick a number",
        (
            jev.Parameter("number", "which number", numbers, "explore"),
            jev.Parameter("half", "which half", halves, depends_on=("number",)),
        ),
        run,
    )

    class Kit(jev.Toolkit):
        name = "counter"

        def install(self, task):
            task.register(tool)

        def observe(self):
            return {"picked": list(picked)}

    return jev.Task([Kit()], verifier=lambda task: len(picked) == 3)


def test_option_description_is_bounded_and_clean():
    option = jev.Option("a", "x" * 500 + "\udcff")
    assert len(option.description) == 200
    option.description.encode("utf-8")
    with pytest.raises(ValueError):
        jev.Option("", "empty id")


def test_offer_domain_resolve_and_operate():
    task = _counter_task()
    task.configure("pick them all", {"max_steps": 5})
    assert [t.name for t in task.offered_tools()] == ["pick"]
    assert task.next_parameter("pick", {}).name == "number"
    assert task.next_parameter("pick", {"number": "1"}).name == "half"
    assert task.next_parameter("pick", ["number", "half"]) is None
    chosen = task.resolve("pick", {"number": "2", "half": "high"})
    assert chosen["half"].value == 20
    before = task.state_ref()
    assert task.state_ref() == before  # observing changes nothing
    outcome = task.operate("pick", chosen)
    assert outcome.status == "ok" and outcome.summary == "picked 2/high"
    assert task.state_ref() != before
    assert [o.id for o in task.domain("pick", "number", {})] == ["1", "3"]
    assert not task.complete()


def test_resolve_rejects_unoffered_and_incomplete():
    task = _counter_task()
    with pytest.raises(OfferError) as bad:
        task.resolve("pick", {"number": "9", "half": "low"})
    assert bad.value.code == "unoffered"
    with pytest.raises(OfferError) as bad:
        task.resolve("pick", {"number": "1"})
    assert bad.value.code == "incomplete"
    with pytest.raises(OfferError) as bad:
        task.resolve("pick", {"number": "1", "half": "low", "extra": "x"})
    assert bad.value.code == "incomplete"
    with pytest.raises(OfferError) as bad:
        task.resolve("nope", {})
    assert bad.value.code == "unoffered"


def test_tool_offered_only_with_nonempty_first_domain_and_completion():
    task = _counter_task()
    for n in ("1", "2", "3"):
        task.operate("pick", task.resolve("pick", {"number": n, "half": "low"}))
    assert task.offered_tools() == []
    assert task.complete()


def test_a_raising_tool_is_an_error_outcome():
    def boom(task, chosen):
        raise RuntimeError("disk on fire")

    task = jev.Task()
    task.register(jev.Tool("boom", "fails", (), boom))
    outcome = task.operate("boom", {})
    assert outcome.status == "error" and "disk on fire" in outcome.summary
    assert task.observe()["counts"] == {"operations": 1, "errors": 1}


def test_observation_fits_8192_bytes_and_is_redacted():
    task = _counter_task()
    task.configure(
        "goal " + "é" * 5000 + " SECRET-VALUE", redact=lambda s: s.replace("SECRET-VALUE", "[R]")
    )
    obs = task.observe()
    assert len(canonical(obs)) <= MAX_OBSERVATION_BYTES
    assert "SECRET-VALUE" not in json.dumps(obs)


def test_outcome_text_is_bounded():
    assert len(Outcome("ok", "s", text="y" * 5000).text) == 1200


def test_tool_rejects_bad_dependencies():
    param = jev.Parameter("b", "b", lambda t, p: [], depends_on=("a",))
    with pytest.raises(ValueError, match="depends on"):
        jev.Tool("t", "t", (param,), lambda t, c: "")


def test_import_is_cheap():
    code = (
        "import sys, jev_harness as jev; jev.Task; jev.EvidenceStore; "
        "bad = [m for m in ('kernel', 'workers', 'openhands', 'openai', 'typesafe_sdk', 'msgspec')"
        " if m in sys.modules]; print(bad)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_apixly_alias_gives_the_same_objects():
    import apixly_jev_harness

    assert apixly_jev_harness.Task is jev.Task
    assert apixly_jev_harness.EvidenceTask is jev.EvidenceTask
    assert "WorkspaceToolkit" in dir(apixly_jev_harness)


def test_tools_may_return_text_or_a_dict():
    task = jev.Task()
    task.register(jev.Tool("text", "t", (), lambda t, c: "first line\nsecond"))
    task.register(jev.Tool("dict", "d", (), lambda t, c: {"status": "error", "text": "bad"}))
    plain = task.operate("text", {})
    assert plain.status == "ok" and plain.summary == "first line" and plain.text.endswith("second")
    shaped = task.operate("dict", {})
    assert shaped.status == "error" and shaped.text == "bad"


def test_apixly_mcp_forwards_or_names_what_is_missing():
    import importlib.util

    if importlib.util.find_spec("jev_harness.mcp") is not None:
        pytest.skip("jev_harness.mcp exists: forwarding is covered by its own tests")
    out = subprocess.run(
        [sys.executable, "-m", "apixly_jev_harness.mcp"], capture_output=True, text=True
    )
    assert out.returncode == 2 and "jev_harness.mcp" in out.stderr and out.stdout == ""
