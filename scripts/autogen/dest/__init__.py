"""One emitter per generated file, as torchgen's dest/: each turns the kernels into its template's values."""
