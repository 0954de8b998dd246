"""python -m dipugen: check diopi_functions.yaml against the installed torch and write dipu's C header of the
proto; with --out, generate the Python kernel package there, for reading (dipu generates its own at first
import and caches it: Note [Generated code per torch version] in dipu/kernels/generated.py).

Note [The generator does not import dipu]
The generator reads the installed torch's schemas, and ``import torch`` would load dipu through the
torch.backends entry point, registering the very kernels being regenerated (stale, or broken by a spec
change). So the command turns that autoload off for its own process before torch is imported; as a
library (dipu regenerating its kernels for another torch) it imports nothing of dipu either, but the
proto's leaf modules (Note [The generator reads the runtime's proto] in proto.py); only the type checker
reads dipu's modules (proto.py's ``if TYPE_CHECKING:`` import).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

if "torch" not in sys.modules:
    os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"

from . import REFERENCE_TORCH, emit, schemas, spec  # noqa: E402
from .dest import c_header  # noqa: E402

REPO = spec.DIPU_DIR.parent  # the checkout, where the C header is written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m dipugen",
        description="Check the op spec against the installed torch and write dipu's C header of the proto "
                    "(dipu/include/diopi/functions.h); with --out, generate the PrivateUse1 op kernels there.")
    parser.add_argument("--yaml", type=Path, default=spec.SPEC,
                        help="the op spec (default: diopi_functions.yaml at the repository root)")
    parser.add_argument("--out", type=Path, default=None,
                        help="write the Python kernel package for the installed torch to this directory instead "
                             "of the C header, for reading: dipu generates and caches its own at first import")
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 and name the files that are stale (CI runs this)")
    parser.add_argument("--cpp-wrappers", type=Path, default=None, metavar="FILE",
                        help="also write the C++ wrappers of every kernel that can have one to FILE, for reading (dipu "
                             "generates and compiles the ones a loaded C op library needs itself: Note [Generated C++ "
                             "wrappers] in dest/cpp_wrappers.py)")
    args = parser.parse_args(argv)
    installed = ".".join(map(str, schemas.installed_torch()))
    unmatched: dict[str, str]  # op name -> why the installed torch's schema does not fit its entry
    try:
        if installed == REFERENCE_TORCH:  # the torch the spec is written against: every entry must fit
            entries, unmatched = spec.load(args.yaml), {}
        else:
            entries, unmatched = spec.load_lenient(args.yaml)
        files = emit.render(entries, args.yaml.name, unmatched=unmatched)
    except spec.SpecError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    if args.cpp_wrappers is not None and not args.check:
        from .dest import cpp_wrappers
        from .kernels import expand_all

        args.cpp_wrappers.write_text(cpp_wrappers.render(expand_all(entries, args.yaml.name), args.yaml.name))
        print(f"wrote {_relative(args.cpp_wrappers)}")
    for _, reason in sorted(unmatched.items()):
        print(f"not generated for torch {installed}: {reason}", file=sys.stderr)
    if args.out is None:  # the C header, the one output checked in (vendors compile against it)
        out, files = REPO.joinpath(*c_header.PATH[:-1]), {c_header.PATH[-1]: emit.c_header()}
    else:
        out = args.out
    if args.check:
        stale = emit.stale_files(out, files)
        for path in stale:
            print(f"stale: {_relative(path)}", file=sys.stderr)
        if stale:
            print("run `python -m dipugen` to regenerate", file=sys.stderr)
        return 1 if stale else 0
    for path in emit.write(out, files):
        print(f"wrote {_relative(path)}")
    return 0


def _relative(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


if __name__ == "__main__":
    sys.exit(main())
