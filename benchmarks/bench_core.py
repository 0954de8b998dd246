"""Core metadata-path latency, dipu vs native CPU, measured side by side.

    python benchmarks/bench_core.py

Target: torch.empty and view within 2x of CPU.
"""

import torch

import dipu  # noqa: F401

from _timing import interleaved, print_table


def main() -> None:
    cpu = torch.randn(64, 64)
    dev = cpu.to("dipu")
    small_cpu, small_dev = torch.randn(4), torch.randn(4).to("dipu")
    small_dst_cpu, small_dst_dev = torch.empty(4), torch.empty(4, device="dipu")
    pairs = {
        "torch.empty((64, 64))": (lambda: torch.empty((64, 64), device="dipu"),
                                  lambda: torch.empty((64, 64))),
        "x.view(-1)": (lambda: dev.view(-1), lambda: cpu.view(-1)),
        "x.t()": (lambda: dev.t(), lambda: cpu.t()),
        "x[1:, 2:]": (lambda: dev[1:, 2:], lambda: cpu[1:, 2:]),
        "4-element copy_": (lambda: small_dst_dev.copy_(small_dev),
                            lambda: small_dst_cpu.copy_(small_cpu)),
        "4-element .to(device)": (lambda: small_cpu.to("dipu"), lambda: small_cpu.clone()),
    }
    results = interleaved(pairs)
    print_table("dipu core vs CPU (median us per call)", results,
                {"torch.empty((64, 64))": 2.0, "x.view(-1)": 2.0})


if __name__ == "__main__":
    main()
