"""The kernel layer: what dipu registers on PrivateUse1 and what its generated kernels call.

Layers, each importing only those above it in this list:

- ``op``: the record of one generated kernel (a leaf);
- ``switches``: the debug switches users set with environment variables (docs/reference.md);
- ``fallback``: the Python side of the CPU fallback (substitutes for ops that have no CPU kernel);
- ``support``: the helpers generated wrappers call, and nothing else imports;
- ``generated``: the generated kernel table for the installed torch;
- ``registry``: the one owner of registration, with force-fallback and autocompare as switches.
"""
