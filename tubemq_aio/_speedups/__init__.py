"""The optional compiled accelerator and its build.

``_cdecode.pyx`` is one extension module; its parts, one job each, are the files it includes:
``_consume.pxi``, ``_frames.pxi``, ``_produce.pxi``, ``_registry.pxi``, ``_window.pxi`` and
``_answer_json.pxi``.

Nothing here is imported directly: :mod:`tubemq_aio.accelerator` loads the extension when it is
built and says which compiled twins there are. ``python -m tubemq_aio._speedups.build`` builds it.
"""
