"""What every operation shares: the registry of operations and rungs (:mod:`.ladder`), NVRTC
compilation (:mod:`.compile`), planned launches and the plan cache (:mod:`.launch`), the GPU
and its errors (:mod:`.device`), random inputs (:mod:`.inputs`), comparisons
(:mod:`.compare`) and NumPy's rule for an axis (:mod:`.axes`)."""
