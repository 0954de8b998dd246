"""A worker of ``python -m dipu conformance``: runs the items it is given, appending to the journal a
``start`` line before each item, its verdicts, and an ``end`` line after it (Note [The conformance
certificate] in dipu/conformance/__init__.py). ``python -m dipu.conformance.worker TASK.json``."""

from __future__ import annotations

import json
import os
import sys
import time


def _append(journal, record: dict) -> None:
    journal.write(json.dumps(record) + "\n")
    journal.flush()
    os.fsync(journal.fileno())


def main(argv: list[str]) -> int:
    task = json.loads(open(argv[0]).read())
    import torch

    from dipu.conformance import suites  # running this module imported dipu, which registered the device

    dtypes = [getattr(torch, name) for name in task["dtypes"]] if task["dtypes"] is not None else None
    with open(task["journal"], "a") as journal:
        for name in task["names"]:
            if time.time() > task["deadline"]:
                return 0  # the parent marks the rest as skipped for the budget
            _append(journal, {"event": "start", "suite": task["suite"], "name": name})
            started = time.perf_counter()
            try:
                for record in suites.run_item(task["suite"], name, dtypes, task["samples"]):
                    _append(journal, record)
            except Exception as error:  # noqa: BLE001  (enumerating the item's inputs failed: its verdict)
                _append(journal, {"suite": task["suite"], "name": name, "dtype": "*", "pass": "*",
                                  "verdict": "error", "dipu_error": type(error).__name__, "cpu_error": None,
                                  "detail": f"{type(error).__name__}: {str(error)[:300]}"})
            _append(journal, {"event": "end", "suite": task["suite"], "name": name,
                              "seconds": round(time.perf_counter() - started, 3)})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
