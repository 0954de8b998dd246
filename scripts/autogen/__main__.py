"""python -m dipugen: generate dipu/_generated/ from diopi_functions.yaml, and dipu's C header of the proto.

Note [The generator does not import dipu]
The generator reads the installed torch's schemas, and ``import torch`` would load dipu through the
torch.backends entry point, registering the very kernels being regenerated (stale, or broken by a spec
change). So the command turns that autoload off for its own process before torch is imported; as a
library (dipu regenerating its kernels for another torch) it imports nothing of dipu either, but the
proto's leaf modules (Note [The generator reads the runtime's proto] in proto.py).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

if "torch" not in sys.modules:
    os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"

import torch  # noqa: E402

from . import REFERENCE_TORCH, emit, schemas, spec  # noqa: E402
from .dest import c_header  # noqa: E402

REPO = spec.DIPU_DIR.parent  # the checkout, where the reviewed copies are written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m dipugen",
        description="Generate the PrivateUse1 op kernels (dipu/_generated/) from the op spec.")
    parser.add_argument("--yaml", type=Path, default=spec.SPEC,
                        help="the op spec (default: diopi_functions.yaml at the repository root)")
    parser.add_argument("--out", type=Path, default=None,
                        help="the package to write (default: dipu/_generated, the reviewed copy generated for "
                             f"the reference torch {REFERENCE_TORCH}); for another torch, any directory")
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 and name the files that are stale (CI runs this)")
    parser.add_argument("--autocompare-all", action="store_true",
                        help="autocompare every op against CPU (except those marked autocompare: false), "
                             "as if DIPU_AUTOCOMPARE_OPS_LIST were '.*'; like DIPU's --autocompare")
    parser.add_argument("--print-call-info", action="store_true",
                        help="print '[dipu_<op>]:<op>  <diopi function>' on every call, whatever "
                             "DIPU_DUMP_OP_ARGS says; like DIPU's --print_func_call_info")
    parser.add_argument("--cpp-wrappers", type=Path, default=None, metavar="FILE",
                        help="also write the C++ wrappers of every kernel that can have one to FILE, for reading (dipu "
                             "generates and compiles the ones a loaded C op library needs itself: Note [Generated C++ "
                             "wrappers] in dest/cpp_wrappers.py)")
    args = parser.parse_args(argv)
    installed = ".".join(map(str, schemas.installed_torch()))
    reference = installed == REFERENCE_TORCH
    if args.out is None and not reference:
        print(f"error: dipu/_generated is the reviewed copy for the reference torch {REFERENCE_TORCH}, and the "
              f"installed torch is {torch.__version__}: install torch=={REFERENCE_TORCH} to regenerate or check "
              "it, or pass --out DIR to generate for the installed torch (dipu does that itself on import)",
              file=sys.stderr)
        return 1
    out = args.out or REPO / "dipu" / "_generated"
    try:
        if reference:  # the reference torch: every entry must fit
            entries, unmatched = spec.load(args.yaml), {}
        else:
            entries, unmatched = spec.load_lenient(args.yaml)
        files = emit.render(entries, args.yaml.name, autocompare_all=args.autocompare_all,
                            print_call_info=args.print_call_info, unmatched=unmatched)
    except spec.SpecError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    if args.cpp_wrappers is not None and not args.check:
        from .dest import cpp_wrappers
        from .kernels import expand_all

        args.cpp_wrappers.write_text(cpp_wrappers.render(expand_all(entries, args.yaml.name), args.yaml.name))
        print(f"wrote {_relative(args.cpp_wrappers)}")
    for name, reason in sorted(unmatched.items()):
        print(f"not generated for torch {installed}: {reason}", file=sys.stderr)
    header = REPO.joinpath(*c_header.PATH) if args.out is None else None  # goes with the reviewed copy
    if args.check:
        stale = emit.stale_files(out, files)
        if header is not None and (not header.is_file() or header.read_text() != emit.c_header()):
            stale.append(header)
        for path in stale:
            print(f"stale: {_relative(path)}", file=sys.stderr)
        if stale:
            print("run `python -m dipugen` to regenerate", file=sys.stderr)
        return 1 if stale else 0
    for path in emit.write(out, files):
        print(f"wrote {_relative(path)}")
    if header is not None and (not header.is_file() or header.read_text() != emit.c_header()):
        header.parent.mkdir(parents=True, exist_ok=True)
        header.write_text(emit.c_header())
        print(f"wrote {_relative(header)}")
    return 0


def _relative(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


if __name__ == "__main__":
    sys.exit(main())
