"""One module per operation, named like its source in ``kernels/``: ``transpose``, ``matmul``,
``reduce``. Each holds the operation's ladder (``RUNGS``), its kernel family (``KERNELS``) and the
public wrapper, re-exported as ``gpukernels.transpose``, ``gpukernels.matmul``, ``gpukernels.sum``."""
