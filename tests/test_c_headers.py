"""dipu's C headers of DIOPI (dipu/include/diopi/): generated from the proto, valid C and C++, complete, and
DeepLink-compatible where the two protos share a name.

The comparison with DeepLink's own functions.h runs where a snapshot of DeepLink-org/DIOPI is on the
machine (``DIPU_DEEPLINK_DIOPI``: its functions.h, a checkout or its bare git directory; by default the
snapshot the project's tooling fetches); elsewhere those tests are skipped, saying so.
"""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from dipu.diopi import Status
from dipu.diopi.c_form import c_parameters
from dipu.diopi.proto import FUNCTIONS
from dipugen import emit
from dipugen.deeplink import HEADER_IN_REPOSITORY, compare, parse, read_header, table
from dipugen.dest.c_header import PATH, declaration

REPO = Path(__file__).resolve().parent.parent
INCLUDE = REPO / "dipu" / "include"
HEADER = REPO.joinpath(*PATH)
DEEPLINK = Path(os.environ.get("DIPU_DEEPLINK_DIOPI", "/work/.mirror/DeepLink-org+DIOPI/repo"))
#: Shared names whose C form still differs from DeepLink's, each with the reason docs/op-library-guide.md gives.
STILL_DIFFERENT = {"diopiFusedAdamW": "count"}

needs_cc = pytest.mark.skipif(shutil.which("gcc") is None or shutil.which("g++") is None,
                              reason="no gcc/g++ on this machine")


def _deeplink_text() -> str:
    try:
        return read_header(DEEPLINK)
    except (FileNotFoundError, subprocess.CalledProcessError) as error:
        pytest.skip(f"no snapshot of DeepLink's DIOPI at {DEEPLINK} (set DIPU_DEEPLINK_DIOPI): {error}")


def test_the_header_is_what_the_generator_makes_of_the_proto():
    assert HEADER.read_text() == emit.c_header(), "stale: run `python -m dipugen`"


def test_every_proto_function_has_its_prototype():
    declared = parse(HEADER.read_text())
    assert sorted(declared) == sorted(FUNCTIONS)
    for name, function in FUNCTIONS.items():
        assert declared[name] == [(p.type.removeprefix("const ") if p.type.startswith("const diopi") and "*" not in
                                   p.type else p.type, p.name) for p in c_parameters(function)], name


def test_lists_share_one_length_after_them():  # Note [The C form of a proto function]
    assert [str(p) for p in c_parameters(FUNCTIONS["diopiCat"])] == [
        "diopiContextHandle_t ctx", "diopiTensorHandle_t out", "diopiConstTensorHandle_t* tensors",
        "int64_t num_tensors", "int64_t dim"]
    types = [p.type for p in c_parameters(FUNCTIONS["diopiFusedAdamW"])]
    assert types[1:9] == ["diopiTensorHandle_t*"] * 5 + ["diopiConstTensorHandle_t*", "int64_t", "double"]
    assert [p.type for p in c_parameters(FUNCTIONS["diopiRandomInp"])][2:4] == ["int64_t", "const int64_t*"]


@needs_cc
@pytest.mark.parametrize("compiler", [["gcc", "-std=c99", "-x", "c"], ["g++", "-std=c++17", "-x", "c++"]],
                         ids=["c99", "c++17"])
def test_the_headers_compile(tmp_path, compiler):
    """Both headers declare, and a library can define a function with the declared prototype."""
    source = tmp_path / "library.c"
    source.write_text('#include "diopi/functions.h"\n\n' + declaration(FUNCTIONS["diopiAdd"]).replace(
        "DIOPI_API ", "").replace(");", ") {\n    (void)ctx; (void)out; (void)input; (void)other; (void)alpha;\n"
                                      "    return diopiNoImplement;\n}\n"))
    result = subprocess.run([*compiler, "-fsyntax-only", "-Wall", "-Wextra", "-Werror", f"-I{INCLUDE}",
                             str(source)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_status_values_are_those_of_diopirt_h():
    text = (INCLUDE / "diopi" / "diopirt.h").read_text()
    body = re.search(r"typedef enum \{(.*?)\} diopiError_t;", text, re.S).group(1)
    values = {name: int(value) for name, value in re.findall(r"(\w+)\s*=\s*(\d+)", re.sub(r"/\*.*?\*/", "", body))}
    assert values == {status.text: int(status) for status in Status}


def test_shared_names_take_deeplinks_arguments():
    rows = compare(parse(_deeplink_text()))
    print("\n" + table(rows))  # docs/op-library-guide.md's table: pytest -s tests/test_c_headers.py
    different = {row.dipu: row.verdict for row in rows if row.verdict not in ("agree", "names")}
    assert different == STILL_DIFFERENT
    assert len(rows) >= 240  # the snapshot still declares what it did when the proto was aligned


@needs_cc
def test_the_compiler_agrees_with_the_comparison(tmp_path):
    """dipu's declaration of every shared name redeclares DeepLink's: a C compiler refuses conflicting types,
    so this checks the comparison (and the C form) with the compiler rather than with the parser."""
    text = _deeplink_text()
    (tmp_path / "diopi").mkdir()
    (tmp_path / "diopi" / "functions.h").write_text(text)
    runtime = DEEPLINK / HEADER_IN_REPOSITORY.replace("functions.h", "diopirt.h")
    (tmp_path / "diopi" / "diopirt.h").write_text(read_header(runtime) if runtime.is_file() else subprocess.run(
        ["git", "--git-dir", str(DEEPLINK), "show", f"HEAD:{HEADER_IN_REPOSITORY.replace('functions', 'diopirt')}"],
        check=True, capture_output=True, text=True).stdout)
    rows = compare(parse(text))

    def compiles(names) -> subprocess.CompletedProcess:
        source = tmp_path / "both.c"
        source.write_text("#include <stdbool.h>\n#include <stddef.h>\n#include <diopi/functions.h>\n\n"
                          + "\n".join(declaration(FUNCTIONS[n]) for n in names) + "\n")
        return subprocess.run(["gcc", "-std=c99", "-fsyntax-only", f"-I{tmp_path}", str(source)],
                              capture_output=True, text=True)

    agreeing = [row.dipu for row in rows if row.verdict in ("agree", "names")]
    result = compiles(agreeing)
    assert result.returncode == 0, result.stderr[-3000:]
    for name in STILL_DIFFERENT:
        assert "conflicting types" in compiles([name]).stderr, name
