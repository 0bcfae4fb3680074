"""`open_session` for direct use: caller-chosen operations, rejection codes, state_ref."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import pytest

from jev_harness.session import open_session
from jmp_lab.servers.jev import JevServer
from kernel.harness.direct import HarnessRejected
from tests.harness.helpers import SCRIPTS
from tests.support.workers import wait_until

PICK = SCRIPTS / "pick_task.py"
INPUTS = {"items": ["a", "b", "c"], "target": "b"}


@pytest.fixture
def home(short_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(short_tmp)
    return short_tmp / "sessions"


def events(session: Any) -> list[Any]:
    return list(session.session.events)


def kinds(session: Any, kind: str) -> list[Any]:
    return [e.data for e in events(session) if e.kind == kind]


def rejected(code: str, call: Any, *args: Any) -> None:
    with pytest.raises(HarnessRejected) as info:
        call(*args)
    assert info.value.code == code and str(info.value).startswith(code)


def test_a_direct_session_operates_and_rejects_by_code(home: Path) -> None:
    s = open_session(PICK, "pick b", INPUTS, sessions_dir=home, direct_only=True)
    try:
        view = s.observe()
        ref = view["state_ref"]
        assert [t["name"] for t in view["tools"]] == ["items.pick"]
        assert view["delegation"] == {
            "available": False,
            "route": None,
            "direct_only": True,
            "same_tools_and_verifier": True,
        }
        assert s.observe()["state_ref"] == ref  # observing changes nothing
        args = s.arguments("items.pick", {}, ref)
        assert args["parameter"]["name"] == "item"
        assert [o["id"] for o in args["options"]] == ["a", "b", "c"]
        assert s.observe()["state_ref"] == ref  # nor does asking for arguments
        rejected("stale_state", s.operate, "items.pick", {"item": "a"}, "0" * 64)
        rejected("stale_state", s.arguments, "items.pick", {}, "0" * 64)
        rejected("incomplete", s.operate, "items.pick", {}, ref)
        rejected("incomplete", s.operate, "items.pick", {"item": "a", "x": "y"}, ref)
        rejected("unoffered", s.operate, "items.pick", {"item": "zz"}, ref)
        rejected("unoffered", s.operate, "items.note", {"item": "a"}, ref)
        rejected("direct_only", s.delegate)
        assert kinds(s, "tool_started") == []  # no rejection wrote one
        out = s.operate("items.pick", {"item": "a"}, ref)
        assert out["status"] == "ok" and out["state_ref"] != ref and not out["complete"]
        rejected("repeated_operation", s.operate, "items.pick", {"item": "a"}, out["state_ref"])
        assert len(kinds(s, "tool_started")) == 1
        route, param = kinds(s, "route")[-1], kinds(s, "parameter")[-1]
        assert route.method == "caller" and route.choice == "items.pick" and route.top is None
        assert (
            param.method == "caller" and param.choice == "a" and param.question == "items.pick.item"
        )
        done = s.operate("items.pick", {"item": "b"})  # state_ref is optional in Python
        assert done["complete"] is True
    finally:
        result = s.close()
    assert result["status"] == "completed"
    assert events(s)[-1].kind == "final"


def test_the_budget_and_closing_early(home: Path) -> None:
    s = open_session(PICK, "pick b", INPUTS, sessions_dir=home, direct_only=True, max_steps=1)
    try:
        s.operate("items.pick", {"item": "a"})
        rejected("budget_exhausted", s.operate, "items.pick", {"item": "b"})
    finally:
        result = s.close()
    assert result["status"] == "blocked" and "max steps" in result["summary"]
    s2 = open_session(PICK, "pick b", INPUTS, sessions_dir=home, direct_only=True)
    assert s2.close()["status"] == "cancelled"


def test_a_concurrent_call_is_busy_not_queued(home: Path, short_tmp: Path) -> None:
    hold = short_tmp / "hold"
    os.mkfifo(hold)
    inputs = {**INPUTS, "hold": str(hold), "hold_item": "a"}
    s = open_session(PICK, "pick b", inputs, sessions_dir=home, direct_only=True)
    try:
        worker = threading.Thread(target=s.operate, args=("items.pick", {"item": "a"}))
        worker.start()
        wait_until(lambda: Path(f"{hold}.started").exists(), 60, "the held operation")
        rejected("busy", s.observe)
        rejected("busy", s.operate, "items.pick", {"item": "b"})
        with open(hold, "w") as fifo:
            fifo.write("go")
        worker.join(60)
        assert s.observe()["observation"]["counts"]["operations"] == 1
    finally:
        s.close()


def test_the_harness_worker_sees_no_model_key(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TYPESAFE_API_KEY", "tk-harness-test-0123456789")
    monkeypatch.setenv("FLASH_API_KEY", "sk-flash-harness-test-0123456789")
    with JevServer() as jev:
        monkeypatch.setenv("TYPESAFE_BASE_URL", jev.url)
        s = open_session(PICK, "pick b", {**INPUTS, "env_probe": True}, sessions_dir=home)
        try:
            out = s.operate("env.keys", {})
            assert out["summary"] == "keys seen: []"
            rejected("route_fixed", s.delegate)
            assert jev.systemone_bodies() == []  # direct operation asked Jev nothing
        finally:
            s.close()


def test_delegation_then_direct_is_route_fixed(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TYPESAFE_API_KEY", "tk-harness-test-0123456789")
    with JevServer(script=[{"items.pick.item": "b"}]) as jev:
        monkeypatch.setenv("TYPESAFE_BASE_URL", jev.url)
        s = open_session(PICK, "pick b", INPUTS, sessions_dir=home)
        try:
            result = s.delegate()
            assert result["status"] == "completed"
            rejected("route_fixed", s.operate, "items.pick", {"item": "c"})
            assert s.delegate() == result  # the run is over: its result again
        finally:
            s.close()


def test_a_run_with_no_time_left_is_blocked(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TYPESAFE_API_KEY", "tk-harness-test-0123456789")
    with JevServer() as jev:
        monkeypatch.setenv("TYPESAFE_BASE_URL", jev.url)
        s = open_session(PICK, "pick b", INPUTS, sessions_dir=home, timeout=0.001)
        try:
            rejected("budget_exhausted", s.delegate)
            result = s.delegate(reject_exhausted=False)  # what `jev-harness run` does
        finally:
            s.close()
    assert result["status"] == "blocked" and "timeout" in result["summary"]
    assert kinds(s, "tool_started") == []
