"""The optional compiled accelerator of the consume hot loops (``_cdecode.pyx``) and its build.

Nothing here is imported directly: :mod:`tubemq_aio.accelerator` loads the extension when it is
built and says which compiled twins there are. ``python -m tubemq_aio._speedups.build`` builds it.
"""
