"""The integrations with other parts of the ecosystem that are neither ``torch.distributed`` (dipu/distributed/) nor
``torch.compile`` (dipu/compile/), each installed at ``import dipu`` (dipu/__init__.py, step 4):

- ``mock_cuda.py``: ``DIPU_MOCK_CUDA=1``, a script's cuda spellings mean dipu (Note [Mock CUDA]);
- ``lightning_accelerator.py``: Lightning's ``accelerator="dipu"`` (Note [Lightning accelerator]);
- ``coexistence.py``: dipu active beside native CUDA (Note [CUDA backward beside dipu]).
"""
