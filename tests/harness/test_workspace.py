"""WorkspaceToolkit confinement: symlinks, FIFOs, devices, `..`, absolute paths, bounds."""

from __future__ import annotations

import json
import os
import stat
import threading

import pytest

import jev_harness as jev
from jev_harness import workspace, workspace_fs
from jev_harness.workspace_fs import Confined, Refused, split_path

SECRET = "TOPSECRET-do-not-leak-4242"


@pytest.fixture
def corpus(tmp_path):
    """A workspace with a marker file, a symlinked secret file and dir, a FIFO, odd names."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(SECRET + "\n")
    root = tmp_path / "ws"
    (root / "docs").mkdir(parents=True)
    (root / "docs" / "guide.md").write_text("# Guide\n\nThe answer marker is BLUE-HERON.\n")
    (root / "main.py").write_text("raise SystemExit('never imported')\n")
    os.symlink(outside / "secret.txt", root / "link.txt")
    os.symlink(outside, root / "linkdir")
    os.mkfifo(root / "pipe")
    (root / os.fsdecode(b"caf\xe9.txt")).write_bytes(b"latin-1 named file\n")
    return root


def _task(root, queries=("marker",)):
    return jev.Task([jev.WorkspaceToolkit(root, queries)])


def _run(task, tool, **ids):
    return task.operate(tool, task.resolve(tool, ids))


def _all_text(task, outcomes):
    store = task.store
    texts = [o.text + o.summary for o in outcomes]
    texts += [store.read(r, 0, 1200) for r in store]
    return "\n".join(texts)


def test_listing_omits_symlinks_and_special_files(corpus):
    task = _task(corpus)
    assert [t.name for t in task.offered_tools()] == ["files.list", "files.search"]
    outcome = _run(task, "files.list", dir=".")
    assert "link.txt (omitted: symlink)" in outcome.text
    assert "linkdir (omitted: symlink)" in outcome.text
    assert "pipe (omitted: fifo)" in outcome.text
    assert "caf\\xe9.txt" in outcome.text  # a non-UTF-8 name, escaped
    assert outcome.data["listed"] == outcome.data["entries"] == 6 and outcome.data["omitted"] == 3
    paths = [o.id for o in task.domain("files.read", "path", {})]
    assert sorted(paths) == ["caf\\xe9.txt", "main.py"]
    assert [o.id for o in task.domain("files.list", "dir", {})] == ["docs"]


def test_read_captures_once_and_confines(corpus):
    task = _task(corpus)
    outcomes = [_run(task, "files.list", dir=".")]
    outcomes.append(_run(task, "files.list", dir="docs"))
    outcomes.append(_run(task, "files.read", path="docs/guide.md"))
    assert "BLUE-HERON" in outcomes[-1].text
    assert outcomes[-1].data["bytes_read"] == outcomes[-1].data["size"]
    odd = _run(task, "files.read", path="caf\\xe9.txt")
    assert odd.status == "ok" and "latin-1 named file" in odd.text
    outcomes.append(_run(task, "files.search", query="marker"))
    assert len(task.store) == 2  # the search captured nothing
    assert "docs/guide.md:3:" in outcomes[-1].text and outcomes[-1].data["matches"] == 1
    assert SECRET not in _all_text(task, outcomes)
    assert task.offered_tools() == [task.tools["files.read"]]  # main.py is left
    assert task.domain("files.read", "path", {})[0].id == "main.py"


def test_search_skips_symlinks_and_does_not_hang_on_a_fifo(corpus):
    task = _task(corpus, queries=["TOPSECRET", "BLUE-HERON"])
    hidden = _run(task, "files.search", query="TOPSECRET")
    assert hidden.data["matches"] == 0 and SECRET not in hidden.text
    found = _run(task, "files.search", query="BLUE-HERON")
    assert found.data["matches"] == 1
    assert [o.id for o in task.domain("files.read", "path", {})] == ["docs/guide.md"]


@pytest.mark.parametrize("path", ["../outside/secret.txt", "/etc/passwd", "docs/../main.py"])
def test_dotdot_and_absolute_paths_are_refused(corpus, path):
    with pytest.raises(Refused):
        split_path(path)


@pytest.mark.parametrize("name", ["link.txt", "pipe"])
def test_confined_read_refuses_symlink_and_fifo(corpus, name):
    result = []
    reader = threading.Thread(
        target=lambda: result.append(_try_read(Confined(corpus), name)), daemon=True
    )
    reader.start()
    reader.join(30)  # a blocking open on the FIFO would hang here: fail, do not wait forever
    assert result and isinstance(result[0], Refused)


def _try_read(fs, name):
    try:
        return fs.read_bytes(split_path(name), 100)
    except Exception as exc:
        return exc


def test_confined_read_refuses_a_path_through_a_symlinked_dir(corpus):
    with pytest.raises(Refused, match="symlink"):
        Confined(corpus).read_bytes(split_path("linkdir/secret.txt"), 100)


def test_device_is_omitted_and_refused(corpus):
    try:
        os.mknod(corpus / "null", stat.S_IFCHR | 0o600, os.makedev(1, 3))
    except (PermissionError, OSError):
        pytest.skip("creating a device node needs privileges this machine lacks")
    task = _task(corpus)
    assert "null (omitted: device)" in _run(task, "files.list", dir=".").text
    with pytest.raises(Refused, match="device"):
        Confined(corpus).read_bytes(split_path("null"), 100)


def test_huge_file_is_captured_bounded(tmp_path, monkeypatch):
    monkeypatch.setattr(workspace, "MAX_FILE_BYTES", 10_000)
    (tmp_path / "big.txt").write_text("y" * 50_000)
    task = _task(tmp_path)
    _run(task, "files.list", dir=".")
    outcome = _run(task, "files.read", path="big.txt")
    assert outcome.data["truncated"] is True and outcome.data["bytes_read"] == 10_000
    assert len(outcome.text) == 1200 and "truncated" in outcome.summary
    assert task.store.describe(outcome.target)["length"] == 10_000


def test_binary_file_is_not_captured(tmp_path):
    (tmp_path / "blob.bin").write_bytes(b"\x00\x01\x02" * 10)
    task = _task(tmp_path)
    _run(task, "files.list", dir=".")
    outcome = _run(task, "files.read", path="blob.bin")
    assert outcome.status == "error" and "binary" in outcome.summary and len(task.store) == 0


def test_listing_bound_is_explicit(tmp_path, monkeypatch):
    monkeypatch.setattr(workspace, "MAX_ENTRIES", 5)
    for i in range(12):
        (tmp_path / f"f{i:02}.txt").write_text("x")
    outcome = _run(_task(tmp_path), "files.list", dir=".")
    assert outcome.data == {"entries": 12, "listed": 5, "limit": 5, "omitted": 0}
    assert "5 of 12 entries listed (limit 5)" in outcome.text


@pytest.mark.parametrize("lack", ["dir_fd", "O_NOFOLLOW"])
def test_fails_closed_without_the_primitives(corpus, monkeypatch, lack):
    if lack == "dir_fd":
        monkeypatch.setattr(os, "supports_dir_fd", set())
    else:
        monkeypatch.delattr(os, "O_NOFOLLOW")
    assert workspace_fs.missing_primitives()
    task = _task(corpus)
    assert task.offered_tools() == []
    with pytest.raises(workspace_fs.Unsupported):
        Confined(corpus).read_bytes(split_path("main.py"), 100)
    outcome = task.operate("files.list", {"dir": jev.Option(".", "root", ())})
    assert outcome.status == "error" and "unsupported" in outcome.summary


def test_inspected_source_is_never_executed(tmp_path):
    marker = tmp_path / "ran"
    (tmp_path / "evil.py").write_text(f"open({str(marker)!r}, 'w').write('x')\n")
    task = _task(tmp_path, queries=["open"])
    _run(task, "files.search", query="open")
    _run(task, "files.read", path="evil.py")
    assert not marker.exists()


PREFERENCE = ["save_report", "record_evidence", "files.read", "files.search", "files.list"]


def _drive(task, steps=30):
    """A plain driver: the most useful offered tool, the first option of each domain."""
    for _ in range(steps):
        if task.complete():
            return
        offered = {t.name: t for t in task.offered_tools()}
        name = next((n for n in PREFERENCE if n in offered), None) or next(iter(offered))
        chosen = {}
        for param in offered[name].parameters:
            chosen[param.name] = task.domain(name, param, chosen)[0]
        task.operate(name, chosen)


def test_workspace_example_completes(corpus, tmp_path, monkeypatch):
    import importlib.util

    spec = importlib.util.spec_from_file_location("workspace_task", "examples/workspace_task.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.chdir(tmp_path)
    inputs = {"root": str(corpus), "queries": ["marker"], "markers": ["BLUE-HERON"]}
    task = module.workflow.build({**inputs, "output": "report.json"})
    task.configure("find the heron")
    _drive(task)
    assert task.complete()
    receipt = task.receipt()
    assert receipt["match"] and receipt["sources"] == ["docs/guide.md"]
    report = (tmp_path / "report.json").read_text()
    assert "BLUE-HERON" in report and SECRET not in report
    with pytest.raises(ValueError, match="markers"):
        module.workflow.build({**inputs, "markers": [], "output": "r.json"})


def test_names_that_escape_alike_are_omitted_not_confused(tmp_path):
    (tmp_path / os.fsdecode(b"a\xe9")).write_text("raw byte name")
    (tmp_path / "a\\xe9").write_text("backslash name")
    task = _task(tmp_path)
    outcome = _run(task, "files.list", dir=".")
    assert "a\\xe9 (omitted: ambiguous name)" in outcome.text
    assert [o.id for o in task.domain("files.read", "path", {})] == ["a\\xe9"]


def test_workspace_example_takes_markers_as_the_seed_writes_them(corpus, tmp_path, monkeypatch):
    """`markers` as a mapping from category to marker (HARNESS.md section 2, the seed): the
    records are labelled by the category (2b9f963 refused the mapping: "must be a list")."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("workspace_task", "examples/workspace_task.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.chdir(tmp_path)
    inputs = {"root": str(corpus), "queries": ["marker"], "markers": {"answer": "BLUE-HERON"}}
    task = module.workflow.build({**inputs, "output": "report.json"})
    task.configure("find the heron")
    _drive(task)
    assert task.complete()
    report = json.loads((tmp_path / "report.json").read_text())
    assert [r["label"] for r in report["records"]] == ["answer"]
    assert "BLUE-HERON" in report["records"][0]["quote"]
    with pytest.raises(ValueError, match=r"markers\['answer'\]: the marker must be"):
        module.workflow.build({**inputs, "markers": {"answer": ""}, "output": "r.json"})
