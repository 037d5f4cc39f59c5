"""The ``tenloom`` command."""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tenloom", description="tenloom command line")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="optimize and run an embedded MPS/MPO expectation value")
    demo.add_argument("--sites", type=int, default=40)
    demo.add_argument("--chi", type=int, default=32)
    sub.add_parser("devices", help="list the devices tenloom can use")
    args = parser.parse_args(argv)
    if args.command == "devices":
        from tenloom.runtime.devices import devices

        for d in devices():
            print(d)
        return 0
    if args.command == "demo":
        from tenloom.demo import run

        return run(args.sites, args.chi)
    return 2  # pragma: no cover - argparse rejects unknown commands


if __name__ == "__main__":
    sys.exit(main())
