"""The ``tenloom`` command: dump, viz, bench (in process through ``tenloom.cli.main``, and once
through the installed console script)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tenloom as tl
from tenloom import cli
from tenloom.dump import dump_nodes


@pytest.fixture
def saved(tmp_path):
    """A saved graph, a saved pair of tensors and a saved plan, with what they should dump."""
    rng = np.random.default_rng(0)
    x = tl.placeholder((6, 6), name="x")
    w = tl.asarray(rng.standard_normal((6, 6)))
    y = tl.exp(tl.trace(x @ w @ x)) * 2.0
    tl.save(y, tmp_path / "g.json")
    tl.save([y, tl.sin(x)], tmp_path / "two.json")
    plan = tl.compile([y], inputs=[x])
    tl.save(plan, tmp_path / "p.json")
    return tmp_path


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def strip(text: str) -> str:
    return "\n".join(line.split("  # ")[0].rstrip() for line in text.splitlines())


def test_dump_graph_optimized_by_default_and_traced_on_request(saved, capsys):
    loaded = tl.load(saved / "g.json")
    code, out, err = run(capsys, "dump", saved / "g.json")
    assert code == 0 and err == ""
    assert out.rstrip("\n") == strip(tl.dump(loaded, optimized=True))
    assert "contract[" in out and "    | v0 = " in out and "  # " not in out
    code, out2, _ = run(capsys, "dump", saved / "g.json", "--optimized")
    assert code == 0 and out2 == out
    code, out, _ = run(capsys, "dump", saved / "g.json", "--traced")
    assert code == 0 and out.rstrip("\n") == strip(tl.dump(loaded, optimized=False))
    assert "matmul(" in out and "contract" not in out


def test_dump_several_outputs_and_optimization_options(saved, capsys):
    code, out, _ = run(
        capsys, "dump", saved / "two.json", "--optimize", "greedy", "--memory-limit", "600"
    )
    assert code == 0
    assert out.rstrip().splitlines()[-1].count("%") == 2  # return %a, %b
    assert "sliced[" in out and "    | sliced over " in out


def test_dump_plan_is_the_plans_own_dump(saved, capsys):
    plan = tl.load(saved / "p.json")
    code, out, _ = run(capsys, "dump", saved / "p.json")
    assert code == 0
    assert out.rstrip("\n") == dump_nodes(plan.optimized.outputs, sources=False)
    assert out.rstrip("\n") == strip(plan.dump())


@pytest.mark.parametrize(
    "args, message",
    [
        (["--traced"], "holds a compiled plan, which keeps only its optimized graph"),
        (["--optimize", "greedy"], "apply to saved graphs only"),
    ],
)
def test_plan_options_that_cannot_apply_are_refused(saved, capsys, args, message):
    code, out, err = run(capsys, "dump", saved / "p.json", *args)
    assert code == 2 and out == ""
    assert message in err and len(err.splitlines()) == 1


def test_missing_file(tmp_path, capsys):
    for command in (["dump"], ["viz", "-o", str(tmp_path / "g.svg")]):
        code, out, err = run(capsys, command[0], tmp_path / "nope.json", *command[1:])
        assert code == 2 and out == ""
        assert err == f"tenloom {command[0]}: error: {tmp_path / 'nope.json'}: no such file\n"


def _malformed(saved: Path) -> dict[str, str]:
    doc = json.loads((saved / "g.json").read_text())
    text = json.dumps(doc)
    unknown_op = json.loads(text)
    unknown_op["nodes"][-1]["op"] = "launch_missiles"
    dangling = json.loads(text)
    dangling["outputs"] = [999]
    return {
        "truncated.json": text[: len(text) // 2],
        "not_tenloom.json": json.dumps({"format": "other", "version": 1}),
        "unknown_op.json": json.dumps(unknown_op),
        "dangling.json": json.dumps(dangling),
        "binary.json": "\x00\xff garbage",
    }


@pytest.mark.parametrize("command", ["dump", "viz"])
def test_malformed_files_give_one_line_and_status_2(saved, capsys, command):
    for name, text in _malformed(saved).items():
        path = saved / name
        path.write_text(text, encoding="latin-1")
        extra = ["-o", str(saved / "out.dot")] if command == "viz" else []
        code, out, err = run(capsys, command, path, *extra)
        assert code == 2, name
        assert out == "" and len(err.splitlines()) == 1, (name, err)
        assert err.startswith(f"tenloom {command}: error: {path}: "), err
        assert "Traceback" not in err
    assert not (saved / "out.dot").exists()


def test_viz_writes_dot_and_tree(saved, capsys):
    code, out, _ = run(capsys, "viz", saved / "g.json", "-o", saved / "g.dot")
    assert code == 0 and out == f"wrote {saved / 'g.dot'}\n"
    dot = (saved / "g.dot").read_text()
    assert dot.startswith("digraph") and "cluster_fused" in dot
    code, _, _ = run(capsys, "viz", saved / "g.json", "-o", saved / "both.gv", "--both")
    text = (saved / "both.gv").read_text()
    assert code == 0 and "cluster_unoptimized" in text and "cluster_optimized" in text
    code, _, _ = run(capsys, "viz", saved / "p.json", "-o", saved / "tree.dot", "--tree")
    assert code == 0 and "cluster_tree0" in (saved / "tree.dot").read_text()


def test_viz_svg(saved, capsys):
    if shutil.which("dot") is None:
        pytest.skip("graphviz's dot program is not installed")
    code, _, err = run(capsys, "viz", saved / "g.json", "-o", saved / "g.svg")
    assert code == 0, err
    assert "<svg" in (saved / "g.svg").read_text()


@pytest.mark.parametrize(
    "args, message",
    [
        (["-o", "g.txt"], "unknown suffix '.txt'"),
        (["-o", "t.dot", "--tree", "--traced"], "--tree draws the optimized graph"),
    ],
)
def test_viz_errors(saved, capsys, args, message):
    args = [str(saved / a) if a.endswith((".txt", ".dot")) else a for a in args]
    code, out, err = run(capsys, "viz", saved / "g.json", *args)
    assert code == 2 and out == "" and message in err and len(err.splitlines()) == 1


def test_usage_errors_exit_2(capsys):
    for argv in (
        ["frobnicate"],
        ["dump"],
        ["viz", "g.json"],
        ["dump", "g.json", "--traced", "--optimized"],
    ):
        with pytest.raises(SystemExit) as info:
            cli.main(argv)
        assert info.value.code == 2
    capsys.readouterr()


def test_bench_quick(capsys):
    code, out, _ = run(capsys, "bench")
    assert code == 0
    assert "fit all" in out and "us/node" in out
    assert "MPS/MPO" in out and "elementwise chain" in out and "ratio" in out
    code, _, err = run(capsys, "bench", "--", "--quick")  # run.py's flags need --full
    assert code == 2 and "with --full" in err


def test_bench_full_runs_the_repository_script(tmp_path, monkeypatch, capsys):
    bench = tmp_path / "benchmarks"
    bench.mkdir()
    (bench / "run.py").write_text(
        "import sys, pathlib\n"
        "pathlib.Path('ran.txt').write_text(' '.join(sys.argv[1:]))\n"
        "sys.exit(3)\n"
    )
    monkeypatch.setattr(cli, "benchmarks_dir", lambda: bench)
    code, out, _ = run(capsys, "bench", "--full", "--", "--quick", "--only", "W1")
    assert code == 3  # the script's own status
    assert (tmp_path / "ran.txt").read_text() == "--quick --only W1"  # run from the repo root
    assert "run.py --quick --only W1" in out


def test_bench_full_without_a_checkout_explains(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(cli, "benchmarks_dir", lambda: tmp_path / "site-packages" / "benchmarks")
    code, out, err = run(capsys, "bench", "--full")
    assert code == 2 and out == ""
    assert "checkout of the tenloom repository" in err and len(err.splitlines()) == 1


def test_the_console_script(saved):
    script = Path(sys.executable).with_name("tenloom")
    if not script.exists():
        pytest.skip("the tenloom console script is not installed next to this Python")
    proc = subprocess.run(
        [script, "dump", saved / "p.json"], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.rstrip("\n") == strip(tl.load(saved / "p.json").dump())
    (saved / "bad.json").write_text('{"format": "tenloom", "version": 1,')
    proc = subprocess.run(
        [script, "dump", saved / "bad.json"], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith("tenloom dump: error: ") and "not valid JSON" in proc.stderr
    assert len(proc.stderr.splitlines()) == 1


def test_console_script_stops_quietly_when_the_reader_goes_away(tmp_path):
    script = Path(sys.executable).with_name("tenloom")
    if not script.exists():
        pytest.skip("the tenloom console script is not installed next to this Python")
    y = tl.placeholder((4,), name="x")
    for _ in range(3000):  # far more text than a pipe buffer holds
        y = tl.sin(y)
    tl.save(y, tmp_path / "long.json")
    proc = subprocess.Popen(
        [script, "dump", tmp_path / "long.json", "--traced"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout.readline().startswith(b"%0 = placeholder")
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 0
    assert err == ""
