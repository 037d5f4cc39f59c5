"""The ``tenloom`` command.

    tenloom demo                         # the embedded MPS/MPO workload against NumPy
    tenloom devices                      # what tenloom can run on
    tenloom dump g.json [--traced]       # a saved graph or plan as text (tl.dump)
    tenloom viz g.json -o g.svg [--tree] # ... drawn with graphviz (tl.visualize)
    tenloom bench [--full]               # quick CPU benchmarks; --full: benchmarks/run.py

Files are what ``tl.save`` writes. A user error (a missing or malformed file, a drawing that
cannot be made) prints one line on stderr and exits with status 2, without a traceback.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import subprocess
import sys
from typing import Any


class CommandError(Exception):
    """A user error the command reports in one line (exit status 2)."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tenloom", description="tenloom command line")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="optimize and run an embedded MPS/MPO expectation value")
    demo.add_argument("--sites", type=int, default=40)
    demo.add_argument("--chi", type=int, default=32)
    sub.add_parser("devices", help="list the devices tenloom can use")

    dump = sub.add_parser(
        "dump",
        help="print a saved graph or plan as text, one line per node",
        description="Print a file written by tl.save as tl.dump does. A graph is shown after "
        "the pass pipeline (what evaluate runs) unless --traced; a plan is shown as compiled.",
    )
    dump.add_argument("file", help="a .json file written by tl.save")
    _add_view_options(dump)

    viz = sub.add_parser(
        "viz",
        help="draw a saved graph or plan with graphviz",
        description="Draw a file written by tl.save with tl.visualize; the suffix of -o picks "
        "the format (.svg, .png, .pdf, or .dot/.gv for the DOT text).",
    )
    viz.add_argument("file", help="a .json file written by tl.save")
    viz.add_argument("-o", "--output", required=True, help="where to write the drawing")
    viz.add_argument(
        "--tree", action="store_true", help="draw the contraction trees instead of the graph"
    )
    _add_view_options(viz, both=True)

    bench = sub.add_parser(
        "bench",
        help="run quick CPU benchmarks (plan overhead, the demo and a fused chain vs NumPy)",
        description="Quick CPU benchmarks, a few seconds. With --full, run the repository's "
        "benchmarks/run.py (tenloom against its peers, minutes) with the arguments after --.",
    )
    bench.add_argument(
        "--full", action="store_true", help="run benchmarks/run.py of a repository checkout"
    )
    bench.add_argument("run_args", nargs="*", help="arguments for benchmarks/run.py (after --)")
    return parser


def _add_view_options(p: argparse.ArgumentParser, both: bool = False) -> None:
    view = p.add_mutually_exclusive_group()
    view.add_argument(
        "--optimized",
        dest="view",
        action="store_const",
        const="optimized",
        help="a graph after the pass pipeline (the default)",
    )
    view.add_argument(
        "--traced", dest="view", action="store_const", const="traced", help="a graph as saved"
    )
    if both:
        view.add_argument(
            "--both", dest="view", action="store_const", const="both", help="the two side by side"
        )
    p.set_defaults(view="optimized")
    p.add_argument("--optimize", help="order search for a graph: auto, greedy, hyper, ...")
    p.add_argument(
        "--memory-limit", help="bytes (or '4GiB') for a graph: slice contractions to fit"
    )


def _graph_opts(args: argparse.Namespace) -> dict[str, Any]:
    opts: dict[str, Any] = {}
    if args.optimize is not None:
        opts["optimize"] = args.optimize
    if args.memory_limit is not None:
        limit = args.memory_limit
        opts["memory_limit"] = int(limit) if limit.isdigit() else limit
    return opts


