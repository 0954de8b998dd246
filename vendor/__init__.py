"""Vendor runtimes, one package each; installed as ``dipu.vendors`` (Note [Installed import names] in
pyproject.toml) and found through the ``dipu.vendors`` entry points."""
