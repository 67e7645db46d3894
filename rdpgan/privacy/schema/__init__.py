"""The parts of ``schema=private``, by concept: reading cells (:mod:`.profiles`), release 1
(:mod:`.counts`), release 2 and the bounds read off it (:mod:`.bounds`), and what each column
becomes (:mod:`.kinds`). The entry that wires them, calibrates the noise and pays for it is
:mod:`rdpgan.privacy.private_schema`."""