def _load(args: argparse.Namespace) -> tuple[Any, tuple]:
    """(the loaded Plan or None, the loaded tensors) of ``args.file``, with the view checked."""
    import tenloom as tl

    if not os.path.exists(args.file):
        raise CommandError(f"{args.file}: no such file")
    obj = tl.load(args.file)
    if isinstance(obj, tl.Plan):
        if args.view != "optimized":
            raise CommandError(
                f"{args.file} holds a compiled plan, which keeps only its optimized graph; "
                f"drop --{args.view}"
            )
        if _graph_opts(args):
            raise CommandError(
                f"{args.file} holds a compiled plan; --optimize and --memory-limit apply to "
                "saved graphs only"
            )
        return obj, ()
    if args.view == "traced" and _graph_opts(args):
        raise CommandError("--optimize and --memory-limit shape the optimized graph; drop --traced")
    return None, obj if isinstance(obj, tuple) else (obj,)


def _dump(args: argparse.Namespace) -> int:
    from tenloom.dump import dump_nodes
    from tenloom.runtime.session import build_graph, optimize_tensors

    plan, tensors = _load(args)
    if plan is not None:
        graph = plan.optimized
    elif args.view == "optimized":  # as tl.dump(optimized=True) does
        graph = optimize_tensors(tensors, _graph_opts(args), "dump")[1].graph
    else:
        graph = build_graph(tensors, share=False)
    # Loaded nodes record where tl.load was called (here), not the code that built them:
    # source lines would only point at this command.
    print(dump_nodes(graph.outputs, sources=False))
    return 0


def _viz(args: argparse.Namespace) -> int:
    import tenloom as tl

    plan, tensors = _load(args)
    if args.tree and args.view != "optimized":
        raise CommandError(
            "--tree draws the optimized graph's contraction trees; drop --" + args.view
        )
    optimized = {"optimized": True, "traced": False, "both": "both"}[args.view]
    what = "tree" if args.tree else "graph"
    if plan is not None:
        tl.visualize(plan, args.output, what=what)
    else:
        target = tensors[0] if len(tensors) == 1 else list(tensors)
        tl.visualize(target, args.output, optimized, what=what, **_graph_opts(args))
    print(f"wrote {args.output}")
    return 0


def benchmarks_dir() -> pathlib.Path:
    """The ``benchmarks`` folder of the repository this package runs from (an editable install
    or a checkout); it is not part of an installed wheel."""
    return pathlib.Path(__file__).resolve().parent.parent / "benchmarks"


def _bench(args: argparse.Namespace) -> int:
    if not args.full:
        if args.run_args:
            raise CommandError(
                f"unexpected arguments {' '.join(args.run_args)}: they go to benchmarks/run.py, "
                "with --full"
            )
        from tenloom.cli.bench import run_quick

        run_quick()
        return 0
    script = benchmarks_dir() / "run.py"
    if not script.is_file():
        raise CommandError(
            f"--full runs benchmarks/run.py from a checkout of the tenloom repository, and there "
            f"is none at {script}; clone the repository, pip install -e '.[bench]' there and "
            "run `tenloom bench --full` (or `python benchmarks/run.py`)"
        )
    cmd = [sys.executable, str(script), *args.run_args]
    print("running " + " ".join(cmd), flush=True)
    return subprocess.run(cmd, cwd=script.parent.parent).returncode


def main(argv: list[str] | None = None) -> int:
    """Run the command line ``argv`` (default ``sys.argv[1:]``); returns the exit status."""
    from tenloom.graph.errors import TenloomError

    args = _parser().parse_args(argv)
    try:
        if args.command == "devices":
            from tenloom.runtime.devices import devices

            for d in devices():
                print(d)
            return 0
        if args.command == "demo":
            from tenloom.cli.demo import run

            return run(args.sites, args.chi)
        if args.command == "dump":
            return _dump(args)
        if args.command == "viz":
            return _viz(args)
        if args.command == "bench":
            return _bench(args)
    except BrokenPipeError:  # `tenloom dump g.json | head`: stop quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except (CommandError, TenloomError, OSError) as e:
        message = " ".join(str(e).split()) or type(e).__name__
        print(f"tenloom {args.command}: error: {message}", file=sys.stderr)
        return 2
    return 2  # pragma: no cover - argparse rejects unknown commands


if __name__ == "__main__":
    sys.exit(main())
